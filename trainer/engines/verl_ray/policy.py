"""A policy over veRL's generate client (the role's vLLM replicas on the cluster)."""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence
from uuid import uuid4

from genenv.runtime.policies import Generation, Prompt

__all__ = ["VerlPolicy"]


class VerlPolicy:
    """A `Policy` over veRL's generate client: token ids in, token ids out.

    ``client`` is anything with veRL's ``LLMServerClient.generate(request_id, *, prompt_ids, sampling_params)``
    coroutine returning a ``TokenOutput`` (on the cluster: the role's client to its vLLM replicas, load-balanced
    by veRL). Prompts are encoded with the tokenizer's chat template; all ``len(prompts) * n`` requests are sent
    concurrently. ``prepare`` (optional) is called before every batch of requests: the ``verl_ray`` backend wakes
    the role's vLLM replicas there (they sleep from an update until the next generation).
    """

    def __init__(self, name: str, client, tokenizer, top_p: float = 1.0, top_k: int = -1,
                 prepare: Callable[[], None] | None = None):
        self.name, self.client, self.tokenizer = name, client, tokenizer
        self.top_p, self.top_k = float(top_p), int(top_k)
        self.prepare = prepare

    @classmethod
    def for_rollout(cls, name: str, client, tokenizer, rollout_config,
                    prepare: Callable[[], None] | None = None) -> VerlPolicy:
        """The policy of a role whose veRL rollout config (``actor_rollout_ref.rollout``) is ``rollout_config``:
        ``top_p`` / ``top_k`` from its keys, the values veRL's ``AgentLoopWorker.generate_sequences`` sends to the
        agent loop (``verl/experimental/agent_loop/agent_loop.py``), so this policy (environment generation,
        held-out evaluation) samples as the agent's rollouts do. veRL's defaults (``top_p: 1``, ``top_k: -1``) are
        plain temperature sampling, as the local engine's `TransformersPolicy`
        (``top_p=1.0, top_k=0``)."""
        return cls(name, client, tokenizer, top_p=rollout_config.get("top_p", 1.0),
                   top_k=rollout_config.get("top_k", -1), prepare=prepare)

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header
        (`chat_prompt_ids`, as every episode loop encodes)."""
        from genenv.runtime.models import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages)

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` generations per prompt (``[len(prompts)][n]``), greedy at ``temperature == 0``; a prompt's own
        ``token_ids`` are used when set, its ``json_schema`` constrains its samples."""
        return self.generate_from_ids([p.token_ids or self.encode_prompt(p.messages) for p in prompts], n=n,
                                      temperature=temperature, max_new_tokens=max_new_tokens,
                                      caps=[p.max_new_tokens for p in prompts],
                                      schemas=[p.json_schema for p in prompts])

    def generate_from_ids(self, encoded: Sequence[list[int]], n: int = 1, temperature: float = 0.0,
                          max_new_tokens: int = 256, caps: Sequence[int | None] | None = None,
                          schemas: Sequence[dict[str, Any] | None] | None = None) -> list[list[Generation]]:
        """As `generate`, from prompt token ids. Sampling parameters use vLLM's names (``temperature``,
        ``top_p`` and ``top_k`` from the role's rollout config, ``max_tokens``: ``caps[i]`` where set,
        ``structured_outputs``: vLLM's ``StructuredOutputsParams(json=schemas[i])`` where set, the same grammar
        the local engine applies with xgrammar); the response keeps the stop token the server returns."""
        caps = caps or [None] * len(encoded)
        schemas = schemas or [None] * len(encoded)
        if self.prepare is not None:
            self.prepare()

        async def one(ids: list[int], cap: int | None, schema: dict[str, Any] | None) -> list[int]:
            params = {"temperature": float(temperature), "top_p": self.top_p, "top_k": self.top_k,
                      "max_tokens": int(cap or max_new_tokens)}
            if schema:
                params["structured_outputs"] = structured_outputs(schema)
            out = await self.client.generate(uuid4().hex, prompt_ids=list(ids), sampling_params=params)
            return list(out.token_ids)

        async def run_all():
            return await asyncio.gather(*[one(ids, cap, schema) for ids, cap, schema in zip(encoded, caps, schemas)
                                          for _ in range(n)])

        flat = asyncio.run(run_all())
        return [[Generation(self.tokenizer.decode(r, skip_special_tokens=True), list(ids), r)
                 for r in flat[i * n:(i + 1) * n]] for i, ids in enumerate(encoded)]


def structured_outputs(schema: dict[str, Any]):
    """vLLM's ``StructuredOutputsParams(json=schema)`` (vLLM >= 0.10.2; veRL's server passes it into
    ``SamplingParams(structured_outputs=...)``). Raises ``RuntimeError`` when vLLM is not importable: a
    constrained request cannot be sent without it (set ``generation.constrained: false``)."""
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError as exc:
        raise RuntimeError("generation.constrained needs vLLM's StructuredOutputsParams (vLLM >= 0.10.2) in the "
                           "process that sends requests; install the gpu extra or set "
                           "generation.constrained=false") from exc
    return StructuredOutputsParams(json=schema)
