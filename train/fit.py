"""Whether a model fits its training rows, measured where success is decided.

In every forward row a few tokens carry the decision: each token at which the row's target parts from its
*twin's* (the row of the same public instance, role permutation and stage under the matched pair's other
binding; the two targets are aligned and every token the alignment does not match counts), and the
first token of the binding code the row names where its output format names it (``OutputFormat.code_span``:
``bind=CODE`` in Short DSL, ``"bind":"CODE"`` in JSON, the Factor-Code field's value; found by
:func:`gencoord_env.train.encoding.decision_indices`). For
Factor-Code rows and most Direct Short DSL rows these are one token; where a sender's own path differs
by binding, the paths part more than once before the code follows (Deposit/Build: ``q=12`` against
``q=6``, then `` build`` against `` resource``; Chest/Table: the quantity, then ``oak_log`` against
``oak_planks``), and every one must be right: a model that gets ``q=12`` and then continues the other
binding's path fails the episode just the same. Every other target token is
boilerplate that the twin shares or that follows from these. The mean loss over ~60 target tokens hides a coin flip on that one token
(0.69 / 57 = 0.012), so this module measures the decision itself:

- :func:`teacher_forced`: on the training rows, the decision token's argmax accuracy, its loss and its
  margin (target logit minus the best other: a margin near 0 is a near-tie that bf16 rounding or another
  decoder can flip), and whether every target token is the argmax (``row_exact``); per stage x template,
  with where the rows that are not exact first go wrong (``first_wrong``: the target text before the token,
  the token, what the model put there, whether it is a decision token, and how many rows share it), so a
  report says what the model confuses (the other branch's item after the right quantity, say) without a
  second pass over the checkpoint.
- :func:`closed_loop`: the model plays the train pool itself in the env (greedy, sim), success per
  template x binding x role permutation: a template whose two bindings sit at 100% and 0% is one the model
  answers from the template, not from the fact it was shown.
- :func:`verdict`: both together; ``fits`` only when every decision token and every train-pool cell is
  right. :func:`shout` warns loudly when a run does not fit.

A row without a twin in the set (a subset, a single-binding set) has the code's token alone.

Example::

    fit = teacher_forced(model, tokenizer, rows)
    fit["decision_accuracy"], fit["by_cell"]["sender_initial/dual_build"]
    play = closed_loop(policy, "train")
    report = verdict(fit, play)
    shout(report, "runs/sft")
"""
from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

from gencoord_env.tasks import Episode, pool as load_pool
from gencoord_env.tasks.episode import parse_episode_id
from gencoord_env.train.encoding import decision_indices, encode, parting_positions, twin_key
from gencoord_env.train.evaluate import evaluate

__all__ = [
    "cell_of", "closed_loop", "decision_indices", "parting_positions", "play_cells", "shout", "teacher_forced",
    "template_of", "twin_key", "verdict",
]


def template_of(episode_id: str) -> str:
    """The template an episode id names; every generated template (``proc<seed>_...``) is ``procedural``."""
    ref = parse_episode_id(episode_id)
    return "procedural" if ref.pool == "procedural" else ref.template


def cell_of(stage: str, episode_id: str) -> str:
    return f"{stage}/{template_of(episode_id)}"


#: target tokens of context shown before a row's first wrong token, and the commonest places kept per cell
FIRST_WRONG_CONTEXT, FIRST_WRONG_KEPT = 8, 3


