"""OpenAI-compatible chat-completions endpoint policy (vLLM's server, hosted APIs).

``POST {base_url}/chat/completions`` with the request's messages and the generation settings. The API key is read
from an environment variable (``OPENAI_API_KEY`` by default; none is sent when it is unset, as a local vLLM server
needs none). Requests of a batch run concurrently on a thread pool of ``concurrency`` workers. Connect errors,
timeouts, HTTP 429 and 5xx are retried with exponential backoff; after the last retry an :class:`EndpointError`
names the URL, the attempts and the last cause. Other 4xx answers and malformed bodies (not JSON, or JSON without
``choices[0].message.content``) fail at once with an :class:`EndpointError` quoting the body.

Generation records (:meth:`~llm_marl_baselines.policies.base.Policy.generate`). The text is always there. With
``logprobs=True`` the request asks for the sampled tokens' log-probabilities (OpenAI's ``"logprobs": true``), read from
``choices[0].logprobs.content[*].logprob``; it is off by default because some servers reject the field. With
``token_ids=True`` it also asks for token ids with vLLM's extensions (``"return_token_ids": true``, answered by
``prompt_token_ids`` and ``choices[0].token_ids``); a server that ignores them still works, the ids stay None. Token ids
are also read from log-probability entries written as ``"token_id:123"`` (vLLM's ``return_tokens_as_token_ids``).
Fields the server leaves out stay None; fields it sends malformed fail with an :class:`EndpointError`.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llm_marl_baselines.policies.base import FINISH_REASONS, ActionRequest, Generation, GenerationSettings, Policy

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class EndpointError(RuntimeError):
    """The endpoint did not give a usable answer (after the retries, for transient failures)."""


class EndpointPolicy(Policy):
    """Actions from an OpenAI-compatible chat endpoint.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"`` (the ``/chat/completions`` route is appended).
        model: the served model name sent in every request.
        api_key_env: the environment variable holding the API key (read at construction).
        timeout_s: per-request timeout (connect, read, write).
        max_retries: retries after the first attempt for transient failures.
        backoff_s: first backoff; doubles per retry, capped by ``max_backoff_s``.
        concurrency: the most requests in flight at once.
        logprobs: ask for the sampled tokens' log-probabilities (off by default: some servers reject the field).
        token_ids: ask for prompt and completion token ids with vLLM's ``return_token_ids`` (off by default: other
            servers may reject unknown fields).
    """

    name = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        concurrency: int = 8,
        logprobs: bool = False,
        token_ids: bool = False,
    ) -> None:
        try:
            import httpx
        except ImportError as error:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                f"the endpoint policy needs httpx; pip install 'llm-marl-envs[endpoint]' ({error})"
            ) from error
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url: expected an http(s) URL, got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model: expected a non-empty served model name, got {model!r}")
        for name, value, minimum in (("timeout_s", timeout_s, 0), ("backoff_s", backoff_s, 0),
                                     ("max_backoff_s", max_backoff_s, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
                raise ValueError(f"{name}: expected a number >= {minimum}, got {value!r}")
        for name, value, minimum in (("max_retries", max_retries, 0), ("concurrency", concurrency, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name}: expected an int >= {minimum}, got {value!r}")
        for name, flag in (("logprobs", logprobs), ("token_ids", token_ids)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name}: expected a bool, got {flag!r}")
        self.logprobs, self.token_ids = logprobs, token_ids
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.concurrency = concurrency
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(api_key_env)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._httpx = httpx
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_s), limits=limits)
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="endpoint-policy")

    def payload(self, request: ActionRequest, settings: GenerationSettings) -> dict[str, Any]:
        """The JSON body for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages(),
            "max_tokens": settings.max_new_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
        }
        if settings.seed is not None:
            body["seed"] = settings.seed
        if self.logprobs:
            body["logprobs"] = True
        if self.token_ids:
            body["return_token_ids"] = True
        return body

    def _generate(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[Generation]:
        if len(requests) == 1:
            return [self._complete(requests[0], settings)]
        return list(self._pool.map(lambda request: self._complete(request, settings), requests))

    def _complete(self, request: ActionRequest, settings: GenerationSettings) -> Generation:
        body = self.payload(request, settings)
        attempts = self.max_retries + 1
        last_cause = ""
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))
            try:
                response = self._client.post(self.url, json=body)
            except self._httpx.TimeoutException as error:
                last_cause = f"timed out ({type(error).__name__})"
                continue
            except self._httpx.TransportError as error:
                last_cause = f"connection failed ({type(error).__name__}: {error})"
                continue
            if response.status_code in RETRY_STATUS:
                last_cause = f"HTTP {response.status_code}: {_snippet(response.text)}"
                continue
            if response.status_code >= 400:
                raise EndpointError(f"{self.url} answered HTTP {response.status_code} for agent "
                                    f"{request.agent!r}: {_snippet(response.text)}")
            return self._record(response.text, request.agent)
        raise EndpointError(f"{self.url} failed for agent {request.agent!r} after {attempts} attempts; "
                            f"last cause: {last_cause}")

    def _record(self, text: str, agent: str) -> Generation:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise EndpointError(f"{self.url} returned malformed JSON for agent {agent!r} ({error}): "
                                f"{_snippet(text)}") from error
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as error:
            raise EndpointError(f"{self.url} returned JSON without choices[0].message.content for agent "
                                f"{agent!r}: {_snippet(text)}") from error
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise EndpointError(f"{self.url}: expected message content to be a string, got "
                                f"{type(content).__name__}")
        try:
            logprobs, logprob_ids = _parse_logprobs(choice.get("logprobs"))
            completion_ids = _parse_ids(choice.get("token_ids"), "choices[0].token_ids") or logprob_ids
            # vLLM puts the prompt's ids at the top level of the answer; accept them on the choice as well.
            prompt_ids = _parse_ids(data.get("prompt_token_ids", choice.get("prompt_token_ids")), "prompt_token_ids")
            finish_reason = choice.get("finish_reason")
            return Generation(
                text=content.strip(),
                prompt_ids=prompt_ids,
                completion_ids=completion_ids,
                logprobs=logprobs,
                finish_reason=finish_reason if finish_reason in FINISH_REASONS else None,
            )
        except (TypeError, ValueError) as error:
            raise EndpointError(f"{self.url} returned an unusable token record for agent {agent!r}: {error}") from error

    def close(self) -> None:
        """Close the HTTP connections and the worker threads."""
        self._pool.shutdown(wait=True)
        self._client.close()


