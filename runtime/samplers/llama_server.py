"""llama.cpp's own ``llama-server`` as a sampler of token ids: parallel slots, continuous batching, prompt caching.

`LlamaServerSampler` starts ``llama-server`` on a GGUF written from a policy's in-memory weights
(`genenv.runtime.samplers.gguf_weights.write_gguf`) and answers the episode loop's `Policy.generate` calls
through the server's native ``/completion`` endpoint with token-id prompts (the chat template applied here, with
the policy's tokenizer, as every local episode loop does), so that the trainer gets the prompt ids, the response ids
and the sampler's log-prob of each response token. Requests go out concurrently, one per sample, up to the number of
slots; the server batches the slots' decoding steps (continuous batching) and keeps each slot's KV cache between
requests (``cache_prompt``), giving a request the slot whose cached prompt shares the longest prefix with it
(llama.cpp's slot selection), so the next turn of a multi-turn episode prefills only what the last turn added.

Sampling is plain temperature sampling, as ``transformers.generate`` does with ``do_sample=True``: llama.cpp's own
defaults (top-k 40, top-p 0.95, min-p 0.05, repetition penalties) are switched off per request; temperature 0 is
greedy. `load_weights` writes the new weights as GGUF and restarts the server on them (a 135M model loads in
about a second); `fingerprint` names the weights the server holds, so a caller can check that it samples from the
weights it just trained.

The binary: ``$GENENV_LLAMA_SERVER``, else ``llama-server`` on ``PATH``. Errors name the URL and the server log's
tail.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from genenv.runtime.policies import Generation, Prompt
from genenv.runtime.samplers.server import ServerSampler, ended_response

__all__ = ["LlamaServerSampler", "SERVER_ENV", "server_binary"]

SERVER_ENV = "GENENV_LLAMA_SERVER"  # path of the llama-server binary
PLAIN_SAMPLING = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "typical_p": 1.0, "repeat_penalty": 1.0,
                  "presence_penalty": 0.0, "frequency_penalty": 0.0, "dry_multiplier": 0.0, "xtc_probability": 0.0,
                  "mirostat": 0}


def server_binary() -> str:
    """The ``llama-server`` to run: ``$GENENV_LLAMA_SERVER``, else the one on ``PATH``.

    Raises:
        FileNotFoundError: neither exists (the message says how to build it).
    """
    path = os.environ.get(SERVER_ENV) or shutil.which("llama-server")
    if not path or not Path(path).is_file():
        raise FileNotFoundError(f"no llama-server binary: set {SERVER_ENV} to it, or put it on PATH "
                                f"(bash .ci/build-llama-server builds a portable one into the active venv)")
    return path


class LlamaServerSampler(ServerSampler):
    """A `Sampler` that samples through ``llama-server`` (see the module docstring).

    Args:
        tokenizer: the policy's Hugging Face tokenizer (chat template, stop tokens).
        state_dict: the weights to serve (Hugging Face Llama keys).
        template: a GGUF of the same architecture whose metadata the written files take (`write_gguf`).
        dtype: the served matrices' type: ``f32``, ``f16``, ``bf16`` or ``q8_0`` (`write_gguf`).
        slots: parallel sequences (``--parallel``); also the requests in flight at once.
        context: tokens of KV cache per slot: the server gets ``slots * context`` as one pool that every slot
            draws from (``--kv-unified``), so one long episode may hold more than ``context`` (up to the model's
            own limit) while others hold less.
        threads: CPU threads of the server (``None``: llama.cpp's default).
        fingerprint: a name for the weights in ``state_dict`` (e.g. the trainer's weights fingerprint).
        workdir: where GGUF files and the log go (``None``: a temporary folder removed by `close`).
        seed: the sampling seed of request ``k`` is ``seed + k``.
        server_args: more ``llama-server`` options (e.g. ``["--flash-attn", "on"]``).
    Raises:
        RuntimeError: the server did not come up (its log's tail in the message).
    """

    def __init__(self, tokenizer, state_dict: Mapping[str, Any], template: str | os.PathLike, dtype: str = "f32",
                 slots: int = 32, context: int = 4096, threads: int | None = None, fingerprint: Any = None,
                 workdir: str | os.PathLike | None = None, seed: int = 0, server_args: Sequence[str] = ()):
        super().__init__(tokenizer, workdir)
        self.template, self.dtype = Path(template), dtype
        self.slots, self.context, self.threads = int(slots), int(context), threads
        self.batch_size = self.slots  # prompts the episode loop sends per call (`play_episodes`' chunk size)
        self.seed = int(seed)
        self.server_args = list(server_args)
        self.name = "llama-server"
        self.load_weights(state_dict, fingerprint)

    def load_weights(self, state_dict: Mapping[str, Any], fingerprint: Any = None) -> float:
        """Serve ``state_dict`` from now on: write it as GGUF and restart the server on it; returns the seconds
        taken (also appended to ``sync_seconds``).

        Raises:
            RuntimeError: the server did not come up (its log's tail in the message).
        """
        from genenv.runtime.samplers.gguf_weights import write_gguf

        start = time.perf_counter()
        path = write_gguf(state_dict, self.template, self.workdir / "weights.gguf", self.dtype)
        self._stop()
        self._launch(lambda port: self._command(path, port), "/health", 120, "llama-server")
        return self._synced(start, fingerprint)

    def _command(self, gguf: Path, port: int) -> list[str]:
        args = [server_binary(), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
                "--parallel", str(self.slots), "--ctx-size", str(self.slots * self.context), "--kv-unified",
                "--cont-batching", "--no-webui", "--metrics", *self.server_args]
        if self.threads:
            args += ["--threads", str(self.threads), "--threads-batch", str(self.threads)]
        return args

    def complete(self, prompt_ids: list[int], max_new_tokens: int, temperature: float, seed: int,
                 json_schema: dict[str, Any] | None = None) -> Generation:
        """One sample of ``prompt_ids``: the response ids (the end-of-turn token included when it ended the
        sample) and their log-probs under the server's sampling distribution (none when the server reported fewer
        than the tokens); with ``json_schema``, sampled under
        the grammar llama.cpp builds from it.

        Raises:
            RuntimeError: the server answered an error or died (its log's tail in the message).
        """
        body = {"prompt": list(prompt_ids), "n_predict": int(max_new_tokens), "temperature": float(temperature),
                "seed": int(seed), "cache_prompt": True, "return_tokens": True, "n_probs": 1,
                "post_sampling_probs": False, **PLAIN_SAMPLING}
        if json_schema:
            body["json_schema"] = json_schema
        out = self._post("/completion", body)
        tokens, logprobs = ended_response(out.get("tokens", []),
                                          [p.get("logprob", 0.0) for p in out.get("completion_probabilities") or []],
                                          out.get("stop_type") == "eos", self.stops)
        timings = out.get("timings") or {}
        self.generated_tokens += len(tokens)
        return Generation(out.get("content", ""), prompt_ids=list(prompt_ids), response_ids=tokens,
                          response_logprobs=logprobs, usage={"prompt_tokens": int(timings.get("prompt_n", 0)),
                                                             "completion_tokens": len(tokens)})

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` samples per prompt (`complete`), all requests concurrent up to the slot count; a prompt's
        ``token_ids`` are used when set, its ``max_new_tokens`` caps its samples and its ``json_schema`` constrains
        them."""
        jobs = self.requests_for(prompts, max_new_tokens, n)
        done = self.in_flight(lambda job: self.complete(job[1], job[2], temperature, job[3], job[4]), jobs, self.slots)
        results: list[list[Generation]] = [[] for _ in prompts]
        for (i, *_), gen in zip(jobs, done):
            results[i].append(gen)
        return results