def teacher_forced(model: Any, tokenizer: Any, rows: Sequence[Any], *, batch_size: int = 16,
                   max_length: int = 2048, near_tie: float = 1.0, encoded: Sequence[Any] | None = None) -> dict[str, Any]:
    """Decision-token accuracy, loss and margin, and exact rows, of ``model`` on ``rows`` (teacher-forced).

    ``near_tie``: a decision whose margin (target logit minus the best other logit) is below this counts
    as a near-tie, right or wrong. ``encoded``: the rows already encoded (:func:`gencoord_env.train.encoding.encode`,
    whose ``decision`` fields were found among a larger set of rows).
    """
    device = next(model.parameters()).device
    if encoded is None:
        encoded = encode(rows, tokenizer, max_length)
    decisions = [e.decisions for e in encoded]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    was_training = model.training
    model.eval()
    per_row: list[dict[str, Any]] = []
    with torch.no_grad():
        for start in range(0, len(encoded), batch_size):
            chunk = encoded[start:start + batch_size]
            width = max(len(e.input_ids) for e in chunk)
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            for i, e in enumerate(chunk):
                ids[i, :len(e.input_ids)] = torch.tensor(e.input_ids)
            ids = ids.to(device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
            head = model.get_output_embeddings()
            for i, e in enumerate(chunk):
                p = e.prompt_tokens
                logits = head(hidden[i, p - 1:len(e.input_ids) - 1]).float()  # predicts target + EOS
                gold = torch.tensor(e.input_ids[p:], device=device)
                argmax = logits.argmax(-1)
                wrong = (argmax != gold).nonzero()
                ks = list(decisions[start + i])
                row: dict[str, Any] = {"row_exact": not len(wrong), "decision": ks or None}
                if len(wrong):
                    k = int(wrong[0, 0])
                    row["first_wrong"] = (tokenizer.decode(e.input_ids[p + max(0, k - FIRST_WRONG_CONTEXT):p + k]),
                                          tokenizer.decode([int(gold[k])]), tokenizer.decode([int(argmax[k])]), k in ks)
                if ks:
                    picked, right = logits[ks], gold[ks]
                    other = picked.clone()
                    other[torch.arange(len(ks)), right] = float("-inf")
                    row.update(correct=bool((picked.argmax(-1) == right).all()),
                               loss=float(F.cross_entropy(picked, right, reduction="sum")),
                               margin=float((picked.gather(1, right[:, None])[:, 0] - other.max(-1).values).min()))
                per_row.append(row)
    if was_training:
        model.train()
    return _aggregate(rows, per_row, near_tie)


def _aggregate(rows: Sequence[Any], per_row: Sequence[Mapping[str, Any]], near_tie: float) -> dict[str, Any]:
    cells: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r, x in zip(rows, per_row):
        cells[cell_of(r.stage, r.episode)].append(x)

    def summary(xs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        scored = [x for x in xs if x.get("decision") is not None]
        n = len(scored)
        return {
            "rows": len(xs),
            "decision_rows": n,
            "decision_accuracy": sum(x["correct"] for x in scored) / n if n else None,
            "decision_loss": sum(x["loss"] for x in scored) / n if n else None,
            "decision_margin_min": min((x["margin"] for x in scored), default=None),
            "near_ties": sum(abs(x["margin"]) < near_tie for x in scored),
            "row_exact": sum(x["row_exact"] for x in xs) / len(xs) if xs else None,
            "first_wrong": [{"after": after, "target": target, "model": got, "decision": decision, "rows": n}
                            for (after, target, got, decision), n in
                            Counter(x["first_wrong"] for x in xs if "first_wrong" in x).most_common(FIRST_WRONG_KEPT)],
        }

    out = summary(per_row)
    out["near_tie"] = near_tie
    out["by_cell"] = {c: summary(xs) for c, xs in sorted(cells.items())}
    out["failing_cells"] = [c for c, s in out["by_cell"].items() if s["decision_accuracy"] is not None and s["decision_accuracy"] < 1.0]
    return out


def closed_loop(policy: Any, pool: str = "train", *, pool_seed: int = 0, batch_size: int = 128,
                episodes: int | None = None) -> dict[str, Any]:
    """Play ``pool`` closed-loop (sim, forward route); success per template x binding x role permutation."""
    report = evaluate(policy, pool, route="forward", pool_seed=pool_seed, episodes=episodes, batch_size=batch_size)
    episodes_ = report["episodes"]
    out = play_cells(pool, [e["episode_id"] for e in episodes_],
                     ["1" if str(e["outcome"]) == "SUCCESS" else "0" for e in episodes_], pool_seed)
    out["outcomes"] = report["metrics"]["outcomes"]
    return out


def play_cells(pool: str, episode_ids: Sequence[str], success_bits: Sequence[str], pool_seed: int = 0) -> dict[str, Any]:
    """Closed-loop results of ``pool``'s episodes, per template x binding x role permutation.

    ``success_bits``: "1" / "0" per episode, in the order of ``episode_ids``.
    """
    meta = {Episode(c, perm).id: (c.template, c.binding, perm) for c in load_pool(pool, pool_seed) for perm in (0, 1)}
    cells: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for episode_id, bit in zip(episode_ids, success_bits):
        template, binding, perm = meta[episode_id]
        cell = cells[f"{template}/{binding}/R{perm}"]
        cell[0] += bit == "1"
        cell[1] += 1
    n = len(episode_ids)
    wins = sum(c[0] for c in cells.values())
    return {
        "pool": pool,
        "episodes": n,
        "successes": wins,
        "success_rate": wins / n if n else None,
        "by_cell": {k: {"successes": s, "episodes": m} for k, (s, m) in sorted(cells.items())},
        "failing_cells": sorted(k for k, (s, m) in cells.items() if s < m),
    }


def verdict(fit: Mapping[str, Any] | None, play: Mapping[str, Any] | None) -> dict[str, Any]:
    """``fits``: every decision token right on the training rows and every train-pool episode a success."""
    reasons = []
    if fit is not None and fit["failing_cells"]:
        reasons.append(f"decision token below 100% on {len(fit['failing_cells'])} stage/template cells "
                       f"(accuracy {fit['decision_accuracy']:.3f}): {', '.join(fit['failing_cells'][:6])}")
    if fit is not None and fit.get("first_wrong") and (reasons or (play is not None and play["failing_cells"])):
        w = fit["first_wrong"][0]
        reasons.append(f"the commonest first wrong token ({w['rows']} rows): after {w['after']!r} the target has "
                       f"{w['target']!r}, the model {w['model']!r}")
    if play is not None and play["failing_cells"]:
        reasons.append(f"train pool closed-loop {play['successes']}/{play['episodes']}; failing template/binding/role "
                       f"cells: {', '.join(play['failing_cells'][:6])}" + (" ..." if len(play["failing_cells"]) > 6 else ""))
    return {"fits": not reasons, "reasons": reasons, "checked": [k for k, v in (("teacher_forced", fit), ("closed_loop", play)) if v is not None]}


def shout(report: Mapping[str, Any], where: str) -> None:
    """A loud warning (and a line on stderr through ``warnings``) when ``report`` says the model does not fit."""
    if not report["fits"]:
        warnings.warn(f"MODEL DOES NOT FIT ITS TRAINING SET ({where}): " + "; ".join(report["reasons"]),
                      RuntimeWarning, stacklevel=2)
