"""The endpoint policy against a real HTTP server on 127.0.0.1 implementing the chat-completions route.

Each path prefix selects a server behaviour: ``/ok`` answers, ``/flaky`` fails twice with HTTP 500 then answers,
``/down`` always fails with 503, ``/hang`` never answers in time, ``/malformed`` sends broken JSON, ``/empty`` sends
JSON without choices, ``/forbidden`` answers 403, ``/slow`` answers after a pause (concurrency). Every answer carries
log-probabilities and token ids when the request asks for them (as vLLM does); ``/idtokens`` writes the tokens of its
log-probabilities as ``"token_id:<id>"`` instead of sending ids, ``/badlogprobs`` sends a malformed log-probability.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llm_marl_baselines.policies import ActionRequest, GenerationSettings, make_policy
from llm_marl_baselines.policies.endpoint import EndpointError, EndpointPolicy

ROUTE = "/v1/chat/completions"


class ChatServer(ThreadingHTTPServer):
    """A chat-completions server whose behaviour depends on the path prefix; it records what it received."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.headers_seen: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class ChatHandler(BaseHTTPRequestHandler):
    server: ChatServer

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        prefix, _, route = self.path.partition("/v1")
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        server = self.server
        with server.lock:
            server.attempts[prefix] += 1
            attempt = server.attempts[prefix]
            server.bodies.append(body)
            server.headers_seen.append(dict(self.headers))
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            status, payload = self._respond(prefix, route, attempt, body)
        finally:
            # Leave the in-flight count before answering: once the answer is written the client may send its next
            # request, and counting this one still would see one request too many.
            with server.lock:
                server.in_flight -= 1
        self._send(status, payload)

    def _respond(self, prefix: str, route: str, attempt: int, body: dict) -> tuple[int, bytes]:
        if "/v1" + route != ROUTE:
            return 404, b'{"error": "no such route"}'
        if prefix == "/flaky" and attempt <= 2:
            return 500, b'{"error": "temporary failure"}'
        if prefix == "/down":
            return 503, b'{"error": "overloaded"}'
        if prefix == "/hang":
            self.server.release.wait(5)
            return 200, self._completion(body)
        if prefix == "/malformed":
            return 200, b'{"choices": [{"message": {"content": "cut off'
        if prefix == "/empty":
            return 200, b'{"id": "x", "object": "chat.completion"}'
        if prefix == "/forbidden":
            return 403, b'{"error": "bad key"}'
        if prefix == "/slow":
            time.sleep(0.2)
        return 200, self._completion(body)

    def _completion(self, body: dict) -> bytes:
        user = body["messages"][-1]["content"]
        content = f" echo: {user} "
        choice: dict = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        answer: dict = {"choices": [choice]}
        # A fake tokenizer: one token per character, id = code point, log-probability -(position + 1) / 10.
        ids = [ord(c) for c in content]
        prefix = self.path.partition("/v1")[0]
        if body.get("logprobs"):
            tokens = [f"token_id:{i}" if prefix == "/idtokens" else chr(i) for i in ids]
            entries = [{"token": t, "logprob": -(n + 1) / 10, "top_logprobs": []} for n, t in enumerate(tokens)]
            if prefix == "/badlogprobs":
                entries[0]["logprob"] = "high"
            choice["logprobs"] = {"content": entries}
        if body.get("return_token_ids") and prefix != "/idtokens":
            answer["prompt_token_ids"] = [len(m["content"]) for m in body["messages"]]
            choice["token_ids"] = ids
        return json.dumps(answer).encode()

    def _send(self, status: int, payload: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test)