def _parse_ids(value: Any, where: str) -> tuple[int, ...] | None:
    """A list of token ids from the answer, or None when the server sent none."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ValueError(f"{where}: expected a list of ints, got {value!r:.80}")
    return tuple(value)


def _parse_logprobs(value: Any) -> tuple[tuple[float, ...] | None, tuple[int, ...] | None]:
    """(log-probabilities, token ids) from an OpenAI ``choices[0].logprobs`` object; ids only when every entry's token
    is written ``"token_id:<id>"`` (vLLM's ``return_tokens_as_token_ids``)."""
    if value is None:
        return None, None
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, list):
        raise ValueError(f"choices[0].logprobs: expected an object with a content list, got {value!r:.80}")
    logprobs: list[float] = []
    ids: list[int] = []
    for index, entry in enumerate(content):
        logprob = entry.get("logprob") if isinstance(entry, dict) else None
        if isinstance(logprob, bool) or not isinstance(logprob, (int, float)):
            raise ValueError(f"choices[0].logprobs.content[{index}].logprob: expected a number, got {entry!r:.80}")
        logprobs.append(float(logprob))
        token = entry.get("token")
        if isinstance(token, str) and token.startswith("token_id:") and token[9:].isdigit():
            ids.append(int(token[9:]))
    return tuple(logprobs), (tuple(ids) if len(ids) == len(logprobs) and ids else None)


def _snippet(text: str, limit: int = 200) -> str:
    text = text.strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."
