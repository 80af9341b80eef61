"""Shared fixtures: the data directory under test, a tiny random model, the real embedded model.

Tests read real data: ``$GENENV_DATA_DIR`` (CI sets it to ``../shared/data``) or, on a fresh clone without it,
the real samples shipped in each benchmark folder. ``DATA_DIR`` is the data directory (``None``: the packaged
samples); ``FULL_DATA`` tells whether the full benchmark files are in use.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from genenv.envs.data import is_packaged, resolve_data_dir  # noqa: E402

DATA_DIR = resolve_data_dir()
FULL_DATA = not is_packaged(DATA_DIR)


@pytest.fixture(scope="session")
def data_dir() -> Path | None:
    """The data directory the tests read (``None``: the packaged samples)."""
    return DATA_DIR


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The embedded SmolLM2-135M-Instruct as a Hugging Face folder (converted from the GGUF once, cached)."""
    from genenv.runtime.models import resolve_model_path

    return resolve_model_path("smollm2")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, smollm2_dir) -> Path:
    """A tiny random Llama (2 layers, width 64) with SmolLM2's tokenizer and chat template, saved to a folder.

    For tests where the model's quality does not matter (update mechanics, checkpoints, resume).
    """
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny-llama")
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture
def kill_when():
    """``kill_when(proc, ready, timeout=300)``: wait until ``ready()`` is true while ``proc`` runs, then SIGKILL it
    (a crash at an arbitrary point); fails when the process ends first."""
    import signal
    import time

    def _kill(proc, ready, timeout: float = 300.0) -> None:
        deadline = time.time() + timeout
        try:
            while time.time() < deadline and proc.poll() is None and not ready():
                time.sleep(0.02)
            assert proc.poll() is None, "the process ended before it could be killed"
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()

    return _kill


@pytest.fixture(scope="session")
def env_server_url():
    """The base URL of one ``genenv-serve`` (every benchmark; it reads ``$GENENV_DATA_DIR`` as the tests do) shared
    by the test run."""
    from genenv.runtime.serve.launch import spawn

    proc, url = spawn()
    yield url
    proc.terminate()
    proc.wait(30)


RESULTS = Path(__file__).resolve().parents[1] / "results"  # the shipped experiment archives and SHA256SUMS


@pytest.fixture(scope="session")
def shipped(tmp_path_factory):
    """``shipped(name) -> Path``: a folder of the shipped experiment runs, ``name`` = ``<experiment>[/<subfolder>]``
    (``twx_informative``, ``twx_informative/genenv``, ``twx_levers/warm/source``), unpacked from
    ``results/<experiment>.tar.xz`` (checksum verified) once per test session into a temporary cache."""
    from genenv.trainer.experiments.archive import unpack

    cache = tmp_path_factory.mktemp("shipped")
    roots: dict[str, Path] = {}

    def folder(name: str) -> Path:
        top, _, sub = name.partition("/")
        if top not in roots:
            roots[top] = unpack(RESULTS / f"{top}.tar.xz", cache)
        return roots[top] / sub if sub else roots[top]

    return folder