@pytest.fixture
def server() -> Iterator[ChatServer]:
    chat_server = ChatServer()
    thread = threading.Thread(target=chat_server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield chat_server
    chat_server.release.set()
    chat_server.shutdown()
    chat_server.server_close()
    thread.join(5)


def policy_for(server: ChatServer, prefix: str, **kwargs: object) -> EndpointPolicy:
    options = {"timeout_s": 2.0, "max_retries": 2, "backoff_s": 0.01, **kwargs}
    return EndpointPolicy(f"{server.url}{prefix}/v1", "served-model", **options)  # type: ignore[arg-type]


SETTINGS = GenerationSettings(temperature=0.3, top_p=0.9, max_new_tokens=12, seed=5)


def test_ok_answers_in_order_with_payload_and_key(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TEST_KEY", "sk-test-123")
    requests = [ActionRequest(f"agent{i}", f"obs {i}", system="sys") for i in range(5)]
    with policy_for(server, "/ok", api_key_env="MY_TEST_KEY") as policy:
        actions = policy.act(requests, SETTINGS)
    assert actions == [f"echo: obs {i}" for i in range(5)]
    body = server.bodies[0]
    assert body["model"] == "served-model"
    assert body["messages"][0] == {"role": "system", "content": "sys"}
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (12, 0.3, 0.9, 5)
    assert all(h.get("Authorization") == "Bearer sk-test-123" for h in server.headers_seen)


def test_records_carry_logprobs_and_token_ids_when_asked(server: ChatServer) -> None:
    requests = [ActionRequest("a", "hi", system="sys"), ActionRequest("b", "yo")]
    with policy_for(server, "/ok") as plain:
        (record, _) = plain.generate(requests, SETTINGS)
    assert "logprobs" not in server.bodies[0] and "return_token_ids" not in server.bodies[0]  # off by default
    assert record.text == "echo: hi" and record.finish_reason == "stop"
    assert (record.prompt_ids, record.completion_ids, record.logprobs) == (None, None, None)

    with policy_for(server, "/ok", logprobs=True, token_ids=True) as policy:
        records = policy.generate(requests, SETTINGS)
    assert server.bodies[-1]["logprobs"] is True and server.bodies[-1]["return_token_ids"] is True
    first = records[0]
    assert first.text == "echo: hi" and first.prompt_ids == (3, 2)  # len("sys"), len("hi")
    assert "".join(map(chr, first.completion_ids)).strip() == first.text  # ids decode back to the text
    assert first.logprobs == tuple(-(n + 1) / 10 for n in range(len(" echo: hi ")))
    assert records[1].text == "echo: yo" and first.has_token_record

    with policy_for(server, "/idtokens", logprobs=True) as policy:
        (from_tokens,) = policy.generate([ActionRequest("a", "hi")], SETTINGS)
    assert from_tokens.completion_ids == tuple(map(ord, " echo: hi ")) and from_tokens.prompt_ids is None
    assert len(from_tokens.logprobs) == len(from_tokens.completion_ids)

    with policy_for(server, "/badlogprobs", logprobs=True) as policy, pytest.raises(
        EndpointError, match=r"unusable token record.*content\[0\]\.logprob: expected a number"
    ):
        policy.generate([ActionRequest("a", "hi")], SETTINGS)


def test_no_key_sends_no_authorization(server: ChatServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with policy_for(server, "/ok") as policy:
        assert policy.act([ActionRequest("a", "x")], GenerationSettings(seed=None)) == ["echo: x"]
    assert "Authorization" not in server.headers_seen[0]
    assert "seed" not in server.bodies[0]


def test_concurrency_limit_is_respected(server: ChatServer) -> None:
    requests = [ActionRequest(f"a{i}", str(i)) for i in range(8)]
    with policy_for(server, "/slow", concurrency=3) as policy:
        assert policy.act(requests, SETTINGS) == [f"echo: {i}" for i in range(8)]
    assert 1 < server.max_in_flight <= 3


def test_server_errors_are_retried_then_succeed(server: ChatServer) -> None:
    with policy_for(server, "/flaky", max_retries=2) as policy:
        assert policy.act([ActionRequest("a", "hello")], SETTINGS) == ["echo: hello"]
    assert server.attempts["/flaky"] == 3


def test_persistent_failure_raises_after_retries(server: ChatServer) -> None:
    with policy_for(server, "/down", max_retries=2) as policy, pytest.raises(EndpointError) as raised:
        policy.act([ActionRequest("a", "hello")], SETTINGS)
    assert server.attempts["/down"] == 3
    message = str(raised.value)
    assert "after 3 attempts" in message and "HTTP 503" in message and "overloaded" in message


def test_hanging_server_times_out_with_clear_error(server: ChatServer) -> None:
    with policy_for(server, "/hang", timeout_s=0.3, max_retries=1) as policy, pytest.raises(EndpointError) as raised:
        policy.act([ActionRequest("a", "hello")], SETTINGS)
    assert "timed out" in str(raised.value) and "after 2 attempts" in str(raised.value)
    assert server.attempts["/hang"] == 2


def test_malformed_json_is_a_clear_error(server: ChatServer) -> None:
    with policy_for(server, "/malformed") as policy, pytest.raises(EndpointError, match="malformed JSON") as raised:
        policy.act([ActionRequest("a", "hello")], SETTINGS)
    assert "cut off" in str(raised.value)
    with policy_for(server, "/empty") as policy, pytest.raises(EndpointError, match=r"without choices\[0\]"):
        policy.act([ActionRequest("a", "hello")], SETTINGS)


def test_client_errors_are_not_retried(server: ChatServer) -> None:
    with policy_for(server, "/forbidden") as policy, pytest.raises(EndpointError, match=r"HTTP 403.*bad key"):
        policy.act([ActionRequest("a", "hello")], SETTINGS)
    assert server.attempts["/forbidden"] == 1


def test_unreachable_server_raises_after_retries() -> None:
    # Bind a port, then close it: nothing listens there.
    probe = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = probe.server_address[1]
    probe.server_close()
    policy = EndpointPolicy(f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff_s=0.01, timeout_s=1.0)
    with policy, pytest.raises(EndpointError, match="connection failed") as raised:
        policy.act([ActionRequest("a", "hello")], SETTINGS)
    assert "after 2 attempts" in str(raised.value)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"base_url": "127.0.0.1:8000"}, "base_url: expected an http"),
        ({"model": ""}, "model: expected a non-empty"),
        ({"concurrency": 0}, "concurrency: expected an int >= 1"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout_s": "slow"}, "timeout_s"),
        ({"logprobs": "yes"}, "logprobs: expected a bool"),
    ],
)
def test_bad_configuration_is_rejected(kwargs: dict, fragment: str) -> None:
    options = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=fragment):
        make_policy("endpoint", **options)
