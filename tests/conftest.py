"""Shared fixtures: the data directory under test, a tiny random model, the real embedded model.

Tests read real data: ``$GENENV_DATA_DIR`` (CI sets it to ``../shared/data``) or, on a fresh clone without it,
the real samples shipped in each benchmark folder. ``DATA_DIR`` is the data directory (``None``: the packaged
samples); ``FULL_DATA`` tells whether the full benchmark files are in use.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# the measurement scripts (scripts/bench_*.py) are not library modules; the tests import their functions by name
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

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


def start_env_server(*args: str, env: dict[str, str] | None = None, timeout: float = 120.0):
    """Start ``genenv-serve`` (``python -m genenv.runtime.env_server``) on a free loopback port with ``args``;
    returns ``(process, base URL)`` once ``/health`` answers. Raises ``RuntimeError`` with its output if it exits
    first."""
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = ["--data-dir", str(DATA_DIR)] if DATA_DIR else []
    import tempfile

    log = tempfile.NamedTemporaryFile("w+", prefix="genenv-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "genenv.runtime.env_server", "--port", str(port), *data, *args],
                            stdout=log, stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})
    proc.log_path = log.name  # a file, not a pipe: a full pipe would block the server (the TWX JVM writes to it)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"genenv-serve exited with {proc.returncode}: {open(log.name).read()[-3000:]}")
        try:
            headers = {"Authorization": f"Bearer {env['GENENV_SERVE_TOKEN']}"} if env and env.get(
                "GENENV_SERVE_TOKEN") else {}
            with urllib.request.urlopen(urllib.request.Request(url + "/health", headers=headers), timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError("genenv-serve did not answer /health in time")


@pytest.fixture(scope="session")
def env_server_url():
    """The base URL of one ``genenv-serve`` (every benchmark, the data under test) shared by the session's tests."""
    proc, url = start_env_server()
    yield url
    proc.terminate()
    proc.wait(30)
