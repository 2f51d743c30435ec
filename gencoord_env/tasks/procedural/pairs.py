"""Pairs and the sequence: one matched pair per index (the first draw that passes every check), and the
endless lazy sequence of their episodes."""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from gencoord_env.caches import cache
from gencoord_env.errors import UsageError
from gencoord_env.tasks.episode import Cluster, Episode
from gencoord_env.tasks.prior import Prior, TemplateSpec, prior
from gencoord_env.tasks.procedural.checks import instance_problems, template_problems
from gencoord_env.tasks.procedural.families import BUILDERS, FAMILIES
from gencoord_env.tasks.procedural.held_out import allowed_quantities, held_out, signature
from gencoord_env.tasks.procedural.programs import NoDesign
from gencoord_env.tasks.procedural.steps import MIN_QMAX
from gencoord_env.tasks.procedural.templates import POOL, build_template

#: ``len(procedural_episodes(seed))``: large enough to read as endless, small enough for any index type.
LENGTH = 2**31 - 1
#: Draws of one pair before giving up (a bug, not bad luck: the reject rate is a few percent).
MAX_ATTEMPTS = 64
#: Every this many pairs, one has its bindings named by codes of the public codebook (see the docstring).
CODEBOOK_EVERY = 2


@dataclass(frozen=True)
class ProceduralPair:
    """One matched pair: its generated template, the prior extended with it, and its two clusters."""

    seed: int
    index: int
    template: TemplateSpec
    prior: Prior
    clusters: tuple[Cluster, Cluster]
    rejected: tuple[str, ...]  # why each earlier draw of this pair was redrawn (empty: the first draw served)


def template_id(seed: int, index: int, attempt: int = 0) -> str:
    """``proc<seed>_<pair>_<draw>``: the id of a draw's template (only letters, digits and ``_``, so a word
    tokenizer reads it as a few fixed words and digits; never a prior template id or a binding name)."""
    return f"{_id_prefix(seed)}{index}_{attempt}"


def _id_prefix(seed: int) -> str:
    return f"proc{seed}_"


def _rng(seed: int, index: int, attempt: int, part: str) -> random.Random:
    return random.Random(f"procedural:{seed}:{index}:{attempt}:{part}")


def draw(seed: int, index: int, attempt: int = 0) -> tuple[TemplateSpec | None, str]:
    """One draw of pair ``index``'s template, checked from the template alone: (template, "") or (None, why)."""
    rng = _rng(seed, index, attempt, "template")
    family = rng.choice(FAMILIES)
    try:
        design = BUILDERS[family](rng)
        if design is None:
            return None, f"{family}: no design within the budgets"
        t, why = build_template(rng, design)
    except NoDesign as e:
        return None, f"{family}: {e}"
    if t is None:
        return None, f"{family}: {why}"
    if signature(t) in held_out().templates:
        return None, f"{family}: held-out structure"
    allowed = allowed_quantities(t)
    if len(allowed) < MIN_QMAX:
        return None, f"{family}: crossproduct quantities"
    if allowed != t.quantities:
        t = dataclasses.replace(t, quantities=allowed)
    bindings = list(t.bindings)
    rng.shuffle(bindings)  # which binding is listed first carries no information
    names = codebook_names(seed, index)
    if names is not None:
        t = rename_bindings(t, dict(zip(bindings, names)))
        bindings = list(t.bindings)
    # the id names the draw, which fixes the template: one id, one template, in every process
    t = dataclasses.replace(t, id=template_id(seed, index, attempt), bindings=tuple(bindings),
                            terminal={b: t.terminal[b] for b in bindings})
    problems = template_problems(t)
    if problems:
        return None, f"{family}: {problems[0]}"
    return t, ""


