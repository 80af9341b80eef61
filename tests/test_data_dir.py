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
from genenv.runtime.policies import OraclePolicy
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
    res = evaluate(OraclePolicy(), ["travelplanner"], split="validation", data_dir=str(other_data), progress=False)
    planted = [r for r, t in zip(res.rows, tasks) if t.gold]
    assert planted and all(r["success"] for r in planted), [r["error"] for r in planted]  # scored on its database
    cfg = compose_config(["benchmark=travelplanner", f"data_dir={other_data}"])
    kwargs = env_kwargs(cfg)
    assert kwargs["travelplanner"]["data_dir"] == str(other_data)
    trained = play_episodes([t for t in tasks if t.gold], OraclePolicy(),
                            RolloutSpec(env_kwargs=kwargs)).trajectories  # the trainer's path
    assert all(t.success for t in trained)
    packaged = play_episodes([t for t in tasks if t.gold][:1], OraclePolicy()).trajectories  # packaged: lacks them
    assert not packaged[0].success and "within_sandbox" in packaged[0].info["error"]


def test_specs_validate_against_the_given_data_dir(other_data):
    login = json.dumps({"dialogue": "User: Please log me in, I am plantedUser with password planted-pass.",
                        "call": {"name": "GetUserToken",
                                     "arguments": {"username": "plantedUser", "password": "planted-pass"}}})
    admitted = get_benchmark("api_bank", str(other_data)).parse_generated(login, "gen-0-0-0", 0, None)
    assert admitted.gold["arguments"]["username"] == "plantedUser", admitted
    refused = get_benchmark("api_bank").parse_generated(login, "gen-0-0-1", 0, None)  # the packaged accounts
    assert refused.reason == "execution_error", refused
