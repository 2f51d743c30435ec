"""Contract checker and skill catalog: every violation code, valid proposals, catalog validation."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gencoord_env.catalog import CATALOG, CATALOG_PATH, CatalogError, load_catalog, minecraft_items, parse_catalog
from gencoord_env.contract import VIOLATION_CODES, PublicScope, Violation, check
from gencoord_env.dsl import PeerRequest, Proposal, Task, parse

SCOPE = PublicScope(
    agents=("agent_a", "agent_b"),
    agent="agent_a",
    references=frozenset({"order_chest", "furnace_a", "table_a", "site_a"}),
    bindings=frozenset({"WORK_BRANCH", "B2"}),
    items=frozenset({"oak_planks", "crafting_table", "raw_iron", "iron_ingot", "coal"}),
)


def violations(text: str, scope: PublicScope = SCOPE) -> list[tuple[str, str]]:
    return [(v.where, v.code) for v in check(parse(text), scope)]


VALID = [
    "SELF resource.obtain(q=4,item=oak_planks) > resource.deliver(q=4,item=oak_planks,to=agent_b)\n"
    "REQ agent_b craft.item(q=1,input=oak_planks,item=crafting_table) > "
    "resource.deliver(q=1,item=crafting_table,dst=order_chest)",
    "SELF -\nREQ agent_b craft.item(bind=WORK_BRANCH,q=1,input=oak_planks,item=crafting_table,station=table_a)",
    "SELF control.wait() > control.wait(ticks=20,bind=B2,loc=site_a)\nREQ -",
    "SELF resource.obtain(q=3,item=raw_iron,from=agent_b,loc=order_chest) > "
    "transform.supply_input(q=3,item=raw_iron,station=furnace_a) > transform.supply_fuel(q=1,item=coal,station=furnace_a) > "
    "transform.collect_output(q=3,input=raw_iron,item=iron_ingot,station=furnace_a) > "
    "build.component(q=3,item=iron_ingot,site=site_a)\nREQ -",
    "SELF resource.deliver(q=1,item=coal,dst=order_chest,dst_role=fuel)\nREQ -",
    # requested tasks are run by the target, so 'to' may name the proposer
    "SELF -\nREQ agent_b resource.deliver(q=2,item=coal,to=agent_a)",
    # 'from' is any agent of the episode, the actor included
    "SELF resource.obtain(q=1,item=coal,from=agent_a)\nREQ -",
    # compatibility keys are canonicalized before checking
    "SELF resource.obtain(count=1,item=coal,location_ref=order_chest,binding_id=B2)\nREQ -",
]


@pytest.mark.parametrize("text", VALID)
def test_valid_proposals_have_no_violations(text: str) -> None:
    assert check(parse(text), SCOPE) == ()


def test_any_minecraft_item_when_scope_items_is_none() -> None:
    scope = PublicScope(("agent_a", "agent_b"), "agent_a", frozenset(), frozenset())
    assert check(parse("SELF resource.obtain(q=1,item=diamond_pickaxe)\nREQ -"), scope) == ()
    assert violations("SELF resource.obtain(q=1,item=diamond_pickaxe)\nREQ -") == [
        ("self_plan[0].item", "item_not_in_episode")
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELF craft.item(q=1,item=crafting_table,speed=2)\nREQ -", [("self_plan[0].speed", "unknown_key")]),
        ("SELF craft.item(q=1,item=crafting_table,to=agent_b)\nREQ -", [("self_plan[0].to", "unknown_key")]),
        ("SELF craft.item(q=1)\nREQ -", [("self_plan[0].item", "missing_key")]),
        ("SELF transform.supply_fuel(q=1,item=coal)\nREQ -", [("self_plan[0].station", "missing_key")]),
        ("SELF build.component(item=oak_planks)\nREQ -",
         [("self_plan[0].q", "missing_key"), ("self_plan[0].site", "missing_key")]),
        ("SELF resource.deliver(q=1,item=coal)\nREQ -", [("self_plan[0]", "one_of")]),
        ("SELF resource.deliver(q=1,item=coal,to=agent_b,dst=order_chest)\nREQ -", [("self_plan[0]", "one_of")]),
        ("SELF craft.item(q=1.0,item=crafting_table)\nREQ -", [("self_plan[0].q", "wrong_type")]),
        ("SELF craft.item(q=true,item=crafting_table)\nREQ -", [("self_plan[0].q", "wrong_type")]),
        ('SELF craft.item(q="1",item=crafting_table)\nREQ -', [("self_plan[0].q", "wrong_type")]),
        ("SELF craft.item(q=1,item=7)\nREQ -", [("self_plan[0].item", "wrong_type")]),
        ("SELF resource.deliver(q=1,item=coal,to=null)\nREQ -", [("self_plan[0].to", "wrong_type")]),
        ('SELF resource.deliver(q=1,item=coal,dst=order_chest,dst_role="a b")\nREQ -',
         [("self_plan[0].dst_role", "wrong_type")]),
        ("SELF control.wait(ticks=2.5)\nREQ -", [("self_plan[0].ticks", "wrong_type")]),
        ("SELF craft.item(q=0,item=crafting_table)\nREQ -", [("self_plan[0].q", "non_positive")]),
        ("SELF control.wait(ticks=-3)\nREQ -", [("self_plan[0].ticks", "non_positive")]),
        ("SELF resource.deliver(q=1,item=coal,to=agent_c)\nREQ -", [("self_plan[0].to", "unknown_agent")]),
        ("SELF resource.obtain(q=1,item=coal,from=agent_z)\nREQ -", [("self_plan[0].from", "unknown_agent")]),
        ("SELF -\nREQ agent_c control.wait()", [("peer_requests[0].target", "unknown_agent")]),
        ("SELF resource.deliver(q=1,item=coal,to=agent_a)\nREQ -", [("self_plan[0].to", "self_target")]),
        ("SELF -\nREQ agent_a control.wait()", [("peer_requests[0].target", "self_target")]),
        ("SELF -\nREQ agent_b resource.deliver(q=1,item=coal,to=agent_b)",
         [("peer_requests[0].requested_plan[0].to", "self_target")]),
        ("SELF resource.obtain(q=1,item=oak_plank)\nREQ -", [("self_plan[0].item", "not_minecraft_item")]),
        ("SELF craft.item(q=1,item=crafting_table,input=minecraft:oak_planks)\nREQ -",
         [("self_plan[0].input", "not_minecraft_item")]),
        ("SELF resource.obtain(q=1,item=diamond)\nREQ -", [("self_plan[0].item", "item_not_in_episode")]),
        ("SELF craft.item(bind=B9,q=1,item=crafting_table)\nREQ -", [("self_plan[0].bind", "inadmissible_binding")]),
        ("SELF resource.deliver(q=1,item=coal,dst=chest_b)\nREQ -", [("self_plan[0].dst", "unknown_reference")]),
        ("SELF build.component(q=1,item=oak_planks,site=site_b)\nREQ -", [("self_plan[0].site", "unknown_reference")]),
        ("SELF control.wait(loc=nowhere)\nREQ -", [("self_plan[0].loc", "unknown_reference")]),
        ("SELF transform.supply_input(q=1,item=raw_iron,station=furnace_b)\nREQ -",
         [("self_plan[0].station", "unknown_reference")]),
        ("SELF resource.obtain(q=2305,item=oak_planks)\nREQ -", [("self_plan[0].q", "over_limit")]),
    ],
)
def test_each_violation_code(text: str, expected: list[tuple[str, str]]) -> None:
    assert violations(text) == expected


def test_every_violation_is_reported_with_a_reason() -> None:
    text = (
        "SELF resource.obtain(q=0,item=oak_plank,zz=1) > resource.deliver(q=1,item=coal,to=agent_a,dst=x)\n"
        "REQ agent_c craft.item(bind=X,q=true,station=table_b)"
    )
    found = check(parse(text), SCOPE)
    assert [(v.where, v.code) for v in found] == [
        ("self_plan[0].q", "non_positive"),
        ("self_plan[0].item", "not_minecraft_item"),
        ("self_plan[0].zz", "unknown_key"),
        ("self_plan[1].to", "self_target"),
        ("self_plan[1].dst", "unknown_reference"),
        ("self_plan[1]", "one_of"),
        ("peer_requests[0].target", "unknown_agent"),
        ("peer_requests[0].requested_plan[0].bind", "inadmissible_binding"),
        ("peer_requests[0].requested_plan[0].q", "wrong_type"),
        ("peer_requests[0].requested_plan[0].station", "unknown_reference"),
        ("peer_requests[0].requested_plan[0].item", "missing_key"),
    ]
    assert all(isinstance(v, Violation) and v.code in VIOLATION_CODES and v.message for v in found)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELF craft.item(q=1,item=crafting_table,speed=2)\nREQ -",
         "craft.item takes no key 'speed'; expected keys: bind, q, input, item, loc, station"),
        ("SELF craft.item(q=1,item=crafting_table,statoin=table_a)\nREQ -",
         "craft.item takes no key 'statoin' (did you mean 'station'?); expected keys: bind, q, input, item, loc, station"),
        ("SELF craft.item(q=1.0,item=crafting_table)\nREQ -", "q must be a positive integer, got 1.0 (a float)"),
        ("SELF craft.item(q=true,item=crafting_table)\nREQ -", "q must be a positive integer, got true (a boolean)"),
        ("SELF craft.item(q=0,item=crafting_table)\nREQ -", "q must be a positive integer, got 0"),
        ("SELF craft.item(q=1,item=7)\nREQ -", "item must be a Minecraft item name (a string), got 7 (a int)"),
        ("SELF resource.obtain(q=1,item=oak_plank)\nREQ -",
         "item='oak_plank' is not a Minecraft 1.21.4 item name (did you mean 'oak_planks'?)"),
        ("SELF resource.obtain(q=1,item=minecraft:coal)\nREQ -",
         "item='minecraft:coal' is not a Minecraft 1.21.4 item name; write item names without the 'minecraft:' namespace"),
        ("SELF resource.obtain(q=1,item=diamond)\nREQ -",
         "item='diamond' is not an item of this episode; expected one of "
         "['coal', 'crafting_table', 'iron_ingot', 'oak_planks', 'raw_iron']"),
        ("SELF resource.deliver(q=1,item=coal,to=agent_a)\nREQ -",
         "to must name a peer of 'agent_a', not 'agent_a' itself; expected one of ['agent_b']"),
        ("SELF resource.deliver(q=1,item=coal,to=agent_c)\nREQ -",
         "to='agent_c' is not an agent of this episode; expected one of ['agent_b']"),
        ("SELF -\nREQ agent_a control.wait()",
         "a request must go to a peer, not to the proposing agent 'agent_a'; expected one of ['agent_b']"),
        ("SELF craft.item(bind=B9,q=1,item=crafting_table)\nREQ -",
         "bind='B9' is not an admissible binding of this episode; expected one of ['B2', 'WORK_BRANCH']"),
        ("SELF resource.deliver(q=1,item=coal,dst=order_chst)\nREQ -",
         "dst='order_chst' is not a grounding reference of this episode (did you mean 'order_chest'?); "
         "expected one of ['furnace_a', 'order_chest', 'site_a', 'table_a']"),
        ("SELF craft.item(q=1)\nREQ -", "craft.item requires the key 'item' (a Minecraft item name)"),
        ("SELF resource.deliver(q=1,item=coal)\nREQ -", "resource.deliver takes exactly one of 'to' or 'dst'; got neither"),
    ],
)
def test_messages_say_what_was_wrong_and_what_was_expected(text: str, message: str) -> None:
    found = check(parse(text), SCOPE)
    assert len(found) == 1
    assert found[0].message == message


def test_structural_violations_of_hand_built_proposals() -> None:
    wait = Task("control.wait", {})
    proposal = Proposal(
        self_plan=(wait,) * 6 + (Task("fly", {}),),
        peer_requests=(PeerRequest("agent_b", ()), PeerRequest("agent_b", (wait,))),
    )
    assert [(v.where, v.code) for v in check(proposal, SCOPE)] == [
        ("self_plan", "path_too_long"),
        ("self_plan[6].skill", "unknown_skill"),
        ("peer_requests", "too_many_requests"),
        ("peer_requests[0].requested_plan", "empty_plan"),
    ]


def test_every_code_is_exercised() -> None:
    """The parametrized cases above cover every code the checker can return."""
    texts = [text for text, _ in test_each_violation_code.pytestmark[0].args[1]]  # type: ignore[attr-defined]
    codes = {v.code for text in texts for v in check(parse(text), SCOPE)}
    assert codes | {"unknown_skill", "path_too_long", "too_many_requests", "empty_plan"} == VIOLATION_CODES


def test_wrong_argument_types_raise_type_error() -> None:
    with pytest.raises(TypeError, match="Expected a Proposal but got str"):
        check("SELF -\nREQ -", SCOPE)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Expected a PublicScope but got dict"):
        check(parse("SELF -\nREQ -"), {})  # type: ignore[arg-type]


def test_public_scope_validation() -> None:
    with pytest.raises(ValueError, match=re.escape("PublicScope.agent 'agent_c' is not one of the episode's agents")):
        PublicScope(("agent_a", "agent_b"), "agent_c", frozenset(), frozenset())
    scope = PublicScope(["agent_a", "agent_b"], "agent_a", {"r"}, {"b"}, {"coal"})  # type: ignore[arg-type]
    assert scope.agents == ("agent_a", "agent_b") and scope.references == frozenset({"r"})
    assert isinstance(scope.items, frozenset)


# ---- limits (data/limits.json) ------------------------------------------------------------------

ANY_ITEM = PublicScope(("agent_a", "agent_b"), "agent_a", frozenset({"order_chest"}), frozenset({"B2"}))
BIG = 2**64


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("SELF resource.obtain(q=2305,item=oak_planks)\nREQ -", "self_plan[0].q",
         "q must be an integer in [1, 2304] (limits.args.count: items one task or skill call moves (q, count): at "
         "least one, at most a full inventory (36 stacks of 64)), got 2305"),
        (f"SELF resource.obtain(q={BIG},item=oak_planks)\nREQ -", "self_plan[0].q",
         "q must be an integer in [1, 2304] (limits.args.count: items one task or skill call moves (q, count): at "
         "least one, at most a full inventory (36 stacks of 64)), got 18446744073709551616"),
        ("SELF control.wait(ticks=1201)\nREQ -", "self_plan[0].ticks",
         "ticks must be an integer in [1, 1200] (limits.args.ticks: game ticks one wait lasts (20 a second): at most "
         "one minute), got 1201"),
        (f"SELF -\nREQ agent_b craft.item(q={10**4000},item=crafting_table)", "peer_requests[0].requested_plan[0].q",
         f"q must be an integer in [1, 2304] (limits.args.count: items one task or skill call moves (q, count): at "
         f"least one, at most a full inventory (36 stacks of 64)), got {str(10**4000)[:20]}... (4001 characters)"),
        (f"SELF craft.item(q=-{10**4000},item=crafting_table)\nREQ -", "self_plan[0].q",
         f"q must be a positive integer, got -{str(10**4000)[:19]}... (4002 characters)"),
        ("SELF resource.obtain(q=1,item=" + "a" * 1_000_000 + ")\nREQ -", "self_plan[0].item",
         "item 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'... has 1000000 characters; a name has at most 128 "
         "(limits.args.name_chars)"),
        ("SELF resource.obtain(q=1,item=oak_planks,loc=" + "o" * 129 + ")\nREQ -", "self_plan[0].loc",
         "loc 'oooooooooooooooooooooooooooooooooooooooo'... has 129 characters; a name has at most 128 "
         "(limits.args.name_chars)"),
        ("SELF -\nREQ " + "b" * 5000 + " control.wait()", "peer_requests[0].target",
         "the target 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb'... has 5000 characters; a name has at most 128 "
         "(limits.args.name_chars)"),
        ("SELF control.wait(" + "k" * 200 + "=1)\nREQ -", "self_plan[0].kkkkkkkkkkkkkkkk...",
         "a key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk'... has 200 characters; a name has at most 128 "
         "(limits.args.name_chars)"),
        ("SELF control.wait(" + ",".join(f"k{i}=1" for i in range(17)) + ")\nREQ -", "self_plan[0]",
         "control.wait has 17 arguments; a task has at most 16 (limits.args.task_args)"),
    ],
)
def test_values_beyond_the_limits_are_over_limit(text: str, where: str, message: str) -> None:
    found = check(parse(text), ANY_ITEM)
    assert [(v.where, v.code, v.message) for v in found] == [(where, found[0].code, message)]
    assert found[0].code in ("over_limit", "non_positive")


def test_limits_come_from_the_limits_table_and_fit_every_op_argument() -> None:
    """The contract's bounds are limits.json's, and within them every value lowers into a valid skill call."""
    from gencoord_env.limits import LIMITS
    from gencoord_env.pipeline.compile import lower
    from gencoord_env.pipeline.types import DispatchTask
    from gencoord_env.world.types import OP_ARGS

    assert CATALOG.limit_of("q") is LIMITS.args["count"] and CATALOG.limit_of("ticks") is LIMITS.args["ticks"]
    assert CATALOG.limit_of("item") is None
    q, ticks, name = LIMITS.args["count"].max, LIMITS.args["ticks"].max, "o" * LIMITS.args["name_chars"].max
    scope = PublicScope(("agent_a", "agent_b"), "agent_a", frozenset({name}), frozenset())
    record = parse(f"SELF resource.obtain(q={q},item=oak_planks,loc={name}) > control.wait(ticks={ticks}) > "
                   f"craft.item(q={q},item=crafting_table,station={name}) > resource.deliver(q={q},item=coal,to=agent_b)"
                   f"\nREQ -")
    assert check(record, scope) == ()
    calls = [c for t in record.self_plan for c in lower(DispatchTask("t", "", "agent_a", t, name, ()))]
    assert {op for _, op, _ in calls} == {"goto", "withdraw", "wait", "craft", "give", "await_handoff"}
    items = minecraft_items()
    assert all(OP_ARGS[op][k].accepts(v, items) for _, op, args in calls for k, v in args.items()), calls
    over = parse(f"SELF resource.obtain(q={q + 1},item=oak_planks) > control.wait(ticks={ticks + 1})\nREQ -")
    assert [v.code for v in check(over, scope)] == ["over_limit", "over_limit"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["key_limits"].pop("ticks"),
         "catalog.key_limits: expected exactly the integer argument keys ['q', 'ticks'], got ['q']"),
        (lambda c: c["key_limits"].update(q="counts"),
         "catalog.key_limits.q: 'counts' is not a limit of limits.json's args; expected one of "
         "['count', 'name_chars', 'path_tasks', 'task_args', 'ticks']"),
        (lambda c: c["key_limits"].update(ticks="count"),
         "catalog.skills.control.wait.lower[0].ops[0].args.ticks: $ticks may be an int 1 to 2304 (limits.args.count), "
         "but wait.ticks takes an int in [0, 1200] (skill_ops.json); make the limit fit the op argument"),
        (lambda c: c["skills"]["control.wait"].update(defaults={"ticks": 5000}),
         "catalog.skills.control.wait.defaults.ticks: 5000 is not within limits.args.ticks [0, 1200]"),
    ],
)
def test_catalog_limits_validation(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    mutate(raw)
    with pytest.raises(CatalogError, match=re.escape(message)):
        parse_catalog(raw)


def test_did_you_mean_over_every_item_name() -> None:
    """The item index suggests what difflib over all 1,385 names suggests, on typos of every kind."""
    import difflib

    names = sorted(minecraft_items())
    typos = ["oak_plank", "crafting_tabel", "iron_ingto", "cobblestonee", "furnase", "raw_irn", "diamondpickaxe",
             "redstone_tourch", "glas_pane", "sticck", "iar", "qqqqzzzz"]
    for word in typos:
        expected = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
        found = check(parse(f"SELF resource.obtain(q=1,item={word})\nREQ -"), ANY_ITEM)[0].message
        hint = f" (did you mean {expected[0]!r}?)" if expected else ""
        assert found == f"item={word!r} is not a Minecraft 1.21.4 item name{hint}"


# ---- skill catalog ---------------------------------------------------------------------------


def test_catalog_contract() -> None:
    assert CATALOG.skill_names == (
        "control.wait", "resource.obtain", "resource.deliver", "craft.item",
        "transform.supply_input", "transform.supply_fuel", "transform.collect_output", "build.component",
    )
    assert CATALOG.key_order == ("bind", "q", "input", "item", "from", "to", "dst", "dst_role", "site", "loc", "station")
    assert dict(CATALOG.key_aliases) == {
        "count": "q", "quantity": "q", "target_agent_ref": "to", "to_agent_id": "to", "destination": "dst",
        "destination_role": "dst_role", "from_agent_id": "from", "location_ref": "loc", "binding_id": "bind",
    }
    for spec in CATALOG.skills.values():
        assert spec.optional["bind"] == "binding" and spec.optional["loc"] == "reference"
    deliver = CATALOG.skills["resource.deliver"]
    assert dict(deliver.exactly_one_of) == {"to": "peer", "dst": "reference"}
    assert set(CATALOG.skills["transform.collect_output"].required) == {"q", "item", "station"}
    assert CATALOG.skills["control.wait"].key_type("ticks") == "positive_int"
    assert CATALOG.skills["control.wait"].key_type("q") is None
    assert {k for k, t in CATALOG.key_types.items() if t == "reference"} == {"loc", "dst", "site", "station"}
    assert [s.name for s in CATALOG.skills.values() if s.transform] == [
        "craft.item", "transform.supply_input", "transform.supply_fuel", "transform.collect_output"]
    assert CATALOG.skills["resource.obtain"].location == ("loc", "@source_chest")
    assert CATALOG.skills["control.wait"].location == CATALOG.location == ("loc",)


def test_minecraft_items() -> None:
    items = minecraft_items()
    assert len(items) > 1000
    assert {"oak_planks", "crafting_table", "furnace", "raw_iron", "iron_ingot", "coal", "cobblestone"} <= items
    assert "oak_plank" not in items and "minecraft:coal" not in items


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda c: c["skills"]["craft.item"]["required"].update(q="number"), "catalog.skills.craft.item.required.q: unknown type 'number'"),
        (lambda c: c["skills"]["craft.item"]["optional"].update(item="item"), "catalog.skills.craft.item: keys ['item'] are listed twice"),
        (lambda c: c["key_aliases"].update(amount="qty"), "catalog.key_aliases.amount: 'qty' is not a compact key of key_order"),
        (lambda c: c["skills"]["craft.item"]["optional"].update(count="positive_int"),
         "catalog.skills.craft.item: 'count' is an alias; use the compact key 'q'"),
        (lambda c: c.pop("skills"), "catalog: missing field 'skills'"),
        (lambda c: c["skills"]["transform.collect_output"]["optional"].update(input="atom"),
         "catalog.skills.transform.collect_output.optional.input: type 'atom' differs from 'item' at "
         "catalog.skills.craft.item.optional.input; a key has one type in every skill"),
        (lambda c: c["skills"]["control.wait"].pop("lower"),
         "catalog.skills.control.wait: missing field 'lower' (the skill calls that realize the skill)"),
        (lambda c: c["skills"]["build.component"].update(location=["stie"]),
         "catalog.skills.build.component.location: 'stie' is not an argument key of the skill; expected one of "
         "['bind', 'item', 'loc', 'q', 'site']"),
        (lambda c: c["skills"]["resource.obtain"].update(location=["loc", "@home"]),
         "catalog.skills.resource.obtain.location: '@home' is not a grounded value here; expected one of ['@source_chest']"),
        (lambda c: c["skills"]["build.component"]["lower"][0]["ops"][1].update(op="plcae"),
         "catalog.skills.build.component.lower[0].ops[1].op: unknown op 'plcae'; expected one of "
         "['await_handoff', 'craft', 'deposit', 'furnace_fuel', 'furnace_input', 'furnace_output', 'give', 'goto', "
         "'place', 'wait', 'withdraw'] (skill_ops.json); did you mean 'place'?"),
        (lambda c: c["skills"]["craft.item"]["lower"][0]["ops"][1]["args"].pop("station"),
         "catalog.skills.craft.item.lower[0].ops[1].args: craft takes exactly ['item', 'count', 'station'] (skill_ops.json), "
         "got ['count', 'item']"),
        (lambda c: c["skills"]["resource.obtain"]["lower"][0]["ops"][1]["args"].update(item="$itme"),
         "catalog.skills.resource.obtain.lower[0].ops[1].args.item: '$itme' names no argument key of the skill"),
        (lambda c: c["skills"]["craft.item"]["lower"][1]["ops"][0]["args"].update(station="$station"),
         "catalog.skills.craft.item.lower[1].ops[0].args.station: '$station' is an optional key a task may lack; "
         "read it only in a case whose 'when' is 'station', or give it a default"),
        (lambda c: c["skills"]["craft.item"]["lower"][1]["ops"][0]["args"].update(station=5),
         "catalog.skills.craft.item.lower[1].ops[0].args.station: 5 is not a string of 0 to 128 characters"),
        (lambda c: c["skills"]["resource.deliver"]["lower"][0]["ops"][1].update(by="@location"),
         "catalog.skills.resource.deliver.lower[0].ops[1].by: '@location' is not a grounded value here; expected one of ['@actor']"),
        (lambda c: c["skills"]["build.component"]["lower"][0].update(when="loc"),
         "catalog.skills.build.component.lower[0]: the last case must have no 'when', so that every task lowers"),
        (lambda c: c["skills"]["resource.deliver"]["lower"][0].update(when="q"),
         "catalog.skills.resource.deliver.lower[0].when: 'q' is a required key, always given; name an optional key"),
        (lambda c: c["skills"]["resource.deliver"]["lower"][1].update(when="dst"),
         "catalog.skills.resource.deliver.lower[1]: the last case must have no 'when'"),
        (lambda c: c["skills"]["build.component"].update(defaults={"q": 1}),
         "catalog.skills.build.component.defaults.q: only an optional key can have a default"),
        (lambda c: c["skills"]["craft.item"].update(transform="yes"),
         "catalog.skills.craft.item.transform: expected true or false, got 'yes'"),
        (lambda c: c["skills"]["craft.item"]["consumes"]["count"].update(made="$qq"),
         "catalog.skills.craft.item.consumes.count.made: '$qq' names no argument key of the skill"),
        (lambda c: c["skills"]["resource.deliver"]["handoff"].pop("to"),
         "catalog.skills.resource.deliver.handoff: missing fields ['to']"),
    ],
)
def test_catalog_validation(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    raw = json.loads(CATALOG_PATH.read_text(encoding="utf-8"))
    mutate(raw)
    with pytest.raises(CatalogError, match=re.escape(message)):
        parse_catalog(raw)


def test_load_catalog_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="is missing; reinstall gencoord_env"):
        load_catalog(tmp_path / "nope.json")