def codebook_names(seed: int, index: int) -> tuple[str, str] | None:
    """The two public codes that name pair ``index``'s bindings, or None for a pair named by its own draw.

    >>> sorted(c for k in range(0, 26, 2) for c in codebook_names(0, k)) == sorted(prior().codebook)
    True
    """
    if index % CODEBOOK_EVERY:
        return None
    codes = sorted(prior().codebook)
    cycle, slot = divmod(index // CODEBOOK_EVERY, len(codes) // 2)
    random.Random(f"procedural:{seed}:codes:{cycle}").shuffle(codes)
    return codes[2 * slot], codes[2 * slot + 1]


def rename_bindings(t: TemplateSpec, names: Mapping[str, str]) -> TemplateSpec:
    """``t`` with its bindings renamed by ``names`` (old -> new) in bindings, nodes, ``bind`` tags and terminals."""
    if sorted(names) != sorted(t.bindings) or len(set(names.values())) != len(names):
        raise UsageError(f"renaming {dict(names)} must map each of {list(t.bindings)} to a distinct new name")
    nodes = tuple(dataclasses.replace(n, branch=names.get(n.branch, n.branch) if n.branch else None,
                                      args={k: (names[v] if k == "bind" else v) for k, v in n.args.items()})
                  for n in t.nodes)
    return dataclasses.replace(t, bindings=tuple(names[b] for b in t.bindings), nodes=nodes,
                               terminal={names[b]: v for b, v in t.terminal.items()})


def _codebook(t: TemplateSpec) -> dict[str, str]:
    return {b: f"a {t.family.replace('_', ' ')} binding of {t.title}" for b in t.bindings}


def extend_prior(t: TemplateSpec, base: Prior | None = None) -> Prior:
    """``base`` (default: the package prior) with template ``t`` added and its bindings in the codebook
    (a binding named by a public code keeps the codebook's entry: only its id reaches a context)."""
    base = base or prior()
    return dataclasses.replace(base, templates={**base.templates, t.id: t},
                               codebook={**_codebook(t), **base.codebook})


@cache(maxsize=1024)
def generate(seed: int, index: int) -> ProceduralPair:
    """Matched pair ``index`` of ``seed``: the first draw that passes every check (see the module docstring).

    Memoized (bounded) so that the four episodes of a pair build their template and prior once.
    """
    base = prior()
    rejected: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        t, why = draw(seed, index, attempt)
        if t is None:
            rejected.append(why)
            continue
        rng = _rng(seed, index, attempt, "instance")
        q = rng.choice(t.quantities)
        variant, decoy = rng.choice(base.variants).id, rng.choice(base.decoys).id
        p = extend_prior(t, base)
        clusters = sorted((Cluster(POOL, t.id, b, q, variant, decoy) for b in t.bindings), key=lambda c: c.id)
        # the served instance, and the largest quantity (where stacks and sites are fullest)
        checks = [clusters]
        if q != max(t.quantities):
            checks.append([dataclasses.replace(c, q=max(t.quantities)) for c in clusters])
        problems = [x for cs in checks for x in instance_problems(cs, p)]
        if problems:
            rejected.append(f"{t.family}: sim: {problems[0]}")
            continue
        return ProceduralPair(seed, index, t, p, (clusters[0], clusters[1]), tuple(rejected))
    raise RuntimeError(f"procedural pair {index} of seed {seed}: no draw passed in {MAX_ATTEMPTS} attempts; "
                       f"last reasons: {rejected[-3:]}")


class ProceduralEpisodes(Sequence[Episode]):
    """Endless matched pairs of generated tasks for one seed; see the module docstring.

    Read-only and lazy: ``eps[k]`` builds (or finds in a bounded memo) pair ``k // 4`` and returns its
    cluster ``(k // 2) % 2`` under role permutation ``k % 2``. Slices return tuples.
    """

    def __init__(self, seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"Expected seed to be an int but got {type(seed).__name__}")
        self.seed = seed

    def __len__(self) -> int:
        return LENGTH

    @overload
    def __getitem__(self, k: int) -> Episode: ...

    @overload
    def __getitem__(self, k: slice) -> tuple[Episode, ...]: ...

    def __getitem__(self, k: int | slice) -> Episode | tuple[Episode, ...]:
        if isinstance(k, slice):
            return tuple(self[i] for i in range(LENGTH)[k])
        if isinstance(k, bool) or not isinstance(k, int):
            raise TypeError(f"procedural episode indices must be int or slice, not {type(k).__name__}")
        if k < 0:
            k += LENGTH
        if not 0 <= k < LENGTH:
            raise IndexError(f"procedural episode index {k} out of range [0, {LENGTH})")
        pair = self.pair(k // 4)
        return Episode(pair.clusters[(k // 2) % 2], k % 2, pair.prior)

    def __iter__(self) -> Iterator[Episode]:
        for k in range(LENGTH):
            yield self[k]

    def index(self, value: Any, start: int = 0, stop: int | None = None) -> int:
        """Where ``value`` sits, read off its template id (a search would never end)."""
        prefix = _id_prefix(self.seed)
        tid = value.cluster.template if isinstance(value, Episode) else ""
        parts = tid[len(prefix):].split("_") if tid.startswith(prefix) else []
        if len(parts) == 2 and all(p.isdigit() for p in parts):
            pair = int(parts[0])
            for k in range(4 * pair, 4 * pair + 4):
                if start <= k < (LENGTH if stop is None else stop) and self[k] == value:
                    return k
        raise UsageError(f"{value!r} is not an episode of {self!r}")

    def __contains__(self, value: object) -> bool:
        try:
            self.index(value)
        except ValueError:
            return False
        return True

    def count(self, value: Any) -> int:
        return int(value in self)

    def pair(self, index: int) -> ProceduralPair:
        """Matched pair ``index`` (episodes ``4*index`` .. ``4*index + 3``)."""
        return generate(self.seed, index)

    def template(self, index: int) -> TemplateSpec:
        return self.pair(index).template

    def __repr__(self) -> str:
        return f"ProceduralEpisodes(seed={self.seed})"


def procedural_episodes(seed: int = 0) -> ProceduralEpisodes:
    """The procedural pool of ``seed``: endless paired episodes (see the module docstring).

    >>> eps = procedural_episodes(0)
    >>> len(eps) == LENGTH and eps[5].cluster.pool == POOL
    True
    """
    return ProceduralEpisodes(seed)
