"""A fast slice of the env contract's fuzzing (`genenv.benchmarks.fuzz`; ``python lab/benches/bench_fuzz.py``
runs it in full): random and adversarial texts (huge integer literals, deep nesting, oversized text) through every
registered env's step and every benchmark spec's ``parse_generated``; none may raise."""
from __future__ import annotations

import pytest

from genenv.benchmarks.fuzz import fuzz_env, fuzz_generation, fuzz_texts
from genenv.benchmarks.registry import BENCHMARKS
from genenv.envs import ENVS

from conftest import DATA_DIR

SLICE = 200  # texts per env and per parser (the full benchmark runs 10,000, with mutated gold texts as well)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    out = fuzz_texts(SLICE, seed=1)  # no gold mutations here: valid API-Bank calls would load its tool models
    assert len(out) == SLICE and any(len(t) > 20_000 for t in out) and any("9" * 4301 in t for t in out)
    return out


@pytest.mark.parametrize("name", sorted(ENVS))
def test_no_text_raises_in_an_env_step(name, texts):
    result = fuzz_env(name, texts, tasks=2, data_dir=DATA_DIR)
    assert result["exceptions"] == 0, result["errors"]
    assert result["texts"] == SLICE and result["invalid"] <= SLICE
    # every env but BFCL multi-turn (where a reply without a call ends the turn) has invalid actions among them
    assert result["invalid"] > 0 or name == "bfcl_multi_turn"


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_no_text_raises_in_a_generation_parser(name, texts):
    result = fuzz_generation(name, texts, data_dir=DATA_DIR)
    assert result["exceptions"] == 0, result["errors"]
    assert result["admitted"] + sum(result["rejected"].values()) == SLICE
    assert result["rejected"]["invalid_json"] + result["rejected"]["no_json"] > 0
