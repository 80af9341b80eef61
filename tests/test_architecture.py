"""The architecture holds: imports point one way (import-linter's contracts in ``pyproject.toml``), every benchmark
folder has the same shape, and the configs compose in the documented order."""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from genenv.trainer.cli import compose_config

ROOT = Path(__file__).resolve().parents[1]
# the installed Python packages (top-level folders): the import contracts' root packages, genenv.<folder>
PACKAGES = [name.split(".")[1] for name in
            tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]]
SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|const|ref|doc):`")


def _user_pages(recursive: bool = True) -> list[Path]:
    """README.md and the pages of ``docs/`` (with ``recursive``, also the generated reports below it)."""
    docs = ROOT / "docs"
    return [ROOT / "README.md", *sorted(docs.rglob("*.md") if recursive else docs.glob("*.md"))]


def test_import_contracts_are_kept():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    out = subprocess.run([exe, "--config", str(ROOT / "pyproject.toml")], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_the_trainer_and_the_leaderboard_both_stand_on_the_runtime():
    """The layers contract puts ``genenv.runtime`` directly under the trainer and the leaderboard (independent of
    each other), so the runtime imports neither; and both really use it."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c["layers"] for c in contracts if c["type"] == "layers")
    assert layers[:2] == ["genenv.eval | genenv.trainer", "genenv.runtime"]
    for folder in ("trainer", "eval"):
        assert any("from genenv.runtime" in p.read_text() for p in (ROOT / folder).rglob("*.py")), folder


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


def test_the_env_framework_names_no_benchmark_and_the_builtins_come_through_the_entry_point():
    """``envs/`` (the bottom layer) never names the benchmark package; the project's benchmarks are registered by the
    ``genenv.benchmarks`` entry point its ``pyproject.toml`` declares, read from the installed metadata."""
    import tomllib
    from importlib import metadata

    from genenv.envs.registry import PLUGIN_GROUP

    for path in (ROOT / "envs").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "genenv.benchmarks." not in text and "genenv.benchmarks:" not in text, path
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][PLUGIN_GROUP]
    installed = {ep.name: ep.value for ep in metadata.entry_points(group=PLUGIN_GROUP)}
    assert declared.items() <= installed.items()


def test_benchmark_settings_win_over_the_profile_and_budgets_come_last():
    paper = compose_config(["profile=paper", "benchmark=alfworld"])
    assert paper.agent.max_new_tokens == 12 and paper.agent.n == 8 and paper.agent.batch_tasks == 64
    assert paper.benchmark.env_kwargs.get("max_steps") is None  # the official 50 steps on a GPU
    cpu = compose_config(["benchmark=alfworld"])
    assert cpu.agent.max_new_tokens == 12 and cpu.benchmark.env_kwargs.max_steps == 6 and cpu.agent.batch_tasks == 2
    assert compose_config(["benchmark=alfworld", "agent.batch_tasks=3"]).agent.batch_tasks == 3  # command line last


# What each benchmark_profile/<name>_cpu.yaml changes in the benchmark's own seed-pool options (a CPU budget).
CPU_POOL_CHANGES = {"twx": {}, "bfcl_multi_turn": {}, "alfworld": {"max_walkthrough": 5}, "travelplanner": {"days": 3},
                    "bfcl": {}, "api_bank": {}, "bamboogle": {}}


@pytest.mark.parametrize("name", sorted(CPU_POOL_CHANGES))
def test_the_seed_pool_a_run_uses_is_the_one_the_benchmark_declares(name):
    """The loop's seed pool (``CoEvolutionTrainer.seed_pool`` on the composed CPU config) holds exactly the tasks of the
    benchmark's declared ``seed_options`` with the CPU profile's documented changes; no config file restates a
    declared option (one definition: the spec)."""
    from types import SimpleNamespace

    import yaml

    from genenv.benchmarks.registry import get_benchmark
    from genenv.trainer.loop import CoEvolutionTrainer
    from genenv.trainer.settings import run_settings
    from genenv.trainer.strategies import build_task_source

    settings = run_settings(compose_config([f"benchmark={name}"]))
    spec = get_benchmark(name, settings.data_dir)
    run = SimpleNamespace(spec=spec, settings=settings, task_source=build_task_source(settings))
    CoEvolutionTrainer.seed_pool(run)
    declared = spec.load(split="train", **{**spec.seed_options, **CPU_POOL_CHANGES[name]})
    assert declared and [t.id for t in run.pool.tasks] == [t.id for t in declared]
    for path in [ROOT / f"configs/benchmark/{name}.yaml", ROOT / f"configs/benchmark_profile/{name}_cpu.yaml"]:
        if path.exists():
            changes = (yaml.safe_load(path.read_text()) or {}).get("benchmark", {}).get("seed_options") or {}
            assert not {k for k, v in changes.items() if spec.seed_options.get(k) == v}, path
    if name == "twx":  # the smallest Coin Collector: 2 rooms, no doors (the declared params reach the engine)
        rooms = {"numLocations": 2, "numDistractorItems": 0, "includeDoors": 0}
        assert len(run.pool.tasks) == 40 and all(t.metadata["params"] == rooms for t in run.pool.tasks)


@pytest.mark.parametrize("name", ["bfcl", "bamboogle", "travelplanner"])
def test_paper_profile_reaches_benchmarks_that_do_not_override_it(name):
    cfg = compose_config(["profile=paper", f"benchmark={name}"])
    assert cfg.agent.batch_tasks == 64 and cfg.agent.max_new_tokens == 2048 and cfg.device == "cuda"


def _anchors(page):
    """GitHub's anchors of the headings of ``page``: lower case, punctuation other than ``-`` dropped, spaces as
    ``-`` (headings inside fenced code blocks are not headings)."""
    anchors, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            anchors.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return anchors


def test_relative_links_of_the_readme_and_docs_resolve():
    """Every relative link ``[text](path#anchor)`` of README.md and docs/**/*.md names a file or folder of the
    repository, and its anchor, if any, a heading of that page; a renamed or moved page or section fails here."""
    root = ROOT
    pages = _user_pages()
    links, broken = 0, []
    for page in pages:
        for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            file = page if not path else page.parent / path
            if not file.exists() or (anchor and file.suffix == ".md" and anchor not in _anchors(file)):
                broken.append(f"{page.relative_to(root)}: {target}")
    assert links > 10 and not broken, broken


def test_the_readme_is_short_and_speaks_of_the_project_only():
    """README.md is at most 120 lines, none over 300 characters, and docs/results.md (the summary of what is
    established) at most 220; README and docs name no work item, stop or
    working session of how the project was made (the pattern below: a numbered work item or stop, and the
    words for a working session or work item)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= 120 and max(map(len, readme)) <= 300
    assert len((ROOT / "docs" / "results.md").read_text(encoding="utf-8").splitlines()) <= 220
    made = re.compile(r"\bissue #?\d+|\bstop \d+|\b(this|the) (session|issue)\b|\bthe issue's\b", re.I)
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in _user_pages()
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if made.search(line)]
    assert not hits, hits


def test_the_api_reference_renders_every_module(tmp_path):
    """pdoc (docs/architecture.md, "The public API") renders a page for every module of the packages a core
    install holds (the env framework, the rewards, the benchmarks), reached through the packages' ``__all__``; the
    pages show the docstrings as Markdown (code spans rendered, no reStructuredText role left). The trainer's and
    the runtime's modules follow the same rules, checked statically above."""
    core = ["envs", "rewards", "benchmarks"]
    out = subprocess.run([sys.executable, "-m", "pdoc", "--docformat", "markdown", *(f"genenv.{n}" for n in core),
                          "-o", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    modules = [p.relative_to(ROOT).with_suffix("") for p in _library_modules()
               if p.relative_to(ROOT).parts[0] in core]
    expected = {Path("genenv", *(m.parts[:-1] if m.name == "__init__" else m.parts)) for m in modules}
    pages = {p.relative_to(tmp_path).with_suffix("") for p in (tmp_path / "genenv").rglob("*.html")}
    assert len(expected) > 60 and expected - pages == set(), sorted(map(str, expected - pages))
    task = (tmp_path / "genenv" / "envs" / "task.html").read_text(encoding="utf-8")
    assert 'id="Task"' in task and task.count("<code>") > 5  # the class, its docstring's code spans rendered
    docstrings = re.findall(r'<div class="docstring">(.*?)</div>', task, re.S)
    assert docstrings and not any(SPHINX_ROLE.search(d) for d in docstrings)


def test_user_docs_pin_no_commit():
    """The user pages (README, ``docs/*.md``) state what holds now: no commit hash (a 7-40 character hex word with
    letters and digits) in their sentences; measurements by commit belong in ``lab/``. The experiment reports
    under ``docs/curriculum/`` are generated from the runs and name the code each run used, as a report must."""
    hexword = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
    pages = _user_pages(recursive=False)
    hits = [f"{p.relative_to(ROOT)}:{i}: {m.group()}" for p in pages
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) for m in hexword.finditer(line)]
    assert len(pages) > 10 and not hits, hits


def test_code_and_tests_say_what_the_code_does_not_how_it_was_made():
    """No module, script, test or config names a numbered work item or stop, or tells the code's history (what
    came before or after a work item, a numbered pull request); "session" is this project's word for an env
    server session, so of the README and docs pattern only the numbered forms apply to code."""
    made = re.compile(r"\bissue #?\d+|\bstop \d+|\bthe issue's\b|\b(until|before|since|after) (issue|stop)\b|"
                      r"\(#\d+\)|\bbefore we\b", re.I)
    files = [p for folder in ("envs", "benchmarks", "runtime", "trainer", "rewards", "eval", "configs", "lab",
                              "tests", "deploy", ".ci") for p in sorted((ROOT / folder).rglob("*"))
             if p.suffix in (".py", ".yaml", ".sh", ".toml", ".txt") or p.name in ("install", "run")]
    files += [ROOT / "setup.py", ROOT / "pyproject.toml"]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in files if p.is_file() and "sample" not in p.parts
            for i, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if made.search(line)]
    assert len(files) > 150 and not hits, hits


def test_no_library_module_is_a_measurement_script():
    """Timing and measurement scripts live in ``lab/benches/``, outside the installed packages: no module named
    ``bench_*`` under the top-level package folders."""
    packages = [*PACKAGES, "configs"]
    found = [str(p.relative_to(ROOT)) for name in packages for p in (ROOT / name).rglob("bench_*.py")]
    assert not found, found


def _library_modules() -> list[Path]:
    """Every module of the installed packages (the top-level folders), packaged samples excluded."""
    return [p for name in PACKAGES for p in sorted((ROOT / name).rglob("*.py")) if "sample" not in p.parts]


def _bound_names(body) -> set[str]:
    """The names a module body binds at its top level (definitions, assignments, imports), looking into
    ``if``/``try``/``with``/``for`` blocks as Python does."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        for field in ("body", "orelse", "finalbody", "handlers"):
            names |= _bound_names(getattr(node, field, None) or [])
    return names


def test_every_module_and_package_names_its_public_surface():
    """Each library module and package ``__init__`` has a literal ``__all__`` (what a user may import), and every
    name in it is bound at the module's top level or, in a package, is one of its modules: a rename that leaves a
    stale public name fails here. A package's ``__all__`` names each of its modules whose name has no leading
    underscore (pdoc, like ``import *``, shows a package's modules only when ``__all__`` names them)."""
    bad = []
    for path in _library_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        public = [node.value for node in tree.body if isinstance(node, ast.Assign)
                  and any(getattr(t, "id", None) == "__all__" for t in node.targets)]
        if not public:
            bad.append(f"{path.relative_to(ROOT)}: no __all__")
            continue
        names = ast.literal_eval(public[-1])
        known = _bound_names(tree.body)
        if path.name == "__init__.py":
            modules = {p.stem for p in path.parent.glob("*.py")}
            modules |= {p.parent.name for p in path.parent.glob("*/__init__.py")}
            known |= modules
            bad += [f"{path.relative_to(ROOT)}: module {m} not in __all__" for m in sorted(modules)
                    if not m.startswith("_") and m not in names]
        bad += [f"{path.relative_to(ROOT)}: {name}" for name in names if name not in known]
    assert len(_library_modules()) > 100 and not bad, bad


def test_docstrings_are_plain_markdown():
    """Docstrings are Markdown, so that ``help()``, editors and pdoc render them as written: code spans in
    backticks, no Sphinx cross-reference roles (which render nowhere without Sphinx) and no reStructuredText
    ``::`` literal-block markers (an indented block is already code in Markdown)."""
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in [*_library_modules(), *sorted((ROOT / "tests").glob("*.py"))]
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
            if SPHINX_ROLE.search(line) or re.search(r"\w::$", line)]
    assert not hits, hits


def test_run_settings_are_built_once_validated_and_name_the_bad_key():
    """``run_settings`` reads every decision of a run from the composed config (defaults live in
    configs/train.yaml only): the role settings equal the YAML's blocks, and a missing key or a bad value is an
    error naming the key."""
    from omegaconf import OmegaConf

    from genenv.trainer.settings import ConfigError, RoleConfig, run_settings

    cfg = compose_config(["benchmark=twx", "arm=replay"])
    s = run_settings(cfg)
    assert (s.env_kwargs["twx"]["parsing"], s.task_source, s.agent_batch, s.keep_checkpoints) == (
        "lenient", "random_env", "replay", 1)
    assert (s.engine.name, s.engine.device, s.engine.threads, s.engine.env_server) == ("local", "auto", "auto", None)
    assert s.engine.options == {}  # the local engine has no block of its own; verl_ray's is its options
    ray = run_settings(compose_config(["engine=verl_ray", "verl_ray.pools.agent.nnodes=2"])).engine.options
    assert ray["pools"]["agent"] == {"nnodes": 2, "n_gpus_per_node": 4} and "common" in ray
    assert (s.curriculum.alpha, s.generation.rollouts_per_task, s.agent.response_budget) == (0.25, 4, 2048)
    assert s.roles["env_policy"] == RoleConfig.defaults("env_policy") and s.roles["env_policy"].kl_coef == 0.01
    assert s.roles["agent"].lr == cfg.agent.policy.lr and s.roles["agent"].lora_alpha == 32
    for override, key in [("parsing=loose", "parsing"), ("keep_checkpoints=0", "keep_checkpoints"),
                          ("generation.every=0", "generation.every"), ("curriculum.env_reward=hard", "curriculum.env_reward"),
                          ("agent.n=0", "agent.n"),
                          ("agent.filter_groups.max_rollouts=0", "agent.filter_groups.max_rollouts")]:
        with pytest.raises(ConfigError, match=f"config key '{key}'"):
            run_settings(compose_config([override]))
    from genenv.trainer.strategies import build_agent_batch, build_task_source

    for override, key, build in [("task_source=teacher", "task_source", build_task_source),
                                 ("agent_batch=plr", "agent_batch", build_agent_batch),
                                 ("env_policy.update_mode=ppo", "env_policy.update_mode", build_task_source)]:
        with pytest.raises(ConfigError, match=f"config key '{key}'"):  # strategy names: when the loop builds them
            build(run_settings(compose_config([override])))
    broken = OmegaConf.to_container(cfg)
    del broken["agent"]["policy"]["lora_alpha"]
    with pytest.raises(ConfigError, match="'agent.policy.lora_alpha' is missing"):
        run_settings(OmegaConf.create(broken))


SETTINGS_MODULES = ("trainer/settings.py", "trainer/experiments/settings.py")  # the only readers of config keys
RAW_READ_CALLS = {("OmegaConf", "select"), ("OmegaConf", "update"), ("RoleConfig", "of"), (None, "read_key"),
                  (None, "as_run_settings")}


def raw_config_reads(source: str) -> list[str]:
    """Where ``source`` reads config keys itself, as ``(line, code)`` strings in line order: an attribute, item or
    method (``ast.Attribute`` / ``ast.Subscript``) of the name ``cfg`` or of an attribute ``.cfg`` (the project's
    one name for a composed or stored run config: ``cfg.agent.n``, ``cfg["seed"]``, ``cfg.get("threads")``,
    ``self.cfg.seed``), or a call of a key reader (``read_key``, ``OmegaConf.select`` / ``update``,
    ``RoleConfig.of``). Passing ``cfg`` whole to a settings builder (``run_settings(cfg)``), storing it
    (``self.cfg = cfg``) or writing it out (``OmegaConf.to_yaml(cfg)``) is not a read. In ``trainer/`` the name
    ``config`` is veRL's own worker config (the ``verl_ray`` engine) or a file path, never the run config."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and (
                isinstance(node.value, ast.Name) and node.value.id == "cfg"
                or isinstance(node.value, ast.Attribute) and node.value.attr == "cfg"):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call):
            f = node.func
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if (owner, name) in RAW_READ_CALLS:
                found.append(f"{node.lineno}: {ast.unparse(node)[:60]}")
    return sorted(found, key=lambda f: int(f.split(":")[0]))


def test_every_trainer_module_reads_settings_not_the_raw_config():
    """Parsed (AST), every module of ``trainer/`` but the two settings modules reads its decisions from
    ``RunSettings`` / ``ExperimentSettings``, never a config key itself; the engines take ``RunSettings`` only."""
    assert raw_config_reads("n = cfg.agent.n\nt = cfg.get('threads')\nread_key(c, 'x')\nRoleConfig.of(c, 'agent')") \
        == ["1: cfg.agent", "2: cfg.get", "3: read_key(c, 'x')", "4: RoleConfig.of(c, 'agent')"]
    assert raw_config_reads("run_settings(cfg)\nOmegaConf.to_yaml(cfg)\nself.cfg = cfg\nx = self.cfg.seed") \
        == ["4: self.cfg.seed"]
    modules = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "trainer").rglob("*.py"))
    assert len(modules) > 30 and all(m in modules for m in SETTINGS_MODULES)
    reads = {m: raw_config_reads((ROOT / m).read_text(encoding="utf-8")) for m in modules if m not in SETTINGS_MODULES}
    assert {m: r for m, r in reads.items() if r} == {}
    role_reads = [m for m in modules if m != "trainer/settings.py" and "RoleConfig.of(" in (ROOT / m).read_text()]
    assert role_reads == [], role_reads  # a role's settings are read in one place


def test_the_engine_builders_take_run_settings_only():
    """Every engine builder refuses a composed config with a ``TypeError`` that names it and says how to build the
    settings; the run's ``RunSettings`` are taken as they are."""
    from genenv.trainer.engines import build_backend
    from genenv.trainer.engines.local import build_local_backend
    from genenv.trainer.engines.verl_ray.config import derived_settings, role_config
    from genenv.trainer.engines.verl_ray.pools import resource_pool_spec
    from genenv.trainer.settings import run_settings

    cfg = compose_config(["engine=verl_ray"])
    for build, args in ((build_backend, ()), (build_local_backend, ()), (derived_settings, ("agent",)),
                        (role_config, ("agent",)), (resource_pool_spec, ())):
        refusal = f"{build.__name__} takes the run's RunSettings, not DictConfig.*run_settings"
        with pytest.raises(TypeError, match=refusal):
            build(cfg, *args)
    assert resource_pool_spec(run_settings(cfg)) == {"genenv_agent_pool": [4], "genenv_env_policy_pool": [4]}


@pytest.mark.parametrize("name, options, extra", [
    ("bfcl", {"category": "simple_python"}, ("category", "simple_python")),
    ("api_bank", {"level": 2}, ("level", 2)),
    ("api_bank_response", {"level": 1}, ("level", 1)),
    ("bamboogle", {}, None),
])
def test_task_split_holds_the_split_only(name, options, extra):
    """``Task.split`` is the split the task was loaded from (never a category or a level, which live in
    ``metadata``)."""
    from genenv.benchmarks.registry import get_benchmark
    from conftest import DATA_DIR

    spec = get_benchmark(name, DATA_DIR)
    for split in ("test", "train", "heldout"):
        tasks = spec.load(split=split, **options)
        assert tasks and {t.split for t in tasks} == {split}, (name, split)
        if extra:
            assert all(t.metadata[extra[0]] == extra[1] for t in tasks)


def test_the_benchmark_spec_is_an_evaluation_part_and_a_task_writer_part():
    """``BenchmarkSpec`` joins two parts that share nothing but the benchmark's name: the evaluation part
    (loading, metrics, the leaderboard's columns) and the task-writer part (prompt, schema, parsing, validation);
    task writing is typed against the writer part, the leaderboard and held-out evaluation never call it."""
    import inspect

    from genenv.benchmarks.spec import BenchmarkEvaluation, BenchmarkSpec
    from genenv.benchmarks.task_writer import TaskWriter
    from genenv.trainer import generation

    def own(cls):
        return {k for k in vars(cls) if not k.startswith("__")} - {"_abc_impl"}

    evaluation, writer = own(BenchmarkEvaluation), own(TaskWriter)
    assert evaluation & writer == {"name"}
    assert {"load", "summarize", "headline", "paper_metric", "pool_options"} <= evaluation
    assert {"parse_generated", "generation_messages", "generation_schema", "near_duplicate", "skill_of"} <= writer
    assert BenchmarkSpec.__mro__[1:3] == (BenchmarkEvaluation, TaskWriter) and own(BenchmarkSpec) == set()
    for fn in (generation.write_tasks, generation.genenv_plans, generation.envgen_plans):
        assert inspect.signature(fn).parameters["spec"].annotation == "TaskWriter"
    for path in [ROOT / "runtime/evaluation.py", *(ROOT / "eval").rglob("*.py")]:
        calls = {n.attr for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(n, ast.Attribute)}
        assert not calls & (writer - {"name"}), path
