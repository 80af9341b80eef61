"""The conformance suite: every registered benchmark, parametrised over the registry, so a new env is tested
without editing this file (``docs/adding-an-env.md``).

For each env: Gymnasium's ``check_env`` (raw and wrapped); the reset/step contract and determinism under a seed;
the gold policy wins a sample of real tasks of the default split and malformed actions (fuzzed) score 0 with
``info["error"]`` and never raise, under both readings of model text (``parsing``); Task JSON and veRL-parquet
round trips; the spec rejects garbage generations with a reason from its vocabulary and admits a valid generation
whose gold the env accepts; the veRL agent-loop adapter plays gold episodes with a scripted generate client;
metrics are labelled and the config composes.
"""
from __future__ import annotations

import functools
import json
import random
import string
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from verl.workers.rollout.replica import TokenOutput

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.envs import ENVS, InvalidAction, Task, TextActionWrapper
from genenv.envs.parsing import PARSING_MODES
from genenv.envs.verl_rows import read_verl_parquet, to_verl_row, write_verl_parquet
from genenv.runtime.policies import GoldPolicy
from genenv.runtime.episodes import RolloutSpec, play_episodes

from conftest import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]

BENCHMARKS = sorted(ENVS)
SAMPLE = 4  # tasks per benchmark, the first of its default split (split_options[0])
FUZZ_CASES = 120


def sample_tasks(name: str, k: int = SAMPLE) -> list[Task]:
    """The first ``k`` tasks of the env's first split with distinct prompts (scripted clients key on the prompt;
    ALFWorld's full data holds several trials of one goal)."""
    entry = ENVS[name]
    tasks = entry.env_class.load_tasks(data_dir=DATA_DIR, **entry.split_options[0])
    first: dict[str, Task] = {}
    for t in tasks:
        first.setdefault(t.prompt, t)
    return list(first.values())[:k]


def make_env(name: str, tasks: list[Task], **kwargs: Any):
    return gym.make(ENVS[name].env_id, tasks=tasks, data_dir=DATA_DIR, **kwargs)


def on_data(name: str) -> dict[str, dict[str, Any]]:
    """Env options that point the env at the tests' data directory."""
    return {name: {"data_dir": DATA_DIR}}


def malformed_actions(seed: int = 0) -> list[Any]:
    """Model outputs with no usable action in any env: empty, whitespace, punctuation and control-character
    noise, unclosed brackets, an unclosed think block, oversized text, and non-string objects. (Words are an
    answer to a free-text env, so env-specific malformed text lives in the env's own tests.)"""
    rng = random.Random(seed)
    junk = string.punctuation + " \t\n"
    cases: list[Any] = ["", "   ", "\n\n\t", "[" * 5000, "{" * 3000, "[{(<",
                        "x" * 30_000, "<think>only thinking", "```\n```", "\x00\x01\x02", None, 42, b"bytes",
                        ["list"], {"dict": 1}, 3.5]
    while len(cases) < FUZZ_CASES:
        n = rng.randint(1, 60)
        if rng.random() < 0.5:
            cases.append("".join(rng.choice(junk) for _ in range(n)))
        else:
            cases.append("".join(chr(rng.randint(0, 31)) for _ in range(n)))
    return cases


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    from genenv.runtime.models import prepare_tokenizer
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    prepare_tokenizer(tok)
    return tok


@pytest.mark.parametrize("name", BENCHMARKS)
def test_registered_everywhere(name):
    entry = ENVS[name]
    assert entry.env_id in gym.registry and entry.env_class.benchmark == name
    spec = get_benchmark(name)
    assert spec.env_class is entry.env_class
    from genenv.trainer.cli import compose_config

    cfg = compose_config([f"benchmark={name}"])
    assert cfg.benchmark.name == name
    env = gym.make(entry.env_id, data_dir=DATA_DIR, **entry.split_options[0])  # the constructor loads real tasks
    obs, info = env.reset(seed=0)
    assert isinstance(obs, str) and obs and info["messages"][-1]["content"] == obs


