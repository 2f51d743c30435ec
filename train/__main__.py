"""``python -m gencoord_env.train data|sft|evaluate ...``: the same as ``gencoord train ...``."""
from __future__ import annotations

import sys

from gencoord_env.commands.cli import main

sys.exit(main(["train", *sys.argv[1:]]))
