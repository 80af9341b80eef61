"""Task generation that the agent can learn from: the generation formats' grammars (structured decoding), grounded
validation, and EnvGen mode — on the real training pools of every benchmark."""
from __future__ import annotations

import dataclasses
import json
import math
import random
from collections import Counter

import pytest

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.envs.task import Task

from conftest import DATA_DIR

GENERATING = ["bfcl", "bfcl_multi_turn", "bamboogle", "api_bank", "api_bank_plan", "api_bank_response",
              "travelplanner", "alfworld", "twx"]
CHEAP_VALIDATION = ["bfcl", "bfcl_multi_turn", "bamboogle", "api_bank", "api_bank_plan", "api_bank_response"]


def _seeds(name: str) -> tuple:
    spec = get_benchmark(name, DATA_DIR)
    return spec, spec.load(split="train", **dict(spec.seed_options))


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    from transformers import AutoTokenizer

    from genenv.runtime.models import prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    prepare_tokenizer(tok)
    return tok


@pytest.fixture(scope="module")
def grammars(tokenizer):
    from genenv.runtime.grammar import SchemaGrammars

    return SchemaGrammars(tokenizer, len(tokenizer))


# ----- structured decoding -----
@pytest.mark.parametrize("name", [n for n in GENERATING if n != "alfworld"])  # ALFWorld: test_alfworld.py
def test_the_grammar_admits_every_demonstration_of_the_training_pool(name, grammars):
    spec, tasks = _seeds(name)
    demos = [t for t in tasks if spec.demonstrable(t)]
    assert len(demos) >= 20, (name, len(demos))
    refused = [t.id for t in demos if not grammars.admits(spec.generation_schema([t]),
                                                          json.dumps(spec.as_generation(t), ensure_ascii=False))]
    assert refused == []


@pytest.mark.parametrize("name", GENERATING)
def test_the_grammar_refuses_malformed_generations(name, grammars):
    spec, tasks = _seeds(name)
    seed = next(t for t in tasks if spec.demonstrable(t))
    schema = spec.generation_schema([seed])
    good = spec.as_generation(seed)
    text = json.dumps(good, ensure_ascii=False)
    first = next(iter(good))
    malformed = [text[:-1],                                             # cut off before the object closes
                 text[:-1] + ', "extra": 1}',                           # a property the format does not have
                 json.dumps({k: v for k, v in good.items() if k != first}),  # a required property missing
                 json.dumps({**good, first: [1, 2]}),                   # the wrong type
                 "Sure! " + text,                                       # text before the object
                 json.dumps(good, indent=2)]                            # other whitespace than the demonstrations'
    assert [m for m in malformed if grammars.admits(schema, m)] == []


def test_enumerated_fields_only_take_the_scene_or_database_values(grammars):
    alfworld, tasks = _seeds("alfworld")
    seed = tasks[0]
    own = alfworld.as_generation(seed)
    schema = alfworld.generation_schema([seed])
    goal = {k: v["const"] if "const" in v else v["enum"][0] for k, v in schema["anyOf"][0]["properties"].items()}
    assert grammars.admits(schema, json.dumps(goal)) and goal != own
    assert not grammars.admits(schema, json.dumps(own))  # the demonstrated goal of this game: a copy
    assert not grammars.admits(schema, json.dumps({**goal, "object": "Spaceship"}))
    assert not grammars.admits(schema, json.dumps({**goal, "task_type": "fly_to_the_moon"}))
    travel, tasks = _seeds("travelplanner")
    query = travel.as_generation(tasks[0])
    schema = travel.generation_schema(tasks[:1])
    assert not grammars.admits(schema, json.dumps({**query, "org": "Atlantis"}, ensure_ascii=False))
    assert not grammars.admits(schema, json.dumps({**query, "days": 4}, ensure_ascii=False))
    bank, tasks = _seeds("api_bank")
    demo = bank.as_generation(next(t for t in tasks if bank.demonstrable(t)))
    schema = bank.generation_schema([])
    assert not grammars.admits(schema, json.dumps({**demo, "call": {"name": "LaunchRocket", "arguments": {}}}))


