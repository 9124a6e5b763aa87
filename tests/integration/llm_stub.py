"""A scripted OpenAI-compatible chat-completions server for tests (stdlib + jinja2).

The test queues the replies; the server answers ``POST /v1/chat/completions`` with them in
order and records every request body it received::

    with LLMStub() as stub:
        stub.script(tool_calls(("load_data", {"target": "sales"})), text("done"))
        ...  # point MLPILOT_LLM_BASE_URL at stub.base_url
        assert stub.requests[0]["tools"]

A reply is a dict built by :func:`tool_calls`, :func:`text`, :func:`raw`, :func:`error` or
:func:`sleep` (optionally passed through :func:`cut`), or a callable that takes the request
body and returns one. When the script runs dry the server answers 400 (not retried), so a
test that asks for more fails clearly.

**Modes** shape a scripted turn the way a real server sends it. ``openai`` (the default)
sends it as scripted. The Nemotron modes first write the model's raw output, as Nemotron
Nano 9B v2 generates it after the chat template's generation prompt: reasoning ending in
``</think>`` (no opening tag: the template wrote ``<think>\\n``; ``open_think=True`` adds one)
when the rendered prompt has reasoning on, then the text, then
``<TOOLCALL>[{"name": …, "arguments": …}]</TOOLCALL>``. Then the server's parsers run:

- ``nim``: hosted NIM: reasoning in ``reasoning_content``, calls in ``tool_calls``;
- ``vllm``: vLLM with the Nemotron tool-parser plugin and no reasoning parser: calls parsed
  (a block that fails to parse stays in ``content``), reasoning left in ``content``;
- ``vllm-reasoning``: the same with a reasoning parser: reasoning in ``reasoning``;
- ``vllm-noparser``: vLLM with neither: everything in ``content``.

**Strict** mode rejects what vLLM rejects: an unknown model id (404, vLLM's words),
``tool_choice: "auto"`` without a tool parser, resent tool-call arguments that are not JSON,
and messages the model's chat template cannot render.

**The chat template** of the model card (``data/nemotron_nano_9b_v2_chat_template.jinja``)
is rendered over every request received; :meth:`LLMStub.template_problems` says which
requests did not render or switch reasoning the way the test expects.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jinja2
import jinja2.ext
import jinja2.sandbox

Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]

MODES = ("openai", "nim", "vllm", "vllm-reasoning", "vllm-noparser")
PARSES_TOOLS = ("nim", "vllm", "vllm-reasoning")
REASONING_FIELD = {"nim": "reasoning_content", "vllm-reasoning": "reasoning"}
SERVED_MODEL = "nvidia/NVIDIA-Nemotron-Nano-9B-v2"  # the id `vllm serve` gives the model
AUTO_REFUSED = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)
DEFAULT_REASONING = "The user wants a plan; I will call the tools with the right arguments."
TEMPLATE_PATH = Path(__file__).parent / "data" / "nemotron_nano_9b_v2_chat_template.jinja"


# -- replies ------------------------------------------------------------------------------------
def tool_calls(
    *calls: tuple[str, dict[str, Any] | str],
    content: str | None = None,
    reasoning: str | None = None,
) -> dict:
    """An assistant turn calling tools; string arguments are sent verbatim (e.g. broken JSON)."""
    return {
        "kind": "message",
        "content": content,
        "reasoning": reasoning,
        "tool_calls": [
            {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}
            for name, args in calls
        ],
    }


def text(content: str, *, reasoning: str | None = None) -> dict:
    """An assistant turn with no tool calls: the planner's loop ends on it."""
    return {"kind": "message", "content": content, "reasoning": reasoning, "tool_calls": []}


def raw(output: str, *, reasoning: str | None = None) -> dict:
    """The model's own text after its reasoning, verbatim (e.g. a broken ``<TOOLCALL>``)."""
    return {"kind": "message", "raw": output, "reasoning": reasoning, "tool_calls": []}


def cut(reply: dict, at: int) -> dict:
    """``reply`` cut after ``at`` characters of raw output: ``finish_reason: "length"``."""
    return {**reply, "cut_at": at}


def error(status: int, *, retry_after: float | None = None, message: str = "stub error") -> dict:
    """An HTTP error, optionally with a ``Retry-After`` header (seconds)."""
    return {"kind": "error", "status": status, "retry_after": retry_after, "message": message}


def sleep(seconds: float, then: dict | None = None) -> dict:
    """Wait ``seconds`` before answering (past the client's timeout, the answer is lost)."""
    return {"kind": "sleep", "seconds": seconds, "then": then or text("late reply")}


