"""``data_dir`` reaches everything that reads data: loaders, env backends and databases, and the specs' validators.

With ``$GENENV_DATA_DIR`` unset, a data directory given as an argument (the trainer's ``data_dir=`` and
``genenv-eval --data-dir``) must be the one every piece reads. The test plants a difference that only that
directory has (a copy of the packaged samples with every TravelPlanner restaurant renamed, and an API-Bank user
that only its accounts table knows), so a piece that falls back to the packaged samples fails.
"""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from genenv.benchmarks.api_bank.data import SAMPLE as API_BANK_SAMPLE
from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.travelplanner.data import SAMPLE as TRAVELPLANNER_SAMPLE
from genenv.benchmarks.travelplanner.data import load_travelplanner_tasks
from genenv.trainer.cli import compose_config
from genenv.runtime.episodes import RolloutSpec, play_episodes
from genenv.runtime.evaluation import evaluate
from genenv.runtime.policies import GoldPolicy
from genenv.trainer.settings import env_kwargs

SUFFIX = " Planted"


@pytest.fixture()
def other_data(tmp_path, monkeypatch):
    """A data directory that differs from the packaged samples where it matters; ``$GENENV_DATA_DIR`` unset."""
    monkeypatch.delenv("GENENV_DATA_DIR", raising=False)
    root = tmp_path / "data"
    shutil.copytree(TRAVELPLANNER_SAMPLE, root / "travelplanner")
    table = root / "travelplanner" / "database" / "restaurants" / "clean_restaurant_2022.csv"
    frame = pd.read_csv(table)
    frame["Name"] = frame["Name"] + SUFFIX
    frame.to_csv(table, index=False)
    shutil.copytree(API_BANK_SAMPLE, root / "api_bank")
    accounts = root / "api_bank" / "init_database" / "Account.json"
    users = json.loads(accounts.read_text())
    users["plantedUser"] = {"password": "planted-pass", "token": "t-planted", "email": "p@example.com"}
    accounts.write_text(json.dumps(users))
    return root


def test_travelplanner_tasks_and_scoring_read_the_given_data_dir(other_data):
    tasks = load_travelplanner_tasks("validation", data_dir=str(other_data))
    assert tasks and any(SUFFIX in json.dumps(t.gold) for t in tasks if t.gold)
    res = evaluate(GoldPolicy(), ["travelplanner"], split="validation", data_dir=str(other_data), progress=False)
    planted = [r for r, t in zip(res.rows, tasks) if t.gold]
    assert planted and all(r["success"] for r in planted), [r["error"] for r in planted]  # scored on its database
    cfg = compose_config(["benchmark=travelplanner", f"data_dir={other_data}"])
    kwargs = env_kwargs(cfg)
    assert kwargs["travelplanner"]["data_dir"] == str(other_data)
    trained = play_episodes([t for t in tasks if t.gold], GoldPolicy(),
                            RolloutSpec(env_kwargs=kwargs)).trajectories  # the trainer's path
    assert all(t.success for t in trained)
    packaged = play_episodes([t for t in tasks if t.gold][:1], GoldPolicy()).trajectories  # packaged: lacks them
    assert not packaged[0].success and "within_sandbox" in packaged[0].info["error"]


def test_specs_validate_against_the_given_data_dir(other_data):
    login = json.dumps({"dialogue": "User: Please log me in, I am plantedUser with password planted-pass.",
                        "call": {"name": "GetUserToken",
                                     "arguments": {"username": "plantedUser", "password": "planted-pass"}}})
    admitted = get_benchmark("api_bank", str(other_data)).parse_generated(login, "gen-0-0-0", 0, None)
    assert admitted.gold["arguments"]["username"] == "plantedUser", admitted
    refused = get_benchmark("api_bank").parse_generated(login, "gen-0-0-1", 0, None)  # the packaged accounts
    assert refused.reason == "execution_error", refused


def test_a_data_dir_without_the_benchmark_s_folder_reads_its_sample_and_says_so(other_data, caplog, monkeypatch):
    """The data directory above holds ``travelplanner/`` and ``api_bank/`` only: those are read from it, Bamboogle
    (no ``bamboogle/`` there) from its packaged sample, with one warning; ``folders_read`` records each choice, and a
    benchmark with neither folder is reported missing under the data directory."""
    from genenv.benchmarks.bamboogle.data import SAMPLE as BAMBOOGLE_SAMPLE
    from genenv.envs.data import DataError, benchmark_dir, benchmark_file, folders_read

    monkeypatch.setattr("genenv.envs.data._FOLDERS_READ", {})  # as in a fresh process
    assert benchmark_dir("travelplanner", other_data, TRAVELPLANNER_SAMPLE) == other_data / "travelplanner"
    with caplog.at_level("WARNING", logger="genenv.envs.data"):
        tasks = get_benchmark("bamboogle", str(other_data)).load(split="heldout")
        get_benchmark("bamboogle", str(other_data)).load(split="train")
    assert len(tasks) == 25 and tasks[0].id == "bamboogle_5"  # the packaged copy holds all 125 questions
    assert [r.getMessage() for r in caplog.records] == [
        f"the data directory {other_data} has no bamboogle/ folder: reading the packaged sample {BAMBOOGLE_SAMPLE}"]
    assert folders_read()["bamboogle"] == str(BAMBOOGLE_SAMPLE)
    assert folders_read()["travelplanner"] == str(other_data / "travelplanner")
    nowhere = benchmark_dir("nobench", other_data, other_data / "no_sample")
    assert nowhere == other_data / "nobench"
    with pytest.raises(DataError, match=f"missing data file {other_data / 'nobench' / 'test.jsonl'}"):
        benchmark_file(nowhere, "test.jsonl")


def test_benchmark_packages_configs_join_the_search_path_beside_the_user_s(monkeypatch):
    """``with_benchmark_configs``: no package, the overrides unchanged; packages appended to a ``hydra.searchpath``
    the user gave (theirs first, none twice), or added as one."""
    from genenv.trainer.cli import with_benchmark_configs

    monkeypatch.setattr("genenv.envs.registry.plugin_config_packages", lambda: [])
    assert with_benchmark_configs(["benchmark=bfcl"]) == ["benchmark=bfcl"]
    monkeypatch.setattr("genenv.envs.registry.plugin_config_packages", lambda: ["a.configs", "b.configs"])
    assert with_benchmark_configs(["benchmark=a"]) == ["benchmark=a", "hydra.searchpath=[pkg://a.configs,pkg://b.configs]"]
    assert with_benchmark_configs(["hydra.searchpath=[file:///x, pkg://b.configs]"]) == [
        "hydra.searchpath=[file:///x,pkg://b.configs,pkg://a.configs]"]
