"""Policies that turn chat prompts into model text: local transformers, an OpenAI-compatible endpoint, the gold policy.

All share one call, `Policy.generate`: a batch of prompts (chat messages, and the task for the gold policy)
in, ``n`` `Generation` per prompt out. The local policy also returns token ids, which the trainer needs
for its GRPO / RWR updates.
"""
from __future__ import annotations

import time
from contextlib import nullcontext, suppress
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Protocol, Sequence

from genenv.envs.task import Task

__all__ = [
    "ChosenLogProbs", "Generation", "GoldPolicy", "OpenAIPolicy", "Policy", "Prompt", "STATIC_WIDTH_STEP",
    "TransformersPolicy", "left_padded", "make_policy", "sampling_kwargs",
]


@dataclass
class Generation:
    """One sampled completion: ``text``; for local models also ``prompt_ids`` / ``response_ids`` (token ids);
    ``response_logprobs``: the sampler's log-prob of each response token where the sampler reports them (veRL's
    vLLM servers with ``rollout.calculate_log_probs``; same length as ``response_ids``), else empty; ``usage``:
    ``prompt_tokens`` / ``completion_tokens`` (OpenAI's usage fields; a prompt's tokens counted on its first
    sample only), empty where the policy counts no tokens (gold policy, random baseline)."""

    text: str
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class Prompt:
    """One generation request.

    Attributes:
        messages: the chat messages.
        task / turn: the task they present and the episode's 0-based turn (the gold policy answers from them).
        token_ids: the messages already encoded with the policy's chat template (local policies use them instead of
            encoding again); empty: not encoded.
        max_new_tokens: a cap for this prompt below the call's (an episode's response budget); ``None``: none.
        json_schema: sample under this JSON Schema's grammar (structured decoding, `.grammar`); ``None``:
            free sampling. Policies that cannot constrain (the gold policy, the random baseline) ignore it.
    """

    messages: list[dict[str, str]]
    task: Task | None = None
    turn: int = 0
    token_ids: list[int] = field(default_factory=list)
    max_new_tokens: int | None = None
    json_schema: dict[str, Any] | None = None


class Policy(Protocol):
    """Anything that answers prompts: ``generate(prompts, n, temperature, max_new_tokens)``."""

    name: str

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` generations for each prompt, in prompt order (shape ``[len(prompts)][n]``)."""
        ...


class GoldPolicy:
    """Answers every task with its gold action rendered as model text (``env.gold_text(task, turn)``).

    Used to prove that an environment and its reward agree: the gold policy must score 100 % wherever the official
    answer key is satisfiable.
    """

    name = "gold"

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` copies of each prompt's gold text. Raises ``ValueError`` for a prompt without its task."""
        from genenv.envs.registry import env_entry

        out = []
        for p in prompts:
            if p.task is None:
                raise ValueError("the gold policy needs the task of each prompt")
            text = env_entry(p.task.benchmark).env_class.gold_text(p.task, p.turn)
            out.append([Generation(text) for _ in range(n)])
        return out


