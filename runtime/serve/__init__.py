"""``genenv-serve``: every registered benchmark behind one OpenEnv session server, split as OpenEnv splits an env:
:mod:`~genenv.runtime.serve.protocol` (the wire types and reset arguments, shared by server and clients),
:mod:`~genenv.runtime.serve.catalog` (the served tasks), :mod:`~genenv.runtime.serve.environment` (one session per
connection and its MCP tools), :mod:`~genenv.runtime.serve.app` (the ASGI app, its guard and the ``genenv-serve``
command line), :mod:`~genenv.runtime.serve.client` (episodes played on a server, the runner of
``genenv-train env_server=URL`` and ``genenv-eval --env-server URL``), :mod:`~genenv.runtime.serve.trl` (TRL's
``environment_factory``) and :mod:`~genenv.runtime.serve.launch` (a local server in a subprocess)."""
from genenv.envs.extras import require_extra

require_extra("serve", "openenv", "fastapi", "uvicorn", "websockets", needed_by="genenv.runtime.serve (genenv-serve)")
