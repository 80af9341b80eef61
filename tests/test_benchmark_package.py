"""A benchmark in a package of its own works everywhere a builtin one does.

The fixture package ``tests/fixtures/unitconv_bench`` is a third-party benchmark written only from
``docs/adding-an-env.md``: unit conversions, its env id outside the ``genenv/`` namespace, its sample data and its
training config inside the package, plugged in through the ``genenv.benchmarks`` entry point. It is built by pip
and installed (``pip install --target``, a wheel with its record and entry points) into a folder that every
command below finds on ``PYTHONPATH``, so the test venv itself is left as it was. The data directory is the tests'
full data (``$GENENV_DATA_DIR``, which has no ``unitconv/``), or an empty one without it: either way the package's
own sample is what is read. Then, each as a user runs it: ``gymnasium.make``, ``genenv-envs`` (list and veRL
export), ``genenv-eval --policy gold``, the conformance suite, one ``genenv-train`` iteration with no Hydra option,
one episode served by ``genenv-serve`` to OpenEnv's client, and a folder of the package's name that shadows it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).with_name("fixtures") / "unitconv_bench"


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """(the folder the package is installed in, the environment of a process that has it, the data directory)."""
    base = tmp_path_factory.mktemp("unitconv")
    source = base / "source"
    shutil.copytree(FIXTURE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = base / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(site), str(source)], check=True, capture_output=True, text=True)
    data = Path(DATA_DIR) if DATA_DIR is not None else base / "data"
    data.mkdir(exist_ok=True)
    assert not (data / "unitconv").exists()
    env = {**os.environ, "GENENV_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}
    return site, env, data


def run(env: dict[str, str], *args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """A console script of the test venv (or ``python``) with ``env``; output captured."""
    exe = args[0] if args[0] == sys.executable else str(Path(sys.executable).with_name(args[0]))
    return subprocess.run([exe, *args[1:]], env=env, cwd=cwd or ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_make_list_export_and_evaluate_read_the_package_s_own_sample(package, tmp_path):
    site, env, data = package
    play = run(env, sys.executable, "-c", """
import json, gymnasium as gym
from genenv.envs import TextActionWrapper
from genenv.envs.registry import ENVS, load_plugins, plugin_config_packages
load_plugins()
env = TextActionWrapper(gym.make("unitconv/UnitConv-v0", split="heldout").unwrapped)  # model text in
obs, info = env.reset(seed=0)
_, reward, done, _, out = env.step("Answer: " + format(env.unwrapped.task.gold, "g"))
print(json.dumps({"reward": reward, "done": done, "obs": obs, "configs": plugin_config_packages(),
                  "module": ENVS["unitconv"].env_class.__module__, "file": __import__("unitconv").__file__}))
