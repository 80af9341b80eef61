"""Policies that turn chat prompts into model text: local transformers, an OpenAI-compatible endpoint, the oracle.

All share one call, :meth:`Policy.generate`: a batch of prompts (chat messages, and the task for the oracle)
in, ``n`` :class:`Generation` per prompt out. The local policy also returns token ids, which the trainer needs
for its GRPO / RWR updates.
"""
from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from genenv.envs.task import Task


@dataclass
class Generation:
    """One sampled completion: ``text``; for local models also ``prompt_ids`` / ``response_ids`` (token ids)."""

    text: str
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)


@dataclass
class Prompt:
    """One generation request: chat ``messages`` and, for the oracle, the ``task`` they present and the episode's
    ``turn`` (0-based step index in a multi-step env)."""

    messages: list[dict[str, str]]
    task: Task | None = None
    turn: int = 0


class Policy(Protocol):
    """Anything that answers prompts: ``generate(prompts, n, temperature, max_new_tokens)``."""

    name: str

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` generations for each prompt, in prompt order (shape ``[len(prompts)][n]``)."""
        ...


class OraclePolicy:
    """Answers every task with its gold action rendered as model text (``env.gold_text(task, turn)``).

    Used to prove that an environment and its reward agree: the oracle must score 100 % wherever the official
    answer key is satisfiable.
    """

    name = "oracle"

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` copies of each prompt's gold text. Raises ``ValueError`` for a prompt without its task."""
        from genenv.envs.registry import env_entry

        out = []
        for p in prompts:
            if p.task is None:
                raise ValueError("the oracle needs the task of each prompt")
            text = env_entry(p.task.benchmark).env_class.gold_text(p.task, p.turn)
            out.append([Generation(text) for _ in range(n)])
        return out


