"""A scripted stand-in for ``python -m llama_cpp.server`` that fails as a broken llama.cpp build does.

It takes the real server's command line (only ``--host`` and ``--port`` are read) and behaves by the environment
variable ``FAKE_LLAMA_MODE``:
- ``exit:N``: prints a line and exits at once with code ``N`` (a server that cannot start);
- ``die_after:K``: answers ``GET /v1/models`` and ``K`` chat completions (non-streamed, OpenAI's shape), then on
  the next ``POST`` kills itself with SIGILL, as a llama.cpp build for another CPU did on the first request whose
  prompt held the chat template's special tokens.
"""
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

mode, _, arg = os.environ.get("FAKE_LLAMA_MODE", "die_after:0").partition(":")
args = sys.argv[1:]
host, port = args[args.index("--host") + 1], int(args[args.index("--port") + 1])
if mode == "exit":
    print("fake llama.cpp server: exiting at once", flush=True)
    sys.exit(int(arg))
chats_left = int(arg)


class Handler(BaseHTTPRequestHandler):
    """``/v1/models`` and ``/v1/chat/completions`` as described in the module docstring."""

    def answer(self, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.answer({"object": "list", "data": [{"id": "smollm2", "object": "model"}]})

    def do_POST(self):  # noqa: N802
        global chats_left
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if chats_left <= 0:
            print("fake llama.cpp server: illegal instruction on a chat request", flush=True)
            os.kill(os.getpid(), signal.SIGILL)
        chats_left -= 1
        self.answer({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": "ok"}}],
                     "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})

    def log_message(self, *a):
        """Quiet: only the lines above reach the log."""


print(f"fake llama.cpp server listening on {host}:{port}", flush=True)
HTTPServer((host, port), Handler).serve_forever()
