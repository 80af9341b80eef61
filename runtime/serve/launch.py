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
    import subprocess
    import sys
    import tempfile

    from genenv.runtime.processes import free_port, wait_until_answers

    port = free_port()
    env = {**os.environ, **(env or {})}
    log = tempfile.NamedTemporaryFile("w+", prefix="genenv-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "genenv.runtime.serve.app", "--port", str(port), *args],
                            stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    proc.log_path = log.name
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {env[TOKEN_ENV]}"} if env.get(TOKEN_ENV) else {}
    wait_until_answers(proc, url + "/health", timeout, "genenv-serve", headers=headers, every=0.3,
                       log=lambda: f"its log {log.name} ends: {open(log.name).read()[-3000:]}")
    return proc, url
