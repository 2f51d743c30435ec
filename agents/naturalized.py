"""Model-free rules that read a naturalized private fact (``active_fact``) through the training surfaces only.

Both are references for the paper's naturalized private-fact table (beside the TF-IDF rule in
``gencoord_env.agents.tfidf`` and the oracle factors); both are fitted on the ``train`` form of
``gencoord_env/data/naturalized.json`` and nothing else, and both give *no plan* when the description
does not map onto one admissible binding (the TF-IDF rule guesses instead).

- ``FrozenFactorParser`` ("Frozen factor parser rule"): a keyword parser frozen on the training
  phrasings. Within a template's public codebook, the keywords of a binding are the content words its
  training phrasings use in a larger share than the training phrasings of every other admissible
  binding; a keyword weighs that difference of shares. A description goes to the binding whose
  keywords it contains with the strictly largest total weight. Word order is not read, so new word
  orders of the training words (C1) still parse; new words (C2, C3) match no keyword.
- ``CompleteSurfaceTable`` ("Complete surface table"): exact-string lookup of the training phrasings.

Words are ``\\w+`` runs, lower-cased, except single capital letters, which are labels (``site A``) and
kept as written; function words (``FUNCTION_WORDS``) are never keywords. Everything else is
Rule-Minimal-Request, and a context without a description (``private_fact="id"``) is read as that rule
reads it.

>>> FrozenFactorParser().read("the active build site is site B", ("SITE_A", "SITE_B"))
'SITE_B'
>>> FrozenFactorParser().read("construct on plot beta", ("SITE_A", "SITE_B")) is None
True
>>> CompleteSurfaceTable().read("build at site B", ("SITE_A", "SITE_B"))
'SITE_B'
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from gencoord_env.caches import cache

from gencoord_env.tasks.context_view import codebook
from gencoord_env.agents.rules import NO_PLAN, RuleMinimalRequest
from gencoord_env.tasks.contexts import Context
from gencoord_env.tasks.naturalized import phrasings, table

#: Closed-class English words (articles, prepositions, pronouns, auxiliaries, conjunctions): the frame of
#: a phrasing, never the word that names a binding.
FUNCTION_WORDS = frozenset("""
a about all an and any are as at be been being but by can could did do does done for from had has have
he her his i in into is it its me my no nor not of off on onto or our over she should so some than that
the their them then there these they this those to under up us was we were what when where which who
will with would you your yourself
""".split())

_WORD = re.compile(r"\w+")


def words(text: str) -> frozenset[str]:
    """The content words of ``text``: lower-cased, labels (one capital letter) kept, function words dropped.

    >>> sorted(words("the planks go onto build site A"))
    ['A', 'build', 'go', 'planks', 'site']
    """
    out = set()
    for w in _WORD.findall(text):
        if len(w) == 1 and w.isupper():
            out.add(w)
        elif len(w) > 1 and w.lower() not in FUNCTION_WORDS:
            out.add(w.lower())
    return frozenset(out)


def _share(binding: str, word: str) -> float:
    texts = phrasings(binding, "train")
    return sum(word in words(t) for t in texts) / len(texts)


@cache(maxsize=256)
def keywords(admissible: tuple[str, ...]) -> Mapping[str, Mapping[str, float]]:
    """Each admissible binding's keywords with their weights, from the training phrasings only.

    >>> keywords(("SITE_A", "SITE_B"))["SITE_A"]
    {'A': 1.0}
    """
    out: dict[str, dict[str, float]] = {}
    for b in admissible:
        own = sorted(set().union(*(words(t) for t in phrasings(b, "train"))))
        weights = {w: _share(b, w) - max((_share(o, w) for o in admissible if o != b), default=0.0) for w in own}
        out[b] = {w: x for w, x in weights.items() if x > 0}
    return out


class _DescriptionRule(RuleMinimalRequest):
    """Rule-Minimal-Request whose binding is read from the description; an unread description: no plan."""

    def read(self, description: str, admissible: Sequence[str]) -> str | None:
        raise NotImplementedError

    def binding(self, ctx: Context) -> str | None:
        fact = ctx.private.active_fact
        if fact is None:
            return super().binding(ctx)
        return self.read(str(fact), tuple(codebook(ctx)))

    def decide(self, ctx: Context) -> str:
        if ctx.private.active_fact is not None and self.binding(ctx) is None:
            return NO_PLAN  # the rule does not guess a branch it cannot read
        return super().decide(ctx)


class FrozenFactorParser(_DescriptionRule):
    """Frozen factor parser rule: training-phrasing keywords, word order ignored, new words unknown."""

    name = "frozen_parser"

    def read(self, description: str, admissible: Sequence[str]) -> str | None:
        """The admissible binding whose keywords ``description`` contains with the largest weight, else None."""
        found = words(description)
        lexicon = keywords(tuple(admissible))
        scores = {b: sum(x for w, x in lexicon[b].items() if w in found) for b in admissible}
        best = max(scores.values(), default=0.0)
        winners = [b for b, s in scores.items() if s == best]
        return winners[0] if best > 0 and len(winners) == 1 else None


class CompleteSurfaceTable(_DescriptionRule):
    """Complete surface table: every training phrasing, as written, mapped to its binding."""

    name = "surface_table"

    def __init__(self, surface: str = "dsl") -> None:
        super().__init__(surface)
        self.table: dict[str, str] = {text: b for b in table()["bindings"] for text in phrasings(b, "train")}

    def read(self, description: str, admissible: Sequence[str]) -> str | None:
        b = self.table.get(description)
        return b if b in admissible else None


__all__ = ["FUNCTION_WORDS", "CompleteSurfaceTable", "FrozenFactorParser", "keywords", "words"]
