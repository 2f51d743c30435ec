"""Unit tests of the codec beyond the golden files: data model, serializer limits, errors, JSON surface."""
from __future__ import annotations

import pickle
import re

import pytest

from gencoord_env import dsl
from gencoord_env.dsl import Args, DSLSyntaxError, PeerRequest, Proposal, Task
from gencoord_env.dsl import parser

CRAFT = Task("craft.item", {"q": 1, "item": "crafting_table"})


def test_public_api() -> None:
    for name in ("parse", "format", "to_json", "from_json", "DSLSyntaxError", "Proposal", "PeerRequest", "Task", "Args"):
        assert hasattr(dsl, name), name
    assert issubclass(DSLSyntaxError, ValueError)


def test_value_types_make_different_proposals() -> None:
    texts = [f"SELF craft.item(q={v},item=crafting_table)\nREQ -" for v in ("1", "1.0", "true", '"1"')]
    proposals = [dsl.parse(t) for t in texts]
    assert len(set(proposals)) == 4
    assert [type(p.self_plan[0].args["q"]) for p in proposals] == [int, float, bool, str]


def test_argument_order_does_not_matter() -> None:
    a = dsl.parse("SELF craft.item(q=1,item=crafting_table)\nREQ -")
    b = dsl.parse("SELF craft.item(item=crafting_table,q=1)\nREQ -")
    assert a == b and hash(a) == hash(b)
    assert dsl.format(b) == "SELF craft.item(q=1,item=crafting_table)\nREQ -"


def test_req_dash_gives_empty_peer_requests() -> None:
    proposal = dsl.parse("SELF -\nREQ -")
    assert proposal.peer_requests == () and proposal.self_plan == ()


def test_canonical_key_order_then_alphabetical() -> None:
    task = Task("resource.deliver", {"zeta": 1, "station": "s", "loc": "l", "site": "x", "dst_role": "r", "dst": "d",
                                     "to": "b", "from": "a", "item": "i", "input": "j", "q": 2, "bind": "B", "alpha": 0})
    text = dsl.format(Proposal(self_plan=(task,)))
    assert text == ("SELF resource.deliver(bind=B,q=2,input=j,item=i,from=a,to=b,dst=d,dst_role=r,site=x,loc=l,"
                    "station=s,alpha=0,zeta=1)\nREQ -")


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("oak_planks", "oak_planks"),
        ("1", '"1"'),
        ("-2.5e3", '"-2.5e3"'),
        ("true", '"true"'),
        ("null", '"null"'),
        ("01", "01"),
        ("", '""'),
        ("a b", '"a b"'),
        ("caf\u00e9", '"caf\\u00e9"'),
        ("\U0001f600", '"\\ud83d\\ude00"'),
        (1.5, "1.5"),
        (1e16, "1e+16"),
        (-0.0, "-0.0"),
        (10**20, "100000000000000000000"),
        (False, "false"),
        (None, "null"),
    ],
)
def test_value_writing(value: object, written: str) -> None:
    text = dsl.format(Proposal(self_plan=(Task("control.wait", {"v": value}),)))
    assert text == f"SELF control.wait(v={written})\nREQ -"
    back = dsl.parse(text).self_plan[0].args["v"]
    assert type(back) is type(value) and back == value