def toolcall_text(calls: list[dict[str, str]]) -> str:
    """Calls as the model writes them: arguments that are a JSON object go in as one;
    anything else as a JSON string (what the model writes when it quotes them)."""
    if not calls:
        return ""
    items = []
    for call in calls:
        try:
            args: Any = json.loads(call["arguments"])
        except json.JSONDecodeError:
            args = None
        value = args if isinstance(args, dict) else call["arguments"]
        items.append(json.dumps({"name": call["name"], "arguments": value}, ensure_ascii=False))
    return "<TOOLCALL>[" + ", ".join(items) + "]</TOOLCALL>"


# -- the chat template ------------------------------------------------------------------------
@functools.cache
def _template() -> jinja2.Template:
    # As transformers' apply_chat_template builds its environment (which vLLM uses).
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = lambda value, **_: json.dumps(value, ensure_ascii=False)
    return env.from_string(TEMPLATE_PATH.read_text(encoding="utf-8"))


def render(body: dict[str, Any]) -> tuple[str, bool]:
    """The prompt the model would see for ``body``, and whether reasoning is on in it.

    Arguments are loaded into objects first, as vLLM does; those that are not JSON stay text.
    """
    messages = json.loads(json.dumps(body.get("messages", [])))
    for message in messages:
        for call in message.get("tool_calls") or []:
            with contextlib.suppress(KeyError, TypeError, json.JSONDecodeError):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    prompt = _template().render(
        messages=messages, tools=body.get("tools"), add_generation_prompt=True
    )
    if prompt.endswith("<think></think>"):
        return prompt, False
    if prompt.endswith("<think>\n"):
        return prompt, True
    raise ValueError("the prompt does not end with the template's thinking prefix")


# -- what a server does with the model's output ---------------------------------------------------
_BLOCK = re.compile(r"<TOOLCALL>(.*?)</TOOLCALL>", re.DOTALL)


def nemotron_parser(output: str) -> tuple[list[dict[str, str]], str | None]:
    """The Nemotron tool-parser plugin (``nemotron_json``, non-streaming) as vLLM runs it:
    one block of calls; anything it cannot parse is left in ``content`` untouched."""
    if "<TOOLCALL>" not in output:
        return [], output
    try:
        text = _BLOCK.findall(output)[0].strip()
        text = text if text.startswith("[") else "[" + text
        text = text if text.endswith("]") else text + "]"
        calls = []
        for item in json.loads(text):
            args = item.get("arguments")
            arguments = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else args
            calls.append({"name": item["name"], "arguments": arguments})
    except (IndexError, ValueError, KeyError, TypeError, AttributeError):
        return [], output
    before = output[: output.rfind("<TOOLCALL>")]
    return calls, before or None


def split_reasoning(output: str) -> tuple[str | None, str]:
    """A reasoning parser: what comes before ``</think>`` is reasoning (all of it, if the
    reply was cut before the tag)."""
    if "</think>" not in output:
        return output.removeprefix("<think>").strip() or None, ""
    reasoning, _, rest = output.partition("</think>")
    return reasoning.removeprefix("<think>").strip() or None, rest.lstrip()


class _Server(ThreadingHTTPServer):
    stub: LLMStub