def benchmark_package(name: str) -> str:
    """The package that holds benchmark ``name``'s env: its folder ``genenv.benchmarks.<folder>`` for a benchmark of
    this project, the top-level package of one installed from elsewhere."""
    parts = ENVS[name].entry_point.split(":", 1)[0].split(".")
    return ".".join(parts[:3]) if parts[:2] == ["genenv", "benchmarks"] else parts[0]


@functools.cache
def import_graph():
    """grimp's import graph of this project's packages (import-linter's ``root_packages``) and of every benchmark
    package installed from elsewhere."""
    import grimp

    roots = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
    outside = sorted({p for p in map(benchmark_package, BENCHMARKS) if not p.startswith("genenv.")})
    return grimp.build_graph(*roots, *outside)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_benchmark_imports_only_the_framework(name):
    """A benchmark's package imports the env framework, the rewards and the shared benchmark modules, never the
    runtime, the trainer, the leaderboard or another benchmark's package, directly or through others (the import
    contracts of ``pyproject.toml`` say the same of this project's folders; this covers a package from
    elsewhere too)."""
    graph = import_graph()
    own = benchmark_package(name)
    forbidden = {"genenv.runtime", "genenv.trainer", "genenv.eval"} | {benchmark_package(n) for n in BENCHMARKS}
    chains = {f: graph.find_shortest_chain(own, f, as_packages=True) for f in sorted(forbidden - {own})}
    assert not {f: c for f, c in chains.items() if c}, f"{own} imports what a benchmark may not"


@pytest.mark.parametrize("name", BENCHMARKS)
def test_check_env_raw_and_wrapped(name):
    env = make_env(name, sample_tasks(name), render_mode="ansi")
    check_env(env.unwrapped)
    check_env(TextActionWrapper(env.unwrapped), skip_render_check=True)


def test_unicode_text_space_is_gymnasium_s_text_with_any_characters():
    """`UnicodeText` (its charset tables shared, not rebuilt) equals gymnasium's ``Text`` over the sampling
    charset, samples strings within its bounds reproducibly under a seed, contains any ``str`` within the bounds,
    and refuses bad bounds."""
    from gymnasium import spaces

    from genenv.envs.spaces import _SAMPLE_CHARSET, UnicodeText

    space = UnicodeText(12, 3, seed=7)
    assert space == spaces.Text(12, min_length=3, charset=_SAMPLE_CHARSET)
    samples = [space.sample() for _ in range(50)]
    assert all(3 <= len(x) <= 12 and set(x) <= set(_SAMPLE_CHARSET) for x in samples)
    again = UnicodeText(12, 3, seed=7)
    assert [again.sample() for _ in range(50)] == samples
    assert space.contains("héllo ✓") and not space.contains("ab") and not space.contains(b"hello")
    with pytest.raises(ValueError):
        UnicodeText(2, 5)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_reset_and_step_contract_deterministic_under_seed(name):
    tasks = sample_tasks(name)
    cls = ENVS[name].env_class

    def play(seed: int):
        env = TextActionWrapper(make_env(name, tasks).unwrapped)
        ids, outcomes = [], []
        for _ in range(3):
            obs, info = env.reset(seed=seed) if not ids else env.reset()
            assert isinstance(obs, str) and {"task_id", "messages"} <= set(info)
            ids.append(info["task_id"])
            out = env.step(cls.gold_text(env.unwrapped.task, 0))
            assert len(out) == 5 and isinstance(out[0], str) and 0.0 <= out[1] <= 1.0
            assert isinstance(out[2], bool) and isinstance(out[3], bool) and "error" in out[4]
            outcomes.append(out[:4])
        return ids, outcomes

    assert play(11) == play(11)
    env = make_env(name, tasks).unwrapped
    assert env.reset(options={"task_id": tasks[-1].id})[1]["task_id"] == tasks[-1].id
    with pytest.raises(ValueError):
        env.reset(options={"task_id": "no-such-task"})
    with pytest.raises(RuntimeError):
        make_env(name, tasks).unwrapped.step("anything")  # step before reset


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.parametrize("parsing", PARSING_MODES)
def test_gold_policy_wins_sample_tasks(name, parsing):
    tasks = sample_tasks(name)
    trajs = play_episodes(tasks, GoldPolicy(),
                          RolloutSpec(env_kwargs={name: {"data_dir": DATA_DIR, "parsing": parsing}})).trajectories
    assert [t.reward for t in trajs] == [1.0] * len(tasks), [t.info.get("error") for t in trajs]
    assert all(t.success and not t.info["error"] for t in trajs)
    cls = ENVS[name].env_class
    if cls.multi_step:
        assert [t.info["turns"] for t in trajs] == [len(cls.gold_action(t)) for t in tasks]


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.parametrize("parsing", PARSING_MODES)
def test_malformed_actions_score_zero_with_error(name, parsing):
    tasks = sample_tasks(name, 2)
    env = TextActionWrapper(make_env(name, tasks, parsing=parsing).unwrapped)
    for i, action in enumerate(malformed_actions()):
        env.reset(options={"task_index": i % len(tasks)})
        obs, reward, terminated, truncated, info = env.step(action)
        assert reward == 0.0 and info["success"] is False, (action, info)
        assert info["error"], (action, info)
        assert isinstance(obs, str)
    raw = make_env(name, tasks).unwrapped  # the raw env takes InvalidAction and wrongly-typed actions too
    for action in (InvalidAction("unparseable"), object(), b"\x00bytes"):  # (a number is an action of some envs)
        raw.reset(options={"task_index": 0})
        _, reward, _, _, info = raw.step(action)
        assert reward == 0.0 and info["error"]


