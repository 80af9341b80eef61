"""``genenv-serve``: every registered benchmark behind one OpenEnv session server, split as OpenEnv splits an env:
`protocol` (the wire types and reset arguments, shared by server and clients),
`catalog` (the served tasks), `environment` (one session per
connection and its MCP tools), `app` (the ASGI app, its guard and the ``genenv-serve``
command line), `client` (episodes played on a server, the runner of
``genenv-train env_server=URL`` and ``genenv-eval --env-server URL``), `trl` (TRL's
``environment_factory``) and `launch` (a local server in a subprocess)."""
from genenv.envs.extras import require_extra

require_extra("serve", "openenv", "fastapi", "uvicorn", "websockets", needed_by="genenv.runtime.serve (genenv-serve)")

__all__ = [  # what a user may import: the public modules
    "app", "catalog", "client", "environment", "launch", "protocol", "trl",
]
