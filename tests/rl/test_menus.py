"""What the menus leak, over every pool the env serves: before a request arrives no slot index tells the
bindings apart (the menu is the same for every binding behind one observation), and with
``menu="branches"`` the receiver's right slot differs between the bindings of a pair, so only the
request's content says which slot to take. ``receiver_shortcuts`` prints the figures with ``-s``."""
from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.messages import RequestMessage
from gencoord_env.tasks.pools import POOL_SIZES, TEAM_POOLS

#: every pool, on a route where its receivers decide (goal_capability's feedback route has none)
POOLS = [*POOL_SIZES, "procedural", *TEAM_POOLS]
ROUTE = {"team_feedback": "feedback"}
EPISODES = 400  # per pool at most (procedural is endless), every episode of the smaller pools


def _walk(pool: str, menu: str) -> tuple[dict[str, set[str]], list[tuple[str, str, int]]]:
    """(menus behind each pre-request observation, (pair key, binding, right slot) of each receiver)."""
    env = gencoord_env.parallel_env(backend="sim", pool=pool, route=ROUTE.get(pool, "forward"), actions="menu", menu=menu)
    rule = make_policy("rule")
    before: dict[str, set[str]] = defaultdict(set)
    receivers: list[tuple[str, str, int]] = []
    n = min(EPISODES, len(env.episodes)) if pool != "procedural" else EPISODES
    for k in range(0, n):
        obs, infos = env.reset(options={"index": k})
        episode = env.session.episode
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            context, text = infos[turn]["context"], env.observation_text(turn)
            menu_seen = json.dumps([infos[turn]["candidates"], obs[turn]["action_mask"].tolist()])
            wanted = rule.act(text, infos[turn])
            slot = infos[turn]["candidates"].index(wanted)
            if any(isinstance(m, RequestMessage) for m in context.messages):
                public = "\n".join(line for line in text.splitlines() if not line.startswith("MESSAGE"))
                receivers.append((public, episode.cluster.binding, slot))
            else:
                before[text].add(menu_seen)
            obs, _, _, _, infos = env.step({turn: slot})
    return before, receivers


def receiver_shortcuts(receivers: list[tuple[str, str, int]]) -> tuple[float, float]:
    """(success of the best fixed slot, share of matched sets whose bindings all want one slot; nan where no
    two bindings share a receiver view)."""
    best = Counter(slot for _, _, slot in receivers).most_common(1)[0][1] / len(receivers)
    by_pair: dict[str, set[int]] = defaultdict(set)
    bindings: dict[str, set[str]] = defaultdict(set)
    for public, binding, slot in receivers:
        by_pair[public].add(slot)
        bindings[public].add(binding)
    paired = [p for p in by_pair if len(bindings[p]) > 1]
    # no matched set behind one receiver view: the receiver holds the fact (goal_capability's workcell mode)
    same = sum(len(by_pair[p]) == 1 for p in paired) / len(paired) if paired else float("nan")
    return best, same


@pytest.mark.parametrize("pool", POOLS)
def test_no_slot_predicts_the_binding_before_the_request_and_branches_need_its_content(pool: str) -> None:
    figures = {}
    for menu in ("default", "branches"):
        before, receivers = _walk(pool, menu)
        leaking = [text for text, menus in before.items() if len(menus) > 1]
        assert not leaking, f"{pool} {menu}: {len(leaking)} observations show two menus"
        if not receivers:
            continue
        figures[menu] = receiver_shortcuts(receivers)
    print(f"\n{pool}: best fixed receiver slot / matched sets with one right slot: {figures}")
    if "default" in figures and figures["default"][1] == figures["default"][1]:  # not nan
        assert figures["default"] == (1.0, 1.0)  # the copy slot: always right, never needs the content
        best, same = figures["branches"]
        assert same == 0.0 and best <= 0.5
