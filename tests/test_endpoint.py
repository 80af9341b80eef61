"""The endpoint policy (``openai:URL#MODEL``) against a real OpenAI-compatible server (llama.cpp's, serving the
embedded GGUF), its retries, concurrency and errors against a scripted HTTP server, and what the server's owner
(`LlamaServer`, the install check) says when the server process fails (a scripted stand-in for
``llama-server`` in ``tests/fake_llama_server``)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from genenv.eval.model_server import LlamaServer, ServerError
from genenv.runtime.processes import free_port
from genenv.runtime.episodes import RolloutSpec
from genenv.runtime.evaluation import evaluate, output_agreement
from genenv.runtime.policies import OpenAIPolicy, Prompt, TransformersPolicy, make_policy


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama.cpp's server on the embedded GGUF for this module's tests (``.ci/install`` installs it)."""
    with LlamaServer(log_path=tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server


class Scripted(BaseHTTPRequestHandler):
    """Answers ``POST /v1/chat/completions`` with the statuses in ``server.script`` (one per request, then 200),
    after ``server.delay`` seconds; counts requests and the most in flight at once."""

    def do_POST(self):  # noqa: N802 (http.server's name)
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.requests += 1
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
            status = srv.script.pop(0) if srv.script else 200
        time.sleep(srv.delay)
        if status == 200:
            text = f"echo: {body['messages'][-1]['content']}"
            payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                       "choices": [{"index": k, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}} for k in range(body.get("n", 1))],
                       "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
        else:
            payload = {"error": {"message": "overloaded", "type": "server_error"}}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        with srv.lock:
            srv.in_flight -= 1

    def log_message(self, *args):
        """Keep the test output quiet (BaseHTTPRequestHandler logs every request to stderr)."""


@pytest.fixture
def scripted():
    """A `Scripted` server on a free port: ``(server, base_url)``."""
    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), Scripted)
    srv.lock, srv.requests, srv.in_flight, srv.max_in_flight = threading.Lock(), 0, 0, 0
    srv.script, srv.delay = [], 0.0
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


def prompts(k: int) -> list[Prompt]:
    return [Prompt([{"role": "user", "content": f"question {i}"}]) for i in range(k)]


def test_503_twice_then_200_is_retried(scripted):
    srv, url = scripted
    srv.script = [503, 503]
    out = OpenAIPolicy(url, "m", max_retries=3).generate(prompts(1))
    assert out[0][0].text == "echo: question 0"
    assert srv.requests == 3
    assert out[0][0].usage == {"prompt_tokens": 7, "completion_tokens": 3}


def test_errors_that_retries_do_not_cure_name_the_url(scripted):
    srv, url = scripted
    srv.script = [503] * 5
    with pytest.raises(RuntimeError, match=rf"{url} answered 503 after 1 retries"):
        OpenAIPolicy(url, "m", max_retries=1).generate(prompts(1))
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RuntimeError, match=rf"{dead} could not be reached"):
        OpenAIPolicy(dead, "m", max_retries=1, timeout=5).generate(prompts(1))


def test_a_turns_requests_are_in_flight_together_up_to_the_concurrency(scripted):
    srv, url = scripted
    srv.delay = 0.3
    out = OpenAIPolicy(url, "m", concurrency=4).generate(prompts(12), n=2)
    assert [g.text for g in out[5]] == ["echo: question 5"] * 2  # prompt order and n kept
    assert srv.requests == 12
    assert srv.max_in_flight == 4


def test_endpoint_evaluation_on_a_real_server(llama_server, data_dir):
    """BFCL and Bamboogle slices and multi-step episodes (TextWorldExpress) through the endpoint, with usage."""
    policy = llama_server.policy(concurrency=4)
    res = evaluate(policy, ["bfcl", "bamboogle"], data_dir=data_dir, limit=4, progress=False,
                   options={"bfcl": {"category": "simple_python"}}, spec=RolloutSpec(max_new_tokens=48))
    assert [(u, t["tasks"]) for u, t in res.timing.items()] == [("bfcl/simple_python", 4), ("bamboogle", 4)]
    assert all(r["completion_tokens"] > 0 and r["prompt_tokens"] > 50 for r in res.rows)
    assert {"bfcl", "bamboogle"} <= set(res.headlines)
    multi = evaluate(policy, ["twx"], data_dir=data_dir, limit=2, progress=False, options={"twx": {"games": "coin"}},
                     spec=RolloutSpec(max_new_tokens=16, env_kwargs={"twx": {"max_steps": 4}}))
    assert len(multi.rows) == 2 and max(r["turns"] for r in multi.rows) > 1
    assert policy.requests >= 8 + sum(r["turns"] for r in multi.rows)


