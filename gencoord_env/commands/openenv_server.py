"""The OpenEnv package's server (``gencoord_v0_env/``): ``gencoord serve`` as a deployment runs it.

Its arguments are those in ``$GENCOORD_SERVE`` (a ``gencoord serve`` command line without the command; default
the ``heldout`` pool on the sim), then the command line's, and ``--port $PORT`` (default 8000)
(:func:`gencoord_env.commands.serve.serve_argv`). ``gencoord_v0_env/server/app.py`` serves :func:`app_from_env`
as OpenEnv's ``server.app:app``; :func:`main` is the package's ``server`` script (``uv run --project
gencoord_v0_env server``) and the container's command. It sits apart from ``serve`` because it reads the
``gencoord`` command line's parser, and ``cli`` imports ``serve``.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from gencoord_env.commands.cli import build_parser
from gencoord_env.commands.cli import main as cli_main
from gencoord_env.commands.serve import config_from_args, make_app, serve_argv, sidecar_pool

__all__ = ["app_from_env", "main"]


def app_from_env() -> Any:
    """The app ``gencoord serve`` would serve for :func:`serve_argv`'s arguments (OpenEnv's ``server.app:app``)."""
    config = config_from_args(build_parser().parse_args(["serve", *serve_argv()]))
    return make_app(config, sidecar_pool(config))


def main(argv: Sequence[str] | None = None) -> None:
    """``gencoord serve`` with :func:`serve_argv`'s arguments (``argv``: default the command line's)."""
    raise SystemExit(cli_main(["serve", *serve_argv(sys.argv[1:] if argv is None else argv)]))
