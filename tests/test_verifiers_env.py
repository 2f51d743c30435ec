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
import sys
import threading
import time
from collections.abc import Iterator
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


def answers(pool: str, indices: range, plays: str, wrong: set[int]) -> tuple[dict[str, str], dict[int, int]]:
    """What the model sees at each of its decisions -> the rule agent's record (MALFORMED at the first decision
    of the episodes in ``wrong``), found by playing the episodes through the TRL adapter's episode logic; and
    how many decisions the model makes in each episode."""
    table: dict[str, str] = {}
    decisions: dict[int, int] = {}
    player = GencoordToolEnv(pool=pool, plays=plays)
    rule = make_policy("rule")
    for k in indices:
        text = player.reset(index=k, prompt=episode_prompt(player, k)[:1])
        first = True
        while player.outcome is None:
            record = MALFORMED if first and k in wrong else rule.act(player.turn.text, player.game.info)
            assert table.setdefault(text, record) == record, "two decisions read alike but were answered apart"
            text, first = player.commit(record), False
        decisions[k] = len(player.records)
    return table, decisions


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


def play(env: GencoordEnv, model: ScriptedModel) -> dict[int, Any]:
    """Every task of the env played by verifiers against the scripted model: task index -> the seat's trace."""
    from verifiers.v1.env import RunSlot

    ctx = vf.ModelContext(model="scripted", client=vf.EvalClientConfig(base_url=model.base_url,
                                                                       api_key_var="GENCOORD_SCRIPTED_MODEL_KEY"))

    async def run() -> dict[int, Any]:
        async with env.serving():
            episodes = await asyncio.gather(*(env.run_slot(RunSlot(task), ctx) for task in env.taskset))
        out = {}
        for episode in episodes:
            assert episode.ok and not episode.errors, episode.errors
            [trace] = episode.traces
            out[episode.task.data.index] = trace
        return out

    return asyncio.run(run())


@pytest.mark.parametrize(("plays", "reward"), [("both", "binary"), ("sender", "staged")])
def test_verifiers_plays_the_pools_episodes_and_pays_the_envs_rewards(plays: str, reward: str) -> None:
    pool, indices, wrong = "train", range(4), {1}
    table, decisions = answers(pool, indices, plays, wrong)
    expected = local_rewards(pool, indices, plays, reward, table)
    assert sorted(set(expected.values())) == [0.0, 1.0] if reward == "binary" else len(set(expected.values())) > 1

    env = load_environment(pool=pool, plays=plays, episodes=len(indices), reward=reward)
    with ScriptedModel(table) as model:
        traces = play(env, model)
    assert model.misses == []
    assert sorted(traces) == list(indices)
    name, other = ("success", "staged") if reward == "binary" else ("staged", "success")
    for k, trace in traces.items():
        assert trace.rewards[name].score == expected[k], (k, trace.info)
        assert trace.reward == expected[k]
        assert other in trace.metrics and other not in trace.rewards
        assert trace.info["outcome"] == ("PARSE_FAILURE" if k in wrong else "SUCCESS")
    # each decision of the model was one model call, and one turn of the episode's multi-turn exchange
    assert len(model.requests) == sum(decisions.values())
    assert max(decisions.values()) > 1 if plays == "both" else set(decisions.values()) == {1}
    assert {k: trace.num_turns for k, trace in traces.items()} == decisions


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
