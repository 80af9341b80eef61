"""Lazy registration by entry-point string and plugin loading: importing the framework imports no benchmark, a
new benchmark (even from another package) needs no edit to the registries, a broken plugin is recorded, not fatal.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import metadata

import gymnasium as gym
import pytest

from genenv.benchmarks.registry import BENCHMARKS, get_benchmark, register_benchmark
from genenv.envs.registry import ENVS, env_entry, load_plugins, register_env

BUILTIN = {"alfworld", "api_bank", "api_bank_plan", "api_bank_response", "bamboogle", "bfcl", "bfcl_multi_turn",
           "travelplanner", "travelplanner_two_stage", "twx"}


def _fresh_python(code: str) -> dict:
    """Run ``code`` in a new interpreter; it prints one JSON object."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_framework_imports_no_benchmark():
    seen = _fresh_python("""
        import json, sys
        import genenv.envs
        from genenv.envs import ENVS
        mods = sorted(sys.modules)
        print(json.dumps({"envs": sorted(ENVS), "entry": ENVS["bfcl"].entry_point,
                          "benchmark_modules": [m for m in mods if m.startswith("genenv.benchmarks.") and
                                                m.count(".") > 2],
                          "heavy": [m for m in ("pandas", "torch", "verl", "textworld", "bfcl_eval") if m in mods]}))
    """)
    assert set(seen["envs"]) == BUILTIN
    assert seen["entry"] == "genenv.benchmarks.bfcl.env:BFCLEnv"
    assert seen["benchmark_modules"] == [] and seen["heavy"] == []


def test_gymnasium_make_imports_only_the_benchmark_asked_for():
    seen = _fresh_python("""
        import json, sys
        import gymnasium as gym
        import genenv.envs
        env = gym.make("genenv/Bamboogle-v0")
        print(json.dumps({"task": env.reset(seed=0)[1]["task_id"],
                          "modules": sorted(m for m in sys.modules if m.startswith("genenv.benchmarks."))}))
    """)
    assert seen["task"].startswith("bamboogle_")
    loaded = {m.split(".")[2] for m in seen["modules"] if m.count(".") > 2}
    assert loaded == {"bamboogle"}, seen["modules"]


@pytest.mark.parametrize("first", ["genenv.benchmarks.registry", "genenv.benchmarks.bamboogle.spec",
                                   "genenv.benchmarks.bfcl.env", "genenv.trainer.loop"])
def test_any_import_order_registers_every_benchmark(first):
    """Benchmark folders register while the framework loads its plugins: no import order may hit a partly
    initialised registry."""
    seen = _fresh_python(f"""
        import json
        import {first}
        from genenv.benchmarks.registry import get_benchmark
        from genenv.envs.registry import ENVS, PLUGIN_ERRORS
        print(json.dumps({{"specs": sorted(n for n in ENVS if get_benchmark(n).name == n), "errors": PLUGIN_ERRORS}}))
    """)
    assert set(seen["specs"]) == BUILTIN and seen["errors"] == {}


def test_every_benchmark_registers_its_env_and_spec():
    assert BUILTIN <= set(ENVS) and set(ENVS) == set(BENCHMARKS)
    for name, entry in ENVS.items():
        assert entry.env_id in gym.registry and entry.env_class.benchmark == name
        assert get_benchmark(name).env_class is entry.env_class
    with pytest.raises(KeyError, match="registered: .*bamboogle"):
        env_entry("no_such_benchmark")
    with pytest.raises(KeyError, match="registered: .*bamboogle"):
        get_benchmark("no_such_benchmark")


def test_conflicting_registrations_are_refused(monkeypatch):
    monkeypatch.setattr("genenv.envs.registry.ENVS", dict(ENVS))
    monkeypatch.setattr("genenv.benchmarks.registry.BENCHMARKS", dict(BENCHMARKS))
    with pytest.raises(ValueError, match="already registered"):
        register_env("bamboogle", "genenv/Bamboogle-v0", "somewhere.else:Copycat")
    with pytest.raises(ValueError, match="already registered"):
        register_benchmark("bamboogle", "somewhere.else:CopycatSpec")
    with pytest.raises(ValueError, match="not 'package.module:"):
        register_env("nameless", "genenv/Nameless-v0", "no_colon_here")
    with pytest.raises(ValueError, match="needs a name"):
        register_benchmark("", "somewhere:Spec")


