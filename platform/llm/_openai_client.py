"""Calling the chat-completions endpoint: bounded retries with backoff, errors a user can act on.

The ``openai`` client is built with ``max_retries=0``: retries happen here, so that every
attempt (status, timing, wait) lands in the planner's transcript and Retry-After is honoured.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlpilot.platform.errors import MlpilotError

logger = logging.getLogger(__name__)

OFFLINE_HINT = "or set MLPILOT_LLM=offline"


class LLMError(MlpilotError):
    """The LLM endpoint could not be used (unreachable, refused, rate-limited, failing).

    ``status`` and ``detail`` are the HTTP status and the server's own words when the
    endpoint refused the request, so that the planner can react to a known refusal.
    """

    status: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter, bounded in attempts and in each wait."""

    attempts: int = 4
    base_s: float = 0.5
    cap_s: float = 8.0
    max_retry_after_s: float = 30.0  # a longer Retry-After is not worth blocking the CLI for

    def delay(
        self, attempt: int, retry_after: float | None, rand: Callable[[], float] = random.random
    ) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based).

        The server's Retry-After wins when given; otherwise half the exponential step plus a
        random half, so that clients that failed together do not retry together.
        """
        if retry_after is not None:
            return max(0.0, min(retry_after, self.max_retry_after_s))
        step = min(self.cap_s, self.base_s * 2 ** (attempt - 1))
        return step / 2 + rand() * step / 2


def display_url(url: str) -> str:
    """The endpoint as shown in errors and transcripts: no credentials, no query string."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


def redact(value: Any, secret: str | None) -> Any:
    """A copy of ``value`` with every occurrence of ``secret`` replaced (a last guard)."""
    if isinstance(value, str):
        return value.replace(secret, "***") if secret and len(secret) >= 4 else value
    if isinstance(value, dict):
        return {k: redact(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secret) for v in value]
    return value


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# Server words for a fault that is the model's or the server's setup, never transient: a
# retry gets the same answer (llama.cpp sends the first two as HTTP 500).
_MODEL_OUTPUT = "does not match the expected"  # "The model produced output that …"
_NO_JINJA = "requires --jinja"  # "tools param requires --jinja flag"
_CONTEXT = (
    "exceeds the available context size",  # llama.cpp
    "maximum context length",  # vLLM and OpenAI
    "context_length_exceeded",
)


def _retryable(status: int, detail: str = "") -> bool:
    if _MODEL_OUTPUT in detail or _NO_JINJA in detail:
        return False
    return status in (408, 409, 429) or status >= 500


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return " ".join(str(message).split())[:200]
    return " ".join(str(getattr(exc, "message", "") or exc).split())[:200]


def _refused(status: int, exc: Any, endpoint: str, model: str) -> LLMError:
    """An error the endpoint will repeat whatever we do: say which setting to check."""
    detail = _server_message(exc)
    error = _refusal(status, detail, endpoint, model)
    error.status, error.detail = status, detail
    return error


def _refusal(status: int, detail: str, endpoint: str, model: str) -> LLMError:
    if status in (401, 403):
        return LLMError(
            f"the LLM endpoint {endpoint} rejected the API key (HTTP {status}): {detail}",
            hint=f"check NVIDIA_API_KEY / OPENAI_API_KEY and MLPILOT_LLM_BASE_URL, {OFFLINE_HINT}",
        )
    if status == 404:
        return LLMError(
            f"the LLM endpoint {endpoint} answered HTTP 404 for model {model!r}: {detail}",
            hint=f"check MLPILOT_LLM_BASE_URL (usually ending in /v1) and MLPILOT_LLM_MODEL, {OFFLINE_HINT}",
        )
    if any(words in detail for words in _CONTEXT):
        return LLMError(
            f"the model's context window at {endpoint} is smaller than the planner's "
            f"conversation (HTTP {status}): {detail}",
            hint="serve the model with a context of 8192 tokens or more (llama-server -c 8192, "
            f"vLLM --max-model-len 8192), or lower MLPILOT_LLM_MAX_TOKENS, {OFFLINE_HINT}",
        )
    if _NO_JINJA in detail:
        return LLMError(
            f"the llama.cpp server at {endpoint} cannot take tools (HTTP {status}): {detail}",
            hint=f"start llama-server with --jinja (and a tool-capable chat template), {OFFLINE_HINT}",
        )
    if _MODEL_OUTPUT in detail:
        return LLMError(
            f"the model at {endpoint} wrote a reply its server could not read as tool calls "
            f"(HTTP {status}, the model's fault, so not retried): {detail}",
            hint="serve a tool-calling model with its own chat template (llama-server --jinja), "
            f"or set MLPILOT_LLM_REASONING=off, {OFFLINE_HINT}",
        )
    return LLMError(
        f"the LLM endpoint {endpoint} refused the request (HTTP {status}): {detail}",
        hint=(
            "check that MLPILOT_LLM_MODEL supports tool calling and that "
            f"MLPILOT_LLM_BACKEND names this kind of server, {OFFLINE_HINT}"
        ),
    )


