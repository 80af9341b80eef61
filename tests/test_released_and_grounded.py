"""The ``genenv_released`` and ``grounded`` task sources on real Bamboogle seed tasks: the released loop's scoring,
quantile filter, rewrite prompts and merge; the grounded reward's probe set, common random numbers and trial
updates, and the local engine undoing a trial update exactly."""
from __future__ import annotations

import dataclasses
import random
from collections import Counter
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch

from genenv.benchmarks.registry import get_benchmark
from genenv.runtime.episodes import Segment
from genenv.runtime.policies import Generation
from genenv.trainer.cli import compose_config
from genenv.trainer.settings import ConfigError, run_settings
from genenv.trainer.strategies import build_task_source
from genenv.trainer.strategies.released import (SCORING_EPISODES, SIMILAR_TASK_REQUEST, quantile_filter,
                                                scored_task_count)
from genenv.trainer.task_pool import TaskPool
from genenv.trainer.updates import Sample


def _settings(*overrides: str):
    return run_settings(compose_config(["benchmark=bamboogle", "run_dir=/tmp/unused", *overrides]))


@pytest.fixture(scope="module")
def bamboogle():
    spec = get_benchmark("bamboogle", None)
    return spec, spec.load(split="train")


class RecordingPolicy:
    """An environment policy that writes a text that is not JSON (rejected ``no_json``) and keeps its prompts."""

    def __init__(self):
        self.calls = []

    def generate(self, prompts, n, temperature, max_new_tokens):
        self.calls.append((prompts, n))
        return [[Generation("no json here", [1], [2]) for _ in range(n)] for _ in prompts]


def test_quantile_filter_is_the_released_one():
    tasks = list("abcdefghij")
    scores = [0.5, 0.0, 1.0, 0.5, 0.25, 0.0, 0.75, 1.0, 0.5, 0.25]
    kept, low, high = quantile_filter(tasks, scores)
    # stable sort: of the two 0.0 scores the first drawn ("b") is lowest; of the two 1.0 the last drawn ("h") is top
    assert low == ["b"] and high == ["h"] and kept == [t for t in tasks if t not in "bh"]
    assert quantile_filter(tasks[:9], scores[:9])[0] == tasks[:9]  # ⌊9 × 0.1⌋ = 0: nothing dropped
    kept20, low20, high20 = quantile_filter(list(range(20)), [float(i) for i in range(20)])
    assert low20 == [0, 1] and high20 == [18, 19] and len(kept20) == 16
    assert [scored_task_count(b) for b in (1, 2, 8, 16)] == [2, 3, 10, 20]
    with pytest.raises(ValueError):
        quantile_filter(tasks, scores[:3])


def test_released_source_scores_filters_rewrites_and_replaces(bamboogle):
    """One round on the real seed pool: 10 tasks drawn and played 4 times each; the lowest- and highest-scoring are
    not rewritten; each of the 8 prompts demonstrates one survivor with the similar-task request and is sampled once;
    the previous round's written task leaves the pool."""
    spec, seeds = bamboogle
    st = _settings("task_source=genenv_released", "generation.prompts_per_iteration=2",
                   "generation.generations_per_prompt=4")
    old = dataclasses.replace(seeds[0], id="gen-0-0-0", origin="generated", admitted_iteration=0)
    pool = TaskPool(seeds[1:30] + [old])
    score = {t.id: (i % 7) / 6 for i, t in enumerate(pool.tasks)}
    played = []

    def rollout(tasks, n):
        played.append((list(tasks), n))
        return SimpleNamespace(trajectories=[SimpleNamespace(task=t, reward=score[t.id]) for t in tasks for _ in range(n)])

    policy = RecordingPolicy()
    loop = SimpleNamespace(settings=st, spec=spec, pool=pool, rng=random.Random(0), counters=Counter(),
                           backend=SimpleNamespace(policy=lambda role: policy), rollout=rollout)
    source = build_task_source(st)
    assert not source.learns
    records, rejected = source.write(loop, 3)
    (drawn, n), = played
    assert len(drawn) == 10 and n == SCORING_EPISODES
    ranked = sorted(drawn, key=lambda t: score[t.id])
    (prompts, n_gen), = policy.calls
    assert n_gen == 1 and len(prompts) == 8 and len(records) == 8 and rejected == Counter({"no_json": 8})
    shown = []
    for p in prompts:
        demos = [m["content"] for m in p.messages if m["role"] == "assistant"]
        assert len(demos) == 1 and SIMILAR_TASK_REQUEST in p.messages[-1]["content"]
        shown.append(next(t for t in drawn if spec.as_generation(t)["question"] in demos[0]))
    assert ranked[0] not in shown and ranked[-1] not in shown and len({t.id for t in shown}) == 8
    assert "gen-0-0-0" not in pool and len(pool) == 29
    assert loop.counters["released/scored"] == 10 and loop.counters["released/dropped"] == 2
    assert loop.counters["released/retired"] == 1 and loop.counters["released/scoring_episodes"] == 40
    assert all(r.feedback["released_score"] == score[r.parent.id] for r in records)


