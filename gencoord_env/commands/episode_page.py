"""``gencoord replay --html TRACE``: one recorded episode as a self-contained HTML page.

The record is played again with its recorded actions and ``render_mode="rgb_array"``
(``replay.play_pictured``), and the page shows:

- the outcome (a green or red banner), the episode, its template, route, surface and interventions;
- the frames: the picture after the reset and after each decision (``envs.gencoord.picture``: roles, the
  private fact marked for the viewer, plans, messages, the handoff, the outcome), inline as PNG data;
- the transcripts: each decision's agent and stage, the observation it saw and the action it took, and each
  message delivered;
- the per-stage trace: one row per trace record (stage and its fields as JSON; observations are in the
  transcripts), every stage of the episode listed.

Nothing is fetched: styles are inline and images are ``data:`` URLs, so the file can be mailed or attached
to an issue. Agent text is escaped. The page says where the replay differed from the record, if it did.
"""
from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping
from typing import Any

from gencoord_env.trace import jsonable

#: characters of one trace field shown in the table before it is cut (the JSON trace keeps all of it)
FIELD_LIMIT = 4000
STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; background: #f6f6f4; color: #1c1c1c; }
h1 { font-size: 20px; margin: 0 0 8px 0; } h2 { font-size: 17px; margin: 28px 0 8px 0; }
.banner { padding: 10px 14px; color: white; font-weight: 600; border-radius: 4px; }
.SUCCESS { background: #2a8c3c; } .failure { background: #b42828; } .truncated { background: #555; }
.meta td { padding: 2px 12px 2px 0; } .frames { display: flex; flex-wrap: wrap; gap: 16px; }
figure { margin: 0; background: white; padding: 8px; border: 1px solid #ddd; }
figcaption { font-size: 13px; margin-top: 4px; } img { display: block; max-width: 100%; image-rendering: pixelated; }
pre { background: white; border: 1px solid #ddd; padding: 8px; white-space: pre-wrap; word-break: break-all;
      font-size: 12px; margin: 4px 0; }
table.trace { border-collapse: collapse; width: 100%; background: white; }
table.trace td, table.trace th { border: 1px solid #ddd; padding: 4px 8px; vertical-align: top; text-align: left; }
table.trace td.stage { font-family: monospace; font-weight: 600; white-space: nowrap; }
.mismatch { color: #b42828; }
"""


def _field(value: Any) -> str:
    text = json.dumps(jsonable(value), indent=1, ensure_ascii=False, default=str)
    return text if len(text) <= FIELD_LIMIT else text[:FIELD_LIMIT] + f"\n... ({len(text):,} characters)"


def page(record: Mapping[str, Any], played: Mapping[str, Any]) -> str:
    """The HTML page of one trace record (module docstring), from what ``replay.play_pictured`` returned for it."""
    final, episode = played["final"], played["episode"]
    outcome = str(final.get("outcome"))
    kind = "SUCCESS" if outcome == "SUCCESS" else "truncated" if final.get("outcome") is None else "failure"
    e = html.escape
    env = record.get("env", {})
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(str(record.get('episode_id')))}</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<div class='banner {kind}' id='outcome'>{e(outcome)}{': ' + e(str(final.get('reason'))) if final.get('reason') else ''}</div>",
             f"<h1>{e(str(record.get('episode_id')))}</h1><table class='meta'>"]
    meta = {"template": episode.template.id, "roles": ", ".join(f"{r}={a}" for r, a in zip(episode.roles, episode.role_agents)),
            **{k: env.get(k) for k in ("route", "surface", "view", "private_fact", "backend")},
            "interventions": ", ".join(str(i.get("name")) for i in record.get("interventions", [])) or "none"}
    parts += [f"<tr><td>{e(k)}</td><td>{e(str(v))}</td></tr>" for k, v in meta.items()]
    parts.append("</table>")
    for m in played["mismatches"]:
        parts.append(f"<p class='mismatch'>replay differs: {e(m)}</p>")
    parts.append("<h2 id='frames'>Frames</h2><div class='frames'>")
    for k, (caption, data) in enumerate(played["frames"]):
        src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        parts.append(f"<figure><img src='{src}' alt='frame {k}'><figcaption>{k}: {e(caption)}</figcaption></figure>")
    parts.append("</div><h2 id='transcripts'>Transcripts</h2>")
    trace = [jsonable(r) for r in final.get("trace") or []]
    for record_ in trace:
        stage = str(record_.get("stage"))
        if "agent" in record_ and "action" in record_:
            parts.append(f"<h3>{e(str(record_['agent']))} decides at {e(stage)}</h3>"
                         f"<details><summary>what {e(str(record_['agent']))} saw</summary><pre>{e(str(record_.get('observation', '')))}</pre></details>"
                         f"<pre class='action'>{e(str(record_['action']))}</pre>")
        elif stage == "deliver":
            parts.append(f"<h3>message delivered</h3><pre>{e(str(record_.get('delivered')))}</pre>")
    parts.append("<h2 id='trace'>Trace, stage by stage</h2><table class='trace'><tr><th>#</th><th>stage</th><th>record</th></tr>")
    for k, record_ in enumerate(trace):
        fields = {key: v for key, v in record_.items() if key not in ("stage", "observation")}
        parts.append(f"<tr><td>{k}</td><td class='stage'>{e(str(record_.get('stage')))}</td>"
                     f"<td><pre>{e(_field(fields))}</pre></td></tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts)


__all__ = ["page"]
