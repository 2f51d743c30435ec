"""A context's wire form reads back as the same ``Context``, for every decision the env serves, and the rule
agents act on the read-back context exactly as on the env's own."""
from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.commands.cli import env_choices
from gencoord_env.tasks.context_wire import context_from_wire, context_to_wire
from gencoord_env.tasks.contexts import render

CHOICES = env_choices()
#: the agent that writes each surface's records
AGENTS = {"dsl": "rule", "json": "rule_json", "freeform": "freeform"}


def accepted(pool: str, route: str, view: str, surface: str) -> bool:
    try:
        gencoord_env.parallel_env(backend="sim", pool=pool, route=route, view=view, surface=surface).close()
    except ValueError:
        return False
    return True


def combinations() -> list[tuple[str, str, str, str]]:
    """Every (pool, route) the env accepts in the full view on the DSL surface, and every view and surface beside
    each route (on the first pool that runs it): the prior's form depends on the view, a message's on the route
    and the surface, the rest on the pool."""
    out = [(p, r, "full", "dsl") for p, r in itertools.product(CHOICES["pool"], CHOICES["route"]) if accepted(p, r, "full", "dsl")]
    for route in CHOICES["route"]:
        pool = next(p for p, r, _, _ in out if r == route)
        out += [(pool, route, v, s) for v, s in itertools.product(CHOICES["view"], CHOICES["surface"])
                if (v, s) != ("full", "dsl") and accepted(pool, route, v, s)]
    return out


def decisions(env: Any, index: int, policy: Any) -> list[tuple[str, dict[str, Any]]]:
    """(observation, info) of the deciding agent at every decision of one episode the policy plays."""
    obs, infos = env.reset(options={"index": index})
    out = []
    while env.agents:
        agent = next(a for a, i in infos.items() if i["deciding"])
        out.append((obs[agent], infos[agent]))
        obs, _, _, _, infos = env.step({**{a: "" for a in env.agents}, agent: policy.act(obs[agent], infos[agent])})
    return out


def test_every_pool_route_view_and_surface_is_covered() -> None:
    cases = combinations()
    assert {c[0] for c in cases} == set(CHOICES["pool"]) and {c[1] for c in cases} == set(CHOICES["route"])
    assert {c[2] for c in cases} == set(CHOICES["view"]) and {c[3] for c in cases} == set(CHOICES["surface"])


@pytest.mark.parametrize("pool,route,view,surface", combinations())
def test_the_wire_form_reads_back_as_the_same_context(pool: str, route: str, view: str, surface: str) -> None:
    env = gencoord_env.parallel_env(backend="sim", pool=pool, route=route, view=view, surface=surface)
    rule = make_policy(AGENTS[surface])
    seen = 0
    # the rule agent's episodes and random ones (other branches, failures), both role orders
    for index, player in ((0, rule), (1, rule), (2, make_policy("random", seed=3, surface=surface) if surface != "freeform" else rule)):
        for text, info in decisions(env, index, player):
            ctx = info["context"]
            wire = json.loads(json.dumps(context_to_wire(ctx)))  # plain JSON values
            back = context_from_wire(wire)
            assert back == ctx
            assert render(back) == render(ctx)
            assert rule.act(text, {**info, "context": back}) == rule.act(text, info)
            seen += 1
    assert seen >= 3


def test_private_fact_forms_and_a_bad_wire_form() -> None:
    for form in ("train", "C1", "C2", "C3"):
        env = gencoord_env.parallel_env(backend="sim", pool="heldout", private_fact=form)
        for _text, info in decisions(env, 0, make_policy("rule")):
            assert context_from_wire(json.loads(json.dumps(context_to_wire(info["context"])))) == info["context"]
    with pytest.raises(ValueError, match="not a context's wire form \\(KeyError: 'prior'\\); expected context_to_wire's output"):
        context_from_wire({"agent": "agent_a"})
