"""Every script in examples/ runs here on its small budget (SB3's in test_sb3_ppo.py; RLlib's only on
request, in its own virtualenv: see test_rllib_example)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: each is run by a test below, sb3_ppo_single_agent by test_sb3_ppo.py, marl_ppo and baselines by test_baselines.py
TESTED = {"sb3_ppo_single_agent", "torchrl_pettingzoo", "supersuit_vector", "rllib_ppo", "marl_ppo", "baselines"}
#: the README's GRPO-over-serve script: run against a live server by tests/train/test_trl_server.py (its
#: arguments are a model, a URL and a step count, not a budget)
SERVED = {"grpo_openenv"}


def test_every_example_is_tested_and_shows_its_command() -> None:
    names = {p.stem for p in EXAMPLES.glob("*.py")}
    assert names == TESTED | SERVED
    for name in TESTED:
        doc = (EXAMPLES / f"{name}.py").read_text(encoding="utf-8")
        assert f"examples/{name}.py" in doc and "--budget small" in doc, name


def test_torchrl_random_actions_respect_the_action_mask(example) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("torchrl")
    torchrl_example = example("torchrl_pettingzoo")
    env = torchrl_example.make_env("heldout")
    data = env.rollout(300, break_when_any_done=False)  # random actions from the masked action spec
    for agent in torchrl_example.AGENTS:
        deciding = data[agent, "info", "deciding"].flatten().bool()
        mask = data[agent, "action_mask"].squeeze(1)
        chosen = mask.gather(-1, data[agent, "action"]).flatten()
        assert deciding.any() and chosen.all()
    episodes, success = torchrl_example.episodes(data)
    assert episodes > 100 and 0.0 < success < 0.3


def test_torchrl_example_trains_and_evaluates_on_its_tiny_budget(example) -> None:  # type: ignore[no-untyped-def]
    """One PPO update of 1,000 steps, then greedy play of every held-out episode (``small``, which learns, took
    210 s in a loaded suite; the README's table has its figures)."""
    pytest.importorskip("torchrl")
    import gencoord_env

    result = example("torchrl_pettingzoo").main(["--budget", "tiny"])
    assert 0.0 < result["random_success"] < 0.3
    assert result["heldout_episodes"] == len(gencoord_env.parallel_env(backend="sim", pool="heldout").episodes)
    assert 0.0 <= result["heldout_success"] <= 1.0


def test_supersuit_example_steps_with_masked_random_actions(example) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("supersuit")
    supersuit_example = example("supersuit_vector")
    result = supersuit_example.main(["--budget", "small"])
    assert result["episodes"] > 500 and 0.0 < result["success"] < 0.3
    vec = supersuit_example.make_vec_env(copies=2)
    obs, _ = vec.reset(seed=0)
    assert obs["observation"].shape[0] == vec.num_envs == 4
    actions = supersuit_example.masked_random(obs["action_mask"], np.random.default_rng(0))
    assert all(obs["action_mask"][row, a] for row, a in enumerate(actions))
    vec.close()


RLLIB = os.environ.get("GENCOORD_RLLIB", "")


@pytest.mark.skipif(not RLLIB, reason="RLlib pins gymnasium 1.2.x and needs its own virtualenv; set GENCOORD_RLLIB=1 "
                                      "(ray importable here) or GENCOORD_RLLIB=/path/to/that/venv/bin/python")
def test_rllib_example() -> None:
    python = sys.executable if RLLIB == "1" else RLLIB
    proc = subprocess.run([python, str(EXAMPLES / "rllib_ppo.py"), "--budget", "small"],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    success = float(re.search(r"held-out success ([\d.]+)", proc.stdout)[1])  # type: ignore[index]
    assert success > 0.5, proc.stdout
