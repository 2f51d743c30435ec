"""The branches menu can be learned from the observation: each slot's label (the ``MENU`` lines, the token
view's ``menu_labels``) names its branch, the right slot's label names what the deciding agent knows (its
private fact, or the request's content) and a learner that reads the labels beside the rule sender learns
the receiver's decision; a checkpoint plays as a policy from exactly the observation it learned on."""
from __future__ import annotations

import numpy as np
import pytest

import gencoord_env
from gencoord_env.agents import make_policy

torch = pytest.importorskip("torch")


def _labels(text: str) -> dict[int, str]:
    return {int(line.split()[1]): line.split(" ", 2)[2] for line in text.split("\n") if line.startswith("MENU ")}


@pytest.mark.parametrize("pool", ["heldout", "horizon", "visibility", "procedural"])
def test_the_right_slots_label_names_what_the_deciding_agent_knows(pool: str) -> None:
    env = gencoord_env.parallel_env(backend="sim", pool=pool, actions="menu", menu="branches")
    rule = make_policy("rule")
    seen = {"sender": 0, "receiver": 0}
    for k in range(0, 96, 3):
        obs, infos = env.reset(options={"index": k})
        binding = env.session.episode.binding
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            text = env.observation_text(turn)
            slot = infos[turn]["candidates"].index(rule.act(text, infos[turn]))
            labels = _labels(text)
            assert sorted(labels) == np.flatnonzero(obs[turn]["action_mask"]).tolist()
            assert labels[slot].split()[0] == f"branch={binding}"  # the rule agent's slot: the true branch
            private = [line for line in text.split("\n") if line.startswith(("PRIVATE", "MESSAGE"))]
            assert binding in "\n".join(private)  # ... which the agent reads in its fact or its message
            seen[infos[turn]["role"]] += 1
            obs, _, _, _, infos = env.step({turn: slot})
    assert seen["sender"] == seen["receiver"] == 32


def test_an_observation_only_receiver_learns_branches_beside_the_rule_sender(example) -> None:  # type: ignore[no-untyped-def]
    """Before the labels a receiver that read only its observation got 0.504 held out (one slot per pair)."""
    marl = example("marl_ppo")
    learners, curve = marl.train("ippo", "branches", updates=5, seed=0, policy="slots", learn="second", episodes=64)
    heldout = marl.success(learners, "heldout", "branches", marl.LEARN["second"], every=4)
    print(f"\ntraining success per update {curve}; held-out (every 4th episode) {heldout:.3f}")
    assert heldout > 0.9
    # without the request the receiver has nothing to read: a coin per matched pair
    assert marl.success(learners, "request_removed", "branches", marl.LEARN["second"], every=4) <= 0.55


def test_a_checkpoint_plays_from_the_observation_it_learned_on(example, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gencoord_env.agents.slots import MenuPolicy

    marl = example("marl_ppo")
    learners, _ = marl.train("ippo", "branches", updates=1, seed=3, policy="slots", episodes=8)
    path = learners.policy_of("branches", {"seed": 3}).save(tmp_path / "run.pt")
    loaded = {a: MenuPolicy.load(path, actor=a) for a in marl.AGENTS}
    assert loaded["agent_a"].about == {"seed": 3}
    env = marl.make_env("heldout", "branches")
    text_env = gencoord_env.parallel_env(backend="sim", pool="heldout")  # text actions: the policy answers records
    for k in range(6):
        obs, infos = env.reset(options={"index": k})
        _, text_infos = text_env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            mine, texts = loaded[turn].observe(infos[turn]["context"])
            assert all(np.array_equal(mine[key], obs[turn][key]) for key in obs[turn])
            slot = learners.act(turn, obs[turn], greedy=True)[0]
            assert loaded[turn].act("", text_infos[turn]) == texts[slot] == infos[turn]["candidates"][slot]
            obs, _, _, _, infos = env.step({turn: slot})
            _, _, _, _, text_infos = text_env.step({turn: texts[slot]})
        assert text_infos[turn]["outcome"] == infos[turn]["outcome"]