def test_constrained_sampling_writes_only_grammatical_objects(tiny_model_dir):
    """A random tiny model: free sampling writes noise; under the TWX schema every sample is a complete object the
    grammar admits (the schema's fields are enums and bounded integers, so objects close within the budget)."""
    from genenv.runtime.policies import Prompt, TransformersPolicy

    spec, tasks = _seeds("twx")
    policy = TransformersPolicy(str(tiny_model_dir), dtype="float32", batch_size=8)
    messages = spec.generation_messages(tasks[:1], None, 0.5)
    schema = spec.generation_schema(tasks[:1])
    constrained, free = policy.generate([Prompt(messages, json_schema=schema), Prompt(messages)], n=3,
                                        temperature=1.0, max_new_tokens=96)  # the longest object is ~70 tokens
    for gen in constrained:
        assert policy.grammars.admits(schema, gen.text), gen.text
        assert gen.response_ids[-1] in policy.tokenizer.stop_token_ids  # it ends with the end-of-turn token
        obj = json.loads(gen.text)
        assert obj["game"] in ("coin", "cookingworld", "twc") and 0 <= obj["seed"] <= 999
    assert not any(policy.grammars.admits(schema, g.text) for g in free)


def test_verl_policy_sends_the_schema_as_vllm_structured_outputs(monkeypatch):
    import asyncio
    import sys
    import types

    from genenv.trainer.engines.verl_ray.policy import VerlPolicy
    from genenv.runtime.policies import Prompt

    class StructuredOutputsParams:  # vLLM's class, as veRL's server receives it
        def __init__(self, json=None):
            self.json = json

    module = types.ModuleType("vllm.sampling_params")
    module.StructuredOutputsParams = StructuredOutputsParams
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", module)
    sent = []

    class Client:
        async def generate(self, request_id, *, prompt_ids, sampling_params):
            sent.append(sampling_params)
            await asyncio.sleep(0)
            return types.SimpleNamespace(token_ids=[5, 6])

    class Tok:
        def decode(self, ids, skip_special_tokens=True):
            return "x"

    schema = {"type": "object"}
    VerlPolicy("env", Client(), Tok()).generate([Prompt([], token_ids=[1], json_schema=schema),
                                                Prompt([], token_ids=[2])], n=2)
    assert [s.get("structured_outputs") is not None for s in sent] == [True, True, False, False]
    assert sent[0]["structured_outputs"].json == schema


# ----- grounded validation -----
@pytest.mark.parametrize("name", CHEAP_VALIDATION)
def test_grounded_validators_admit_every_demonstration(name):
    spec, tasks = _seeds(name)
    demos = [t for t in tasks if spec.demonstrable(t)]
    spec._admits_own = {}  # validate afresh, not from the demonstrable() cache
    rejected = {}
    for t in demos:
        out = spec.parse_generated(json.dumps(spec.as_generation(t), ensure_ascii=False), "g", 0, t)
        if not isinstance(out, Task):
            rejected[t.id] = out
    assert rejected == {}


