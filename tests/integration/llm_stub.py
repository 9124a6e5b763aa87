"""A scripted OpenAI-compatible chat-completions server for tests (stdlib only).

The test queues the replies; the server answers ``POST /v1/chat/completions`` with them in
order and records every request body it received::

    with LLMStub() as stub:
        stub.script(tool_calls(("load_data", {"target": "sales"})), text("done"))
        ...  # point MLPILOT_LLM_BASE_URL at stub.base_url
        assert stub.requests[0]["tools"]

A reply is a dict built by :func:`tool_calls`, :func:`text`, :func:`error` or
:func:`sleep`, or a callable that takes the request body and returns one. When the script
runs dry the server answers 400 (not retried), so a test that asks for more fails clearly.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def tool_calls(*calls: tuple[str, dict[str, Any] | str], content: str | None = None) -> dict:
    """An assistant turn calling tools; string arguments are sent verbatim (e.g. broken JSON)."""
    return {
        "kind": "message",
        "content": content,
        "tool_calls": [
            {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}
            for name, args in calls
        ],
    }


def text(content: str) -> dict:
    """An assistant turn with no tool calls: the planner's loop ends on it."""
    return {"kind": "message", "content": content, "tool_calls": []}


def error(status: int, *, retry_after: float | None = None, message: str = "stub error") -> dict:
    """An HTTP error, optionally with a ``Retry-After`` header (seconds)."""
    return {"kind": "error", "status": status, "retry_after": retry_after, "message": message}


def sleep(seconds: float, then: dict | None = None) -> dict:
    """Wait ``seconds`` before answering (past the client's timeout, the answer is lost)."""
    return {"kind": "sleep", "seconds": seconds, "then": then or text("late reply")}


class LLMStub:
    """The server: ``start()`` binds a free port on 127.0.0.1 and serves in a daemon thread."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Replace the queue of replies."""
        with self._lock:
            self._replies = deque(replies)
            self.requests.clear()
            self.headers.clear()

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            reply = self._replies.popleft() if self._replies else None
        if reply is None:
            return error(400, message="llm stub: no scripted reply left")
        return reply(body) if callable(reply) else reply

    # -- serving --------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "start() the stub first"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LLMStub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON"}})
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._answer(stub._next(body, headers), body)

            def _answer(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
                if reply["kind"] == "sleep":
                    time.sleep(reply["seconds"])
                    reply = reply["then"]
                if reply["kind"] == "error":
                    extra = {}
                    if reply["retry_after"] is not None:
                        extra["Retry-After"] = f"{reply['retry_after']:g}"
                    payload = {"error": {"message": reply["message"], "type": "stub_error"}}
                    self._send(reply["status"], payload, extra)
                    return
                self._send(200, stub._completion(reply, body))

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LLMStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _completion(self, reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in enumerate(reply["tool_calls"])
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
        if calls:
            message["tool_calls"] = calls
        return {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }


def system_prompt(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def user_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]