PLUGIN = '''
"""A third-party benchmark: one env module and one spec module, registered by its package's entry point."""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_env


def register():
    register_env("echo", "genenv/Echo-v0", "echo_bench.env:EchoEnv", split_options=({"split": "test"},))
    register_benchmark("echo", "echo_bench.spec:EchoSpec")
'''
PLUGIN_ENV = '''
from genenv.envs.base import TaskEnv, parse_or_invalid
from genenv.envs.parsing import parse_free_text
from genenv.envs.task import Task


class EchoEnv(TaskEnv):
    """Repeat the word."""

    benchmark = "echo"
    action_kind = "free_text"

    @classmethod
    def load_tasks(cls, split=None, data_dir=None, **_):
        return [Task(id=f"echo-{w}", benchmark="echo", split="test", prompt=f"Say {w}.", gold=w,
                     action_kind="free_text") for w in ("red", "green")]

    @classmethod
    def render_messages(cls, task):
        return [{"role": "user", "content": task.prompt}]

    @classmethod
    def parse_lenient(cls, text):
        return parse_or_invalid(parse_free_text, text)

    def score(self, task, action):
        ok = str(action).strip().lower() == task.gold
        return float(ok), {"success": ok}

    @classmethod
    def gold_action(cls, task):
        return task.gold

    @classmethod
    def gold_text(cls, task, turn=0):
        return task.gold
'''
PLUGIN_SPEC = '''
from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection


class EchoSpec(BenchmarkSpec):
    name = "echo"

    def summarize(self, unit, trajectories):
        return [Metric("echo/success", sum(t.success for t in trajectories) / len(trajectories), len(trajectories),
                       "exact word")]

    def headline(self, metrics):
        return metrics[0]

    def as_generation(self, task):
        return {"word": task.gold}

    def parse_generated(self, text, task_id, iteration, parent):
        return Rejection("no_generation", "echo writes no tasks")
'''


def test_a_third_party_plugin_adds_a_benchmark_and_a_broken_one_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr("genenv.envs.registry.ENVS", dict(ENVS))
    monkeypatch.setattr("genenv.benchmarks.registry.BENCHMARKS", dict(BENCHMARKS))
    monkeypatch.setattr("genenv.envs.registry.PLUGIN_ERRORS", {})
    pkg = tmp_path / "echo_bench"
    pkg.mkdir()
    for name, text in (("__init__.py", PLUGIN), ("env.py", PLUGIN_ENV), ("spec.py", PLUGIN_SPEC)):
        (pkg / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = [metadata.EntryPoint("echo", "echo_bench:register", "genenv.benchmarks"),
               metadata.EntryPoint("broken", "a_module_that_does_not_exist:register", "genenv.benchmarks")]
    load_plugins(plugins)
    from genenv.envs import registry

    assert "a_module_that_does_not_exist:register" in registry.PLUGIN_ERRORS
    assert "echo" in registry.ENVS and "echo_bench.env" not in sys.modules  # registered, not yet imported
    env = gym.make("genenv/Echo-v0")
    from genenv.envs.wrappers import make_text_env
    from genenv.runtime.episodes import play_episodes
    from genenv.runtime.policies import GoldPolicy

    tasks = env.unwrapped.tasks
    assert [t.reward for t in play_episodes(tasks, GoldPolicy()).trajectories] == [1.0, 1.0]
    assert make_text_env(tasks[:1]).reset()[1]["messages"] == [{"role": "user", "content": "Say red."}]
    assert get_benchmark("echo").env_class is registry.ENVS["echo"].env_class


def test_every_registry_is_the_one_registry_helper():
    """Environment rewards, advantage estimators, environment-policy update modes and engines are tables of the
    same `Registry`: a name is taken once, re-registering the same object is a no-op,
    and an unknown name's error lists the registered ones."""
    from genenv.envs.tables import Registry
    from genenv.rewards.env_policy_reward import ENV_POLICY_REWARDS
    from genenv.trainer.engines import ENGINES
    from genenv.trainer.strategies import ENV_POLICY_UPDATES
    from genenv.trainer.updates.advantages import ADVANTAGES

    tables = {"alpha_curriculum": ENV_POLICY_REWARDS, "grpo": ADVANTAGES, "rwr": ENV_POLICY_UPDATES, "local": ENGINES}
    for name, table in tables.items():
        assert isinstance(table, Registry) and name in table
        assert table.add(name, table[name]) is table[name]  # the same object again: no-op
        with pytest.raises(ValueError, match="already registered"):
            table.add(name, object())
        with pytest.raises(ValueError, match=f"unknown {table.kind} 'nope'; choose one of .*{name}"):
            table.lookup("nope")
    fresh = Registry("thing")
    assert fresh.register("a")(len) is len and fresh.lookup("a") is len
    with pytest.raises(ValueError, match="needs a name"):
        fresh.add("", len)


def test_a_benchmark_registers_its_spec_and_env_in_one_call(monkeypatch):
    """``register_benchmark`` with ``env_id`` and ``env`` records both halves under the one name (every shipped
    benchmark registers so); half an env registration is refused."""
    monkeypatch.setattr("genenv.envs.registry.ENVS", dict(ENVS))
    monkeypatch.setattr("genenv.benchmarks.registry.BENCHMARKS", dict(BENCHMARKS))
    import genenv.benchmarks.registry as breg
    import genenv.envs.registry as ereg

    register_benchmark("echo_one", "somewhere:EchoSpec", env_id="genenv/EchoOne-v0", env="somewhere:EchoEnv")
    assert breg.BENCHMARKS["echo_one"] == "somewhere:EchoSpec" and ereg.ENVS["echo_one"].env_id == "genenv/EchoOne-v0"
    with pytest.raises(ValueError, match="both env_id and env"):
        register_benchmark("echo_two", "somewhere:EchoSpec", env_id="genenv/EchoTwo-v0")
    for name in BENCHMARKS:  # every shipped benchmark has its env under the same name
        assert name in ENVS
