"""A real OpenAI-compatible server for the embedded model: llama.cpp's own ``llama-server`` serving the packaged
SmolLM2-135M-Instruct GGUF as it is, for testing and measuring the endpoint policy on this machine. It is the
binary the ``llama-server`` sampler runs (`genenv.runtime.samplers.llama_server.server_binary`), so one llama.cpp
build serves both.

The server runs ``parallel`` slots (4 by default), batching concurrent requests (continuous batching). Start it from
the command line:

    python -m genenv.eval.model_server --port 8011  # then: genenv-eval --policy openai:http://127.0.0.1:8011/v1#smollm2
    python -m genenv.eval.model_server --check      # start, stream one chat completion (tokens/s), stop

Install: ``bash .ci/build-llama-server`` builds the binary **portably** (``GGML_NATIVE=OFF``: AVX2-level kernels
that run on any x86-64 host of the last decade; ``.ci/install --test`` runs it and ends with ``--check``), or set
``GENENV_LLAMA_SERVER`` to another build. A build tuned to the building host (``GGML_NATIVE=ON``) died with SIGILL
(illegal instruction) or SIGSEGV on the first chat request on Intel Xeon hosts with AVX-512 and AMX;
`exit_description` names those cases and the fix.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from genenv.runtime.processes import free_port, stop_process

__all__ = ["LlamaServer", "ServerError", "main", "stream_speed"]

SERVED_NAME = "smollm2"
"""The model name the server answers to (``openai:URL#smollm2``)."""

PORTABLE_REBUILD = ("bash .ci/build-llama-server (a portable build: cmake -DGGML_NATIVE=OFF), or set "
                    "GENENV_LLAMA_SERVER to a build made for this CPU")
"""The command that replaces a host-tuned llama.cpp build with a portable one."""


class ServerError(RuntimeError):
    """The server could not be started or died (missing package, exit, no answer in time); the message says why,
    with the exit code and the end of the server's log."""


def exit_description(code: int) -> str:
    """``code`` as `subprocess.Popen.returncode` gives it, in words: ``"code 3"``, or for a negative code
    (killed by a signal) ``"code -4 (SIGILL)"``, with what to do where the signal has a known cause here."""
    if code >= 0:
        return f"code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    text = f"code {code} ({name})"
    if -code == signal.SIGILL:
        text += (": an illegal instruction, i.e. llama.cpp was built for another CPU than this one (a native "
                 f"build); rebuild it portably: {PORTABLE_REBUILD}")
    elif -code == signal.SIGSEGV:
        text += (": a crash; native llama.cpp builds made on Intel hosts with AVX-512 and AMX crashed so (SIGSEGV or "
                 f"SIGILL) on chat requests: if this build is one, rebuild it portably: {PORTABLE_REBUILD}")
    return text


class LlamaServer:
    """llama.cpp's ``llama-server`` on the embedded GGUF, as a context manager: started on entry (waits until
    ``GET /v1/models`` answers, then sends one chat completion of one token, so that a build that dies on the chat
    template's special tokens fails here), terminated on exit.

    Args:
        port: TCP port (default: a free one).
        threads: llama.cpp threads: a number, or ``"auto"``: the usable cores less those other processes keep busy
            now (`resolve_threads`, counted when the server is made).
        n_ctx: context window of each slot in tokens (SmolLM2 was trained to 8192).
        parallel: slots, i.e. requests decoded together (``--parallel``).
        startup_timeout: seconds to wait for the first answer.
        log_path: file for the server's output (default: a new ``llama-server-*.log`` in the temp folder, kept, so
            that a failure can show its tail).
        model: the GGUF file to serve (default: the packaged SmolLM2-135M-Instruct Q4_1).
        binary: the ``llama-server`` to run (default: `server_binary`'s; another build, e.g. to compare builds).
        first_chat: send the one-token chat completion at start (default); ``False`` reports the server started
            once ``GET /v1/models`` answers (to measure a build that serves plain text but dies on chat requests).
    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``; ``spec``: the ``--policy`` spec that evaluates against it.
    Raises:
        ServerError: on entry, when there is no ``llama-server`` binary, the process exits, no answer comes in
            time, or the first chat completion fails; the message holds the exit code and the log's last lines.
    """

    def __init__(self, port: int | None = None, threads: int | str = "auto", n_ctx: int = 8192, parallel: int = 4,
                 startup_timeout: float = 180.0, log_path: str | Path | None = None, model: str | Path | None = None,
                 binary: str | None = None, first_chat: bool = True):
        from genenv.runtime.threads import resolve_threads

        self.port = port or free_port()
        self.threads, self.n_ctx, self.startup_timeout = resolve_threads(threads), n_ctx, startup_timeout
        self.parallel = parallel
        self.log_path = Path(log_path) if log_path else None
        self.model = model
        self.binary = binary
        self.first_chat = first_chat
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.spec = f"openai:{self.base_url}#{SERVED_NAME}"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        """The server's command line.

        Raises:
            ServerError: no ``llama-server`` binary (`server_binary`).
        """
        from genenv.runtime.models import smollm2_gguf_path
        from genenv.runtime.samplers.llama_server import server_binary

        try:
            binary = self.binary or server_binary()
        except FileNotFoundError as e:
            raise ServerError(str(e)) from e
        return [binary, "--model", str(self.model or smollm2_gguf_path()), "--alias", SERVED_NAME,
                "--chat-template", "chatml", "--threads", str(self.threads), "--threads-batch", str(self.threads),
                "--parallel", str(self.parallel), "--ctx-size", str(self.n_ctx * self.parallel), "--no-webui",
                "--host", "127.0.0.1", "--port", str(self.port)]

    def log_tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of the server's log ("" when there is none yet)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(errors="replace").rstrip().splitlines()
        return "\n".join(text[-lines:])

    def failure(self, wait: float = 0.0) -> str | None:
        """``None`` while the server process runs (or before it was started); once it has exited, what happened:
        the exit code in words (`exit_description`), the log file and its last lines. ``wait``: seconds to
        give a dying process to exit first (after a request failed); with 0 it is one ``poll``, cheap enough for
        the endpoint policy to call while requests are in flight."""
        if self.proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(wait) if wait > 0 else self.proc.poll()
        if self.proc.returncode is None:
            return None
        tail = self.log_tail()
        return (f"the llama.cpp server (pid {self.proc.pid}) exited with {exit_description(self.proc.returncode)}; "
                f"log: {self.log_path}" + (f"; its last lines:\n{tail}" if tail else ""))

    def policy(self, **kwargs):
        """An `OpenAIPolicy` on this server that watches the process: when it dies,
        the policy's ``generate`` raises at once with `failure`'s words instead of retrying a dead address.
        ``kwargs`` go to the policy (``concurrency``, ``timeout``, ``max_retries``)."""
        from genenv.runtime.policies import OpenAIPolicy

        return OpenAIPolicy(self.base_url, SERVED_NAME, server_failure=self.failure, **kwargs)

    def __enter__(self) -> "LlamaServer":
        command = self.command()
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        out = open(self.log_path, "w")  # noqa: SIM115 (the child holds it; closed with the process)
        self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        try:
            self._wait_listening()
            if self.first_chat:
                self._first_chat()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _wait_listening(self) -> None:
        """Polls ``GET /v1/models`` until 200. Raises ServerError: the process exited, or no answer in time."""
        import requests

        deadline = time.time() + self.startup_timeout
        while time.time() < deadline:
            if (why := self.failure()) is not None:
                raise ServerError(f"{why}\n(command: {' '.join(self.command())})")
            with contextlib.suppress(requests.RequestException):  # not listening yet: ask again
                if requests.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return
            time.sleep(0.5)
        raise ServerError(f"the llama.cpp server did not answer at {self.base_url} within {self.startup_timeout} s; "
                          f"log: {self.log_path}")

    def _first_chat(self) -> None:
        """One chat completion of one token (its prompt holds the chat template's special tokens). Raises
        ServerError: the server died on it or answered an error."""
        import requests

        body = {"model": SERVED_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        try:
            resp = requests.post(f"{self.base_url}/chat/completions", json=body, timeout=self.startup_timeout)
        except requests.RequestException as e:
            raise ServerError(f"the first chat completion failed ({type(e).__name__}): "
                              f"{self.failure(wait=1.0) or 'the server runs but did not answer'}") from e
        if resp.status_code != 200:
            raise ServerError(f"the first chat completion answered {resp.status_code}: {resp.text[:300]}")

    def stream_speed(self, **kwargs) -> dict[str, float]:
        """`stream_speed` against this server (``kwargs`` go to it). Raises ServerError when the request
        fails, with what happened to the server (`failure`)."""
        try:
            return stream_speed(self.base_url, **kwargs)
        except Exception as e:  # noqa: BLE001 (any failure of the request is reported, with the server's state)
            raise ServerError(f"the streamed completion failed ({type(e).__name__}: {str(e)[:200]}); "
                              f"{self.failure(wait=1.0) or 'the server still runs'}") from e

    def __exit__(self, *exc) -> None:
        stop_process(self.proc, 15)


def stream_speed(base_url: str, max_tokens: int = 128, chat: bool = True,
                 prompt: str = "Once upon a time") -> dict[str, float]:
    """One streamed completion through the ``openai`` client, greedy: ``{"tokens", "first_token_s",
    "tokens_per_s"}`` (tokens = streamed chunks with text, one token each on llama.cpp's server; the rate is
    counted from the first chunk to the last, i.e. decoding). ``chat``: a chat completion (its prompt holds the
    chat template's special tokens); else a plain-text completion of ``prompt``. Raises the ``openai`` client's
    errors."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0, timeout=120)
    t0 = time.perf_counter()
    if chat:
        stream = client.chat.completions.create(
            model=SERVED_NAME, stream=True, temperature=0.0, max_tokens=max_tokens,
            messages=[{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}])
        texts = (c.choices[0].delta.content if c.choices else None for c in stream)
    else:
        stream = client.completions.create(model=SERVED_NAME, stream=True, temperature=0.0, max_tokens=max_tokens,
                                           prompt=prompt)
        texts = (c.choices[0].text if c.choices else None for c in stream)
    stamps = [time.perf_counter() for t in texts if t]
    client.close()
    if not stamps:
        return {"tokens": 0, "first_token_s": float("nan"), "tokens_per_s": 0.0}
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
    return {"tokens": len(stamps), "first_token_s": stamps[0] - t0, "tokens_per_s": rate}


def check(threads: int | str = "auto", max_tokens: int = 128, chat: bool = True) -> int:
    """Start the server, stream one completion (`stream_speed`), print the figures and stop: 0 when it
    answered; 1 with the reason (the server's exit code, its log's last lines, what to do) on stderr when not.
    ``.ci/install`` ends with it."""
    try:
        with LlamaServer(threads=threads) as server:
            threads = server.threads
            speed = server.stream_speed(max_tokens=max_tokens, chat=chat)
    except ServerError as e:
        print(f"llama.cpp server check FAILED: {e}", file=sys.stderr)
        return 1
    kind = "chat completion" if chat else "text completion"
    print(f"llama.cpp server check: one {kind} stream of {speed['tokens']} tokens, first token after "
          f"{speed['first_token_s']:.2f} s, {speed['tokens_per_s']:.1f} tokens/s ({threads} threads)", flush=True)
    return 0 if speed["tokens"] > 0 else 1


def main(argv: list[str] | None = None) -> int:
    """Serve the embedded model until interrupted (Ctrl-C), or ``--check`` it once (exit status 0 / 1)."""
    p = argparse.ArgumentParser(description="Serve the embedded SmolLM2 GGUF with llama.cpp's llama-server.")
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--threads", default="auto", help="a number, or auto: the cores other processes leave free")
    p.add_argument("--check", action="store_true",
                   help="start the server, stream one chat completion, print tokens/s and stop (exit 1 on failure)")
    p.add_argument("--max-tokens", type=int, default=128, help="--check: tokens to stream")
    p.add_argument("--plain", action="store_true",
                   help="--check: a plain-text completion instead of a chat completion (no special tokens)")
    args = p.parse_args(argv)
    if args.check:
        return check(threads=args.threads, max_tokens=args.max_tokens, chat=not args.plain)
    with LlamaServer(port=args.port, threads=args.threads) as server:
        print(f"serving: --policy {server.spec} (log: {server.log_path})", flush=True)
        try:
            server.proc.wait()
        except KeyboardInterrupt:  # Ctrl-C stops serving; __exit__ stops the server
            return 0
        print(server.failure(), file=sys.stderr)  # the server ended by itself
    return 1


if __name__ == "__main__":
    sys.exit(main())
