"""The sender's half of an episode, for the Minecraft end-to-end tests: a module of its own name, so that test
modules import it by a name no other folder's ``conftest`` shadows (``pytest tests/world/minecraft tests/minecraft``
in one run)."""
from __future__ import annotations


def play_sender(env: object) -> tuple[str, str]:
    """Reset ``env`` to heldout episode 0 and play the sender's reference record; returns the receiver and its
    reference record, whose step compiles and executes the episode."""
    from gencoord_env import dsl
    from gencoord_env.tasks import references as R

    env.reset(options={"index": 0})  # type: ignore[attr-defined]
    q = R.sender_initial(env.session.episode)  # type: ignore[attr-defined]
    _, _, _, _, infos = env.step({env.session.turn: dsl.format(q)})  # type: ignore[attr-defined]
    receiver = next(a for a, i in infos.items() if i["deciding"])
    return receiver, dsl.format(R.receiver_after_request(q.peer_requests[0]))
