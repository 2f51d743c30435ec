"""Episode outcome codes: the paper's stage failure codes plus the two non-failure outcomes."""
from __future__ import annotations

import enum


class FailureCode(str, enum.Enum):
    """One code per stage of the grounded pipeline (supplement, "Finite response schema").

    ``SUCCESS`` and ``NO_COMMITMENT`` are outcomes rather than failures; they share the enum so that
    every episode ends with exactly one value of this type.
    """

    SUCCESS = "SUCCESS"
    NO_COMMITMENT = "NO_COMMITMENT"
    PARSE_FAILURE = "PARSE_FAILURE"
    CONTRACT_REJECT = "CONTRACT_REJECT"
    RESOLUTION_CONFLICT = "RESOLUTION_CONFLICT"
    MATERIALIZATION_FAILURE = "MATERIALIZATION_FAILURE"
    EXECUTION_FAILURE = "EXECUTION_FAILURE"
    HANDOFF_FAILURE = "HANDOFF_FAILURE"
    TERMINAL_FAILURE = "TERMINAL_FAILURE"

    def __str__(self) -> str:
        return self.value
