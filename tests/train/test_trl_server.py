"""TRL over a running ``gencoord serve``: ``GencoordServerEnv`` plays the server's episodes as the in-process
``GencoordToolEnv`` plays them, owns its reward (``get_reward``), and ``examples/grpo_openenv.py`` (the README's
GRPO example, as written) trains a tiny model on CPU through it."""
from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
pytest.importorskip("datasets")
pytest.importorskip("fastapi")
pytest.importorskip("openenv")

from test_serve import http, running  # noqa: E402  (tests/ is on the path)

from gencoord_env.agents import make_policy  # noqa: E402
from gencoord_env.commands.llm_rl import GencoordServerEnv, GencoordToolEnv, episode_dataset  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "grpo_openenv.py"
ENV = {"backend": "sim", "pool": "train", "reward": "staged"}


def test_the_server_env_plays_as_the_in_process_env_and_owns_its_reward() -> None:
    public = [n for n, _ in inspect.getmembers(GencoordServerEnv, predicate=inspect.isfunction) if not n.startswith("_")]
    assert sorted(public) == ["commit", "get_reward", "reset"]  # TRL: reset, get_reward, and one tool
    with running(env=ENV, max_sessions=4) as url:
        rows = GencoordServerEnv.dataset(url, range(4))
        assert list(rows) == list(episode_dataset("train", range(4), reward="staged"))  # the prior from the server
        remote, local = GencoordServerEnv(url), GencoordToolEnv(pool="train", reward="staged")
        for row in rows:
            local_texts = [local.reset(**row)]
            remote_texts = [remote.reset(**row)]
            assert remote_texts == local_texts and remote.get_reward() == 0.0  # not finished: nothing earned yet
            records = []
            while local.outcome is None:
                records.append(make_policy("rule").act(local.turn.text, local.game.info))
                local_texts.append(local.commit(records[-1]))
                remote_texts.append(remote.commit(records[-1]))
            assert remote_texts == local_texts and remote.outcome == local.outcome == "SUCCESS"
            assert remote.get_reward() == local.turn.reward == 1.0
        # a failure earns the env's staged credit, as the env pays it
        remote.reset(index=3)
        assert remote.commit("SELF -\nREQ -") == "END outcome=CONTRACT_REJECT" and remote.get_reward() == 0.2
        # one role, the client's own rule partner deciding from the context the server sends
        receiver, local_receiver = GencoordServerEnv(url, plays="receiver"), GencoordToolEnv(pool="train", plays="receiver")
        for index in (0, 1):
            assert receiver.reset(index=index) == local_receiver.reset(index=index)
            assert receiver.turn.role == "receiver"
    with running(env=ENV, max_sessions=2, plays="sender", partner="rule") as url:
        sender = GencoordServerEnv(url)  # the server's rule receiver plays the rest
        for index in (0, 1):
            sender.reset(index=index)
            assert sender.turn.role == "sender"
            local = GencoordToolEnv(pool="train", reward="staged", plays="sender")
            local.reset(index=index)
            good = make_policy("rule").act(local.turn.text, local.game.info)
            assert sender.commit(good) == local.commit(good) == "END outcome=SUCCESS" and sender.get_reward() == 1.0


def test_the_readme_grpo_example_trains_on_cpu_through_the_server(tmp_path: Path, make_qwen_checkpoint) -> None:  # type: ignore[no-untyped-def]
    """The README's block is the example file; the example, as written, runs GRPO steps on a tiny Qwen3 checkpoint
    against a ``--plays sender --partner rule`` server, scored by the env's own reward."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert EXAMPLE.read_text(encoding="utf-8") in readme
    assert len(EXAMPLE.read_text(encoding="utf-8").splitlines()) < 30
    checkpoint = make_qwen_checkpoint(tmp_path / "tiny", ["SELF REQ agent_a agent_b PRIOR NODE " * 20] * 20, template="qwen3",
                                      arch="qwen3", hidden_size=32, num_layers=1)
    with running(env={"backend": "sim", "pool": "train"}, max_sessions=8, plays="sender", partner="rule") as url:
        env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.run([sys.executable, str(EXAMPLE), str(checkpoint), url, "1"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-4000:]
        served = http(url, "/health")[1]
    logs = [line for line in proc.stdout.splitlines() if "'loss'" in line or '"loss"' in line]
    assert logs, proc.stdout[-3000:]
    assert re.search(r"rewards/GencoordServerEnv/mean", proc.stdout), proc.stdout[-3000:]  # the env's reward, no reward function
    assert served["status"] == "healthy"
