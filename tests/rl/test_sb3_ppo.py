"""Standard RL learns the sender's decision: sb3-contrib MaskablePPO on the single-agent menu view, a rule
receiver as partner, trained on the train pool and judged on held-out clusters
(``examples/sb3_ppo_single_agent.py`` with its quick budget, 6,144 steps: the small one, 10,240, took 198 s
of training in a loaded CI run and learned the same)."""
from __future__ import annotations

import pytest

pytest.importorskip("sb3_contrib")


def test_ppo_beats_ninety_percent_on_heldout_as_sender_after_six_thousand_steps(example) -> None:  # type: ignore[no-untyped-def]
    sb3 = example("sb3_ppo_single_agent")
    result = sb3.main(["--budget", "quick"])
    assert result["heldout_success"] > 0.9, result
