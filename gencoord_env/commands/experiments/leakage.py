"""Can the uninformed agent read the hidden fact from its own view? A binding classifier, pool by pool.

The agent without the deciding fact (forward suites: the receiver before any request arrives; Goal x
Capability: the requester) must be at chance, or the paper's 50% ceilings and every learned result
would rest on a shortcut. This trains a TF-IDF + logistic-regression classifier on the train pool's
uninformed views (the receiver's observation with the request removed), labelled with the binding's slot
in its template's codebook, and reports its accuracy on every pool, plus how many distinct views each
pool has and how many of them occur under both bindings.

    python -m gencoord_env.commands.experiments.leakage          # needs the `experiments` extra (scikit-learn)
"""
from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.tasks import POOL_SIZES, prior
from gencoord_env.wrappers import RequestRemoval

View = tuple[str, str, int]  # (binding, observation text, binding's slot in the template's codebook)


def uninformed_views(pool: str) -> list[View]:
    """The uninformed agent's observation at its decision in every episode of ``pool`` (sim backend)."""
    if pool == "goal_capability":
        env: Any = gencoord_env.parallel_env(pool=pool, backend="sim", route="feedback")
    else:
        env = RequestRemoval(gencoord_env.parallel_env(pool=pool, backend="sim"))
    policy = make_policy("rule")
    out: list[View] = []
    for k in range(len(env.unwrapped.episodes)):
        obs, infos = env.reset(options={"index": k})
        episode = env.unwrapped.session.episode
        uninformed = episode.first if pool == "goal_capability" else episode.second
        while env.agents:
            turn = next(a for a, i in infos.items() if i["deciding"])
            if turn == uninformed:
                out.append((episode.binding, obs[turn], episode.template.bindings.index(episode.binding)))
                break
            obs, _, _, _, infos = env.step({turn: policy.act(obs[turn], infos[turn])})
    return out


def shared_views(views: Sequence[View]) -> tuple[int, int]:
    """(distinct views, distinct views seen under both bindings)."""
    groups: dict[str, set[str]] = defaultdict(set)
    for binding, text, _ in views:
        groups[text].add(binding)
    return len(groups), sum(len(b) > 1 for b in groups.values())


def classifier_accuracy(train: Sequence[View], test: Sequence[View]) -> float:
    """Accuracy of a TF-IDF + logistic regression classifier of the binding slot, fitted on ``train``."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"[^\s]+")
    model = LogisticRegression(max_iter=2000).fit(vectorizer.fit_transform([t for _, t, _ in train]), [s for _, _, s in train])
    predicted = model.predict(vectorizer.transform([t for _, t, _ in test]))
    return float(sum(int(p == s) for p, (_, _, s) in zip(predicted, test)) / len(test))


def report(pools: Sequence[str] = tuple(sorted(POOL_SIZES))) -> dict[str, dict[str, float]]:
    """``{pool: {"accuracy", "views", "shared_views"}}`` with the classifier fitted on ``train``."""
    train = uninformed_views("train")
    out = {}
    for pool in pools:
        views = train if pool == "train" else uninformed_views(pool)
        distinct, shared = shared_views(views)
        out[pool] = {"accuracy": classifier_accuracy(train, views), "views": distinct, "shared_views": shared}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from gencoord_env.commands.cli import Parser

    ap = Parser(prog="python -m gencoord_env.commands.experiments.leakage", description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    _ = prior()
    result = report()
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(f"{'pool':16s} {'classifier acc.':>16s} {'views':>7s} {'under both bindings':>20s}")
    for pool, r in result.items():
        print(f"{pool:16s} {r['accuracy']:16.3f} {int(r['views']):7d} {int(r['shared_views']):20d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
