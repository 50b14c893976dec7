"""RemoteBackend: any OpenAI-compatible server (vLLM, SGLang, llama-server, Ollama, `ember serve`)
behind Ember's Backend API.

Each request streams `/v1/chat/completions` (or `/v1/completions` for raw prompts) over SSE in
its own thread. Every way a stream can end badly (refused key, unknown model, server error, a
stall past the read timeout, a dropped connection, a malformed chunk) ends in
`Finished(reason="error")` that keeps the text received so far and says why in one line.
Local KV policies (sink window, prefix cache, drafts) run on the server or not at all: the
features dict reports them off.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ember.engine.api import (
    EngineInfo,
    EngineOptions,
    EventStream,
    Finished,
    FinishReason,
    GenerationRequest,
    Health,
    Stats,
    TextDelta,
    TokenLogprob,
)
from ember.engine.errors import EngineError
from ember.engine.remote.sse import Chunk, iter_chunks, request_body

if TYPE_CHECKING:
    import httpx

API_KEY_ENV = ("EMBER_REMOTE_API_KEY", "OPENAI_API_KEY")
FEATURES_OFF = ("sink_window", "prefix_cache", "disk_prefix_cache", "draft", "kv_shift")


@dataclass(frozen=True)
class RemoteConfig:
    """Where the server is and how long to wait for it."""

    url: str
    model: str
    api_key: str = ""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 120.0  # longest silence inside a stream before giving up

    def __post_init__(self) -> None:
        parsed = urlparse(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise EngineError(f"remote url {self.url!r}: must be http(s)://host[:port][/path]")
        if self.connect_timeout_s <= 0 or self.read_timeout_s <= 0:
            raise EngineError("remote timeouts must be > 0 seconds")

    @property
    def base(self) -> str:
        """The URL without a trailing slash or /v1 (endpoints add /v1/...)."""
        base = self.url.rstrip("/")
        return base[:-3] if base.endswith("/v1") else base


def api_key_from_env(explicit: str = "") -> str:
    """The explicit key, else EMBER_REMOTE_API_KEY, else OPENAI_API_KEY, else empty."""
    if explicit:
        return explicit
    return next((os.environ[k] for k in API_KEY_ENV if os.environ.get(k)), "")


def http_error(status: int, body: str, config: RemoteConfig) -> str:
    """One line saying why the server refused."""
    detail = body.strip().replace("\n", " ")[:160]
    if status == 401 or status == 403:
        return f"{config.base} refused the API key ({status}); set EMBER_REMOTE_API_KEY"
    if status == 404:
        return f"{config.base}: model {config.model!r} or endpoint not found (404) {detail}"
    return f"{config.base} answered {status}: {detail}"


def remote_config(options: EngineOptions) -> RemoteConfig | None:
    """The server options point at: --remote URL or a model given as a URL; None for a local
    model. (app resolves a registry entry of kind remote into remote_url + model.)"""
    key = api_key_from_env(options.remote_api_key)
    if options.runner == "remote" or options.remote_url:
        if not options.remote_url:
            raise EngineError("remote runner needs a server URL (--remote URL)")
        return RemoteConfig(options.remote_url, options.model, key)
    if options.runner != "auto":
        return None
    if options.model.startswith(("http://", "https://")):
        return RemoteConfig(options.model, "", key)
    return None


class RemoteHandle(EventStream):
    """A streamed remote request: iterate its events; abort() stops it and keeps the text."""

    def __init__(self, backend: RemoteBackend, request: GenerationRequest) -> None:
        super().__init__()
        self._backend = backend
        self._request = request
        self._aborted = threading.Event()
        self._response: httpx.Response | None = None
        self._logprobs: list[TokenLogprob] = []  # as the server sent them (no token ids)
        self._thread = threading.Thread(target=self._run, name="ember-remote", daemon=True)
        self._thread.start()

    def abort(self) -> None:
        """Stop the stream now (closes the connection); the reply so far is kept."""
        self._aborted.set()
        response = self._response
        if response is None:
            return
        # A reader blocked in recv() only wakes when the socket itself shuts down.
        stream = response.extensions.get("network_stream")
        sock = stream.get_extra_info("socket") if stream is not None else None
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
            else:
                response.close()
        except OSError:
            pass  # already closed

    def _run(self) -> None:
        text: list[str] = []
        stats = Stats(runner="remote", device=self._backend.config.base)
        started = time.perf_counter()
        reason: FinishReason = "stop"
        error = ""
        try:
            reason = self._stream(text, stats, started)
        except Exception as exc:  # noqa: BLE001 - every failure ends the request in an event
            if self._aborted.is_set():
                reason = "abort"
            else:
                reason, error = "error", _describe(exc, self._backend.config)
        elapsed = time.perf_counter() - started
        if stats.generated_tokens and elapsed > stats.ttft_s:
            stats.decode_tok_s = stats.generated_tokens / (elapsed - stats.ttft_s)
        if reason != "error" and self._request.sampling.logprobs and text and not self._logprobs:
            base = self._backend.config.base
            reason, error = "error", f"{base} sent no logprobs (it does not serve them)"
        logprobs = tuple(self._logprobs)
        self.push(Finished(reason, "".join(text), (), stats, error, logprobs=logprobs))

    def _stream(self, text: list[str], stats: Stats, started: float) -> FinishReason:
        path, body = request_body(self._request, self._backend.config.model)
        client = self._backend.client()
        with client.stream("POST", path, json=body) as response:
            self._response = response
            if response.status_code != 200:
                payload = response.read().decode("utf-8", "replace")
                raise EngineError(http_error(response.status_code, payload, self._backend.config))
            finish: str | None = None
            for chunk in iter_chunks(response.iter_lines()):
                if self._aborted.is_set():
                    return "abort"
                if chunk.done:
                    return _reason(finish)
                finish = self._take(chunk, text, stats, started) or finish
            if self._aborted.is_set():
                return "abort"
            if finish is not None:
                return _reason(finish)  # servers that end without [DONE]
            raise EngineError(f"{self._backend.config.base} closed the connection mid-reply")

    def _take(self, chunk: Chunk, text: list[str], stats: Stats, started: float) -> str | None:
        if chunk.usage:
            stats.prompt_tokens = int(chunk.usage.get("prompt_tokens", 0))
            stats.generated_tokens = int(chunk.usage.get("completion_tokens", 0))
        if chunk.text or chunk.logprobs:
            if not text:
                stats.ttft_s = time.perf_counter() - started
            text.append(chunk.text)
            self._logprobs += chunk.logprobs
            self.push(TextDelta(chunk.text, (), chunk.logprobs))
        return chunk.finish_reason


def _reason(finish: str | None) -> FinishReason:
    return "length" if finish == "length" else "stop"


def _describe(exc: Exception, config: RemoteConfig) -> str:
    import httpx

    if isinstance(exc, EngineError):
        return str(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return f"{config.base}: no connection within {config.connect_timeout_s:g} s"
    if isinstance(exc, httpx.ConnectError):
        return f"{config.base}: cannot connect ({exc})"
    if isinstance(exc, httpx.ReadTimeout):
        return f"{config.base} stalled: no data for {config.read_timeout_s:g} s"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return f"{config.base} closed the connection mid-reply ({exc})"
    return f"{config.base}: {type(exc).__name__}: {exc}"


class RemoteBackend:
    """Backend over an OpenAI-compatible HTTP server."""

    def __init__(self, config: RemoteConfig) -> None:
        import httpx

        self.config = config
        self._closed = False
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        timeout = httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s)
        self._client = httpx.Client(base_url=config.base, headers=headers, timeout=timeout)
        self._info = EngineInfo(
            model=config.model,
            runner="remote",
            device=config.base,
            architecture="remote",
            context_limit=0,
            features={name: False for name in FEATURES_OFF},
        )

    @classmethod
    def from_options(cls, options: EngineOptions) -> RemoteBackend:
        """From `--remote URL --model NAME` (API key: option, then environment)."""
        config = remote_config(options)
        if config is None:
            raise EngineError(f"model {options.model!r} is not a remote server")
        return cls(config)

    @property
    def info(self) -> EngineInfo:
        return self._info

    def client(self) -> httpx.Client:
        return self._client

    def list_models(self) -> list[str]:
        """Model ids the server offers (GET /v1/models)."""
        try:
            response = self._client.get("/v1/models")
        except Exception as exc:  # noqa: BLE001
            raise EngineError(_describe(exc, self.config)) from None
        if response.status_code != 200:
            raise EngineError(http_error(response.status_code, response.text, self.config))
        try:
            data: Any = response.json()
            return [str(m["id"]) for m in data["data"]]
        except (ValueError, KeyError, TypeError):
            raise EngineError(f"{self.config.base}: /v1/models answered no model list") from None

    def submit(self, request: GenerationRequest) -> RemoteHandle:
        """Start streaming request; events arrive on the returned handle."""
        return RemoteHandle(self, request)

    def count_tokens(self, request: GenerationRequest) -> int:
        """Token count from the server's /tokenize (llama-server, vLLM); EngineError without one."""
        if request.prompt_ids is not None:
            return len(request.prompt_ids)
        text = request.prompt or "\n".join(m.content for m in request.messages or ())
        body = {"model": self.config.model, "prompt": text, "content": text}
        try:
            response = self._client.post("/tokenize", json=body)
            data: Any = response.json() if response.status_code == 200 else None
        except Exception:  # noqa: BLE001
            data = None
        if isinstance(data, dict):
            if isinstance(data.get("count"), int):
                return int(data["count"])
            if isinstance(data.get("tokens"), list):
                return len(data["tokens"])
        raise EngineError(f"{self.config.base} cannot count tokens (no /tokenize endpoint)")

    def health(self) -> Health:
        """ok until closed: the remote server's own health is its /health, not ours to guess."""
        return Health("closed", "backend closed") if self._closed else Health("ok")

    def close(self) -> None:
        self._closed = True
        self._client.close()
