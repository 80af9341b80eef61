"""The built wheel, installed non-editable in a fresh virtual environment, as a user installs it.

One venv, two installs: first the core alone (``pip install <wheel>``), which plays a Bamboogle episode, names the
missing extra of every heavier env and command, and runs the README's evaluation command against an
OpenAI-compatible endpoint (llama.cpp's server on the embedded GGUF) with the configs, shipped samples and
baselines read from the wheel; then ``pip install "<wheel>[bfcl]"``, which adds ``genenv/BFCL-v0``.

The core install uses ``.ci/constraints.txt``; the ``bfcl`` extra resolves bfcl-eval's own pins (numpy 1.26.4,
cohere 5.18, ...), which the constraints of the full install cannot hold, so only torch is held there (the CPU
wheel 2.13.0, as everywhere on a CPU machine). Both installs come from pip's cache after ``.ci/install``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from genenv.eval.model_server import LlamaServer

ROOT = Path(__file__).resolve().parents[1]

PLAY = """
import json, sys
import gymnasium as gym, genenv.envs
env = gym.make(sys.argv[1])
obs, info = env.reset(seed=0)
_, reward, terminated, truncated, info = env.step(env.unwrapped.gold_action(env.unwrapped.task))
print(json.dumps({"reward": reward, "terminated": terminated, "modules": sorted(
    m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "verl", "bfcl_eval"))}))
"""

MISSING = """
import sys
import gymnasium as gym, genenv.envs
from genenv.envs.extras import MissingExtra
for env_id in sys.argv[1:]:
    try:
        gym.make(env_id)
    except MissingExtra as exc:
        print(env_id, "|", exc.extra, "|", exc)
    else:
        print(env_id, "| made")
"""


def _run(python: Path, *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900):
    """Run ``python *args`` (or a console script when ``python`` is one) in ``cwd``; returns the completed process."""
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Iterator[tuple[Path, Path, Path]]:
    """(the venv's ``bin`` folder, a working folder outside the source tree, the wheel) with the built wheel
    installed, core only; removed after the module (about 2 GB)."""
    base = tmp_path_factory.mktemp("wheel")
    # built from a copy, so that setuptools' build/ folder never lands in the source tree
    source = base / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info",
                                                                 "results", "lab", "tests", "__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(base / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (base / "dist").glob("genenv-*.whl")
    venv.create(base / "venv", with_pip=True)
    bin_dir = base / "venv" / "bin"
    install = _run(bin_dir / "python", "-m", "pip", "install", "-q", "-c", str(ROOT / ".ci" / "constraints.txt"),
                   str(wheel), cwd=base)
    assert install.returncode == 0, install.stderr[-3000:]
    work = base / "work"
    work.mkdir()
    yield bin_dir, work, wheel
    shutil.rmtree(base, ignore_errors=True)


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without the data folder (the wheel's shipped samples are read) and offline."""
    env = {k: v for k, v in os.environ.items() if k not in ("GENENV_DATA_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", **extra)
    return env


def test_the_core_wheel_plays_bamboogle_names_missing_extras_and_evaluates_an_endpoint(wheel_venv, tmp_path):
    bin_dir, work, _ = wheel_venv
    env = _clean_env()
    where = _run(bin_dir / "python", "-c", "import genenv.envs; print(genenv.envs.__file__)", cwd=work, env=env)
    assert "site-packages" in where.stdout and str(ROOT) not in where.stdout, where  # the wheel, not the tree

    played = _run(bin_dir / "python", "-c", PLAY, "genenv/Bamboogle-v0", cwd=work, env=env)
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads(played.stdout.splitlines()[-1])
    assert result == {"reward": 1.0, "terminated": True, "modules": []}  # gold answer; no torch in the core

    missing = _run(bin_dir / "python", "-c", MISSING, "genenv/BFCL-v0", "genenv/ALFWorld-v0",
                   "genenv/TextWorldExpress-v0", "genenv/APIBank-v0", "genenv/TravelPlanner-v0", cwd=work, env=env)
    assert missing.returncode == 0, missing.stderr[-3000:]
    lines = {line.split(" | ")[0]: line.split(" | ")[1:] for line in missing.stdout.splitlines()}
    assert {k: v[0] for k, v in lines.items()} == {
        "genenv/BFCL-v0": "bfcl", "genenv/ALFWorld-v0": "alfworld", "genenv/TextWorldExpress-v0": "twx",
        "genenv/APIBank-v0": "api-bank", "genenv/TravelPlanner-v0": "made"}
    assert "pip install 'genenv[bfcl]'" in lines["genenv/BFCL-v0"][1]
    assert "genenv/BFCL-v0 needs" in lines["genenv/BFCL-v0"][1]

    train = _run(bin_dir / "genenv-train", "benchmark=bamboogle", cwd=work, env=env)
    assert train.returncode == 1 and "pip install 'genenv[train]'" in train.stderr, train.stderr[-2000:]
    local = _run(bin_dir / "genenv-eval", "--benchmarks", "bamboogle", "--policy", "smollm2", "--limit", "1",
                 "--out", str(tmp_path / "local"), cwd=work, env=env)
    assert local.returncode == 1 and "pip install 'genenv[local]'" in local.stderr, local.stderr[-2000:]

    # the README's evaluation command, on an OpenAI-compatible endpoint, from the wheel's configs and samples
    with LlamaServer(log_path=tmp_path / "server.log") as server:
        out = tmp_path / "endpoint"
        ev = _run(bin_dir / "genenv-eval", "--benchmarks", "bamboogle", "--policy", server.spec,
                  "--limit", "3", "--max-new-tokens", "24", "--out", str(out), cwd=work, env=env)
    assert ev.returncode == 0, ev.stderr[-3000:]
    assert "packaged samples" in ev.stdout + ev.stderr
    assert "Bamboogle" in ev.stdout or "bamboogle" in ev.stdout
    rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["completion_tokens"] > 0 for r in rows)


def test_the_bfcl_extra_adds_bfcl(wheel_venv, tmp_path):
    bin_dir, work, wheel = wheel_venv
    pins = tmp_path / "torch.txt"
    pins.write_text("torch==2.13.0\n")
    install = _run(bin_dir / "python", "-m", "pip", "install", "-q", "-c", str(pins), f"{wheel}[bfcl]", cwd=work)
    assert install.returncode == 0, install.stderr[-3000:]
    env = _clean_env()
    played = _run(bin_dir / "python", "-c", PLAY, "genenv/BFCL-v0", cwd=work, env=env)
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads(played.stdout.splitlines()[-1])
    assert result["reward"] == 1.0 and "bfcl_eval" in result["modules"], result  # scored by bfcl-eval's checker
    missing = _run(bin_dir / "python", "-c", MISSING, "genenv/BFCLMultiTurn-v0", "genenv/ALFWorld-v0", cwd=work,
                   env=env)
    assert missing.stdout.splitlines() == ["genenv/BFCLMultiTurn-v0 | made", missing.stdout.splitlines()[1]]
    assert "| alfworld |" in missing.stdout
