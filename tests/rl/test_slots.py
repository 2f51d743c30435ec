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


def test_checkpoints_of_several_seeds_cross_play_by_name(example, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gencoord_env.commands.experiments.protocol import Setting, cross_play, evaluate_pair

    marl = example("marl_ppo")
    for seed in (0, 1):
        learners, _ = marl.train("ippo", "branches", updates=1, seed=seed, policy="slots", episodes=8)
        learners.policy_of("branches", {"seed": seed}).save(tmp_path / f"run{seed}.pt")
    spec = f"rl:{tmp_path}/run{{seed}}.pt"
    setting = Setting("heldout", episodes=8)
    self_play = evaluate_pair(spec, spec, setting, seeds=[0, 1])
    assert self_play.units == ["0", "1"] and self_play.table.shape == (2, 4)
    one_actor = make_policy(f"rl:{tmp_path}/run0.pt#agent_b")
    assert one_actor.actor == "agent_b" and one_actor.actor_for("agent_a") == "agent_b"
    with pytest.raises(ValueError, match="no actor 'agent_c'"):
        make_policy(f"rl:{tmp_path}/run0.pt#agent_c")
    with pytest.raises(FileNotFoundError, match="no menu-policy checkpoint"):
        make_policy(f"rl:{tmp_path}/none.pt")
    xp = cross_play([f"slots={spec}", "rule=rule"], setting, seeds=[0, 1])
    assert xp.names == ["slots/0", "slots/1", "rule"]
    scores = xp.scores()["slots"]
    assert scores["cross_play"].units == ["slots/0|slots/1", "slots/1|slots/0"]
    assert scores["with_others"].table.shape == (4, 4) and scores["self_play"].table.shape == (2, 4)


def test_sequences_of_orders_train_on_the_pipeline_with_one_return_per_sequence(example) -> None:  # type: ignore[no-untyped-def]
    marl = example("marl_ppo")
    with pytest.raises(ValueError, match="--orders plays the pipeline"):
        marl.engine_for("batched", orders=2)
    assert marl.engine_for(None, orders=2) == "pipeline" and marl.engine_for(None) == "batched"
    env = marl.OrderSequence(marl.EpisodeStatistics(marl.make_env("train", "branches")), 3, "mean")
    learners = marl.Learners(env.observation_space("agent_a")["observation"].shape[0], 19, "ippo", "slots")
    batch = marl.collect(env, learners, episodes=4)
    returns = [round(r, 4) for b in batch.values() for r in b["ret"].tolist()]
    assert 4 * 3 <= len(returns) <= 4 * 3 * 2  # every decision of every order (one ends at a refused first record)
    assert set(returns) <= {0.0, 0.3333, 0.6667, 1.0} and len(env.successes) == 12  # a share; each order counted
    _, curve = marl.train("ippo", "branches", updates=1, seed=0, policy="slots", episodes=4, orders=2)
    assert len(curve) == 1 and 0.0 <= curve[0] <= 1.0
