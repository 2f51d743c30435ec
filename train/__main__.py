"""``python -m train data|sft|evaluate ...`` (see ``train.cli``)."""
from __future__ import annotations

import sys

from train.cli import main

sys.exit(main())
