"""``mlpilot doctor``'s LLM and GPU checks, against a local stand-in for the endpoint."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from mlpilot.platform.cli.doctor import check_gpu, check_llm
from mlpilot.platform.config import Settings


class ModelsEndpoint(BaseHTTPRequestHandler):
    key = "good-key"
    models: ClassVar[tuple[str, ...]] = ("nvidia/nvidia-nemotron-nano-9b-v2",)
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {self.key}":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"data": [{"id": m} for m in self.models]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ModelsEndpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"MLPILOT_HOME": str(tmp_path), **env})


def test_no_key_means_the_offline_planner(tmp_path: Path) -> None:
    check = check_llm(_settings(tmp_path))
    assert check.status == "info" and "offline planner in use" in check.detail
    assert "offline planner in use" in check_llm(_settings(tmp_path, MLPILOT_LLM="offline")).detail
    forced = check_llm(_settings(tmp_path, MLPILOT_LLM="openai"))
    assert forced.status == "fail" and "no API key" in forced.detail


def test_a_key_is_checked_against_the_models_endpoint(tmp_path: Path, endpoint: str) -> None:
    good = check_llm(_settings(tmp_path, NVIDIA_API_KEY="good-key", MLPILOT_LLM_BASE_URL=endpoint))
    assert good.status == "ok" and "nemotron" in good.detail
    assert ModelsEndpoint.seen[-1] == "/v1/models"
    other = check_llm(
        _settings(
            tmp_path,
            NVIDIA_API_KEY="good-key",
            MLPILOT_LLM_BASE_URL=endpoint,
            MLPILOT_LLM_MODEL="someone/else",
        )
    )
    assert other.status == "warn" and "does not list someone/else" in other.detail
    bad = check_llm(_settings(tmp_path, OPENAI_API_KEY="wrong", MLPILOT_LLM_BASE_URL=endpoint))
    assert bad.status == "fail" and "rejected the API key" in bad.detail
    assert "wrong" not in bad.detail


def test_an_unreachable_endpoint_fails_with_a_hint(tmp_path: Path) -> None:
    from helpers import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    check = check_llm(_settings(tmp_path, NVIDIA_API_KEY="k", MLPILOT_LLM_BASE_URL=url))
    assert check.status == "fail" and "unreachable" in check.detail and check.hint


def test_gpu_check_reports_what_engine_auto_will_do() -> None:
    from mlpilot.platform.execution import cuda_device_status

    check = check_gpu()
    if cuda_device_status().usable:
        assert check.status in ("ok", "warn")
    else:
        assert check.status == "info" and "runs on the CPU" in check.detail
