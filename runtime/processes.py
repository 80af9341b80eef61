"""Local server processes: a free loopback port, waiting until a started server answers, stopping it; and the ends
of the processes that own them.

One place for what `genenv.runtime.serve.launch.spawn` (``genenv-serve``),
`genenv.runtime.samplers.llama_server.LlamaServerSampler` (``llama-server``) and
`genenv.eval.model_server.LlamaServer` (``llama-server`` as an OpenAI-compatible endpoint) each do with their process.
Their owners stop them in finalizers that run at interpreter exit; `exit_on_sigterm` and `end_with_parent` make a
stopped owner (``kill PID``, a killed parent) exit through them, so no server outlives its owner.
"""
from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from typing import Callable

__all__ = ["end_with_parent", "exit_on_sigterm", "free_port", "stop_process", "wait_until_answers"]


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


def exit_on_sigterm() -> None:
    """Make SIGTERM (``kill PID``, a job scheduler's stop) end this process as ``SystemExit(143)`` instead of at once,
    so the interpreter's exit runs its finalizers: the server processes a sampler started are stopped and its
    temporary folders removed. The handler restores the default action first, so a second SIGTERM during that
    cleanup ends the process at once. Installed only from the main thread and only where SIGTERM has its default
    action (a handler of the caller's is kept)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        return

    def _exit(signum, frame):
        signal.signal(signum, signal.SIG_DFL)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)


def end_with_parent(on_end: Callable[[], None] | None = None) -> None:
    """End this process, started by ``multiprocessing``, when its parent process ends, however it ends (SIGKILL
    included): a daemon thread waits on multiprocessing's parent sentinel (`multiprocessing.parent_process`, on every
    platform), calls ``on_end`` (a log line, say), and sends the main thread SIGTERM, which `exit_on_sigterm` (called
    here) makes an ordinary exit, finalizers included. A parent that has already ended is noticed at once.

    Raises:
        RuntimeError: this process was not started by ``multiprocessing``.
    """
    import multiprocessing
    import signal
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:
        raise RuntimeError("end_with_parent: this process was not started by multiprocessing")
    exit_on_sigterm()
    main = threading.main_thread().ident

    def watch() -> None:
        parent.join()
        if on_end is not None:
            on_end()
        if hasattr(signal, "pthread_kill"):  # POSIX: a real signal to the main thread wakes a blocking call
            signal.pthread_kill(main, signal.SIGTERM)
        else:  # Windows: the handler runs when the main thread next runs Python code
            import _thread

            _thread.interrupt_main(signal.SIGTERM)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()