class TrialBackend:
    """A stand-in engine: training on a task adds that task's planted ``gain`` to every probe reward; ``trial``
    undoes it (as the local engine does)."""

    def __init__(self, gains):
        self.gains, self.state, self.updates = gains, 0.0, []

    @contextmanager
    def trial(self, role):
        saved = self.state
        try:
            yield
        finally:
            self.state = saved

    def update(self, role, samples, estimator):
        self.updates.append({s.uid for s in samples})
        self.state += sum(self.gains[uid] for uid in {s.uid for s in samples})
        return {}


def test_grounded_source_rewards_the_probe_change_of_a_trial_update(bamboogle):
    spec, seeds = bamboogle
    st = _settings("task_source=grounded", "probe.tasks=5", "probe.n=3")
    source = build_task_source(st)
    assert source.learns
    written = [dataclasses.replace(seeds[i], id=f"gen-0-{i}-0", origin="generated") for i in range(3)]
    backend = TrialBackend({written[0].id: 0.2, written[1].id: -0.1, written[2].id: 0.5})
    draws = []

    def rollout(tasks, n):
        noise = torch.rand(len(tasks) * n)  # the sampler's random numbers
        draws.append(noise)
        return SimpleNamespace(trajectories=[SimpleNamespace(task=t, reward=float(0.3 + backend.state + 0.01 * noise[i]))
                                             for i, t in enumerate(tasks * n)])

    pool = TaskPool(seeds)
    loop = SimpleNamespace(settings=st, spec=spec, pool=pool, counters=Counter(), backend=backend, rollout=rollout,
                           iteration=2)
    source.prepare(loop)
    probe = source.probe_set(loop)
    assert len(probe) == 5 and all(t.id not in pool for t in probe) and len(pool) == len(seeds) - 5
    assert [t.id for t in build_task_source(st).probe_set(loop)] == [t.id for t in probe]  # a resumed run: same set

    def episodes(task, rewards):
        return [SimpleNamespace(task=task, reward=r, sample_index=k,
                                segments=lambda: [Segment(prompt_ids=[1], response_ids=[2], response_mask=[1])])
                for k, r in enumerate(rewards)]

    records = [SimpleNamespace(task=written[0]), SimpleNamespace(task=None), SimpleNamespace(task=written[1]),
               SimpleNamespace(task=written[2])]
    rolled = SimpleNamespace(trajectories=episodes(written[0], [1.0, 0.0]) + episodes(written[1], [0.0, 1.0])
                             + episodes(written[2], [1.0, 1.0]))  # written[2]: one reward, no advantage
    before = torch.get_rng_state()
    scored = source.score(loop, records, rolled, {})
    assert torch.equal(torch.get_rng_state(), before)  # the probe's seeding does not move the run's random state
    assert [s.r_env for s in scored] == pytest.approx([0.2, 0.0, -0.1, 0.0])
    assert [s.in_band for s in scored] == [True, False, False, False]
    assert backend.updates == [{written[0].id}, {written[1].id}] and backend.state == 0.0
    assert len(draws) == 3 and all(torch.equal(d, draws[0]) for d in draws)  # common random numbers
    assert loop.counters["probe/trials"] == 2 and loop.counters["probe/episodes"] == 45


