"""``python -m gencoord_env.train data|sft|evaluate ...`` (see ``train.cli``)."""
from __future__ import annotations

import sys

from gencoord_env.train.cli import main

sys.exit(main())
