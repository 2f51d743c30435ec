"""The verifiers environment: verifiers 0.4 itself (its env, null harness, subprocess runtime and interception
server) plays episodes of the sim pools, and its rewards are those of the same episodes played in the env.

The model is the one stand-in: an OpenAI-compatible endpoint in this process that answers each
observation with the record a table holds for it (the rule agent's, or a malformed one on purpose).
The harness's chat program is installed by ``uv`` on its first start (from the package index, then its cache).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

if sys.version_info < (3, 11):
    pytest.skip("verifiers 0.4 needs Python >= 3.11", allow_module_level=True)
vf = pytest.importorskip("verifiers.v1")
uv = pytest.importorskip("uv")

import gencoord_env  # noqa: E402
from gencoord_env.agents import make_policy  # noqa: E402
from gencoord_env.commands.llm_rl import GencoordToolEnv, episode_prompt  # noqa: E402
from gencoord_env.commands.verifiers_env import TASKSET_ID, GencoordEnv, load_environment  # noqa: E402

#: what the scripted model answers to the first decision of the episodes it gets wrong on purpose
MALFORMED = "SELF build.component(\nREQ"


class ScriptedModel:
    """An OpenAI-compatible chat endpoint (streamed or not) answering each request with ``answers[last user turn]``;
    a user turn it has no answer for is recorded in ``misses`` and answered with an empty reply."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []
        self.misses: list[str] = []
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                model.requests.append(body)
                user = next(m for m in reversed(body["messages"]) if m["role"] == "user")["content"]
                reply = model.answers.get(user)
                if reply is None:
                    model.misses.append(user)
                    reply = ""
                head = {"id": f"c{len(model.requests)}", "created": int(time.time()), "model": body["model"]}
                usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
                if body.get("stream"):
                    chunk = {**head, "object": "chat.completion.chunk"}
                    events = [{**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply},
                                                     "finish_reason": None}]},
                              {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                              {**chunk, "choices": [], "usage": usage}]
                    data = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"
                    kind = "text/event-stream"
                else:
                    data = json.dumps({**head, "object": "chat.completion", "usage": usage, "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}]}).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture(autouse=True)
def _uv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime finds the uv of this environment (the extra's), so it never installs one of its own."""
    monkeypatch.setenv("PATH", str(Path(uv.find_uv_bin()).parent) + os.pathsep + os.environ.get("PATH", ""))


def answers(pool: str, indices: range, plays: str, wrong: set[int]) -> tuple[dict[str, str], dict[int, dict[str, int]], dict[str, str]]:
    """What the model sees at each of its decisions -> the rule agent's record (MALFORMED at the first decision
    of the episodes in ``wrong``), found by playing the episodes through the TRL adapter's episode logic; how
    many decisions the model makes in each episode in each role; and the role deciding at each text."""
    table: dict[str, str] = {}
    roles: dict[str, str] = {}
    decisions: dict[int, dict[str, int]] = {}
    player = GencoordToolEnv(pool=pool, plays=plays)
    rule = make_policy("rule")
    for k in indices:
        text = player.reset(index=k, prompt=episode_prompt(player, k)[:1])
        first, decisions[k] = True, {}
        while player.outcome is None:
            record = MALFORMED if first and k in wrong else rule.act(player.turn.text, player.game.info)
            assert table.setdefault(text, record) == record, "two decisions read alike but were answered apart"
            role = roles[text] = player.turn.role
            decisions[k][role] = decisions[k].get(role, 0) + 1
            text, first = player.commit(record), False
    return table, decisions, roles


def local_rewards(pool: str, indices: range, plays: str, reward: str, table: dict[str, str]) -> dict[int, float]:
    """The env's own reward of each episode, played in a plain ParallelEnv: the model's decisions answered from
    ``table`` (looked up by the observation without its prior, as the model sees it), the rest by the rule agent."""
    from gencoord_env.tasks.contexts import split_prior

    env = gencoord_env.parallel_env(backend="sim", pool=pool, reward=reward)
    rule = make_policy("rule")
    out = {}
    for k in indices:
        obs, infos = env.reset(options={"index": k})
        total = 0.0
        while env.agents:
            agent = next(a for a, i in infos.items() if i["deciding"])
            if plays in ("both", infos[agent]["role"]):
                record = table[split_prior(obs[agent])[1]]  # type: ignore[index]
            else:
                record = rule.act(obs[agent], infos[agent])
            obs, rewards, _, _, infos = env.step({**{a: "" for a in env.agents}, agent: record})
            total += rewards[agent]
        out[k] = total
    return out


def play(env: Any, model: ScriptedModel) -> dict[int, list[Any]]:
    """Every task of the env played by verifiers against the scripted model: task index -> its seats' traces."""
    from verifiers.v1.env import RunSlot

    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=model.base_url,
                                                                       api_key_var="GENCOORD_SCRIPTED_MODEL_KEY"))

    async def run() -> dict[int, list[Any]]:
        async with env.serving():
            episodes = await asyncio.gather(*(env.run_slot(RunSlot(task), ctx) for task in env.taskset))
        out = {}
        for i, episode in enumerate(episodes):
            assert episode.ok and not episode.errors, episode.errors
            out[getattr(episode.task.data, "index", i)] = episode.traces
        return out

    return asyncio.run(run())


@pytest.mark.parametrize(("plays", "reward"), [("both", "binary"), ("sender", "staged")])
def test_verifiers_plays_the_pools_episodes_one_seat_per_role_and_pays_the_envs_rewards(plays: str, reward: str) -> None:
    pool, indices, wrong = "train", range(4), {1}
    table, decisions, roles = answers(pool, indices, plays, wrong)
    expected = local_rewards(pool, indices, plays, reward, table)
    assert sorted(set(expected.values())) == [0.0, 1.0] if reward == "binary" else len(set(expected.values())) > 1

    env = load_environment(pool=pool, plays=plays, episodes=len(indices), reward=reward)
    with ScriptedModel(table) as model:
        traces = play(env, model)
    assert model.misses == []
    assert sorted(traces) == list(indices)
    name, other = ("success", "staged") if reward == "binary" else ("staged", "success")
    for k, seats in traces.items():
        # a seat per role that decided, in its own conversation: its turns are that role's decisions
        assert {t.agent.name: t.num_turns for t in seats} == decisions[k], k
        for trace in seats:
            assert trace.info["role"] == trace.agent.name and trace.agent.trainable
            assert trace.rewards[name].score == expected[k], (k, trace.info)
            assert trace.reward == expected[k]
            assert other in trace.metrics and other not in trace.rewards
            assert trace.info["outcome"] == ("PARSE_FAILURE" if k in wrong else "SUCCESS")
    # each decision of the model was one model call, and every conversation one role's
    assert len(model.requests) == sum(sum(d.values()) for d in decisions.values())
    for request in model.requests:
        assert len({roles[m["content"]] for m in request["messages"] if m["role"] == "user"}) == 1
    if plays == "both":
        # two seats where both roles decided; the sender's alone where its malformed record ended the episode
        assert [set(d) for d in decisions.values()] == [{"sender", "receiver"}, {"sender"}, {"sender", "receiver"},
                                                         {"sender", "receiver"}]
    else:
        assert all(d == {"sender": 1} for d in decisions.values())


def test_a_frozen_partner_seat_plays_but_is_not_trained() -> None:
    """``frozen=("receiver",)``: the receiver's seat plays its decisions (here on a model of its own, as a fixed
    checkpoint would) and its trace is untrainable; the sender's trains, and both earn the episode's reward."""
    pool, indices = "train", range(2)
    table, decisions, roles = answers(pool, indices, "both", set())
    with ScriptedModel(table) as model, ScriptedModel(table) as partner:
        env = load_environment(pool=pool, episodes=len(indices), frozen=("receiver",),
                               receiver={"model": "frozen", "client": {"type": "eval", "base_url": partner.base_url,
                                                                       "api_key_var": "GENCOORD_SCRIPTED_MODEL_KEY"}})
        traces = play(env, model)
    assert model.misses == partner.misses == []
    for seats in traces.values():
        by_role = {t.agent.name: t for t in seats}
        assert set(by_role) == {"sender", "receiver"}
        assert by_role["sender"].agent.trainable and not by_role["receiver"].agent.trainable
        assert all(t.reward == 1.0 and t.info["outcome"] == "SUCCESS" for t in seats)
    # the frozen seat's decisions went to its own model, the rest to the run's
    assert {roles[r["messages"][-1]["content"]] for r in partner.requests} == {"receiver"}
    assert {roles[r["messages"][-1]["content"]] for r in model.requests} == {"sender"}
    assert len(partner.requests) == sum(d["receiver"] for d in decisions.values())
    with pytest.raises(ValueError, match=re.escape("frozen=['partner']: ['partner'] name no seat; the seats are ['sender', 'receiver']")):
        load_environment(frozen=("partner",))


def test_verifiers_openenv_taskset_drives_gencoord_serve() -> None:
    """verifiers' built-in OpenEnv taskset (id ``openenv``) plays a running ``gencoord serve``: the model's
    plain-text records fill the action's one required field, each user turn is the observation as JSON, and its
    ``openenv_reward`` is the env's reward of the same episode played locally."""
    pytest.importorskip("openenv")
    from test_serve import running

    pool, indices = "heldout", range(3)
    env_kwargs = {"backend": "sim", "pool": pool, "route": "forward", "reward": "staged"}
    game = gencoord_env.parallel_env(**env_kwargs)
    rule = make_policy("rule")
    table: dict[str, str] = {}
    expected: dict[int, float] = {}
    decisions = 0
    for k in indices:
        obs, infos = game.reset(options={"index": k})
        total, first = 0.0, True
        while game.agents:
            agent = next(a for a, i in infos.items() if i["deciding"])
            record = "SELF -\nREQ -" if k == 2 and first else rule.act(obs[agent], infos[agent])
            table[obs[agent]] = record
            decisions += 1
            obs, rewards, _, _, infos = game.step({**{a: "" for a in game.agents}, agent: record})
            total, first = total + rewards[agent], False
        expected[k] = total
    assert len(set(expected.values())) > 1  # a success and a staged failure

    with running(env=env_kwargs, max_sessions=4) as url, ScriptedModel(KeyedAnswers(table)) as model:
        config = vf.resolve_env_config({"taskset": {"id": "openenv", "base_url": url, "resets": [{"index": k} for k in indices]},
                                        "player": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}})
        env = vf.load_environment(config)
        traces = play(env, model)
    assert model.misses == []
    assert len(model.requests) == decisions  # one model call per decision
    for k in indices:
        [trace] = traces[k]
        assert trace.rewards["openenv_reward"].score == pytest.approx(expected[k]), k


