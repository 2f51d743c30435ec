"""Every stage ``stages.REWRITABLE`` names is rewritable: an intervention there changes the outcome and
leaves its trace record; an intervention on any other stage is refused when it is built."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable

import pytest

import gencoord_env
from gencoord_env.contract import Violation
from gencoord_env.envs.gencoord.stages import REWRITABLE
from gencoord_env.lifecycle import PipelineStage as P
from gencoord_env.outcomes import FailureCode as F
from gencoord_env.pipeline.types import Resolution
from gencoord_env.agents import make_policy
from gencoord_env.wrappers import CounterfactualFeedback, RequestReplacement, StageIntervention

from wrapper_play import interventions_in, play


def rewriting(stage: P, change: Callable[[Any], Any]) -> type[StageIntervention]:
    """An intervention on ``stage`` that applies ``change`` and checks it is given that stage's inputs."""

    class Rewrite(StageIntervention):
        def rewrite(self, value: Any, episode: Any, **inputs: Any) -> tuple[Any, dict[str, Any]]:
            assert sorted(inputs) == sorted(REWRITABLE[stage]), (stage, sorted(inputs))
            return change(value), {"rewrote": stage.value}

    Rewrite.stage = stage
    Rewrite.__name__ = f"Rewrite_{stage.value}"
    return Rewrite


def conflict(value: Resolution) -> Resolution:
    return Resolution(None, F.RESOLUTION_CONFLICT, "overruled by an intervention")


HELDOUT = {"pool": "heldout"}
FEEDBACK = {"pool": "goal_capability", "route": "feedback"}
#: stage -> (env arguments, the intervention class, the outcome it leads to)
CASES: dict[P, tuple[dict[str, Any], type[StageIntervention], F | None]] = {
    P.CHECK: (HELDOUT, rewriting(P.CHECK, lambda v: (*v, Violation("self_plan", "refused", "refused by an intervention"))),
              F.CONTRACT_REJECT),
    P.DELIVER: ({"pool": "request"}, RequestReplacement, F.TERMINAL_FAILURE),
    P.RESPOND: (FEEDBACK, CounterfactualFeedback, None),
    P.RESOLVE_FORWARD: (HELDOUT, rewriting(P.RESOLVE_FORWARD, conflict), F.RESOLUTION_CONFLICT),
    P.RESOLVE_FEEDBACK: (FEEDBACK, rewriting(P.RESOLVE_FEEDBACK, conflict), F.RESOLUTION_CONFLICT),
    P.RESOLVE_JOINT: ({**HELDOUT, "route": "centralized"}, rewriting(P.RESOLVE_JOINT, conflict), F.RESOLUTION_CONFLICT),
    P.RESOLVE_EDGES: ({"pool": "teams"}, rewriting(P.RESOLVE_EDGES, conflict), F.RESOLUTION_CONFLICT),
    P.MATERIALIZE: (HELDOUT, rewriting(P.MATERIALIZE, lambda plan: replace(plan, tasks=plan.tasks[:-1])), None),
    P.COMPILE: (HELDOUT, rewriting(P.COMPILE, lambda calls: list(calls)[:-1]), None),
    P.VERIFY: (HELDOUT, rewriting(P.VERIFY, lambda v: replace(v, code=F.TERMINAL_FAILURE, terminal_ok=False,
                                                              reasons=("overruled",))), F.TERMINAL_FAILURE),
}


def test_every_rewritable_stage_has_a_case():
    assert set(CASES) == set(REWRITABLE) == set(P)


@pytest.mark.parametrize("stage", list(CASES), ids=str)
def test_an_intervention_on_each_stage_changes_the_outcome_and_is_traced(stage: P):
    kwargs, cls, expected = CASES[stage]
    baseline = play(gencoord_env.parallel_env(backend="sim", **kwargs), 0)["info"]
    assert baseline["outcome"] is F.SUCCESS
    info = play(cls(gencoord_env.parallel_env(backend="sim", **kwargs)), 0)["info"]
    assert info["outcome"] is not F.SUCCESS
    if expected is not None:
        assert info["outcome"] is expected
    records = interventions_in(info["trace"])
    assert records and {r["intervention"] for r in records} == {cls.__name__}


def test_an_intervention_on_verify_rewrites_the_verdict():
    """``stage = "verify"`` (a plain string) works: the verdict is rewritten, not silently left alone."""

    class Overrule(StageIntervention):
        stage = "verify"

        def rewrite(self, value: Any, episode: Any, **inputs: Any) -> tuple[Any, dict[str, Any]]:
            return replace(value, code=F.HANDOFF_FAILURE), {"was": value.code}

    info = play(Overrule(gencoord_env.parallel_env(backend="sim", pool="heldout")), 0)["info"]
    assert info["outcome"] is F.HANDOFF_FAILURE
    assert interventions_in(info["trace"]) == [{"stage": "intervention", "intervention": "Overrule", "was": F.SUCCESS}]


def test_an_intervention_on_an_unknown_stage_is_refused_at_construction():
    class Typo(StageIntervention):
        stage = "verfy"

        def rewrite(self, value: Any, episode: Any, **inputs: Any) -> tuple[Any, None]:
            return value, None

    valid = ", ".join(s.value for s in P)
    with pytest.raises(ValueError, match=re.escape(f"Typo rewrites stage 'verfy', which is not a rewritable stage "
                                                   f"(did you mean 'verify'?); the rewritable stages are {valid}")):
        Typo(gencoord_env.parallel_env(backend="sim", pool="heldout"))


