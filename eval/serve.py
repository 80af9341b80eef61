"""A real OpenAI-compatible server for the embedded model: llama.cpp's (``llama-cpp-python[server]``) serving the
packaged SmolLM2-135M-Instruct GGUF as it is, for testing and measuring the endpoint policy on this machine.

llama.cpp's server answers one request at a time (measured: 8 concurrent requests took as long as 8 sequential
ones, ``shared/NOTES-verl-and-cpu.md``); a vLLM server batches concurrent requests. Start it from the command
line::

    python -m genenv.eval.serve --port 8011            # then: genenv-eval --policy openai:http://127.0.0.1:8011/v1#smollm2

Install: ``pip install "llama-cpp-python[server]==0.3.36"`` (built from its sdist: ~5 min on 2 cores; pip caches
the wheel). ``.ci/install`` installs it, so the endpoint tests run in CI.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

SERVED_NAME = "smollm2"
"""The model name the server answers to (``openai:URL#smollm2``)."""


class ServerError(RuntimeError):
    """The server could not be started (missing package, early exit, no answer in time); the message says why."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """``python -m llama_cpp.server`` on the embedded GGUF, as a context manager: started on entry (waits until
    ``GET /v1/models`` answers), terminated on exit.

    Args:
        port: TCP port (default: a free one).
        threads: llama.cpp threads.
        n_ctx: context window in tokens (SmolLM2 was trained to 8192).
        startup_timeout: seconds to wait for the first answer.
        log_path: file for the server's output (default: discarded).
    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``; ``spec``: the ``--policy`` spec that evaluates against it.
    Raises:
        ServerError: on entry, when ``llama_cpp`` is not installed, the process exits, or no answer comes in time.
    """

    def __init__(self, port: int | None = None, threads: int = 2, n_ctx: int = 8192, startup_timeout: float = 180.0,
                 log_path: str | Path | None = None):
        self.port = port or free_port()
        self.threads, self.n_ctx, self.startup_timeout = threads, n_ctx, startup_timeout
        self.log_path = log_path
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.spec = f"openai:{self.base_url}#{SERVED_NAME}"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        """The server's command line."""
        from genenv.runtime.models import smollm2_gguf_path

        return [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf_path()),
                "--model_alias", SERVED_NAME, "--chat_format", "chatml", "--n_threads", str(self.threads),
                "--n_ctx", str(self.n_ctx), "--host", "127.0.0.1", "--port", str(self.port)]

    def __enter__(self) -> "LlamaServer":
        import importlib.util

        import requests

        if importlib.util.find_spec("llama_cpp") is None:
            raise ServerError('llama.cpp server missing: pip install "llama-cpp-python[server]==0.3.36"')
        out = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL  # noqa: SIM115 (closed in __exit__)
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        deadline = time.time() + self.startup_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"the llama.cpp server exited with code {self.proc.returncode} "
                                  f"(command: {' '.join(self.command())}; log: {self.log_path or 'not kept'})")
            with contextlib.suppress(requests.RequestException):  # not listening yet: ask again
                if requests.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise ServerError(f"the llama.cpp server did not answer at {self.base_url} within {self.startup_timeout} s")

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)
        self.proc = None


def main(argv: list[str] | None = None) -> int:
    """Serve the embedded model until interrupted (Ctrl-C)."""
    p = argparse.ArgumentParser(description="Serve the embedded SmolLM2 GGUF with llama.cpp's OpenAI server.")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    with LlamaServer(port=args.port, threads=args.threads) as server:
        print(f"serving: --policy {server.spec}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C stops serving; __exit__ stops the server
            server.proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