@pytest.mark.parametrize(
    ("proposal", "message"),
    [
        (Proposal(peer_requests=(PeerRequest("a", (CRAFT,)), PeerRequest("b", (CRAFT,)))),
         "the REQ line carries at most one peer request; got 2"),
        (Proposal(peer_requests=(PeerRequest("agent_b", ()),)), "the peer request to 'agent_b' has an empty requested plan"),
        (Proposal(self_plan=(CRAFT,) * 6), "self_plan has 6 tasks; a path has at most 5"),
        (Proposal(peer_requests=(PeerRequest("b", (CRAFT,) * 6),)), "requested_plan has 6 tasks; a path has at most 5"),
        (Proposal(self_plan=(Task("fly", {}),)), "unknown skill 'fly'; the Short DSL writes only catalog skills"),
        (Proposal(self_plan=(Task("craft.item", {"count": 1}),)),
         "key 'count' of 'craft.item' is an alias; use the compact key 'q'"),
        (Proposal(self_plan=(Task("craft.item", {"1q": 1}),)),
         "key '1q' of 'craft.item' is not an identifier [A-Za-z][A-Za-z0-9_]*"),
        (Proposal(self_plan=(Task("craft.item", {"q": float("inf")}),)),
         "cannot write the non-finite number inf; JSON numbers are finite"),
        (Proposal(self_plan=(Task("craft.item", {"q": [1]}),)),  # type: ignore[dict-item]
         "cannot write a value of type list; expected str, int, float, bool or None"),
        (Proposal(peer_requests=(PeerRequest("agent b", (CRAFT,)),)),
         "peer request target 'agent b' is not an agent id [A-Za-z0-9_.:/+-]+ other than '-'"),
        (Proposal(peer_requests=(PeerRequest("-", (CRAFT,)),)),
         "peer request target '-' is not an agent id [A-Za-z0-9_.:/+-]+ other than '-'"),
    ],
)
def test_format_rejects_what_two_lines_cannot_express(proposal: Proposal, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        dsl.format(proposal)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        dsl.to_json(proposal)


def test_type_errors_for_wrong_argument_types() -> None:
    with pytest.raises(TypeError, match="Expected the Short DSL text as str but got bytes"):
        dsl.parse(b"SELF -\nREQ -")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Expected a Proposal but got str"):
        dsl.format("SELF -\nREQ -")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Expected the JSON text as str but got NoneType"):
        dsl.from_json(None)  # type: ignore[arg-type]


def test_error_carries_position_and_pickles() -> None:
    text = "SELF -\nREQ agent_b craft.item(q=1,,item=x)"
    with pytest.raises(DSLSyntaxError) as caught:
        dsl.parse(text)
    error = caught.value
    assert (error.offset, error.line, error.column) == (34, 2, 28)
    assert error.msg == "expected a key [A-Za-z][A-Za-z0-9_]*, found ','"
    assert error.doc == text
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.msg, copy.offset, copy.line, copy.column, str(copy)) == (
        error.msg, error.offset, error.line, error.column, str(error))
    assert error.__context__ is None  # no parser internals chained to the traceback


def test_error_from_json_decoding_hides_internals() -> None:
    with pytest.raises(DSLSyntaxError) as caught:
        dsl.parse('SELF craft.item(item="a\\q")\nREQ -')
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_huge_integer_is_a_syntax_error() -> None:
    with pytest.raises(DSLSyntaxError, match="^integer '1111111111111111111111111111111111111111'... is too long"):
        dsl.parse(f"SELF control.wait(ticks={'1' * 5000})\nREQ -")


def test_argument_shortcut_declines_quotes_and_agrees_with_the_full_rule() -> None:
    assert parser.parse_simple_args('q=1,item="crafting_table"') is None
    assert parser.parse_simple_args("q=1, item=crafting_table,count=2") is None  # q given twice: the full rule reports it
    assert parser.parse_simple_args("count=1, item=crafting_table") == {"q": 1, "item": "crafting_table"}
    quoted = 'SELF craft.item(q=1,item="crafting_table")\nREQ -'
    plain = "SELF craft.item(q=1,item=crafting_table)\nREQ b control.wait()"
    assert dsl.parse(quoted) == dsl.parse(plain).__class__(dsl.parse(plain).self_plan, ())


# ---- GenCoord-JSON surface -------------------------------------------------------------------

PAPER = (
    "SELF resource.obtain(q=4,item=oak_planks) > resource.deliver(q=4,item=oak_planks,to=agent_b)\n"
    "REQ agent_b craft.item(q=1,input=oak_planks,item=crafting_table) > "
    "resource.deliver(q=1,item=crafting_table,dst=order_chest)"
)


def test_to_json_is_compact_canonical() -> None:
    assert dsl.to_json(dsl.parse("SELF craft.item(item=x,q=1)\nREQ -")) == (
        '{"self_plan":[{"skill":"craft.item","args":{"q":1,"item":"x"}}],"peer_requests":[]}'
    )
    proposal = dsl.parse(PAPER)
    assert dsl.from_json(dsl.to_json(proposal)) == proposal
    assert len(dsl.to_json(proposal)) > len(PAPER)  # the DSL is the compact surface