class RandomAdmissiblePolicy:
    """Text games' random baseline: a uniformly random command among those the latest observation lists
    (`genenv.envs.text_games.admissible_commands`), from a seeded RNG; ``look`` when none is listed.

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
        dtype / device: see `genenv.runtime.models.load_model_and_tokenizer`.
        batch_size: prompts per ``generate`` call (memory vs. throughput).
        model / tokenizer: pass already loaded objects instead (the trainer shares them with its optimiser).
        autocast_dtype: run generation under ``torch.autocast`` in this dtype (fp32 weights, bf16 matmuls).
        share_prefix: the ``n`` samples of a prompt share one prefill (`sample`); ``False``: transformers'
            ``num_return_sequences``, which prefills each copy (and no KV reuse across calls).
        prefix_cache_tokens: tokens of KV states kept between calls, so a prompt that extends an earlier prompt and
            its response (a multi-step episode's next turn) prefills only the new tokens
            (`prefix_cache`); 0: none.
        decode_attention: on the CPU, single-token decoding steps use
            `decode_attention` instead of SDPA (decoding over a long cache is several times faster; figures:
            ``lab/notes/cpu-profiles.md``, "runtime/policies.py"); ``False``: SDPA throughout.
        retire_rows: sampling (free or under a JSON Schema) drops finished rows from the decoding batch
            (`decode`); ``False``: transformers' ``generate``, which decodes every row
            until the batch's last one stops (with xgrammar's logits processor under a schema).
        continuous_batching: the episode loop plays free-text episodes through `continuous` (every
            unfinished episode in one decoding batch, KV states kept across turns,
            `continuous`); ``False``: one `generate` call per turn (lock step).
        static_cache: transformers' ``generate`` with a static KV cache (``cache_implementation="static"``),
            whose decoding steps transformers compiles with ``torch.compile`` on a GPU (its auto-compile; on the
            CPU they run uncompiled). Every call then decodes all its rows until the last one stops, in lock step,
            with no KV states kept between calls: ``retire_rows``, ``prefix_cache_tokens`` and
            ``continuous_batching`` are off whatever they say. Prompts are left-padded to a multiple of
            `STATIC_WIDTH_STEP` tokens so that few cache shapes (and compilations) occur.
        builtin: ``False``: plain ``transformers.generate`` only (the ``transformers`` sampler,
            `genenv.runtime.samplers.sampler`): SDPA attention and transformers' own ``DynamicCache``, with
            ``decode_attention``, ``retire_rows``, ``continuous_batching`` and the prefix cache off whatever they
            say; ``True``: the project's own engine where those knobs turn it on.
    """

    def __init__(self, model_name: str = "smollm2", dtype: str = "auto", device: str = "cpu",
                 batch_size: int = 16, model=None, tokenizer=None, autocast_dtype: str | None = None,
                 share_prefix: bool = True, prefix_cache_tokens: int = 131072, decode_attention: bool = True,
                 retire_rows: bool = True, continuous_batching: bool = True, static_cache: bool = False,
                 builtin: bool = True):
        from genenv.envs.extras import require_extra
        from genenv.runtime.models import LOCAL_MODULES

        require_extra("local", *LOCAL_MODULES, needed_by=f"the local model {model_name!r}")
        from genenv.runtime.models import load_model_and_tokenizer, prepare_tokenizer

        if model is None:
            model, tokenizer = load_model_and_tokenizer(model_name, dtype=dtype, device=device)
        else:
            prepare_tokenizer(tokenizer)
        if not builtin:
            decode_attention = retire_rows = continuous_batching = False
            prefix_cache_tokens = 0
        self.builtin = builtin
        if decode_attention:
            from genenv.runtime._builtin.attention import use_decode_attention

            use_decode_attention(model)
        self.model, self.tokenizer = model, tokenizer
        self.name = model_name
        self.device = device
        self.batch_size = batch_size
        self.autocast_dtype = autocast_dtype  # e.g. "bfloat16": generate in bf16 from fp32 training weights
        self.share_prefix = share_prefix
        # the KV reuse the policy was built with, which use_static_cache turns off and on
        prefix_cache = None
        if prefix_cache_tokens > 0:
            from genenv.runtime._builtin.prefix_cache import PrefixCache

            prefix_cache = PrefixCache(prefix_cache_tokens)
        self._kv_reuse = (prefix_cache, retire_rows, continuous_batching)
        self.use_static_cache(static_cache)
        self.continuous_counters: dict[str, float] = {}  # running totals of every continuous batch (COUNTERS)
        self.generated_tokens = 0
        self.generate_seconds = 0.0
        self._grammars = None
        self._fingerprint: Any = None

    def load_weights(self, state_dict, fingerprint: Any = None) -> float:
        """Sample from ``state_dict`` (Hugging Face keys; cast to the sampling model's dtype) from now on, named
        ``fingerprint``; the KV states kept between calls are dropped. Nothing is copied when ``state_dict`` is the
        sampling model's own (a float32 or LoRA role samples from its trained model). Returns the seconds taken.

        Raises:
            RuntimeError: a key the sampling model does not have, or a shape that differs (``load_state_dict``).
        """
        import torch

        start = time.perf_counter()
        own = self.model.state_dict()
        if any(k not in own or own[k].data_ptr() != v.data_ptr() for k, v in state_dict.items()):
            with torch.no_grad():
                self.model.load_state_dict(state_dict, strict=True)
        self.clear_prefix_cache()
        self._fingerprint = fingerprint
        return time.perf_counter() - start

    def fingerprint(self) -> Any:
        """The ``fingerprint`` given with the weights last loaded (`load_weights`)."""
        return self._fingerprint

    def close(self) -> None:
        """Release the KV states kept between calls (the model stays: the trainer owns it)."""
        self.clear_prefix_cache()

    def use_static_cache(self, on: bool) -> None:
        """Sample through the static KV cache (``on``: ``static_cache`` as in the constructor, with the prefix
        cache, retiring rows and the continuous batch off) or without it (those three as the policy was built;
        the prefix cache keeps what it held)."""
        prefix_cache, retire_rows, continuous_batching = self._kv_reuse
        self.static_cache = on
        self.prefix_cache = None if on else prefix_cache
        self.retire_rows = retire_rows and not on
        self.continuous_batching = continuous_batching and not on

    @property
    def grammars(self):
        """The `SchemaGrammars` of this model's tokenizer (built on first
        use)."""
        if self._grammars is None:
            from genenv.runtime.grammar import SchemaGrammars

            self._grammars = SchemaGrammars(self.tokenizer, getattr(self.model.config, "vocab_size", None))
        return self._grammars

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header
        (`chat_prompt_ids`)."""
        from genenv.runtime.models import chat_prompt_ids

        return chat_prompt_ids(self.tokenizer, messages)

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """Batched sampling (greedy when ``temperature == 0``); stops at the end-of-turn token. A prompt's own
        ``token_ids`` are used when set; its ``max_new_tokens`` cuts its generations to its cap (the first ``k``
        tokens of a sample are distributed as a sample with ``max_new_tokens=k``); its ``json_schema`` samples
        it under that schema's grammar (constrained and free prompts go to separate ``generate`` calls)."""
        encoded = [p.token_ids or self.encode_prompt(p.messages) for p in prompts]
        caps = [p.max_new_tokens for p in prompts]
        schemas = [p.json_schema for p in prompts]
        results: list[list[Generation]] = [[] for _ in prompts]
        for constrained in (False, True):
            rows = [i for i, s in enumerate(schemas) if bool(s) == constrained]
            if not rows:
                continue
            out = self.generate_from_ids([encoded[i] for i in rows], n=n, temperature=temperature,
                                         max_new_tokens=max_new_tokens, caps=[caps[i] for i in rows],
                                         schemas=[schemas[i] for i in rows] if constrained else None)
            for i, gens in zip(rows, out):
                results[i] = gens
        return results

    def generate_from_ids(self, encoded: Sequence[list[int]], n: int = 1, temperature: float = 0.0,
                          max_new_tokens: int = 256, caps: Sequence[int | None] | None = None,
                          schemas: Sequence[dict[str, Any]] | None = None) -> list[list[Generation]]:
        """As `generate`, from prompt token ids (used by the veRL agent-loop generate client); ``caps``: a
        per-prompt cap below ``max_new_tokens`` (``None``: none); ``schemas``: one JSON Schema per prompt to
        sample under (``None``: free sampling)."""
        import torch

        from genenv.runtime._builtin.prefix_cache import sliding

        tok = self.tokenizer
        results: list[list[Generation]] = []
        per_call = max(1, self.batch_size // max(1, n))
        reuse = self.prefix_cache is not None and self.share_prefix
        if reuse:
            self.prefix_cache.check_weights(self.model)
        start = time.perf_counter()
        for i in range(0, len(encoded), per_call):
            chunk = encoded[i:i + per_call]
            row_caps = [caps[i + row] if caps is not None else None for row in range(len(chunk)) for _ in range(n)]
            cache = None
            if reuse:
                with torch.no_grad(), self.precision():
                    self.prefix_cache.prefill_alone(self.model, chunk)
                cache, input_ids, attention, _ = self.prefix_cache.batch(chunk, self.model.config, tok.pad_token_id,
                                                                         self.device)
            else:
                input_ids, attention = left_padded(chunk, tok.pad_token_id,
                                                   STATIC_WIDTH_STEP if self.static_cache else 1)
            input_ids, attention = input_ids.to(self.device), attention.to(self.device)
            if self.retire_rows:
                def keep(row, fed, keys, values, mask, response, chunk=chunk):
                    self.prefix_cache.keep_row(list(chunk[row // n]) + response, fed, keys, values, mask)

                grammar = None
                if schemas is not None:
                    from genenv.runtime.grammar import RowMatchers

                    grammar = RowMatchers([self.grammars.compiled(schemas[i + row]) for row in range(len(chunk))
                                           for _ in range(n)], self.grammars.info.vocab_size)
                with torch.no_grad(), self.precision():
                    responses = self.decode_rows(input_ids, attention, n, cache, max_new_tokens, temperature,
                                                 row_caps, keep if reuse and not sliding(cache) else None, grammar)
                logprobs = [[] for _ in responses]  # the engine's decoding loop reports none
            else:
                chosen = ChosenLogProbs()  # first: the raw logits, before a grammar's mask and the temperature
                kwargs: dict[str, Any] = dict(max_new_tokens=max_new_tokens, eos_token_id=tok.stop_token_ids,
                                              pad_token_id=tok.pad_token_id, logits_processor=[chosen],
                                              **sampling_kwargs(temperature))
                if schemas is not None:
                    kwargs["logits_processor"].append(self.grammars.logits_processor(
                        [schemas[i + row] for row in range(len(chunk)) for _ in range(n)]))
                with torch.no_grad(), self.precision():
                    out = self.sample(input_ids, attention, n, kwargs, cache)
                responses = [self.cut_response(ids, cap)
                             for ids, cap in zip(out[:, input_ids.shape[1]:].cpu().tolist(), row_caps)]
                logprobs = [lp[:len(resp)] for lp, resp in zip(chosen.rows(out, input_ids.shape[1]), responses)]
                if reuse:
                    self.prefix_cache.keep_rows(cache, attention.repeat_interleave(n, 0),
                                                [list(chunk[r // n]) + resp for r, resp in enumerate(responses)])
            for row, ids in enumerate(chunk):
                gens = []
                for k in range(n):
                    resp = responses[row * n + k]
                    self.generated_tokens += len(resp)
                    gens.append(Generation(tok.decode(resp, skip_special_tokens=True), list(ids), resp,
                                           logprobs[row * n + k], usage={
                                               "prompt_tokens": len(ids) if k == 0 else 0,
                                               "completion_tokens": len(resp)}))
                results.append(gens)
        self.generate_seconds += time.perf_counter() - start
        return results

    def cut_response(self, ids: list[int], cap: int | None) -> list[int]:
        """A ``generate`` row's new tokens as a response: cut to ``cap``, ended after its first stop token (kept:
        the model must learn to stop), trailing padding dropped."""
        tok = self.tokenizer
        resp = ids[:cap]
        for j, t in enumerate(resp):
            if t in tok.stop_token_ids:
                resp = resp[:j + 1]
                break
        while resp and resp[-1] == tok.pad_token_id and tok.pad_token_id not in tok.stop_token_ids:
            resp.pop()
        return resp

    def decode_rows(self, input_ids, attention, n: int, cache, max_new_tokens: int, temperature: float,
                    caps: Sequence[int | None], on_retire=None, grammar=None) -> list[list[int]]:
        """``n`` samples per row of ``input_ids`` (``[B, W]``, left-padded; ``cache``: states of its first
        columns, or ``None``) through `decode`, which retires finished rows; with
        ``n > 1`` and ``share_prefix`` the prompts are prefilled once and their cache repeated ``n`` times, as in
        `sample`. Returns ``B * n`` responses (row ``b * n + k``: sample ``k`` of prompt ``b``); ``caps``:
        one per returned row; ``grammar``: a `RowMatchers` over the ``B * n``
        rows (``None``: free text)."""
        from genenv.runtime._builtin.decoding import decode
        from genenv.runtime._builtin.kv_cache import growing_cache

        if cache is None:
            cache = growing_cache(self.model.config)
        if n > 1 and self.share_prefix:
            self.prefill_shared(input_ids, attention, cache)
        cache.batch_repeat_interleave(n)  # no-op on an empty cache
        return decode(self.model, input_ids.repeat_interleave(n, 0), attention.repeat_interleave(n, 0), cache,
                      max_new_tokens, temperature, self.tokenizer.stop_token_ids, caps, on_retire, grammar)

    def prefill_shared(self, input_ids, attention, cache) -> None:
        """Prefill every column of ``input_ids`` (``[B, W]``, left-padded, mask ``attention``) but the last into
        ``cache`` (which already holds the first ``C`` columns), so that the prompts' KV states can be repeated for
        their samples and each sample feeds only the last token; nothing to do when fewer than 2 columns are left.
        Position ids come from the mask, as ``generate`` derives them."""
        cached = cache.get_seq_length()
        if input_ids.shape[1] - cached >= 2:
            positions = (attention.cumsum(-1) - 1).clamp(min=0)
            self.model(input_ids=input_ids[:, cached:-1], attention_mask=attention[:, :-1],
                       position_ids=positions[:, cached:-1], past_key_values=cache, use_cache=True, logits_to_keep=1)

    def precision(self):
        """The context generation runs in: ``torch.autocast`` in ``autocast_dtype`` when set, else none."""
        import torch

        if not self.autocast_dtype:
            return nullcontext()
        return torch.autocast(device_type=torch.device(self.device).type, dtype=getattr(torch, self.autocast_dtype))

    def continuous(self, temperature: float = 0.0, max_new_tokens: int = 256, capacity: int | None = None):
        """A `ContinuousBatch` over this policy's model (rows decode together
        across turns, each keeping its KV states), or ``None`` where it does not apply: ``continuous_batching``
        off, ``retire_rows`` off, ``prefix_cache_tokens`` 0 (no KV states kept between turns; otherwise it bounds
        the batch's KV states, ``max_kv_tokens``), a model with sliding-window layers, or one not on the CPU
        decoding attention (`attention`, which computes the batch's packed passes).
        ``capacity``: rows at once (default ``batch_size``)."""
        from genenv.runtime._builtin.attention import NAME
        from genenv.runtime._builtin.continuous import ContinuousBatch
        from genenv.runtime._builtin.kv_cache import growing_cache
        from genenv.runtime._builtin.prefix_cache import sliding

        if (not (self.continuous_batching and self.retire_rows and self.prefix_cache is not None)
                or sliding(growing_cache(self.model.config))
                or getattr(self.model.config, "_attn_implementation", None) != NAME):
            return None
        return ContinuousBatch(self.model, self.tokenizer.stop_token_ids, temperature, max_new_tokens,
                               capacity or self.batch_size, self.precision, self.continuous_counters,
                               max_kv_tokens=self.prefix_cache.max_tokens)

    def continuous_generation(self, prompt_ids: Sequence[int], response_ids: Sequence[int], shared: bool,
                              response_logprobs: Sequence[float] = ()) -> Generation:
        """A finished turn of a continuous batch as a `Generation` (counted in ``generated_tokens``;
        ``shared``: its prompt's prefill was a sibling's, so it reports no prompt tokens, as `generate`
        does for the second and later samples of a prompt; ``response_logprobs``: the sampler's log-probs of
        ``response_ids``, `TurnOutput`'s)."""
        resp = list(response_ids)
        self.generated_tokens += len(resp)
        return Generation(self.tokenizer.decode(resp, skip_special_tokens=True), list(prompt_ids), resp,
                          list(response_logprobs), usage={"prompt_tokens": 0 if shared else len(prompt_ids),
                                                          "completion_tokens": len(resp)})

    def clear_prefix_cache(self) -> None:
        """Release the KV states kept between calls (the episode loop calls it when a rollout ends)."""
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def new_cache(self):
        """An empty KV cache for one ``generate`` call: the engine's in-place `growing_cache` when ``builtin``,
        else transformers' own ``DynamicCache``."""
        if self.builtin:
            from genenv.runtime._builtin.kv_cache import growing_cache

            return growing_cache(self.model.config)
        from transformers import DynamicCache

        return DynamicCache(config=self.model.config)

    def sample(self, input_ids, attention, n: int, kwargs: dict[str, Any], cache=None):
        """``model.generate`` of ``n`` samples per row of ``input_ids`` (``[B, W]``, left-padded; returns
        ``[B * n, W + new]``, row ``b * n + k`` the ``k``-th sample of prompt ``b``).

        Decoding appends to ``cache``, a ``DynamicCache`` already holding the KV states of the first ``C`` columns
        (`PrefixCache.batch`; generation continues from it and leaves every fed token's states in it), or with
        ``None`` to a new one (`new_cache`). With ``n > 1`` and ``share_prefix`` the prompts are prefilled once and their KV cache is repeated
        ``n`` times (transformers' ``DynamicCache.batch_repeat_interleave``) before decoding, instead of
        ``num_return_sequences``, which prefills every copy again: the same sampling distribution for ``1/n`` of the
        prompt compute. In float32 the two paths draw the same tokens seed for seed (tested); in bfloat16 the
        prefill's rounding differs with its shape, so seeded samples can part (measured on BFCL, SmolLM2 bf16,
        24 rollouts: 11 identical texts) while every sample still comes from the policy. With ``static_cache``
        the call is ``generate`` of every row repeated ``n`` times into a static cache (see the class).
        """
        if self.static_cache:
            return self.model.generate(input_ids=input_ids.repeat_interleave(n, 0),
                                       attention_mask=attention.repeat_interleave(n, 0), cache_implementation="static",
                                       **kwargs)
        if cache is None and (n == 1 or not self.share_prefix or input_ids.shape[1] < 2):
            return self.model.generate(input_ids=input_ids, attention_mask=attention, num_return_sequences=n,
                                       past_key_values=self.new_cache(), **kwargs)
        if cache is None:
            cache = self.new_cache()
        if n > 1:
            self.prefill_shared(input_ids, attention, cache)
            cache.batch_repeat_interleave(n)
        return self.model.generate(input_ids=input_ids.repeat_interleave(n, 0),
                                   attention_mask=attention.repeat_interleave(n, 0), past_key_values=cache, **kwargs)


class ChosenLogProbs:
    """A ``transformers`` logits processor (first in ``generate``'s ``logits_processor``) that records the log-prob
    of each token every row draws under the model's own distribution: ``log_softmax`` of the raw logits, before a
    grammar's mask and the temperature, the distribution the trainer's log-probs are taken from (for the
    trainer-sampler gap). It holds one step's ``[B, V]`` log-probs at a time: a step's drawn token is read from
    the next call's ``input_ids``, the last step's from the finished sequences (`rows`). Scores pass unchanged."""

    def __init__(self):
        self.steps: list = []
        self._last = None

    def __call__(self, input_ids, scores):
        """Record the previous step's drawn tokens' log-probs; keep this step's; return ``scores`` as given."""
        import torch

        if self._last is not None:
            self.steps.append(self._last.gather(1, input_ids[:, -1:]).squeeze(1))
        self._last = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def rows(self, sequences, prompt_width: int) -> list[list[float]]:
        """Per row of ``sequences`` (``[B, prompt_width + new]``, ``generate``'s output) the log-prob of each new
        token (``new`` per row; rows that stopped early carry values for their padding too: cut them to the
        response)."""
        import torch

        steps = list(self.steps)
        if self._last is not None and len(steps) < sequences.shape[1] - prompt_width:
            steps.append(self._last.gather(1, sequences[:, -1:].to(self._last.device)).squeeze(1))
        if not steps:
            return [[] for _ in range(sequences.shape[0])]
        return torch.stack(steps, 1).cpu().tolist()


def sampling_kwargs(temperature: float) -> dict[str, Any]:
    """``generate`` keyword arguments for plain sampling at ``temperature`` (no top-k / top-p), or greedy decoding
    when ``temperature <= 0`` (the sampling keys set to ``None``, so a model's generation config cannot add its
    own)."""
    if temperature > 0:
        return dict(do_sample=True, temperature=temperature, top_p=1.0, top_k=0)
    return dict(do_sample=False, temperature=None, top_p=None, top_k=None)


STATIC_WIDTH_STEP = 64
"""Prompt widths of a static-cache policy are rounded up to a multiple of this many tokens (left padding): a
static cache's shape, and so each compiled graph, is fixed by the call's batch size and total length."""


def left_padded(rows: Sequence[list[int]], pad_token_id: int, multiple: int = 1):
    """``(input_ids, attention_mask)``, both ``[len(rows), width]`` (long), each row right-aligned after
    ``pad_token_id`` padding (mask 0 on the padding); ``width`` is the longest row's length rounded up to a
    multiple of ``multiple``."""
    import torch

    width = -(-max(len(x) for x in rows) // multiple) * multiple
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for row, ids in enumerate(rows):
        input_ids[row, width - len(ids):] = torch.tensor(ids)
        attention[row, width - len(ids):] = 1
    return input_ids, attention


class OpenAIPolicy:
    """An OpenAI-compatible chat-completions endpoint (a vLLM or llama.cpp server, or any API), through the
    ``openai`` client's async API.

    A `generate` call sends its prompts concurrently, at most ``concurrency`` requests in flight (a
    multi-step episode's turn: every unfinished episode's request at once). Retries are the ``openai`` client's
    own: connection errors, timeouts, 408 / 409 / 429 and 5xx answers are retried ``max_retries`` times with
    exponential backoff and jitter (0.5 s doubling to 8 s, ``Retry-After`` obeyed; ``openai/_base_client.py``).

    Args:
        base_url: e.g. ``http://localhost:8000/v1``.
        model: the served model name.
        api_key: sent as a bearer token (``EMPTY`` for a local server).
        timeout: seconds per request (each retry gets its own).
        concurrency: requests in flight at once (default 32: a vLLM server batches them; a one-at-a-time server
            such as llama.cpp's gains only the overlap of client work).
        max_retries: retries per request after the first try.
        server_failure: for a server process this program started, a check that returns ``None`` while it runs
            and, once it has died, what happened (exit code, log tail; e.g.
            `genenv.eval.model_server.LlamaServer.failure`): polled every 0.25 s while requests are in flight,
            so a dead server ends the call at once with its reason instead of retries against a dead address.
    Raises (from generate):
        RuntimeError: the endpoint could not be reached, or answered an error that retries did not cure, or the
            watched server process died; the message names the URL, the status and the server's words (or the
            process's exit code and log tail).
    """

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", timeout: float = 120.0,
                 concurrency: int = 32, max_retries: int = 4, server_failure: Callable[[], str | None] | None = None):
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = float(timeout)
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.server_failure = server_failure
        self.name = f"openai:{model}"
        self.requests = 0  # chat-completion calls answered, over the policy's life

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` choices per prompt (text and token usage, no token ids), the prompts' requests concurrent; a
        prompt's ``json_schema`` is sent as ``response_format`` (OpenAI structured outputs, which vLLM and
        llama.cpp servers accept too); a server that returns fewer than ``n`` choices is asked again for the
        rest. Runs its own event loop (from a thread when the caller already runs one)."""
        import asyncio

        work = self._generate_all(list(prompts), n, temperature, max_new_tokens)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(work)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as pool:
            return pool.submit(asyncio.run, work).result()

    async def _generate_all(self, prompts: list[Prompt], n: int, temperature: float, max_new_tokens: int
                            ) -> list[list[Generation]]:
        import asyncio

        import openai

        client = openai.AsyncOpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                                    max_retries=self.max_retries)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(p: Prompt) -> list[Generation]:
            body: dict[str, Any] = {"model": self.model, "messages": p.messages, "temperature": temperature,
                                    "max_tokens": min(max_new_tokens, p.max_new_tokens or max_new_tokens)}
            if p.json_schema:
                body["response_format"] = {"type": "json_schema",
                                           "json_schema": {"name": "task", "schema": p.json_schema, "strict": True}}
            gens: list[Generation] = []
            while len(gens) < n:
                async with gate:
                    try:
                        resp = await self._unless_server_died(client.chat.completions.create(n=n - len(gens), **body))
                    except openai.APIStatusError as e:
                        raise RuntimeError(f"{self.base_url} answered {e.status_code} after {self.max_retries} "
                                           f"retries: {str(e)[:300]}") from e
                    except openai.APIConnectionError as e:  # includes timeouts
                        self._raise_if_server_died(e)
                        raise RuntimeError(f"{self.base_url} could not be reached after {self.max_retries} "
                                           f"retries ({type(e).__name__}: {e})") from e
                self.requests += 1
                usage = resp.usage
                choices = resp.choices or []
                if not choices:
                    raise RuntimeError(f"{self.base_url} answered without choices: {str(resp)[:300]}")
                for k, c in enumerate(choices[:n - len(gens)]):
                    # the request's usage, counted once: prompt tokens on its first choice
                    gens.append(Generation((c.message.content if c.message else None) or "", usage={
                        "prompt_tokens": (usage.prompt_tokens if usage and k == 0 else 0) or 0,
                        "completion_tokens": ((usage.completion_tokens if usage else 0) or 0) // len(choices)}))
            return gens

        try:
            return list(await asyncio.gather(*(one(p) for p in prompts)))
        finally:
            await client.close()

    def _raise_if_server_died(self, cause: BaseException | None = None) -> None:
        """Raises RuntimeError with ``server_failure``'s words when the watched server process has died."""
        why = self.server_failure() if self.server_failure else None
        if why is not None:
            raise RuntimeError(f"{self.base_url}: {why}") from cause

    async def _unless_server_died(self, request: Awaitable[Any]) -> Any:
        """``await request``, but with a watched server (``server_failure``) check every 0.25 s whether its process
        died and, if so, cancel the request (and the ``openai`` client's retries) and raise RuntimeError."""
        import asyncio

        if self.server_failure is None:
            return await request
        task = asyncio.ensure_future(request)
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.25)
            if done:
                return task.result()
            try:
                self._raise_if_server_died()
            except RuntimeError:
                task.cancel()
                with suppress(asyncio.CancelledError, Exception):
                    await task
                raise


def make_policy(name: str, dtype: str | None = None, device: str | None = None, batch_size: int | None = None,
                concurrency: int | None = None, timeout: float | None = None, max_retries: int | None = None,
                builtin: bool = True) -> Policy:
    """Build a policy from its command-line name (``--policy``).

    ``gold`` (the gold policy; ``oracle``, its former name, still loads it with a ``FutureWarning``); ``random`` /
    ``random:SEED`` (text games: a random admissible command); ``smollm2`` (embedded model); ``hf:PATH`` or a
    folder path (local transformers); a training run's agent: ``RUN_DIR``, ``RUN_DIR/checkpoints/latest`` or
    ``RUN_DIR/checkpoints/iter-N`` (full weights or a LoRA adapter merged into its base, `checkpoint_folder`);
    ``openai:BASE_URL#MODEL`` (OpenAI-compatible endpoint; ``OPENAI_API_KEY`` is used if set). ``dtype`` /
    ``device`` / ``batch_size`` go to `TransformersPolicy`, ``concurrency`` / ``timeout`` / ``max_retries`` to
    `OpenAIPolicy` (``None``: their defaults); ``builtin=False`` makes a local model plain
    ``transformers.generate`` (the ``transformers`` sampler; `genenv.runtime.samplers.sampler.local_sampler` builds
    every kind).

    Raises:
        ValueError: a malformed ``openai:`` name. ModelNotFound: a local name that is no model folder.
    """
    import os

    def given(**kw: Any) -> dict[str, Any]:
        return {k: v for k, v in kw.items() if v is not None}

    if name == "oracle":  # the former name; ``oracle`` now names only the task source
        import warnings

        warnings.warn("--policy oracle is now --policy gold (the gold policy); 'oracle' names the task source "
                      "that steers a generator", FutureWarning, stacklevel=2)
        name = "gold"
    if name == "gold":
        return GoldPolicy()
    if name == "random" or name.startswith("random:"):
        return RandomAdmissiblePolicy(int(name.partition(":")[2] or 0))
    if name.startswith("openai:"):
        url, _, model = name[len("openai:"):].partition("#")
        if not model:
            raise ValueError("an openai policy is named openai:BASE_URL#MODEL")
        return OpenAIPolicy(url, model, api_key=os.environ.get("OPENAI_API_KEY", "EMPTY"),
                            **given(concurrency=concurrency, timeout=timeout, max_retries=max_retries))
    name = name.removeprefix("hf:")
    return TransformersPolicy(name, builtin=builtin, **given(dtype=dtype, device=device, batch_size=batch_size))
