"""The gencoord_v0 OpenEnv server in OpenEnv's layout: ``openenv.yaml`` names ``server.app:app``.

``app`` is the app ``gencoord serve`` serves for the arguments in the environment variable ``GENCOORD_SERVE``
(a ``gencoord serve`` command line without the command; default: the ``heldout`` pool on the sim)::

    GENCOORD_SERVE="--backend sim --pool train --max-sessions 64 --plays sender" uvicorn server.app:app --port 8000

``main()`` (``python -m server.app``, ``uv run --project gencoord_v0_env server``) runs ``gencoord serve`` itself
with those arguments and its own, on ``--port`` or ``$PORT`` (default 8000), as the container does.
"""
from __future__ import annotations

from gencoord_env.commands.openenv_server import app_from_env
from gencoord_env.commands.openenv_server import main as serve_main

app = app_from_env()


def main() -> None:
    """``gencoord serve`` with ``$GENCOORD_SERVE`` and the command line's arguments."""
    serve_main()


if __name__ == "__main__":
    main()