@pytest.mark.parametrize("name", BENCHMARKS)
def test_task_json_and_verl_parquet_round_trip(name, tmp_path):
    tasks = sample_tasks(name)
    for t in tasks:
        assert Task.from_json(t.to_json()) == t
    row = to_verl_row(tasks[0])
    assert row["data_source"] == f"genenv/{name}" and row["prompt"] == ENVS[name].env_class.render_messages(tasks[0])
    assert row["ability"] == (ENVS[name].env_class.ability or name)  # the env's label, else its name
    assert json.loads(row["reward_model"]["ground_truth"]) == tasks[0].gold
    write_verl_parquet(tasks, tmp_path / "train.parquet")
    assert read_verl_parquet(tmp_path / "train.parquet") == tasks


GARBAGE_GENERATIONS = ["", "no json here", "[1, 2, 3]", '{"unfinished": ', "{}", '{"x": 1}', "null",
                       '{"question": 7, "game": [], "function": "nope", "seed": "x"}']


@pytest.mark.parametrize("name", BENCHMARKS)
def test_generation_rejects_garbage_and_admits_a_valid_task(name):
    spec = get_benchmark(name, DATA_DIR)
    for text in GARBAGE_GENERATIONS:
        out = spec.parse_generated(text, "gen-0-0-0", 0, None)
        assert isinstance(out, Rejection) and out.reason in spec.all_rejection_reasons, (text, out)
    seeds = [t for t in spec.load(split="train", **spec.seed_options) if spec.demonstrable(t)]
    seed = seeds[0]
    text = "Here it is: " + json.dumps(spec.as_generation(seed)) + " }"  # stray text around the object
    task = spec.parse_generated(text, "gen-0-0-1", 0, seed)
    assert isinstance(task, Task), task
    assert task.origin == "generated" and task.parent_id == seed.id and task.benchmark == name
    assert isinstance(spec.near_duplicate(task, seeds[:5]), Rejection)  # it restates a pool task
    other = next(s for s in seeds[1:] if spec.near_duplicate(s, [seed]) is None)  # data may hold variants
    assert spec.near_duplicate(task, [other]) is None
    traj = play_episodes([task], GoldPolicy(),
                         RolloutSpec(env_kwargs=on_data(name))).trajectories[0]  # solvable by its own gold
    assert traj.reward == 1.0 and traj.success
    msgs = spec.generation_messages(seeds[:2], p_hat=0.25, alpha=0.5)
    assert msgs[0]["role"] == "system" and "25%" in msgs[-1]["content"] and "50%" in msgs[-1]["content"]