def test_greedy_endpoint_agrees_with_the_local_policy(llama_server, data_dir, smollm2_dir):
    """The same greedy prompts through llama.cpp (Q4_1 weights) and transformers (their float32 de-quantised
    copy): numerics differ, so texts may part after a few tokens; most must start alike."""
    kwargs = dict(data_dir=data_dir, limit=12, progress=False, spec=RolloutSpec(max_new_tokens=24))
    remote = evaluate(llama_server.policy(), ["bamboogle"], **kwargs)
    local = evaluate(TransformersPolicy(str(smollm2_dir), dtype="float32"), ["bamboogle"], **kwargs)
    agree = output_agreement(local, remote)
    print(f"agreement with the local policy: {agree}")
    assert agree["n"] == 12
    assert agree["first_word"] >= 0.5


def test_the_spec_reaches_the_same_server(llama_server):
    """``--policy openai:URL#smollm2`` (another process's view of the server) answers like ``server.policy()``."""
    p = prompts(1)
    spec_text = make_policy(llama_server.spec, max_retries=0).generate(p, max_new_tokens=8)[0][0].text
    assert spec_text == llama_server.policy().generate(p, max_new_tokens=8)[0][0].text != ""


FAKE_LLAMA = Path(__file__).parent / "fake_llama_server"


@pytest.fixture
def fake_llama(monkeypatch):
    """Makes the scripted ``llama-server`` stand-in the binary of this process and its children
    (``GENENV_LLAMA_SERVER``); returns a function that sets its ``FAKE_LLAMA_MODE``."""
    monkeypatch.setenv("GENENV_LLAMA_SERVER", str(FAKE_LLAMA))
    return lambda mode: monkeypatch.setenv("FAKE_LLAMA_MODE", mode)


def test_a_server_that_dies_on_its_first_chat_fails_at_start_naming_sigill_and_the_fix(fake_llama, tmp_path):
    fake_llama("die_after:0")
    with pytest.raises(ServerError) as err:
        LlamaServer(model="unused.gguf", log_path=tmp_path / "s.log").__enter__()  # entering is the start-up
    msg = str(err.value)
    assert "exited with code -4 (SIGILL)" in msg and "illegal instruction" in msg
    assert "bash .ci/build-llama-server" in msg  # what to do
    assert "fake llama.cpp server: illegal instruction on a chat request" in msg  # the log's tail


def test_the_endpoint_policy_says_when_its_server_died_mid_run(fake_llama, tmp_path):
    fake_llama("die_after:2")  # the start-up chat and one request, then SIGILL
    with LlamaServer(model="unused.gguf", log_path=tmp_path / "s.log") as server:
        policy = server.policy(concurrency=1, max_retries=4)
        assert policy.generate(prompts(1))[0][0].text == "ok"
        with pytest.raises(RuntimeError, match=r"exited with code -4 \(SIGILL\)") as err:
            policy.generate(prompts(2))
        assert server.base_url in str(err.value) and "illegal instruction on a chat request" in str(err.value)
        assert "could not be reached" not in str(err.value)


@pytest.mark.parametrize("mode, words", [("exit:3", "exited with code 3"), ("die_after:0", "code -4 (SIGILL)")])
def test_the_install_check_fails_on_a_broken_server(fake_llama, mode, words):
    """``python -m genenv.eval.model_server --check`` (the last step of ``.ci/install``) exits 1 naming the
    server's exit code, against a server that exits at once and one that dies on its first chat request."""
    fake_llama(mode)
    out = subprocess.run([sys.executable, "-m", "genenv.eval.model_server", "--check"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "llama.cpp server check FAILED" in out.stderr and words in out.stderr


def test_the_install_check_streams_a_chat_completion_from_the_real_server():
    """The same check against the installed llama.cpp build: it streams tokens and exits 0."""
    out = subprocess.run([sys.executable, "-m", "genenv.eval.model_server", "--check", "--max-tokens", "16"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    streamed = re.search(r"one chat completion stream of (\d+) tokens", out.stdout)
    assert streamed and 0 < int(streamed.group(1)) <= 16, out.stdout