class RandomAdmissiblePolicy:
    """Text games' random baseline: a uniformly random command among those the latest observation lists
    (:func:`genenv.envs.text_games.admissible_commands`), from a seeded RNG; ``look`` when none is listed.

    Args:
        seed: the RNG seed (the same seed and prompts give the same commands).
    """

    def __init__(self, seed: int = 0):
        import random

        self.rng = random.Random(seed)
        self.name = f"random-admissible:{seed}"

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` random admissible commands per prompt (``temperature`` and ``max_new_tokens`` are ignored)."""
        from genenv.envs.text_games import admissible_commands

        out = []
        for p in prompts:
            commands = admissible_commands(p.messages[-1]["content"]) if p.messages else []
            out.append([Generation(self.rng.choice(commands) if commands else "look") for _ in range(n)])
        return out


class TransformersPolicy:
    """A local causal LM run with ``transformers.generate`` (batched, left-padded, the model's chat template).

    Args:
        model_name: a SmolLM2 alias (the embedded model) or a local Hugging Face folder.
        dtype / device: see :func:`genenv.trainer.models.load_model_and_tokenizer`.
        batch_size: prompts per ``generate`` call (memory vs. throughput).
        model / tokenizer: pass already loaded objects instead (the trainer shares them with its optimiser).
        autocast_dtype: run generation under ``torch.autocast`` in this dtype (fp32 weights, bf16 matmuls).
    """

    def __init__(self, model_name: str = "smollm2", dtype: str = "bfloat16", device: str = "cpu",
                 batch_size: int = 16, model=None, tokenizer=None, autocast_dtype: str | None = None):
        from genenv.trainer.models import load_model_and_tokenizer, prepare_tokenizer

        if model is None:
            model, tokenizer = load_model_and_tokenizer(model_name, dtype=dtype, device=device)
        else:
            prepare_tokenizer(tokenizer)
        self.model, self.tokenizer = model, tokenizer
        self.name = model_name
        self.device = device
        self.batch_size = batch_size
        self.autocast_dtype = autocast_dtype  # e.g. "bfloat16": generate in bf16 from fp32 training weights
        self.generated_tokens = 0
        self.generate_seconds = 0.0

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header."""
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """Batched sampling (greedy when ``temperature == 0``); stops at the end-of-turn token."""
        encoded = [self.encode_prompt(p.messages) for p in prompts]
        return self.generate_from_ids(encoded, n=n, temperature=temperature, max_new_tokens=max_new_tokens)

    def generate_from_ids(self, encoded: Sequence[list[int]], n: int = 1, temperature: float = 0.0,
                          max_new_tokens: int = 256) -> list[list[Generation]]:
        """As :meth:`generate`, from prompt token ids (used by the veRL agent-loop generate client)."""
        import torch

        tok = self.tokenizer
        results: list[list[Generation]] = []
        per_call = max(1, self.batch_size // max(1, n))
        start = time.perf_counter()
        for i in range(0, len(encoded), per_call):
            chunk = encoded[i:i + per_call]
            width = max(len(x) for x in chunk)
            input_ids = torch.full((len(chunk), width), tok.pad_token_id, dtype=torch.long)
            attention = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, ids in enumerate(chunk):
                input_ids[row, width - len(ids):] = torch.tensor(ids)
                attention[row, width - len(ids):] = 1
            kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, num_return_sequences=n,
                                          eos_token_id=tok.stop_token_ids, pad_token_id=tok.pad_token_id)
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            amp = (torch.autocast(device_type=torch.device(self.device).type, dtype=getattr(torch, self.autocast_dtype))
                   if self.autocast_dtype else nullcontext())
            with torch.no_grad(), amp:
                out = self.model.generate(input_ids=input_ids.to(self.device),
                                          attention_mask=attention.to(self.device), **kwargs)
            new = out[:, width:].cpu()
            for row, ids in enumerate(chunk):
                gens = []
                for k in range(n):
                    resp = new[row * n + k].tolist()
                    cut = len(resp)
                    for j, t in enumerate(resp):
                        if t in tok.stop_token_ids:
                            cut = j + 1  # keep the end-of-turn token: the model must learn to stop
                            break
                    resp = resp[:cut]
                    while resp and resp[-1] == tok.pad_token_id and tok.pad_token_id not in tok.stop_token_ids:
                        resp.pop()
                    self.generated_tokens += len(resp)
                    gens.append(Generation(tok.decode(resp, skip_special_tokens=True), list(ids), resp))
                results.append(gens)
        self.generate_seconds += time.perf_counter() - start
        return results


class OpenAIPolicy:
    """An OpenAI-compatible chat-completions endpoint (a vLLM server or any API), over real HTTP.

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        model: the served model name.
        api_key: sent as a bearer token (``EMPTY`` for a local vLLM server).
        timeout: seconds per request.
    Raises (from generate):
        RuntimeError: the server answered with an error status (the message includes it).
    """

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", timeout: float = 120.0):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.name = f"openai:{model}"

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """One ``POST /chat/completions`` per prompt with ``n`` choices (text only, no token ids)."""
        import requests

        out = []
        for p in prompts:
            body = {"model": self.model, "messages": p.messages, "n": n, "temperature": temperature,
                    "max_tokens": max_new_tokens}
            resp = requests.post(f"{self.base_url}/chat/completions", json=body, timeout=self.timeout,
                                 headers={"Authorization": f"Bearer {self.api_key}"})
            if resp.status_code != 200:
                raise RuntimeError(f"{self.base_url} answered {resp.status_code}: {resp.text[:300]}")
            choices = resp.json().get("choices", [])
            out.append([Generation((c.get("message") or {}).get("content") or "") for c in choices][:n])
        return out


def make_policy(spec: str, **kwargs: Any) -> Policy:
    """Build a policy from a command-line spec.

    ``oracle``; ``random`` / ``random:SEED`` (text games: a random admissible command); ``smollm2`` (embedded
    model); ``hf:PATH`` or a folder path (local transformers); ``openai:BASE_URL#MODEL`` (OpenAI-compatible
    endpoint; ``OPENAI_API_KEY`` is used if set). ``kwargs`` go to :class:`TransformersPolicy` (dtype, device,
    batch_size).
    """
    import os

    if spec == "oracle":
        return OraclePolicy()
    if spec == "random" or spec.startswith("random:"):
        return RandomAdmissiblePolicy(int(spec.partition(":")[2] or 0))
    if spec.startswith("openai:"):
        url, _, model = spec[len("openai:"):].partition("#")
        if not model:
            raise ValueError("openai policy spec is openai:BASE_URL#MODEL")
        return OpenAIPolicy(url, model, api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"))
    name = spec[len("hf:"):] if spec.startswith("hf:") else spec
    return TransformersPolicy(name, **{k: v for k, v in kwargs.items() if v is not None})


def describe(policy: Policy) -> str:
    """Short JSON description of a policy for result files."""
    return json.dumps({"name": getattr(policy, "name", type(policy).__name__), "type": type(policy).__name__})