def test_from_json_canonicalizes_aliases_and_accepts_whitespace() -> None:
    text = '{ "peer_requests": [], "self_plan": [ {"args": {"count": 2, "item": "x"}, "skill": "craft.item"} ] }'
    assert dsl.from_json(text) == dsl.parse("SELF craft.item(q=2,item=x)\nREQ -")


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("", "invalid JSON: Expecting value", 0),
        ('{"self_plan":[]', "invalid JSON: Expecting ',' delimiter", 15),
        ("[]", "$: expected an object with fields self_plan, peer_requests, found an array", 0),
        ('{"self_plan":[]}', "$: missing field 'peer_requests'", 0),
        ('{"self_plan":[],"peer_requests":[],"x":1}', "$: unknown field 'x'; expected only self_plan, peer_requests", 0),
        ('{"self_plan":[],"self_plan":[],"peer_requests":[]}', "invalid JSON record: duplicate object key 'self_plan'", 0),
        ('{"self_plan":{},"peer_requests":[]}', "$.self_plan: expected an array of tasks, found an object", 0),
        ('{"self_plan":[{"skill":"craft.itm","args":{}}],"peer_requests":[]}',
         "$.self_plan[0].skill: unknown skill 'craft.itm'; did you mean 'craft.item'?", 0),
        ('{"self_plan":[{"skill":"craft.item"}],"peer_requests":[]}', "$.self_plan[0]: missing field 'args'", 0),
        ('{"self_plan":[{"skill":"craft.item","args":{"q":[1]}}],"peer_requests":[]}',
         "$.self_plan[0].args.q: expected a string, number, boolean or null, found an array", 0),
        ('{"self_plan":[{"skill":"craft.item","args":{"q":1e999}}],"peer_requests":[]}',
         "$.self_plan[0].args.q: number is out of range", 0),
        ('{"self_plan":[{"skill":"craft.item","args":{"q":NaN}}],"peer_requests":[]}',
         "invalid JSON number: NaN is not a JSON number", 0),
        ('{"self_plan":[{"skill":"craft.item","args":{"q":1,"count":2}}],"peer_requests":[]}',
         "$.self_plan[0].args: duplicate key 'count': 'q' is already given as 'q'", 0),
        ('{"self_plan":[{"skill":"craft.item","args":{"a b":1}}],"peer_requests":[]}',
         "$.self_plan[0].args: key 'a b' is not an identifier [A-Za-z][A-Za-z0-9_]*", 0),
        ('{"self_plan":[],"peer_requests":[{"target":"b","requested_plan":[]}]}',
         "$.peer_requests[0].requested_plan: empty requested plan: expected 1 to 5 tasks", 0),
        ('{"self_plan":[],"peer_requests":[{"target":"-","requested_plan":[]}]}',
         "$.peer_requests[0].target: expected an agent id [A-Za-z0-9_.:/+-]+ other than '-'", 0),
        ('{"self_plan":[],"peer_requests":[1,2]}', "$.peer_requests: at most one peer request; found 2", 0),
        ('{"self_plan":' + "[" * 100000 + "]" * 100000 + ',"peer_requests":[]}',
         "invalid JSON record: nested too deeply", 0),
    ],
)
def test_from_json_errors(text: str, message: str, offset: int) -> None:
    with pytest.raises(DSLSyntaxError, match=f"^{re.escape(message)} \\(at line") as caught:
        dsl.from_json(text)
    assert caught.value.offset == offset


def test_from_json_path_length_limit() -> None:
    task = '{"skill":"control.wait","args":{}}'
    text = '{"self_plan":[' + ",".join([task] * 6) + '],"peer_requests":[]}'
    with pytest.raises(DSLSyntaxError, match=re.escape("$.self_plan: a path has at most 5 tasks; found 6")):
        dsl.from_json(text)


def test_args_mapping_is_immutable_and_typed() -> None:
    args = Args({"q": 1})
    with pytest.raises(TypeError):
        args["q"] = 2  # type: ignore[index]
    assert Args({"q": 1}) != Args({"q": True})
    assert Args({"q": 1}) == {"q": 1}
