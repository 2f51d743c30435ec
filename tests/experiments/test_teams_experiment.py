"""``gencoord experiment teams`` on the sim with the rule agents: the per-edge ceilings, feedback per edge and
the paper's B_local / B_central as the chain grows."""
from __future__ import annotations

import pytest

from gencoord_env.commands.experiments.analysis import analyze
from gencoord_env.commands.experiments.cli import policy_factory
from gencoord_env.commands.experiments.runner import run_experiment
from gencoord_env.commands.experiments.specs import experiment


@pytest.fixture(scope="module")
def records() -> dict[str, dict]:
    exp = experiment("teams")
    make, chosen = policy_factory(None)
    rows = run_experiment(exp, make)
    return {r["condition"]: r for r in analyze(exp, rows, {c.name: chosen(c) for c in exp.conditions})}


def test_true_requests_succeed_on_every_template(records: dict[str, dict]) -> None:
    for template in ("chain", "relay", "fan_in"):
        r = records[f"{template} / true requests"]
        assert r["success_rate"] == 1.0 and r["episodes"] == r["clusters"] * 3
    assert records["fan_in / true requests"]["clusters"] == 32  # four bindings per public instance


def test_removing_one_edges_request_gives_the_paired_ceiling_on_its_receiver(records: dict[str, dict]) -> None:
    removed = {k: r for k, r in records.items() if " / removed " in k}
    assert len(removed) == 6
    for name, r in removed.items():
        assert r["success_rate"] == 0.5, name
        assert r["paired"]["success"]["versus_minus_condition"] == 0.5
    assert records["relay / removed relay>receiver"]["failed_edges"] == "relay>receiver 24"


def test_replacing_a_request_sends_execution_down_the_alternative(records: dict[str, dict]) -> None:
    for name in ("relay / replaced sender>relay", "relay / replaced relay>receiver", "fan_in / replaced wood_sender>builder",
                 "fan_in / replaced stone_sender>builder", "chain / replaced every edge"):
        r = records[name]
        assert r["success_rate"] == 0.0 and r["outcomes"] == {"TERMINAL_FAILURE": r["episodes"]}, name
        assert r["handoff_verified_rate"] == 1.0
    # the chain's two requests carry one fact: replacing one of them is caught where their consequences meet
    for name in ("chain / replaced sender>crafter", "chain / replaced sender>courier"):
        r = records[name]
        assert r["outcomes"] == {"RESOLUTION_CONFLICT": 48} and r["failed_edges"] == "crafter>courier 48"


def test_feedback_works_per_edge(records: dict[str, dict]) -> None:
    assert records["workcells / correct feedback"]["success_rate"] == 1.0
    assert records["workcells / centralized"]["success_rate"] == 1.0
    assert records["workcells / A-only"]["success_rate"] == 0.25  # two peers, each a coin the requester cannot see
    for peer in ("first_peer", "second_peer"):
        assert records[f"workcells / counterfactual requester>{peer}"]["success_rate"] == 0.0
    feedback = records["workcells / correct feedback"]
    assert feedback["active_edges"] == 4  # two requests and two responses, each on its own directed edge


def test_centralized_and_local_bytes_as_the_chain_grows(records: dict[str, dict]) -> None:
    local = [records[f"chain n={n} / local (forward)"] for n in (3, 4, 5)]
    central = [records[f"chain n={n} / centralized"] for n in (3, 4, 5)]
    assert [r["agents"] for r in local] == [3, 4, 5] and all(r["success_rate"] == 1.0 for r in local + central)
    assert [r["active_edges"] for r in local] == [2, 3, 4] and all(r["local_rounds"] == 1 for r in local)
    assert [r["central_participants"] for r in central] == [2, 3, 4]
    b_local = [r["b_local_mean"] for r in local]
    b_central = [r["b_central_mean"] for r in central]
    assert b_local == sorted(b_local) and b_central == sorted(b_central)
    assert all(c > 5 * local for c, local in zip(b_central, b_local))  # state aggregation outweighs the edge exchange
    # each added carrier adds one edge exchange locally and one upload + download centrally
    assert b_central[2] - b_central[1] > b_local[2] - b_local[1] > 0
