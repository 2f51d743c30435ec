"""What the Minecraft end-to-end tests share beside their fixture: whether the sidecar is installed here, and
the sender's half of an episode. A module of its own name, so that test modules import it by a name no other
folder's ``conftest`` shadows (``pytest tests/world/minecraft tests/minecraft`` in one run)."""
from __future__ import annotations

from gencoord_env.world.minecraft.runtime import find_sidecar_dir, missing_packages


def _missing() -> list[str]:
    try:
        return missing_packages(find_sidecar_dir())
    except Exception as e:  # noqa: BLE001 - any lookup failure means: not installed here
        return [str(e)]


#: what the sidecar install lacks here ([] when it is complete)
MISSING = _missing()


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