class _Handler(BaseHTTPRequestHandler):
    """HTTP for :class:`LLMStub`: ``GET /v1/models`` and ``POST /v1/chat/completions``."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            served = self.server.stub.served_model or "stub"
            self._send(200, {"object": "list", "data": [{"id": served, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw_body = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw_body or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "request body is not JSON"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._answer(self.server.stub._next(body, headers), body)

    def _answer(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
        stub = self.server.stub
        if reply["kind"] == "sleep":
            time.sleep(reply["seconds"])
            reply = reply["then"]
        if reply["kind"] == "error":
            extra = {}
            if reply["retry_after"] is not None:
                extra["Retry-After"] = f"{reply['retry_after']:g}"
            kind = reply.get("type", "BadRequestError" if stub.strict else "stub_error")
            payload = {
                "error": {"message": reply["message"], "type": kind, "code": reply["status"]}
            }
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


class LLMStub:
    """The server: ``start()`` binds a free port on 127.0.0.1 and serves in a daemon thread."""

    def __init__(
        self,
        mode: str = "openai",
        *,
        strict: bool = False,
        served_model: str | None = None,
        open_think: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: use one of {MODES}")
        self.mode = mode
        self.strict = strict
        self.served_model = served_model or (SERVED_MODEL if strict else None)
        self.open_think = open_think
        self.expect_reasoning = "off"  # what MLPILOT_LLM_REASONING the test set
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.renders: list[dict[str, Any]] = []
        self.rejected: list[tuple[int, str]] = []
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------
    def script(self, *replies: Reply) -> None:
        """Replace the queue of replies (and forget the requests received so far)."""
        with self._lock:
            self._replies = deque(replies)
            self.requests.clear()
            self.headers.clear()
            self.renders.clear()
            self.rejected.clear()

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def template_problems(self, reasoning: str | None = None) -> list[str]:
        """Requests the chat template could not render, or rendered with reasoning other
        than ``reasoning`` (default: :attr:`expect_reasoning`)."""
        want = (reasoning or self.expect_reasoning) == "on"
        problems = []
        with self._lock:
            renders = list(self.renders)
        for i, result in enumerate(renders, 1):
            if result["error"]:
                problems.append(f"request {i}: the chat template failed: {result['error']}")
            elif result["thinking"] != want:
                got = "on" if result["thinking"] else "off"
                problems.append(f"request {i}: the chat template switched reasoning {got}")
        return problems

    def _next(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        result: dict[str, Any] = {"thinking": None, "error": None}
        try:
            result["thinking"] = render(body)[1]
        except Exception as exc:  # any template failure is what the test looks for
            result["error"] = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.renders.append(result)
        refusal = self._refusal(body, result["error"])
        if refusal is not None:
            with self._lock:
                self.rejected.append((refusal["status"], refusal["message"]))
            return refusal
        with self._lock:
            reply = self._replies.popleft() if self._replies else None
        if reply is None:
            return error(400, message="llm stub: no scripted reply left")
        reply = reply(body) if callable(reply) else reply
        if reply["kind"] == "message":
            reply = {**reply, "thinking": bool(result["thinking"])}
        return reply

    def _refusal(self, body: dict[str, Any], render_error: str | None) -> dict[str, Any] | None:
        """What vLLM refuses before the model runs (strict mode only)."""
        if not self.strict:
            return None
        model = body.get("model")
        if self.served_model and model != self.served_model:
            return {
                **error(404, message=f"The model `{model}` does not exist."),
                "type": "NotFoundError",
            }
        choice = body.get("tool_choice", "auto" if body.get("tools") else "none")
        if self.mode not in PARSES_TOOLS and body.get("tools") and choice == "auto":
            return error(400, message=AUTO_REFUSED)
        for message in body.get("messages", []):
            for call in message.get("tool_calls") or []:
                try:
                    json.loads(call["function"]["arguments"])
                except json.JSONDecodeError as exc:
                    return error(400, message=f"{exc} None")
        if render_error:
            return error(400, message=render_error)
        return None

    # -- serving --------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._server is not None, "start() the stub first"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LLMStub:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
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

    # -- shaping a reply --------------------------------------------------------------------
    def _completion(self, reply: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        n = next(self._ids)
        if self.mode == "openai":
            message, finish = self._as_scripted(reply, n)
        else:
            message, finish = self._as_nemotron(reply)
        return {
            "id": f"chatcmpl-stub-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def _as_scripted(self, reply: dict[str, Any], n: int) -> tuple[dict[str, Any], str]:
        content = reply["raw"] if reply.get("raw") is not None else reply["content"]
        calls = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for i, c in enumerate(reply["tool_calls"])
        ]
        if reply.get("cut_at") is not None:  # a cut reply: the text so far, no calls
            return {"role": "assistant", "content": (content or "")[: reply["cut_at"]]}, "length"
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
        return message, "tool_calls" if calls else "stop"

    def _model_output(self, reply: dict[str, Any]) -> tuple[str, str]:
        """What the model generates after the generation prompt, and why it stopped."""
        thinking = ""
        if reply.get("thinking"):
            opening = "<think>\n" if self.open_think else ""
            thinking = f"{opening}{reply.get('reasoning') or DEFAULT_REASONING}\n</think>\n\n"
        if reply.get("raw") is not None:
            body = reply["raw"]
        else:
            body = (reply.get("content") or "") + toolcall_text(reply["tool_calls"])
        output = thinking + body
        if reply.get("cut_at") is not None:
            return output[: reply["cut_at"]], "length"
        return output, "stop"

    def _as_nemotron(self, reply: dict[str, Any]) -> tuple[dict[str, Any], str]:
        output, finish = self._model_output(reply)
        message: dict[str, Any] = {"role": "assistant", "content": output}
        field = REASONING_FIELD.get(self.mode)
        if field and reply.get("thinking"):
            message[field], output = split_reasoning(output)
            message["content"] = output
        if self.mode in PARSES_TOOLS:
            calls, message["content"] = nemotron_parser(output)
            if calls:
                message["tool_calls"] = [
                    {
                        "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
                        "type": "function",
                        "function": call,
                    }
                    for call in calls
                ]
                return message, "tool_calls"
        return message, finish


def system_prompt(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def user_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]
