"""The architecture holds: imports point one way (import-linter's contracts in ``pyproject.toml``), every benchmark
folder has the same shape, and the configs compose in the documented order."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from genenv.trainer.cli import compose_config

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    out = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_every_benchmark_folder_registers_itself_and_owns_its_env_and_spec():
    from genenv.benchmarks.registry import BENCHMARKS
    from genenv.envs.registry import ENVS, load_plugins

    load_plugins()
    folders = {p.name for p in (ROOT / "benchmarks").iterdir() if (p / "__init__.py").is_file()}
    for name, entry in ENVS.items():
        folder = entry.entry_point.split(":")[0].split(".")[2]
        assert folder in folders and BENCHMARKS[name].startswith(f"genenv.benchmarks.{folder}."), name
    for folder in folders:
        assert {"env.py", "spec.py"} <= {p.name for p in (ROOT / "benchmarks" / folder).iterdir()}, folder


def test_benchmark_settings_win_over_the_profile_and_budgets_come_last():
    paper = compose_config(["profile=paper", "benchmark=alfworld"])
    assert paper.agent.max_new_tokens == 12 and paper.agent.n == 8 and paper.agent.batch_tasks == 64
    assert paper.benchmark.env_kwargs.get("max_steps") is None  # the official 50 steps on a GPU
    cpu = compose_config(["benchmark=alfworld"])
    assert cpu.agent.max_new_tokens == 12 and cpu.benchmark.env_kwargs.max_steps == 6 and cpu.agent.batch_tasks == 2
    assert compose_config(["benchmark=alfworld", "agent.batch_tasks=3"]).agent.batch_tasks == 3  # command line last


@pytest.mark.parametrize("name", ["bfcl", "bamboogle", "travelplanner"])
def test_paper_profile_reaches_benchmarks_that_do_not_override_it(name):
    cfg = compose_config(["profile=paper", f"benchmark={name}"])
    assert cfg.agent.batch_tasks == 64 and cfg.agent.max_new_tokens == 2048 and cfg.device == "cuda"


def test_relative_links_of_the_readme_and_docs_resolve():
    """Every relative link ``[text](path)`` of README.md and docs/**/*.md names a file or folder of the repository
    (anchors aside); a renamed or moved page fails here."""
    import re

    root = ROOT
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    links, broken = 0, []
    for page in pages:
        for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            links += 1
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(root)}: {target}")
    assert links > 10 and not broken, broken
