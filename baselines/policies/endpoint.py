"""OpenAI-compatible chat-completions endpoint policy (vLLM's server, hosted APIs).

``POST {base_url}/chat/completions`` with the request's messages and the generation settings. The API key is read
from an environment variable (``OPENAI_API_KEY`` by default; none is sent when it is unset, as a local vLLM server
needs none). Requests of a batch run concurrently on a thread pool of ``concurrency`` workers. Connect errors,
timeouts, HTTP 429 and 5xx are retried with exponential backoff; after the last retry an :class:`EndpointError`
names the URL, the attempts and the last cause. Other 4xx answers and malformed bodies (not JSON, or JSON without
``choices[0].message.content``) fail at once with an :class:`EndpointError` quoting the body.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from baselines.policies.base import ActionRequest, GenerationSettings, Policy

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
        return body

    def _act(self, requests: list[ActionRequest], settings: GenerationSettings) -> list[str]:
        if len(requests) == 1:
            return [self._complete(requests[0], settings)]
        return list(self._pool.map(lambda request: self._complete(request, settings), requests))

    def _complete(self, request: ActionRequest, settings: GenerationSettings) -> str:
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
            return self._content(response.text, request.agent)
        raise EndpointError(f"{self.url} failed for agent {request.agent!r} after {attempts} attempts; "
                            f"last cause: {last_cause}")

    def _content(self, text: str, agent: str) -> str:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise EndpointError(f"{self.url} returned malformed JSON for agent {agent!r} ({error}): "
                                f"{_snippet(text)}") from error
        try:
            content = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as error:
            raise EndpointError(f"{self.url} returned JSON without choices[0].message.content for agent "
                                f"{agent!r}: {_snippet(text)}") from error
        if content is None:
            return ""
        if not isinstance(content, str):
            raise EndpointError(f"{self.url}: expected message content to be a string, got "
                                f"{type(content).__name__}")
        return content.strip()

    def close(self) -> None:
        """Close the HTTP connections and the worker threads."""
        self._pool.shutdown(wait=True)
        self._client.close()


def _snippet(text: str, limit: int = 200) -> str:
    text = text.strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."