def test_grounded_source_refuses_an_engine_without_trials_and_a_probe_set_too_large(bamboogle):
    spec, seeds = bamboogle
    loop = SimpleNamespace(settings=None, spec=spec, pool=TaskPool(seeds), counters=Counter(),
                           backend=SimpleNamespace(update=None))
    with pytest.raises(ConfigError, match="trial updates"):
        build_task_source(_settings("task_source=grounded")).prepare(loop)
    loop.backend = TrialBackend({})
    with pytest.raises(ConfigError, match="probe.tasks"):
        build_task_source(_settings("task_source=grounded", f"probe.tasks={len(seeds)}")).prepare(loop)
    with pytest.raises(ConfigError, match="probe.n"):
        _settings("task_source=grounded", "probe.n=0")


def test_local_engine_trial_undoes_an_update_exactly(tiny_model_dir):
    """Inside ``trial`` an update changes the agent's weights; on exit its weights, AdamW state and update count
    are those before, and a later real update gives the same weights as one made without the trial."""
    from genenv.trainer.engines.local import build_local_backend

    st = _settings(f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}", "threads=1")
    samples = [Sample([1, 2, 3], [4, 5, 6], r, "task-a") for r in (1.0, 0.0, 1.0, 0.0)]

    def trained(with_trial: bool):
        torch.manual_seed(0)
        backend = build_local_backend(st)
        backend.update("agent", samples, "grpo")  # an optimiser with state before the trial
        before = backend.fingerprint("agent")
        moments = {k: v.clone() for k, v in backend.optimizers["agent"].state_dict()["state"][0].items()}
        if with_trial:
            with backend.trial("agent"):
                backend.update("agent", samples, "grpo")
                assert backend.fingerprint("agent") != before and backend.steps["agent"] == 2
            assert backend.fingerprint("agent") == before and backend.steps["agent"] == 1
            after = backend.optimizers["agent"].state_dict()["state"][0]
            assert all(torch.equal(after[k], v) for k, v in moments.items())
        backend.update("agent", samples, "grpo")
        return backend.fingerprint("agent")

    assert trained(True) == trained(False)


@pytest.mark.parametrize("source", ["genenv_released", "grounded"])
def test_a_run_of_the_new_sources_resumes_from_its_checkpoint(tmp_path, tiny_model_dir, source):
    """A run stopped after iteration 0 resumes with its pool and counters: the released loop's pool keeps the seed
    tasks and at most its latest rewrites; the grounded run's probe set stays out of the pool after the resume."""
    from genenv.trainer.loop import CoEvolutionTrainer

    common = [f"run_dir={tmp_path / 'run'}", "benchmark=bamboogle", "tensorboard=false", "threads=1",
              f"task_source={source}", f"agent.policy.model={tiny_model_dir}",
              f"env_policy.policy.model={tiny_model_dir}", "generation.prompts_per_iteration=1",
              "generation.generations_per_prompt=2", "agent.batch_tasks=2", "agent.n=2", "agent.max_new_tokens=6",
              "probe.tasks=3", "probe.n=1"]
    first = CoEvolutionTrainer(compose_config([*common, "iterations=1"]))
    first.run()
    saved_pool, saved_counters = [t.id for t in first.pool.tasks], dict(first.counters)
    second = CoEvolutionTrainer(compose_config([*common, "iterations=2"]))
    rows = second.run()
    assert [r["iteration"] for r in rows] == [1]
    assert all(second.counters[k] >= v for k, v in saved_counters.items())
    seeds = [t for t in second.pool.tasks if t.origin == "seed"]
    if source == "genenv_released":
        assert second.counters["released/scored"] == 2 * saved_counters["released/scored"]
        assert {t.admitted_iteration for t in second.pool.tasks if t.origin == "generated"} <= {1}
        assert len(seeds) == len([i for i in saved_pool if not i.startswith("gen-")])
    else:
        probe = {t.id for t in second.task_source.probe_set(second)}
        assert len(probe) == 3 and not probe & {t.id for t in second.pool.tasks}
        assert second.counters["probe/tasks"] == 3