class KeyedAnswers(dict):
    """``table[observation text]`` for a user turn that is the OpenEnv taskset's JSON payload."""

    def __init__(self, table: dict[str, str]) -> None:
        super().__init__()
        self.table = table

    def get(self, user: str, default: Any = None) -> Any:  # type: ignore[override]
        try:
            payload = json.loads(user)
            assert payload["action_schema"]["required"] == ["text"]
            return self.table.get(payload["observation"]["text"], default)
        except (ValueError, KeyError, TypeError):
            return default


def test_the_tasks_are_the_pools_episodes_with_the_prior_as_system_prompt() -> None:
    env = load_environment(pool="heldout", episodes=3)
    tasks = list(env.taskset)
    assert [t.data.name for t in tasks] == ["heldout#0", "heldout#1", "heldout#2"]
    player = GencoordToolEnv(pool="heldout")
    for task in tasks:
        assert task.data.prompt is None  # the env opens the exchange with the first observation
        assert [{"role": "system", "content": task.data.system_prompt}] == episode_prompt(player, task.data.index)[:1]
    config = vf.resolve_env_config({"taskset": {"id": TASKSET_ID, "pool": "heldout", "episodes": 3}})
    assert type(vf.load_environment(config)) is GencoordEnv  # the id alone finds the env, as the verifiers CLI does


def test_the_environment_and_the_tool_env_need_no_torch() -> None:
    # the prior is split off by the env's own renderer module, not by the learned agents' prompt module (torch)
    import subprocess

    code = """
import sys
sys.modules["torch"] = sys.modules["transformers"] = None
from gencoord_env.commands.llm_rl import GencoordToolEnv
from gencoord_env.commands.verifiers_env import load_environment
[task] = load_environment(pool="heldout", episodes=1).taskset
player = GencoordToolEnv(pool="heldout")
first = player.reset(index=0, prompt=[{"role": "system", "content": task.data.system_prompt}])
assert task.data.system_prompt.startswith("PRIOR ") and "PRIOR " not in first
print(player.commit("SELF -\\nREQ -"))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("END outcome=")
