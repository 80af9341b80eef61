"""The one sampler interface of the trainer: the agent's rollouts, held-out evaluation and task writing all sample
through a `Sampler`, chosen once per role from the settings (``<role>.policy.sampler``).

A sampler is a `Policy` (token-id prompts through `Prompt.token_ids`, ``n``, temperature, a per-prompt cap, stop
at the end-of-turn token, an optional JSON Schema per prompt; `Generation` holds the response ids and, where the
engine reports them, the sampler's log-probs) that also takes new weights (`Sampler.load_weights`), names the
weights it holds (`Sampler.fingerprint`, compared with the trainer's each iteration, so a sampler that kept stale
weights shows) and releases what it runs (`Sampler.close`).

The kinds (`SAMPLERS`):

- ``builtin``: the project's own CPU engine, `TransformersPolicy` with its continuous batch across turns, its prefix
  cache and its CPU decoding attention (bf16 on CPUs that compute it natively, AMX or AVX-512 BF16).
- ``transformers``: `TransformersPolicy` as plain ``transformers.generate`` (SDPA attention, transformers' own
  ``DynamicCache``, or its static cache with ``static_cache``), one call per turn: the reference on any device.
- ``llama-server``: llama.cpp's own server (`LlamaServerSampler`): parallel slots, continuous batching, prompt
  caching per slot; the weights written as GGUF from the trainer's state dict at each sync.
- ``vllm``: vLLM's OpenAI-compatible server (`VLLMSampler`), the engine of GPU trainers; the weights written as
  safetensors and reloaded in place at each sync.

Which is fastest depends on the machine: ``lab/notes/engine-measurements.md`` has the measured table.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from genenv.runtime.policies import Generation, Prompt

__all__ = ["SAMPLERS", "Sampler", "gguf_template", "local_sampler", "make_sampler"]

SAMPLERS = ("builtin", "transformers", "llama-server", "vllm")
"""The sampler kinds `make_sampler` builds (see the module docstring)."""


class Sampler(Protocol):
    """What the trainer samples through (see the module docstring)."""

    name: str

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` generations for each prompt, in prompt order (shape ``[len(prompts)][n]``)."""
        ...

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header."""
        ...

    def load_weights(self, state_dict: Mapping[str, Any], fingerprint: Any = None) -> float:
        """Sample from ``state_dict`` (Hugging Face keys) from now on, named ``fingerprint``; returns the seconds
        the sync took."""
        ...

    def fingerprint(self) -> Any:
        """The ``fingerprint`` given with the weights held now (``None`` before any)."""
        ...

    def close(self) -> None:
        """Release what the sampler runs (a server process, kept KV states); idempotent."""
        ...


def gguf_template(model_name: str, folder: str | Path | None = None) -> Path:
    """A GGUF whose metadata (tokenizer, chat template, shapes) fits ``model_name``, for `write_gguf`: a ``*.gguf``
    file in the model's folder, else the embedded SmolLM2-135M GGUF when the model has SmolLM2-135M's shapes (the
    alias itself, or a checkpoint trained from it).

    Raises:
        ValueError: neither applies (the message says how to make one: llama.cpp's ``convert_hf_to_gguf.py``).
    """
    from genenv.runtime.models import SMOLLM2_ALIASES, resolve_model_path, smollm2_gguf_path

    if model_name in SMOLLM2_ALIASES:
        return smollm2_gguf_path()
    folder = Path(folder) if folder is not None else resolve_model_path(model_name)
    found = sorted(folder.glob("*.gguf"))
    if found:
        return found[0]
    smol = resolve_model_path("smollm2") / "config.json"
    keys = ("architectures", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "intermediate_size", "vocab_size")
    try:
        mine, theirs = json.loads((folder / "config.json").read_text()), json.loads(smol.read_text())
    except (OSError, ValueError):
        mine, theirs = {}, {None: None}
    if all(mine.get(k) == theirs.get(k) for k in keys):
        return smollm2_gguf_path()
    raise ValueError(f"the llama-server sampler needs a GGUF of {model_name!r}'s architecture for its metadata: put "
                     f"one in {folder} (llama.cpp's convert_hf_to_gguf.py writes it)")


def make_sampler(kind: str, model, tokenizer, model_name: str, *, device: str = "cpu", batch_size: int = 16,
                 autocast_dtype: str | None = None, prefix_cache_tokens: int = 131072,
                 continuous_batching: bool = True, static_cache: bool = False, threads: int | None = None,
                 fingerprint: Any = None, folder: str | Path | None = None) -> Sampler:
    """The sampler ``kind`` (`SAMPLERS`) over ``model`` (a loaded transformers causal LM) and ``tokenizer``.

    ``builtin`` / ``transformers`` sample from ``model`` itself (pass the sampling copy); ``llama-server`` serves a
    GGUF written from ``model``'s state dict (float32, exact; the template from `gguf_template` of ``model_name`` /
    ``folder``) with ``batch_size`` slots and ``threads`` CPU threads; ``vllm`` starts vLLM's server on a folder
    written from it (``$GENENV_VLLM_PYTHON`` runs it; ``$GENENV_VLLM_ARGS``: more server options, e.g.
    ``--gpu-memory-utilization 0.3``) with ``batch_size`` requests in flight. ``autocast_dtype``,
    ``prefix_cache_tokens``, ``continuous_batching`` and ``static_cache`` are `TransformersPolicy`'s (the last
    three apply to ``builtin``; ``transformers`` keeps only ``static_cache``). ``fingerprint`` names the weights.

    Raises:
        ValueError: an unknown ``kind``, or no GGUF template for ``llama-server`` (`gguf_template`).
        FileNotFoundError: ``llama-server`` with no server binary (`server_binary`).
        RuntimeError: a server that did not come up (its log's tail in the message).
    """
    from genenv.runtime.policies import TransformersPolicy

    if kind not in SAMPLERS:
        raise ValueError(f"sampler {kind!r}: choose one of {list(SAMPLERS)}")
    if kind == "vllm":
        import os
        import shlex

        from genenv.runtime.samplers.vllm_server import VLLMSampler

        return VLLMSampler(tokenizer, model.state_dict(), model.config, concurrency=batch_size,
                           server_args=shlex.split(os.environ.get("GENENV_VLLM_ARGS", "")), fingerprint=fingerprint)
    if kind == "llama-server":
        from genenv.runtime.samplers.llama_server import LlamaServerSampler, server_binary

        server_binary()  # fail before writing any weights
        return LlamaServerSampler(tokenizer, model.state_dict(), gguf_template(model_name, folder), slots=batch_size,
                                  threads=threads, fingerprint=fingerprint)
    builtin = kind == "builtin"
    policy = TransformersPolicy(model_name, device=device, batch_size=batch_size, model=model, tokenizer=tokenizer,
                                autocast_dtype=autocast_dtype, builtin=builtin,
                                prefix_cache_tokens=prefix_cache_tokens if builtin else 0,
                                continuous_batching=continuous_batching and builtin, static_cache=static_cache)
    policy.load_weights(model.state_dict(), fingerprint)
    return policy


def local_sampler(kind: str, name: str, *, dtype: str | None = None, device: str | None = None,
                  batch_size: int | None = None, threads: int | None = None) -> Sampler:
    """The sampler ``kind`` over the local model ``name`` (a `make_policy` model name: ``smollm2``, ``hf:PATH``, a
    folder, a training run's agent): ``builtin`` and ``transformers`` as `make_policy` builds them (``dtype``,
    ``device``, ``batch_size``), ``llama-server`` and ``vllm`` on the model's float32 weights with ``batch_size``
    slots or requests in flight (16 when ``None``; ``threads``: llama-server's CPU threads) (`genenv-eval
    --sampler`).

    Raises:
        ValueError: an unknown ``kind``, or no GGUF template for ``llama-server`` (`gguf_template`).
        ModelNotFound: ``name`` is no local model. FileNotFoundError: ``llama-server`` without its binary.
    """
    from genenv.runtime.policies import make_policy

    if kind not in SAMPLERS:
        raise ValueError(f"sampler {kind!r}: choose one of {list(SAMPLERS)}")
    if kind in ("builtin", "transformers"):
        return make_policy(name, dtype=dtype, device=device, batch_size=batch_size, builtin=kind == "builtin")
    from genenv.runtime.models import load_model_and_tokenizer

    name = name.removeprefix("hf:")
    model, tokenizer = load_model_and_tokenizer(name, dtype="float32")
    return make_sampler(kind, model, tokenizer, name, batch_size=batch_size or 16, threads=threads)
