"""The merge is memoized by episode and paths: warm or cold, every pair of paths resolves the same, and the
commitment holds the caller's own tasks."""
from __future__ import annotations

from gencoord_env import caches
from gencoord_env.pipeline.resolve import resolve_joint
from gencoord_env.tasks import pool_episodes
from gencoord_env.tasks import references as R
from gencoord_env.types import PeerRequest, Proposal


def _records() -> list[tuple[object, Proposal]]:
    """Heldout episodes with the joint records of each binding, each also sent to the episode of the other
    role permutation, to an episode of another template with the same agent first (the same paths: a
    conflict there) and cut short."""
    episodes = pool_episodes("heldout")[:64]
    out = []
    for k, episode in enumerate(episodes):
        swapped = episodes[k ^ 1]  # the same cluster, the other agent first
        elsewhere = next(e for e in episodes if e.template.id != episode.template.id and e.perm == episode.perm)
        for binding in episode.template.bindings:
            q = R.joint(episode, binding)
            request = q.peer_requests[0]
            short = Proposal(q.self_plan[:-1], (PeerRequest(request.target, request.requested_plan[1:]),))
            out += [(episode, q), (swapped, q), (elsewhere, q), (episode, short)]
    return out


def test_memoized_merges_resolve_as_cold_ones() -> None:
    records = _records()
    warm = [resolve_joint(q, episode) for episode, q in records]
    assert [resolve_joint(q, episode) for episode, q in records] == warm
    cold = []
    for episode, q in records:
        caches.clear()
        cold.append(resolve_joint(q, episode))
    assert cold == warm
    codes = {str(r.code) for r in warm}
    assert "None" in codes and "RESOLUTION_CONFLICT" in codes  # commitments and conflicts both met


def test_the_commitment_holds_the_callers_tasks() -> None:
    episode = pool_episodes("heldout")[0]
    q = R.joint(episode, episode.binding)
    twin = Proposal(tuple(type(t)(t.skill, dict(t.args)) for t in q.self_plan), q.peer_requests)
    first, second = resolve_joint(q, episode).commitment, resolve_joint(twin, episode).commitment
    assert first == second
    assert all(a is b for a, b in zip(second.paths[0], twin.self_plan))
