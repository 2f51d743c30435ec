"""``examples/marl_ppo.py`` on the batched engine: the same learners judged on the batched engine and on the
pipeline, episode by episode, give the same success on the held-out pool and with the request removed, and a training update reads
decisions of the shapes the pipeline's collection gives."""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("torch")


@pytest.mark.parametrize(("menu", "policy"), [("default", "mlp"), ("branches", "slots")])
def test_batched_evaluation_equals_the_pipelines(example, menu: str, policy: str) -> None:  # type: ignore[no-untyped-def]
    marl = example("marl_ppo")
    learners, curve = marl.train("mappo", menu, 1, seed=0, policy=policy, episodes=64, engine="batched")
    assert len(curve) == 1 and 0.0 <= curve[0] <= 1.0
    for pool in ("heldout", "request_removed") if menu == "default" else ("heldout",):
        assert marl.success_batched(learners, pool, menu, every=3) == pytest.approx(
            marl.success(learners, pool, menu, every=3)), pool


def test_batched_and_pipeline_collections_have_one_shape(example) -> None:  # type: ignore[no-untyped-def]
    marl = example("marl_ppo")
    torch.manual_seed(0)
    tree = marl.shared_tree(pool="train", menu="default", observations="bag", state=True)
    space = tree.env.observation_space("agent_a")
    learners = marl.Learners(space["observation"].shape[0], space["action_mask"].shape[0], "mappo")
    engine = marl.BatchedEngine(tree, 32, seed=0, autoreset=False)
    batched, outcome = marl.collect_batched(engine, learners)
    piped = marl.collect(marl.make_env("train", "default"), learners, 32)
    assert outcome.shape == (32,) and (outcome >= 0).all()
    for agent in marl.AGENTS:
        assert batched[agent].keys() == piped[agent].keys()
        for key, value in batched[agent].items():
            assert value.dtype == piped[agent][key].dtype and value.shape[1:] == piped[agent][key].shape[1:], (agent, key)
    # every episode's first decision is the first role's: 32 of them between the two agents
    assert sum(len(b["action"]) for b in batched.values()) >= 32
    returns = torch.cat([b["ret"] for b in batched.values()])
    assert set(returns.tolist()) <= {0.0, 1.0}  # the binary reward of each decision's episode


def test_a_rule_partner_on_the_batched_engine_is_the_pipelines(example) -> None:  # type: ignore[no-untyped-def]
    """An observation-only receiver beside the rule sender: the same learners judged on both engines agree."""
    marl = example("marl_ppo")
    learners, _ = marl.train("ippo", "branches", 1, seed=0, policy="slots", learn="second", episodes=32)
    learned = marl.LEARN["second"]
    assert marl.success_batched(learners, "heldout", "branches", learned, every=3) == pytest.approx(
        marl.success(learners, "heldout", "branches", learned, every=3))


def test_ippo_critics_read_the_log_of_the_bag_the_actors_read(example) -> None:  # type: ignore[no-untyped-def]
    """On the batched engine as in the pipeline's collection (``features``): the critic's input is the log of the
    counts the actor reads, every decision."""
    marl = example("marl_ppo")
    tree = marl.shared_tree(pool="train", menu="default", observations="bag", state=True)
    space = tree.env.observation_space("agent_a")
    learners = marl.Learners(space["observation"].shape[0], space["action_mask"].shape[0], "ippo")
    batched, _ = marl.collect_batched(marl.BatchedEngine(tree, 32, seed=0, autoreset=False), learners)
    for agent, b in batched.items():
        assert torch.equal(b["critic_x"], marl.features(b["bag"].numpy())), agent


@pytest.mark.parametrize("algo", ["ippo", "mappo"])
def test_training_on_the_columns_the_pool_uses_is_training_the_whole_layers(example, algo: str) -> None:  # type: ignore[no-untyped-def]
    """``Cut``: the first layers trained on the ~280 columns the train pool's observations use learn what the whole
    layers learn (the same training successes, every weight within float rounding), and come back whole."""
    marl = example("marl_ppo")
    whole, whole_curve = marl.train(algo, "default", 3, seed=2, episodes=64, cut=False)
    cut, cut_curve = marl.train(algo, "default", 3, seed=2, episodes=64, cut=True)
    assert cut_curve == whole_curve
    a, b = whole.state_dict(), cut.state_dict()
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].shape == b[key].shape and torch.allclose(a[key], b[key], atol=1e-5), key
    first = cut.actors["agent_a"].net[0]
    assert first.in_features == 2 * (first.in_features // 2) and first.in_features > 3000  # the whole bag again
    moved = (a["actors.agent_a.net.0.weight"] != marl.train(algo, "default", 0, seed=2, episodes=64)[0]
             .state_dict()["actors.agent_a.net.0.weight"]).any(0)
    assert 0 < int(moved.sum()) < 400  # training moved only the columns the pool uses