""")
    assert play.returncode == 0, play.stderr[-3000:]
    got = json.loads(play.stdout.splitlines()[-1])
    assert got["reward"] == 1.0 and got["done"] and got["obs"].startswith("Convert ")
    assert got["configs"] == ["unitconv.configs"] and got["file"].startswith(str(site))  # installed, not the source
    listing = run(env, "genenv-envs")
    assert listing.returncode == 0, listing.stderr[-3000:]
    counts = {line.split()[1]: int(line.split()[-1]) for line in listing.stdout.splitlines()
              if line.startswith("unitconv/UnitConv-v0")}
    assert counts == {"split=test": 20, "split=train": 16, "split=heldout": 4}
    export = run(env, "genenv-envs", "export", "--benchmark", "unitconv", "--split", "train",
                 "--out", str(tmp_path / "train.parquet"))
    assert export.returncode == 0, export.stderr[-3000:]
    rows = pd.read_parquet(tmp_path / "train.parquet")
    assert len(rows) == 16 and set(rows["ability"]) == {"math"} and set(rows["data_source"]) == {"genenv/unitconv"}
    evaluation = run(env, "genenv-eval", "--benchmarks", "unitconv", "--policy", "gold", "--out", str(tmp_path / "ev"))
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    summary = json.loads((tmp_path / "ev" / "summary.json").read_text())
    assert summary["headlines"]["unitconv"]["value"] == 1.0 and summary["headlines"]["unitconv"]["n"] == 20
    assert summary["data_dir"] == str(data)
    assert summary["data_folders"]["unitconv"] == str(site / "unitconv" / "sample")  # the folder actually read
    assert "has no unitconv/ folder: reading the packaged sample" in evaluation.stderr


def test_the_conformance_suite_passes_untouched(package):
    _, env, _ = package
    out = run(env, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_conformance.py",
              "-k", "unitconv")
    assert out.returncode == 0, out.stdout[-4000:]
    passed = int(re.search(r"(\d+) passed", out.stdout).group(1))
    builtin = run(env, sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                  "tests/test_conformance.py", "-k", "bamboogle")
    assert passed == len(re.findall(r"\[[^\]]*bamboogle[^\]]*\]", builtin.stdout)) >= 10  # every per-benchmark test


def test_one_training_iteration_finds_the_package_s_config(package, tiny_model_dir, tmp_path):
    """``genenv-train benchmark=unitconv``: the package's ``configs/benchmark/unitconv.yaml`` (12 new tokens) and
    its ``benchmark_profile/unitconv_cpu.yaml`` (4 tasks per batch) compose with no Hydra option."""
    site, env, _ = package
    out = run(env, "genenv-train", "benchmark=unitconv", "iterations=1", f"run_dir={tmp_path / 'run'}",
              "tensorboard=false", "threads=1", f"agent.policy.model={tiny_model_dir}",
              f"env_policy.policy.model={tiny_model_dir}", "generation.prompts_per_iteration=1",
              "generation.generations_per_prompt=2", "agent.n=2")
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    run_dir = tmp_path / "run"
    config = (run_dir / "config.yaml").read_text()
    assert re.search(r"name: unitconv\n", config) and "batch_tasks: 4\n" in config and "max_new_tokens: 12\n" in config
    (row,) = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert row["iteration"] == 0 and row["gen/generated"] == 2
    assert json.loads((run_dir / "data.json").read_text())["data_folders"]["unitconv"] == str(
        site / "unitconv" / "sample")


def test_genenv_serve_plays_an_episode_to_openenv_s_client(package):
    from openenv.core.generic_client import GenericEnvClient

    from genenv.runtime.serve.client import reset_arguments
    from genenv.runtime.serve.launch import spawn

    site, env, _ = package
    proc, url = spawn("--benchmarks", "unitconv", env={k: env[k] for k in ("PYTHONPATH", "GENENV_DATA_DIR")})
    try:
        sys.path.insert(0, str(site))
        from unitconv.env import load_unitconv_tasks

        task = load_unitconv_tasks("heldout")[0]
        with GenericEnvClient(base_url=url).sync() as client:
            result = client.reset(**reset_arguments(task))
            assert result.observation["task_id"] == task.id
            result = client.step({"text": f"Answer: {task.gold:g}"})
            assert result.done and result.reward == 1.0 and result.observation["info"]["success"] is True
            result = client.reset(**reset_arguments(task))
            result = client.step({"text": "Answer: no idea"})
            assert result.reward == 0.0 and "not a number" in result.observation["info"]["error"]
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m == "unitconv" or m.startswith("unitconv.")]:
            del sys.modules[name]
        proc.terminate()
        proc.wait(30)


def test_a_folder_that_shadows_the_package_is_named(package, tmp_path):
    """A folder named like the package in the working directory (``python -m`` puts it first on ``sys.path``):
    ``genenv-envs`` exits 1 naming the entry point, what failed, where ``unitconv`` came from and that it shadows
    the installed distribution; ``genenv-train benchmark=unitconv`` says the same before Hydra finds no config."""
    site, env, _ = package
    (tmp_path / "unitconv").mkdir()
    (tmp_path / "unitconv" / "__init__.py").write_text('"""A checkout of something else."""\n')
    out = run(env, sys.executable, "-m", "genenv.eval.envs_cli", cwd=tmp_path)
    assert out.returncode == 1
    assert "the benchmark entry point unitconv:register failed to import: AttributeError" in out.stderr, out.stderr
    assert f"imported from {tmp_path / 'unitconv' / '__init__.py'}" in out.stderr
    assert f"not from the installed distribution genenv-unitconv ({site / 'unitconv'})" in out.stderr
    assert "shadows it" in out.stderr and "genenv/Bamboogle-v0" in out.stdout  # the other benchmarks still listed
    train = run(env, sys.executable, "-m", "genenv.trainer.cli", "benchmark=unitconv", cwd=tmp_path)
    assert train.returncode == 1 and "genenv-train: the benchmark entry point unitconv:register failed" in train.stderr