def _walk_to_the_longest(grammars, tokenizer, schema: dict, rng: random.Random, limit: int) -> tuple[list[int], str]:
    """Tokens a sampler that never chooses to stop writes under ``schema``'s grammar: at every step a random
    allowed token other than the stop tokens (those only when nothing else is allowed), so strings and lists grow
    until their bounds end them. Returns the tokens (the stop token last) and the text."""
    import numpy as np
    import xgrammar as xgr

    matcher = xgr.GrammarMatcher(grammars.compiled(schema))
    vocab = grammars.info.vocab_size
    bitmask = xgr.allocate_token_bitmask(1, vocab)
    stops = set(grammars.info.stop_token_ids)
    tokens: list[int] = []
    while not matcher.is_terminated() and len(tokens) < limit:
        matcher.fill_next_token_bitmask(bitmask)
        allowed = np.flatnonzero(np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")[:vocab])
        choices = [int(t) for t in allowed if int(t) not in stops] or [int(t) for t in allowed]
        tokens.append(rng.choice(choices))
        assert matcher.accept_token(tokens[-1])
    return tokens, tokenizer.decode(tokens[:-1], skip_special_tokens=False, clean_up_tokenization_spaces=False)


@pytest.mark.parametrize("name", GENERATING)
def test_a_complete_object_always_fits_the_generation_budget(name, grammars, tokenizer):
    """The budget a constrained generation gets (``generation_budget``: the schema's longest accepted text in
    bytes, plus the stop token) holds the longest object a sampler that never stops can write: every walk ends
    with the stop token within the budget, its text within ``max_json_bytes``, and parses as one JSON object."""
    from genenv.benchmarks.bounded_schema import max_json_bytes
    from genenv.trainer.generation import generation_budget

    spec, tasks = _seeds(name)
    rng = random.Random(0)
    seeds = [t for t in tasks if spec.demonstrable(t)]
    for seed in rng.sample(seeds, 2):
        schema = spec.generation_schema([seed])
        budget = generation_budget(schema, None, True)
        tokens, text = _walk_to_the_longest(grammars, tokenizer, schema, rng, budget + 1)
        assert len(tokens) <= budget and tokens[-1] in grammars.info.stop_token_ids, (seed.id, len(tokens))
        assert len(text.encode()) <= max_json_bytes(schema) and isinstance(json.loads(text), dict), text[:200]


def test_constrained_sampling_that_retires_rows_gives_generates_greedy_objects(tiny_model_dir, grammars):
    """Structured decoding through the row-retiring decoder (each row's grammar matcher follows the row as others
    leave the batch) writes, greedily, the same tokens as transformers' ``generate`` with xgrammar's logits
    processor; every object is complete and its grammar accepts it."""
    from genenv.benchmarks.bounded_schema import json_object, text
    from genenv.runtime.policies import Prompt, TransformersPolicy
    from genenv.trainer.generation import generation_budget

    spec, tasks = _seeds("bamboogle")
    seeds = [t for t in tasks if spec.demonstrable(t)]
    schemas = [spec.generation_schema([]), json_object({"question": text(12)}),
               json_object({"question": text(40), "answer": text(3)})]  # rows that end at different steps
    prompts = [Prompt(spec.generation_messages(seeds[i:i + 2], 0.25 * i, 0.5), json_schema=schema,
                      max_new_tokens=generation_budget(schema, None, True)) for i, schema in enumerate(schemas)]
    outs = {}
    for retire in (True, False):
        policy = TransformersPolicy(str(tiny_model_dir), dtype="float32", retire_rows=retire)
        outs[retire] = [[g.response_ids for g in group] for group in
                        policy.generate(prompts, n=2, temperature=0.0, max_new_tokens=240)]
        sampled = policy.generate(prompts, n=2, temperature=1.0, max_new_tokens=240)
        assert all(grammars.admits(schema, g.text) for schema, group in zip(schemas, sampled) for g in group)
    assert outs[True] == outs[False] and len({len(ids) for group in outs[True] for ids in group}) > 1


def test_unbounded_schemas_are_refused_with_where():
    """Parts that accept texts of any length are named; a too-small budget is a configuration error."""
    from genenv.benchmarks.bounded_schema import UnboundedSchema, json_object, max_json_bytes, text
    from genenv.trainer.generation import generation_budget
    from genenv.trainer.settings import ConfigError

    for part, where in [({"type": "string"}, "$.a"), ({"type": "array", "items": text(3)}, "$.a"),
                        ({"type": "number"}, "$.a"), ({}, "$.a"), ({"type": "string", "pattern": "^a+$"}, "$.a"),
                        ({"type": "object", "additionalProperties": text(3), "maxProperties": 2}, "$.a")]:
        with pytest.raises(UnboundedSchema) as err:
            max_json_bytes(json_object({"a": part}))
        assert err.value.path == where
    bounded = json_object({"q": text(10, suffix="?"), "n": {"type": "integer", "minimum": 0, "maximum": 100},
                           "e": {"enum": ["ab", "é"]}})
    assert max_json_bytes(bounded) == len('{"q": "' + "x" * 10 + '?", "n": 100, "e": "ab"}') == 41
    assert generation_budget(bounded, None, True) == 42 == generation_budget(bounded, 500, True)
    assert max_json_bytes({"type": "string", "maxLength": 5}) == 2 + 5 * 4  # any character, up to 4 bytes
    assert generation_budget(bounded, 20, False) == 20  # free sampling: the cap
    with pytest.raises(ConfigError, match="below the 42 tokens"):
        generation_budget(bounded, 41, True)
    with pytest.raises(ConfigError, match="unbounded"):
        generation_budget(json_object({"a": {"type": "string"}}), 500, True)


def test_a_run_whose_budget_cannot_hold_a_generation_stops_at_start(tmp_path):
    """``generation.max_new_tokens`` below what the benchmark's schema needs fails when the run starts, before
    any model loads or any task is written, and names the key and the need."""
    from genenv.trainer.cli import compose_config
    from genenv.trainer.generation import run_generation_budget
    from genenv.trainer.settings import ConfigError, run_settings

    from genenv.trainer.loop import CoEvolutionTrainer

    small = ["benchmark=bfcl", "generation.max_new_tokens=384", f"run_dir={tmp_path}/run",
             f"agent.policy.model={tmp_path}/no-model", f"env_policy.policy.model={tmp_path}/no-model"]
    with pytest.raises(ConfigError, match=r"generation.max_new_tokens=384 is below the \d+ tokens"):
        CoEvolutionTrainer(compose_config(small))  # before any model loads (there is none to load)
    settings = run_settings(compose_config(small))
    with pytest.raises(ConfigError, match=r"generation.max_new_tokens=384 is below the \d+ tokens"):
        run_generation_budget(settings)
    derived = run_settings(compose_config(["benchmark=bfcl"]))
    assert derived.generation.max_new_tokens is None and run_generation_budget(derived) > 384
    free = run_settings(compose_config(["benchmark=bfcl", "generation.max_new_tokens=384",
                                        "generation.constrained=false"]))
    assert run_generation_budget(free) == 384


PLANTED = {  # (benchmark, a demonstration's field path to the request text, the text put there)
    "bfcl": ("question", "Please call the function for me."),
    "api_bank": ("dialogue", ["User: Please do it for me.", "AI: Sure."]),
    "bfcl_multi_turn": ("question", "Please handle it."),
    "api_bank_plan": ("requirement", "Please handle it."),
}


@pytest.mark.parametrize("name", ["bfcl", "api_bank", "bfcl_multi_turn", "api_bank_plan"])
def test_grounded_validators_reject_planted_ungrounded_tasks(name):
    """Each demonstration with its request replaced by one that states nothing: the same gold calls (they still
    type-check and execute) are rejected as ``ungrounded_value``, and admitted with ``grounded`` off."""
    spec, tasks = _seeds(name)
    format_only = get_benchmark(name, DATA_DIR, grounded=False)
    assert spec.grounded and not format_only.grounded
    with pytest.raises(AttributeError):  # a shared spec is never changed from outside
        spec.grounded = False
    field, vague = PLANTED[name]
    checked = 0
    for seed in [t for t in tasks if spec.demonstrable(t)][:15]:
        demo = {**spec.as_generation(seed), field: vague}
        if "calls" in demo:  # the first call: later ones may take their values from earlier results
            demo["calls"] = demo["calls"][:1]
        out = spec.parse_generated(json.dumps(demo), "g", 0, seed)
        if not isinstance(out, Rejection):
            continue  # a call whose values need no statement (none, or only 0 / 1 / booleans)
        assert out.reason == "ungrounded_value", (seed.id, out)
        checked += 1
        assert isinstance(format_only.parse_generated(json.dumps(demo), "g", 0, seed), Task), seed.id
    assert checked >= 5, checked


def test_grounded_response_task_needs_its_request_arguments_in_the_dialogue():
    spec, tasks = _seeds("api_bank_response")
    seed = next(t for t in tasks if spec.demonstrable(t) and "(" in spec.as_generation(t)["dialogue"][-1]
                and "='" in spec.as_generation(t)["dialogue"][-1])
    demo = spec.as_generation(seed)
    request = demo["dialogue"][-1]
    planted = {**demo, "dialogue": ["User: Please do it.", "AI: Sure.", request]}
    assert spec.parse_generated(json.dumps(planted), "g", 0, seed).reason == "ungrounded_value"
    assert isinstance(spec.parse_generated(json.dumps(demo), "g", 0, seed), Task)


def test_bfcl_grounding_rules_on_planted_values():
    spec = get_benchmark("bfcl", DATA_DIR)
    fn = {"name": "book_table", "description": "Book a table.", "parameters": {"type": "dict", "properties": {
        "city": {"type": "string", "description": "City."},
        "people": {"type": "integer", "description": "Guests."},
        "time": {"type": "string", "description": "HH:MM."},
        "area": {"type": "string", "description": "Area.", "enum": ["indoor", "outdoor"]}},
        "required": ["city", "people", "time"]}}

    def verdict(question, args):
        out = spec.parse_generated(json.dumps({"function": fn, "question": question,
                                               "answer": {"name": "book_table", "arguments": args}}), "g", 0, None)
        return out.reason if isinstance(out, Rejection) else "admitted"

    base = {"city": "Los Angeles", "people": 6, "time": "19:30"}
    assert verdict("Book a table in Los Angeles for six people at 7:30 pm.", base) == "admitted"
    assert verdict("Book a table for six people at 7:30 pm.", base) == "ungrounded_value"      # city unstated
    assert verdict("Book a table in Los Angeles at 7:30 pm.", base) == "ungrounded_value"      # 6 unstated
    assert verdict("Book a table in Los Angeles for 6 at 7:30 pm.", {**base, "area": "outdoor"}) == "admitted"  # enum
    assert verdict("Book a table in Los Angeles for 6.", {"city": "Los Angeles", "people": 6}) == "gold_fails_checker"


def test_bamboogle_offline_rules_reject_the_issue_example_and_admit_every_question():
    spec, _ = _seeds("bamboogle")
    every = spec.load(split="test")
    assert len(every) == 125 and all(isinstance(spec.parse_generated(json.dumps(spec.as_generation(t)), "g", 0, t),
                                                Task) for t in every)
    # 5 questions hold a '"' (3) or a non-ASCII character (Temür, curly quotes), which a bounded string cannot write
    assert sum(spec.demonstrable(t) for t in every) == 120
    for question, answer, reason in [
            ("How many people does the person who invented the blender have?", "A mix of people", "answer_not_entity"),
            ("How many moons does the planet named after the god of war have?", "Some moons", "answer_type_mismatch"),
            ("Who invented the telephone?", "It was Alexander Graham Bell.", "answer_is_sentence"),
            ("When was the founder of Microsoft born?", "a long time ago", "answer_not_entity"),
            ("When was the founder of Microsoft born?", "in his youth", "answer_type_mismatch"),
            ("How many people live in the largest city of New York state?", "{5}", "answer_not_entity"),
            ("Is the capital of France in Europe?", "Paris", "answer_type_mismatch"),
            ("Who founded the company that makes the Windows operating system", "Bill Gates", "not_a_question"),
            ("Who was the father of the founder of Microsoft Windows?", "Microsoft Windows", "answer_in_question")]:
        out = spec.parse_generated(json.dumps({"question": question, "answer": answer}), "g", 0, None)
        assert getattr(out, "reason", "admitted") == reason, (question, answer, out)


# ----- EnvGen mode -----
def test_envgen_targets_the_weakest_measured_skills():
    from genenv.trainer.generation import skill_feedback, weakest_skills

    rates = {"math": (0.1, 4), "physics": (0.6, 3), "finance": (float("nan"), 0), "travel": (0.0, 2)}
    assert weakest_skills(rates, 3, random.Random(0)) == ["travel", "math", "physics"]
    text = skill_feedback(rates, "travel")
    assert "travel 0% (2 tasks), math 10% (4 tasks), physics 60% (3 tasks)" in text and "finance" not in text
    assert sorted(weakest_skills({"a": (math.nan, 0), "b": (math.nan, 0)}, 2, random.Random(0))) == ["a", "b"]


def test_envgen_calls_the_frozen_llm_only_every_k_iterations(tmp_path, tiny_model_dir):
    from genenv.trainer.cli import compose_config
    from genenv.trainer.loop import CoEvolutionTrainer

    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=bamboogle", "iterations=3", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}",
                          "arm=envgen", "generation.every=2", "generation.prompts_per_iteration=1",
                          "generation.generations_per_prompt=2", "agent.batch_tasks=3", "agent.n=2",
                          "agent.max_new_tokens=6"])
    trainer = CoEvolutionTrainer(cfg)
    calls = []
    env_policy = trainer.backend.policy("env_policy")
    original = env_policy.generate

    def counting(prompts, **kw):
        calls.append((trainer.iteration, len(prompts)))
        return original(prompts, **kw)

    env_policy.generate = counting
    rows = trainer.run()
    assert calls == [(0, 2), (2, 2)]  # iterations 0 and 2, prompts_per_iteration * every prompts each
    assert [r["gen/generated"] for r in rows] == [4, 0, 4]
    assert all(r["weights/env_policy_delta"] == 0.0 for r in rows)  # frozen
    lines = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    assert {row["iteration"] for row in lines} == {0, 2}
    late = [row["feedback"] for row in lines if row["iteration"] == 2]
    assert all(f["target_skill"] in f["skill_success"] for f in late)
    measured = [s for f in late for s, (rate, n) in f["skill_success"].items() if n > 0]
    assert measured  # by iteration 2 the agent's rollouts on seed tasks give per-skill success rates
    seeds_rolled = Counter(i for e in trainer.pool.entries.values() if e.task.origin == "seed"
                           for i, _ in e.p_hat_history)
    assert all(seeds_rolled[i] >= 2 for i in range(3))  # every batch mixes in original tasks (half of 3, rounded up)
    new = [dataclasses.replace(t, id=f"gen-{t.id}", origin="generated")
           for t in trainer.pool.sample(5, random.Random(0), origin="seed")]
    batch = trainer.agent_batch.select(trainer, new)
    assert batch[:5] == new and [t.origin for t in batch[5:]] == ["seed", "seed"]  # every new task, plus seeds
