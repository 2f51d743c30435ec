"""``gencoord replay --html``: a recorded episode as one self-contained HTML page (frames, transcripts, every
stage of its trace), opened in headless Chromium where one is installed."""
from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.rollout import rollout
from gencoord_env.commands.replay import main as replay_main
from gencoord_env.commands.replay import read_records
from gencoord_env.wrappers import TraceRecorder, UnreliableChannel

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """A trace of request-pool episodes through a channel that drops some requests: successes and failures."""
    path = tmp_path_factory.mktemp("trace") / "trace.jsonl"
    env = TraceRecorder(UnreliableChannel(gencoord_env.parallel_env(backend="sim", pool="request"), drop=0.5, seed=3), path)
    rollout(env, make_policy("rule"), episodes=6)
    records = list(read_records(path))
    assert {r["outcome"] == "SUCCESS" for r in records} == {True, False}
    return path, records


def _stages(page: str) -> list[str]:
    return [html.unescape(s) for s in re.findall(r"<td class='stage'>(.*?)</td>", page)]


def test_the_page_holds_frames_transcripts_and_every_stage_and_fetches_nothing(tmp_path: Path, trace) -> None:  # type: ignore[no-untyped-def]
    path, records = trace
    for record in (next(r for r in records if r["outcome"] == "SUCCESS"), next(r for r in records if r["outcome"] != "SUCCESS")):
        out = tmp_path / f"{record['episode_id']}.html"
        assert replay_main(["--html", str(path), "--episode", record["episode_id"], "--out", str(out)]) == 0
        page = out.read_text(encoding="utf-8")
        assert _stages(page) == [str(r["stage"]) for r in record["trace"]]
        assert len(re.findall(r"<img src='data:image/png;base64,", page)) == len(record["actions"]) + 1
        assert not re.search(r"(src|href)=['\"](?!data:)", page) and "http" not in page.split("<body>")[0]
        banner = re.search(r"<div class='banner (\w+)' id='outcome'>([^<:]*)", page)
        assert banner is not None and banner.group(2) == record["outcome"]
        assert banner.group(1) == ("SUCCESS" if record["outcome"] == "SUCCESS" else "failure")
        assert "replay differs" not in page
        for step in record["actions"]:  # the transcripts: every action as the agent sent it
            assert html.escape(step["action"], quote=False) in page


def test_a_missing_episode_is_named(trace, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    path, records = trace
    assert replay_main(["--html", str(path), "--episode", records[0]["episode_id"] + "x"]) == 2
    assert "did you mean" in capsys.readouterr().err


def test_headless_chromium_renders_the_page_with_every_stage(tmp_path: Path, trace) -> None:  # type: ignore[no-untyped-def]
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip(f"no Chromium here (looked for {', '.join(BROWSERS)}); Debian: apt-get install chromium")
    path, records = trace
    record = next(r for r in records if r["outcome"] != "SUCCESS")
    page = tmp_path / "page.html"
    assert replay_main(["--html", str(path), "--episode", record["episode_id"], "--out", str(page)]) == 0
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'profile'}"]
    shot = tmp_path / "shot.png"
    subprocess.run([browser, *flags, f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri()],
                   check=True, capture_output=True, timeout=180)
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                         timeout=180).stdout
    assert _stages(dom.replace('"', "'")) == [str(r["stage"]) for r in record["trace"]]  # as the browser parsed it
    import matplotlib.image

    image = matplotlib.image.imread(shot)[..., :3]
    assert image.shape[:2] == (1600, 1280)
    assert image.std() > 0.1 and len(np.unique(image.reshape(-1, 3), axis=0)) > 50  # not blank
    banner = np.median(image[20:40, 40:400].reshape(-1, 3), axis=0)  # the red failure banner on top
    assert banner[0] > 0.6 and banner[1] < 0.25 and banner[2] < 0.25, banner
