"""``python -m gencoord_env.world.minecraft setup``: install the sidecar's Node packages (same as ``gencoord setup``).

``python -m gencoord_env.world.minecraft check`` reports whether the runtime is ready without changing anything.
"""
from __future__ import annotations

import argparse
import sys

from .errors import RuntimeMissing
from .runtime import locate, setup


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gencoord_env.world.minecraft", description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["setup", "check"])
    ap.add_argument("--force", action="store_true", help="reinstall even when up to date")
    args = ap.parse_args(argv)
    try:
        rt = setup(force=args.force) if args.command == "setup" else locate()
    except RuntimeMissing as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"ready: Node {'.'.join(map(str, rt.node_version))} at {rt.node}; sidecar {rt.entry}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
