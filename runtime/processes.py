"""Local server processes: a free loopback port, waiting until a started server answers, stopping it.

One place for what `genenv.runtime.serve.launch.spawn` (``genenv-serve``),
`genenv.runtime.samplers.llama_server.LlamaServerSampler` (``llama-server``) and
`genenv.eval.model_server.LlamaServer` (``llama-server`` as an OpenAI-compatible endpoint) each do with their process.
"""
from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from typing import Callable

__all__ = ["free_port", "stop_process", "wait_until_answers"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answers(proc: subprocess.Popen, url: str, timeout: float, name: str, log: Callable[[], str],
                       headers: dict[str, str] | None = None, every: float = 0.1) -> None:
    """Poll ``GET url`` every ``every`` seconds until it answers 2xx, for at most ``timeout`` seconds.

    Raises:
        RuntimeError: ``proc`` (called ``name`` in the message) exited first, or ``url`` did not answer in time
            (the process is then killed); the message ends with ``log()``, the caller's words on its log.
    """
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}: {log()}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2):
                return
        except OSError:  # not listening yet (connection refused, timeout, or an error status while loading)
            time.sleep(every)
    proc.kill()
    proc.wait(30)
    raise RuntimeError(f"{name} did not answer {url} within {timeout:.0f} s; {log()}")


def stop_process(proc: subprocess.Popen | None, timeout: float = 30.0) -> None:
    """Terminate ``proc`` if it runs, and kill it when it has not exited ``timeout`` seconds later."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)