class ScriptedClient:
    """veRL's ``server_manager.generate`` answering each episode from a script keyed by the task's prompt, or by
    a tuple of texts that must all be in the conversation (the longest matching key wins)."""

    def __init__(self, tokenizer, scripts: dict[str | tuple[str, ...], list[str]]):
        self.tok, self.scripts = tokenizer, {k: list(v) for k, v in scripts.items()}

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_: Any) -> TokenOutput:
        text = self.tok.decode(prompt_ids)
        parts = {k: (k,) if isinstance(k, str) else k for k in self.scripts}
        key = max((k for k in self.scripts if all(p in text for p in parts[k])),
                  key=lambda k: sum(map(len, parts[k])))
        return TokenOutput(token_ids=self.tok.encode(self.scripts[key].pop(0), add_special_tokens=False) + [2])


@pytest.mark.parametrize("name", BENCHMARKS)
def test_agent_loop_plays_gold_episodes(name, tokenizer):
    from genenv.trainer.engines.verl_ray.agent_loop import rollout_agent_loop

    tasks = sample_tasks(name, 2)
    assert len({t.prompt for t in tasks}) == len(tasks)
    cls = ENVS[name].env_class
    turns = {t.prompt: len(cls.gold_action(t)) if cls.multi_step else 1 for t in tasks}
    client = ScriptedClient(tokenizer, {p: [cls.gold_text(t, k) for k in range(turns[p])]
                                        for p, t in ((t.prompt, t) for t in tasks)})

    policy = SimpleNamespace(tokenizer=tokenizer)  # with a scripted client, the agent loop needs only this
    trajs = rollout_agent_loop(tasks, policy, n=1, server_manager=client, response_length=16384,
                               max_new_tokens=4096, env_kwargs=on_data(name))  # gold plans are long turns
    assert [t.reward for t in trajs] == [1.0] * len(tasks) and all(t.success for t in trajs)
    for t in trajs:
        segments = t.segments()
        if cls.prompt_window is None:  # the conversation grew append-only: one packed sequence
            (seg,) = segments
            mask = seg.response_mask
            assert len(mask) == len(seg.response_ids) and mask[0] == 1 and mask[-1] == 1
            assert (0 in mask) == (turns[t.task.prompt] > 1)  # env tokens only between turns
        else:  # a windowed prompt rewrites history: one sequence per turn, every token the policy's
            assert len(segments) == turns[t.task.prompt] and all(set(s.response_mask) == {1} for s in segments)
    assert all(not script for script in client.scripts.values())  # every scripted turn was played


@pytest.mark.parametrize("name", BENCHMARKS)
def test_metrics_are_labelled_by_protocol(name):
    spec = get_benchmark(name, DATA_DIR)
    entry = ENVS[name]
    units = spec.eval_units(dict(entry.split_options[0]))
    assert units and all(isinstance(label, str) and label for label, _ in units)
    trajs = play_episodes(sample_tasks(name), GoldPolicy(), RolloutSpec(env_kwargs=on_data(name))).trajectories
    metrics = spec.summarize(units[0][0], trajs)
    assert metrics and all(m.protocol and 0.0 <= m.value <= 1.0 and 0 < m.n <= len(trajs) for m in metrics)
    assert any(m.n == len(trajs) for m in metrics)  # breakdowns (e.g. per task type) cover fewer
    head = spec.headline(metrics)
    assert head is not None and head.protocol and head.value == 1.0
