"""What the samplers that run an inference server share (`LlamaServerSampler`, `VLLMSampler`): the working folder,
the server process (started on a free port, waited for, stopped with the sampler or at interpreter exit), JSON
requests whose errors name the URL and the server's log, the requests of one ``generate`` call (token ids, caps,
seeds) sent concurrently, the weights' fingerprint, the chat template, and the sampled tokens made into a response
the trainer learns from (`ended_response`)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

from genenv.runtime.processes import free_port, stop_process, wait_until_answers

__all__ = ["ServerSampler", "ended_response"]


def ended_response(tokens: Sequence[int], logprobs: Sequence[float], stopped: bool, stops: Sequence[int],
                   stop_token: int | None = None) -> tuple[list[int], list[float]]:
    """A server's sampled ``tokens`` and their ``logprobs`` as a response the trainer learns from: when the
    sample ``stopped`` at an end-of-turn token that the server left out (none of ``stops`` last), that token
    (``stop_token``, default ``stops[0]``) is appended, so the trained sequence ends the turn as sampled; the
    log-probs are kept only when there is one per token (``[]`` otherwise: llama.cpp leaves out the tokens that
    end inside a UTF-8 character, and an appended token has none)."""
    tokens = [int(t) for t in tokens]
    if stopped and stops and (not tokens or tokens[-1] not in stops):
        tokens.append(int(stops[0] if stop_token is None else stop_token))
    logprobs = [float(x) for x in logprobs]
    return tokens, (logprobs if len(logprobs) == len(tokens) else [])


class ServerSampler:
    """The shared part of a sampler that runs a server (see the module docstring).

    Args:
        tokenizer: the policy's Hugging Face tokenizer (chat template, stop tokens).
        workdir: where the weights and the log go (``None``: a temporary folder removed by `close`).
        fingerprint: a name for the weights the server starts with.
    """

    def __init__(self, tokenizer, workdir: str | os.PathLike | None, fingerprint: Any = None):
        self.tokenizer = tokenizer
        self.workdir = Path(tempfile.mkdtemp(prefix="genenv-sampler-")) if workdir is None else Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        # a temporary folder (a GGUF or safetensors copy of the weights) goes with this object or at interpreter exit,
        # after the server stops (finalizers run newest first), even when nobody calls `close`
        self._remove_dir = (weakref.finalize(self, shutil.rmtree, str(self.workdir), True) if workdir is None
                            else None)
        self.log_path = self.workdir / "server.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.requests = 0
        self.seed = 0  # the first request's sampling seed (subclasses set it)
        self.generated_tokens = 0
        self.sync_seconds: list[float] = []
        self._fingerprint = fingerprint
        self._reaper = None

    @property
    def stops(self) -> list[int]:
        """The token ids that end a turn (the tokenizer's ``stop_token_ids``, else its end of sequence)."""
        return list(getattr(self.tokenizer, "stop_token_ids", None) or [self.tokenizer.eos_token_id])

    def _launch(self, command: Callable[[int], list[str]], health: str, timeout: float, name: str,
                env: dict[str, str] | None = None) -> None:
        """Start ``command(port)`` on a free port, its output in ``server.log``, and wait until ``health`` answers;
        the process stops with this object, or at interpreter exit, even when nobody calls `close`.

        Raises:
            RuntimeError: it exited first or did not answer in ``timeout`` seconds (stopped; the log's tail in the
                message).
        """
        port = free_port()
        with open(self.log_path, "w") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(command(port), stdout=log, stderr=subprocess.STDOUT, env=env)
        self._reaper = weakref.finalize(self, stop_process, self.proc)
        self.url = f"http://127.0.0.1:{port}"
        try:
            wait_until_answers(self.proc, self.url + health, timeout, name, log=self._log_tail)
        except RuntimeError:
            self._stop()
            raise

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def _stop(self) -> None:
        if self._reaper is not None:
            self._reaper.detach()
        stop_process(self.proc)
        self.proc = None

    def _post(self, path: str, body: dict[str, Any] | None = None, timeout: float = 600) -> Any:
        """POST ``body`` as JSON to ``path``; the decoded answer (``None`` for an empty one).

        Raises:
            RuntimeError: an error status (the URL, the status and the server's words), or no answer (with the log's
                tail when the server died).
        """
        request = urllib.request.Request(self.url + path, data=json.dumps(body or {}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"{self.url}{path} answered {exc.code}: {exc.read()[:500]!r}") from exc
        except (urllib.error.URLError, ConnectionError) as exc:
            dead = self.proc is not None and self.proc.poll() is not None
            raise RuntimeError(f"{self.url}{path} failed ({exc})"
                               f"{': the server died: ' + self._log_tail() if dead else ''}") from exc
        return json.loads(raw) if raw else None

    def _synced(self, start: float, fingerprint: Any) -> float:
        """Record a finished weight sync begun at ``start`` (``time.perf_counter``): the weights' ``fingerprint`` and
        the seconds taken (appended to ``sync_seconds`` and returned)."""
        self._fingerprint = fingerprint
        seconds = time.perf_counter() - start
        self.sync_seconds.append(seconds)
        return seconds

    def fingerprint(self) -> Any:
        """The ``fingerprint`` given with the weights the server holds now."""
        return self._fingerprint

    def close(self) -> None:
        """Stop the server (and remove the temporary folder); idempotent."""
        self._stop()
        if self._remove_dir is not None:
            self._remove_dir()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def requests_for(self, prompts: Sequence[Any], max_new_tokens: int, copies: int
                     ) -> list[tuple[int, list[int], int, int, dict[str, Any] | None]]:
        """One request per prompt and copy, ``(prompt index, token ids, cap, seed, JSON Schema)``: a prompt's
        ``token_ids`` when set, else its messages under the chat template; its cap ``min(max_new_tokens, its own
        max_new_tokens)``; seeds ``seed + requests so far + k``, so every request of a sampler's life has its own.
        Counts them in ``requests``."""
        jobs = []
        for i, p in enumerate(prompts):
            ids = p.token_ids or self.encode_prompt(p.messages)
            cap = min(max_new_tokens, p.max_new_tokens or max_new_tokens)
            for _ in range(copies):
                jobs.append((i, ids, cap, self.seed + self.requests + len(jobs), p.json_schema))
        self.requests += len(jobs)
        return jobs

    @staticmethod
    def in_flight(call: Callable[[Any], Any], jobs: Sequence[Any], width: int) -> list[Any]:
        """``[call(job) for job in jobs]``, up to ``width`` calls at once (threads: the server does the work)."""
        if not jobs:
            return []
        with ThreadPoolExecutor(max(1, min(width, len(jobs)))) as pool:
            return list(pool.map(call, jobs))

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header."""
        from genenv.runtime.models import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages)
