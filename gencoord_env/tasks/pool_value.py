"""The ``Pool`` value an env asks once: what it needs to know of the pool it serves.

It sits above both pool sources, the drawn pools (``tasks.pools``) and the endless generated one
(``tasks.procedural``, which reads the pools' quantity split), so that neither imports the other back.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gencoord_env.errors import UnknownName
from gencoord_env.tasks.episode import AGENTS, Episode, agents_for
from gencoord_env.tasks.pools import POOL_SIZES, TEAM_POOLS, pool_episodes
from gencoord_env.tasks.prior import TemplateSpec

#: Every pool name an env accepts: the paper's, the team pools and the endless procedural pool.
POOL_NAMES: tuple[str, ...] = (*POOL_SIZES, *TEAM_POOLS, "procedural")


@dataclass(frozen=True)
class Pool:
    """What an env needs to know of a pool, asked once (``make_pool``).

    ``agents``: every agent an episode may have (two, or the largest team's); ``team``: its episodes have
    more than two roles; ``endless``: it generates episodes without end (``procedural``: take the first N);
    ``described``: its bindings are the package's own, each with a written description
    (``private_fact`` other than ``"id"``; generated bindings have none).
    """

    name: str
    episodes: Sequence[Episode] = field(repr=False)
    agents: tuple[str, ...]
    team: bool = False
    endless: bool = False
    described: bool = True

    def templates(self) -> tuple[TemplateSpec, ...]:
        """The templates of its episodes, each once in first-seen order (of an endless pool: of its first 256
        episodes).

        >>> [t.id for t in make_pool("teams").templates()]
        ['chain', 'relay', 'fan_in']
        """
        episodes = (self.episodes[k] for k in range(256)) if self.endless else self.episodes
        return tuple({e.template.id: e.template for e in episodes}.values())


def make_pool(pool: str | Sequence[Episode], seed: int = 0) -> Pool:
    """The ``Pool`` of a pool name (drawn with ``seed``), or of a sequence of episodes (name ``custom``).

    >>> p = make_pool("teams"); p.team, p.agents, len(p.episodes)
    (True, ('agent_a', 'agent_b', 'agent_c'), 192)
    """
    if isinstance(pool, str):
        if pool == "procedural":  # the generator is imported only by those who play it
            from gencoord_env.tasks.procedural import procedural_episodes

            return Pool(pool, procedural_episodes(seed), AGENTS, endless=True, described=False)
        if pool not in POOL_NAMES:
            raise UnknownName("pool", pool, POOL_NAMES)
        episodes: Sequence[Episode] = pool_episodes(pool, seed)
        name = pool
    else:
        episodes, name = tuple(pool), "custom"
        if not episodes or not all(isinstance(e, Episode) for e in episodes):
            raise TypeError("pool must be a pool name or a non-empty sequence of Episode objects")
    roles = max(len(e.roles) for e in episodes)
    return Pool(name, episodes, agents_for(roles), team=roles > 2)


__all__ = ["POOL_NAMES", "Pool", "make_pool"]
