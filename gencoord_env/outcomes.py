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


#: ``reward="staged"``: partial credit by how far the pipeline got before it stopped. A parsed record
#: that the contract rejects earns 0.2, a contract-valid one that forms no commitment 0.4, a commitment
#: that fails in materialization or execution 0.6, an executed plan whose handoff was verified but whose
#: terminal predicate fails 0.8, and success 1.0. The verifier checks the handoff before the terminal
#: predicate, so TERMINAL_FAILURE always comes after a verified handoff.
STAGED_REWARD: dict[FailureCode, float] = {
    FailureCode.PARSE_FAILURE: 0.0,
    FailureCode.CONTRACT_REJECT: 0.2,
    FailureCode.NO_COMMITMENT: 0.4,
    FailureCode.RESOLUTION_CONFLICT: 0.4,
    FailureCode.MATERIALIZATION_FAILURE: 0.6,
    FailureCode.EXECUTION_FAILURE: 0.6,
    FailureCode.HANDOFF_FAILURE: 0.6,
    FailureCode.TERMINAL_FAILURE: 0.8,
    FailureCode.SUCCESS: 1.0,
}

#: ``reward="binary"`` (the paper's): 1.0 for SUCCESS, else 0.0.
BINARY_REWARD: dict[FailureCode, float] = {code: float(code is FailureCode.SUCCESS) for code in FailureCode}

REWARDS: dict[str, dict[FailureCode, float]] = {"binary": BINARY_REWARD, "staged": STAGED_REWARD}