def _gave_up(last: dict[str, Any], attempts: int, endpoint: str, timeout_s: float) -> LLMError:
    status = last["status"]
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    if status == "timeout":
        return LLMError(
            f"the LLM endpoint {endpoint} did not answer within {timeout_s:g} s ({tries})",
            hint=f"check MLPILOT_LLM_BASE_URL, raise MLPILOT_LLM_TIMEOUT, {OFFLINE_HINT}",
        )
    if status == "connection error":
        return LLMError(
            f"cannot connect to the LLM endpoint {endpoint} ({tries}): {last.get('error', '')}",
            hint=f"check MLPILOT_LLM_BASE_URL and the network, {OFFLINE_HINT}",
        )
    if status == 429:
        wait = last.get("retry_after_s")
        later = f"; it asks to retry after {wait:g} s" if wait is not None else ""
        return LLMError(
            f"the LLM endpoint {endpoint} kept rate-limiting the planner (HTTP 429, {tries}){later}",
            hint=f"wait and try again, check the key's quota, {OFFLINE_HINT}",
        )
    return LLMError(
        f"the LLM endpoint {endpoint} failed with HTTP {status} ({tries}): {last.get('error', '')}",
        hint=f"the provider has a problem: try again later, check MLPILOT_LLM_BASE_URL, {OFFLINE_HINT}",
    )


def create_with_retries(
    create: Callable[..., Any],
    kwargs: dict[str, Any],
    *,
    backoff: Backoff,
    endpoint: str,
    timeout_s: float,
    log: list[dict[str, Any]],
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """``create(**kwargs)`` with retries; every attempt is appended to ``log``."""
    import openai

    model = str(kwargs.get("model", ""))
    for attempt in range(1, backoff.attempts + 1):
        started = time.monotonic()
        entry: dict[str, Any] = {"attempt": attempt}
        retry_after = None
        try:
            response = create(**kwargs)
        except openai.APIStatusError as exc:
            entry["status"] = exc.status_code
            entry["error"] = _server_message(exc)
            retry_after = parse_retry_after(exc.response.headers)
            if retry_after is not None:
                entry["retry_after_s"] = round(retry_after, 3)
            if not _retryable(exc.status_code, entry["error"]):
                entry["elapsed_s"] = round(time.monotonic() - started, 3)
                log.append(entry)
                logger.info("LLM endpoint refused: HTTP %s %s", exc.status_code, entry["error"])
                raise _refused(exc.status_code, exc, endpoint, model) from None
        except openai.APITimeoutError:
            entry["status"] = "timeout"
        except openai.APIConnectionError as exc:
            entry["status"] = "connection error"
            entry["error"] = " ".join(str(exc.__cause__ or exc).split())[:200]
        else:
            entry["status"] = 200
            entry["elapsed_s"] = round(time.monotonic() - started, 3)
            log.append(entry)
            return response
        entry["elapsed_s"] = round(time.monotonic() - started, 3)
        log.append(entry)
        too_long = retry_after is not None and retry_after > backoff.max_retry_after_s
        if attempt == backoff.attempts or too_long:
            raise _gave_up(entry, attempt, endpoint, timeout_s)
        wait = backoff.delay(attempt, retry_after)
        entry["wait_s"] = round(wait, 3)
        sleep(wait)
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover
