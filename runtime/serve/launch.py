"""Start a local ``genenv-serve`` in a subprocess and wait until it answers (`spawn`): what the tests, the
benchmark scripts and a user's own script use to get a server on a free loopback port."""
from __future__ import annotations

import os

from genenv.runtime.serve.protocol import TOKEN_ENV

__all__ = ["spawn"]


def spawn(*args: str, env: dict[str, str] | None = None, timeout: float = 120.0):
    """Start ``genenv-serve`` with ``args`` in a subprocess on a free loopback port; returns ``(process, base URL)``
    once ``/health`` answers (with ``GENENV_SERVE_TOKEN`` from ``env`` when set). Its output goes to a temporary
    file (``process.log_path``): a pipe nobody reads would block it once full.

    Raises:
        RuntimeError: it exited first (with its output's tail) or did not answer within ``timeout`` seconds.
    """
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **(env or {})}
    log = tempfile.NamedTemporaryFile("w+", prefix="genenv-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "genenv.runtime.serve.app", "--port", str(port), *args],
                            stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    proc.log_path = log.name
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {env[TOKEN_ENV]}"} if env.get(TOKEN_ENV) else {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"genenv-serve exited with {proc.returncode}: {open(log.name).read()[-3000:]}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/health", headers=headers), timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"genenv-serve did not answer /health within {timeout:.0f} s; its log: {log.name}")