def test_an_intervention_without_a_stage_is_refused():
    class Unnamed(StageIntervention):
        pass

    with pytest.raises(ValueError, match="Unnamed rewrites stage '', which is not a rewritable stage"):
        Unnamed(gencoord_env.parallel_env(backend="sim", pool="heldout"))


def test_an_intervention_on_a_stage_its_route_never_runs_is_refused():
    with pytest.raises(ValueError, match=re.escape("rewrites the 'respond' stage, which only runs in the routes ['feedback']")):
        CounterfactualFeedback(gencoord_env.parallel_env(backend="sim", pool="heldout"))
    with pytest.raises(ValueError, match=re.escape("Rewrite_resolve_edges rewrites the 'resolve_edges' stage, which only "
                                                   "runs in the routes ['forward']; this env uses route='centralized'")):
        rewriting(P.RESOLVE_EDGES, lambda v: v)(gencoord_env.parallel_env(backend="sim", pool="teams", route="centralized"))


def test_reset_refuses_an_intervention_object_on_an_unknown_stage():
    class Loose:
        stage = "deliverr"

        def rewrite(self, value: Any, episode: Any, **inputs: Any) -> tuple[Any, None]:
            return value, None

    env = gencoord_env.parallel_env(backend="sim", pool="heldout")
    with pytest.raises(ValueError, match=re.escape("Loose rewrites stage 'deliverr', which is not a rewritable stage "
                                                   "(did you mean 'deliver'?)")):
        env.reset(options={"interventions": (Loose(),)})


#: (stage, env arguments) an env never reaches, and the words of the refusal's reason: the pool, the route and
#: the surface each make a stage unreachable
UNREACHABLE: list[tuple[P, dict[str, Any], str]] = [
    (P.RESOLVE_EDGES, HELDOUT, "on route 'forward' it runs in the pools ['teams', 'chain3', 'chain4', 'chain5']"),
    (P.RESOLVE_EDGES, {"pool": "procedural"}, "on route 'forward' it runs in the pools ['teams', 'chain3', 'chain4', 'chain5']"),
    (P.RESOLVE_FORWARD, {"pool": "teams"}, "on route 'forward' it runs in the pools ['train', 'heldout', 'request', "
                                           "'horizon', 'crossproduct', 'goal_capability', 'visibility', 'procedural']"),
    (P.DELIVER, {"pool": "heldout", "surface": "freeform"},
     "the free-form dialogue has no 'deliver' stage; surface='dsl' or 'json' runs it"),
]


@pytest.mark.parametrize("stage, kwargs, hint", UNREACHABLE, ids=lambda v: str(v) if isinstance(v, P) else None)
def test_an_intervention_on_a_stage_its_env_never_reaches_is_refused_at_construction(stage: P, kwargs: dict[str, Any], hint: str):
    env = gencoord_env.parallel_env(backend="sim", **kwargs)
    cls = rewriting(stage, lambda v: v)
    where = f"pool {kwargs['pool']!r} on route {kwargs.get('route', 'forward')!r}"
    if "surface" in kwargs:
        where += f" with surface={kwargs['surface']!r}"
    with pytest.raises(ValueError, match=re.escape(f"{cls.__name__} rewrites the {stage.value!r} stage, which {where} "
                                                   f"never runs (its episodes run ")) as refused:
        cls(env)
    assert str(refused.value).endswith(f"); {hint}")
    with pytest.raises(ValueError, match=re.escape(f"{cls.__name__} rewrites the {stage.value!r} stage, which {where}")):
        env.reset(options={"interventions": (cls.__new__(cls),)})  # a bare intervention object is refused at reset too


@pytest.mark.parametrize("kwargs", [HELDOUT, {"pool": "procedural"}, {"pool": "teams"}, FEEDBACK,
                                    {"pool": "team_feedback", "route": "feedback"}, {**HELDOUT, "route": "centralized"},
                                    {"pool": "teams", "route": "requester_only"}, {**HELDOUT, "route": "single_step"},
                                    {**HELDOUT, "surface": "freeform"}], ids=str)
def test_every_stage_an_env_runs_is_accepted_and_no_other(kwargs: dict[str, Any]):
    """What an env accepts is what its episodes run: a rewrite on each accepted stage fires in some episode."""
    env = gencoord_env.parallel_env(backend="sim", **kwargs)
    accepted = set()
    for stage in P:
        try:
            rewriting(stage, lambda v: v)(gencoord_env.parallel_env(backend="sim", **kwargs))
            accepted.add(stage)
        except ValueError:
            pass
    assert accepted == set(env.stages_running)
    fired: set[str] = set()
    for index in range(len(env.episodes) if not env.pool.endless else 8):
        wrapped = env
        for stage in accepted:
            wrapped = rewriting(stage, lambda v: v)(wrapped)
        policy = make_policy("freeform" if "surface" in kwargs else "rule")
        fired |= {r["rewrote"] for r in interventions_in(play(wrapped, index, policy)["info"]["trace"])}
        if len(fired) == len(accepted):
            break
    assert fired == {s.value for s in accepted}


def test_the_wrappers_table_says_what_each_intervention_rewrites() -> None:
    """The package docstring's table (stage and routes of every intervention) is what the classes say."""
    import gencoord_env.wrappers as wrappers

    rows = {}
    for line in wrappers.__doc__.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in wrappers.INTERVENTIONS:
            rows[cells[0]] = (cells[1], tuple(r.strip() for r in cells[2].split(",")))
    assert rows == {name: (str(cls.stage), cls.routes()) for name, cls in wrappers.INTERVENTIONS.items()}
