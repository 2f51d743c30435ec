"""TF-IDF nearest-neighbour rule for naturalized private facts (a seedless, model-free reference).

The sender's private field holds a description (``active_fact``) instead of a binding id. This rule
embeds the description with a TF-IDF vectorizer (scikit-learn) fitted on the *training* phrasings of
every binding, finds the most cosine-similar training phrasing among the bindings the template admits
(its public codebook), and forwards that binding; words are lower-cased and every word counts, one-letter
words included (``site A`` vs ``site B``); everything else is Rule-Minimal-Request. Ties and
all-zero similarities (no shared vocabulary) go to the first codebook entry, the rule's fixed guess.
"""
from __future__ import annotations

from sklearn.feature_extraction.text import TfidfVectorizer

from gencoord_env.tasks.context_view import codebook
from gencoord_env.agents.rules import RuleMinimalRequest
from gencoord_env.tasks.contexts import Context
from gencoord_env.tasks.naturalized import phrasings, table


class TfidfNearestNeighbour(RuleMinimalRequest):
    """Map a naturalized private fact to the binding of its nearest training phrasing."""

    name = "tfidf"

    def __init__(self, surface: str = "dsl", form: str = "train") -> None:
        super().__init__(surface)
        self.labels: list[str] = []
        texts: list[str] = []
        for binding in table()["bindings"]:
            for text in phrasings(binding, form):
                self.labels.append(binding)
                texts.append(text)
        # single-character tokens are kept: "site A" and "site B" differ only in one letter
        self.vectorizer = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b")
        self.matrix = self.vectorizer.fit_transform(texts)

    def nearest(self, description: str, admissible: list[str] | tuple[str, ...]) -> str:
        """The admissible binding whose training phrasing is most similar to ``description``."""
        scores = (self.matrix @ self.vectorizer.transform([description]).T).toarray().ravel()
        best: dict[str, float] = {b: 0.0 for b in admissible}
        for label, score in zip(self.labels, scores):
            if label in best and score > best[label]:
                best[label] = float(score)
        return max(admissible, key=lambda b: (best[b], -list(admissible).index(b)))

    def binding(self, ctx: Context) -> str | None:
        fact = ctx.private.active_fact
        if fact is None:
            return super().binding(ctx)
        return self.nearest(str(fact), list(codebook(ctx)))


__all__ = ["TfidfNearestNeighbour"]
