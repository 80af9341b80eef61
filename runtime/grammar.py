"""Structured decoding: sampling under a JSON Schema with xgrammar (the grammar engine vLLM itself uses).

The environment policy writes tasks as JSON objects in a format each benchmark spec declares as a JSON Schema
(`genenv.benchmarks.task_writer.TaskWriter.generation_schema`). Sampled freely, a 135M model closes that object
once in 8 to 30 tries; sampled under the schema's grammar, every token it emits keeps the text a prefix of a
valid object, and the object ends with the end-of-turn token.

How the grammar is applied (xgrammar 0.2.9):

- ``xgrammar.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size, stop_token_ids=...)``
  maps the vocabulary; ``GrammarCompiler.compile_json_schema(schema, any_whitespace=False,
  separators=(", ", ": "), strict_mode=True)`` compiles one schema (properties in the schema's order, Python's
  ``json.dumps`` spacing, no properties the schema does not list); compiled grammars are cached by schema text.
- local engine: ``xgrammar.contrib.hf.LogitsProcessor`` (one fresh processor per ``generate`` call, one
  grammar per batch row) masks the logits before sampling (`SchemaGrammars.logits_processor`);
- ``engine=verl_ray``: the same schema goes to vLLM as ``SamplingParams(structured_outputs=
  StructuredOutputsParams(json=schema))`` (`genenv.trainer.engines.verl_ray.policy.VerlPolicy`).

What the update sees: the tokens actually sampled. Their log-probabilities in the update are the *unmasked*
policy's (the model's own forward pass), so RWR maximises the reward-weighted likelihood of admitted samples
under the policy itself; the grammar only changes which samples are proposed. docs/task-generation.md, "Structured decoding".
"""
from __future__ import annotations

import json
from typing import Any, Sequence

__all__ = ["JSON_OPTIONS", "RowMatchers", "SchemaGrammars"]

JSON_OPTIONS = dict(any_whitespace=False, separators=(", ", ": "), strict_mode=True)


def schema_text(schema: dict[str, Any]) -> str:
    """The text of a schema, keys in their order (the order properties are generated in): the cache's key."""
    return json.dumps(schema, ensure_ascii=False)


class SchemaGrammars:
    """JSON-Schema grammars compiled for one tokenizer, cached by schema.

    Args:
        tokenizer: a Hugging Face tokenizer prepared by `prepare_tokenizer`
            (its ``stop_token_ids`` end a completed object).
        vocab_size: the model's vocabulary size (``model.config.vocab_size``; may exceed the tokenizer's, padding).
    Raises:
        ImportError: xgrammar is not installed (it is a dependency of the package).
    """

    def __init__(self, tokenizer, vocab_size: int | None = None):
        import xgrammar as xgr

        self._xgr = xgr
        stop = list(getattr(tokenizer, "stop_token_ids", None) or [tokenizer.eos_token_id])
        self.info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size, stop_token_ids=stop)
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1)
        self._cache: dict[str, Any] = {}

    def compiled(self, schema: dict[str, Any]):
        """The compiled grammar of ``schema`` (compiled once and cached; figures: ``lab/notes/cpu-profiles.md``,
        "runtime/grammar.py")."""
        key = schema_text(schema)
        if key not in self._cache:
            self._cache[key] = self.compiler.compile_json_schema(key, **JSON_OPTIONS)
        return self._cache[key]

    def logits_processor(self, schemas: Sequence[dict[str, Any]]):
        """A new transformers logits processor for one ``generate`` call (xgrammar's processors are single-use):
        ``schemas[i]`` constrains batch row ``i``; the copies of ``num_return_sequences`` are listed once each.

        Raises:
            ValueError: a row has no schema (constrained and free prompts are generated in separate calls).
        """
        if not schemas or not all(schemas):
            raise ValueError("every row of a constrained generate call needs a schema")
        from xgrammar.contrib.hf import LogitsProcessor

        return LogitsProcessor([self.compiled(s) for s in schemas])

    def admits(self, schema: dict[str, Any], text: str) -> bool:
        """Whether the grammar of ``schema`` accepts ``text`` as a complete object (the test of a format)."""
        matcher = self._xgr.GrammarMatcher(self.compiled(schema))
        return bool(matcher.accept_string(text)) and bool(matcher.is_completed())


class RowMatchers:
    """One grammar matcher per row of a decoding batch that shrinks as rows finish
    (`genenv.runtime._builtin.decoding.decode`): rows are named by their index in the input batch, so a row keeps its
    matcher when other rows leave. What xgrammar's transformers ``LogitsProcessor`` does per step, by row name.

    Args:
        compiled: one compiled grammar per input row (`SchemaGrammars.compiled`).
        vocab_size: the logits' width the bitmask covers (``SchemaGrammars.info.vocab_size``).
    """

    def __init__(self, compiled: Sequence[Any], vocab_size: int):
        import xgrammar as xgr

        self._xgr = xgr
        self.matchers = [xgr.GrammarMatcher(c) for c in compiled]
        self.vocab_size = int(vocab_size)
        self.bitmask = xgr.allocate_token_bitmask(len(self.matchers), self.vocab_size)

    def mask(self, logits, rows: Sequence[int]) -> None:
        """Set, in place, the logits of tokens row ``rows[slot]``'s grammar forbids to ``-inf`` (``logits``:
        ``[len(rows), V]`` float32, slot ``slot`` for input row ``rows[slot]``); the slot of a row whose grammar
        has ended (it sampled its stop token; its samples are ignored) is left as it is."""
        bitmask = self.bitmask[:len(rows)]
        for slot, row in enumerate(rows):
            matcher = self.matchers[row]
            if matcher.is_terminated():
                bitmask[slot].fill_(-1)  # every bit set: nothing masked
            else:
                matcher.fill_next_token_bitmask(bitmask, slot)
        self._xgr.apply_token_bitmask_inplace(logits, bitmask.to(logits.device), vocab_size=self.vocab_size)

    def accept(self, row: int, token: int) -> None:
        """Advance row ``row``'s matcher by its sampled ``token``.

        Raises:
            RuntimeError: the grammar refuses ``token`` (it was sampled without `mask`).
        """
        if not self.matchers[row].accept_token(int(token)):
            raise RuntimeError(f"row {row}: token {token} is outside its grammar")
