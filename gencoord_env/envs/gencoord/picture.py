"""Pictures of an episode: ``render_mode="ansi"`` (the episode as text) and ``"rgb_array"`` (a top-down
picture of the arena), both from world truth, with numpy only.

The picture is a uint8 ``(H, W, 3)`` array, ``CELL`` pixels per block of the arena floor (x to the right,
z downwards), sized from the episode's layout:

- a station is a filled square in the colour of its kind (``KIND_COLOURS``: chest brown, crafting table
  orange, furnace grey), a build site an outlined square; a container's contents and a site's built cells
  are drawn inside them in the items' colours;
- an agent is a white disc at its spawn position with its own rim colour (``AGENT_COLOURS`` by role index);
  what it holds (world truth's inventory) is a column of squares beside it, one per item kind in the
  item's colour (``item_colour``), as tall as ``log2(count) + 1`` rows;
- the handoff: once a ``handoff`` event has happened, a line in the handed item's colour from the giver to
  the receiver, a square of that colour at its middle (the items in flight).

Every item has one colour (a hash of its name), so a test or a reader finds an item in any frame.
``frame(...)`` is a pure function of the layout, the truth and the handoffs; ``holding_box`` says where an
agent's held items are drawn.
"""
from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gencoord_env.world.types import GroundTruth, Pos, WorldSpec

CELL = 16
MARGIN = 3  # blocks of floor around the layout
FLOOR = (34, 40, 34)
GRID = (44, 52, 44)
KIND_COLOURS: Mapping[str, tuple[int, int, int]] = {
    "chest": (120, 80, 40), "crafting_table": (200, 120, 50), "furnace": (110, 110, 110), "site": (90, 90, 140)}
AGENT_COLOURS: tuple[tuple[int, int, int], ...] = ((80, 160, 255), (255, 90, 90), (90, 220, 120), (240, 200, 60),
                                                  (200, 100, 240))
WHITE = (245, 245, 245)


def item_colour(item: str) -> tuple[int, int, int]:
    """The colour of ``item`` in every picture: bright, and apart from the floor, kinds and agents.

    >>> item_colour("oak_planks") == item_colour("oak_planks")
    True
    """
    h = zlib.crc32(item.encode("utf-8"))
    # three channels from the hash, each in 96..255 with its low bit set: never a kind's or an agent's colour
    return tuple(96 + ((h >> s) & 0x7F) | 1 for s in (0, 8, 16))  # type: ignore[return-value]


def _bounds(spec: WorldSpec) -> tuple[int, int, int, int]:
    xs = [p[0] for p in spec.positions.values()] + [s.pos[0] for s in spec.stations]
    zs = [p[2] for p in spec.positions.values()] + [s.pos[2] for s in spec.stations]
    xs += [c[0] for s in spec.stations for c in s.cells]
    zs += [c[2] for s in spec.stations for c in s.cells]
    return min(xs) - MARGIN, max(xs) + MARGIN, min(zs) - MARGIN, max(zs) + MARGIN


def shape(spec: WorldSpec) -> tuple[int, int, int]:
    """The picture's shape for a layout."""
    x0, x1, z0, z1 = _bounds(spec)
    return ((z1 - z0 + 1) * CELL, (x1 - x0 + 1) * CELL, 3)


def _pixel(spec: WorldSpec, pos: Pos) -> tuple[int, int]:
    """(row, column) of the top-left pixel of block ``pos``."""
    x0, _, z0, _ = _bounds(spec)
    return (pos[2] - z0) * CELL, (pos[0] - x0) * CELL


def _fill(img: np.ndarray, r: int, c: int, h: int, w: int, colour: Sequence[int]) -> None:
    img[max(r, 0):max(r + h, 0), max(c, 0):max(c + w, 0)] = colour


def holding_box(spec: WorldSpec, agent: str) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) pixels of the column where ``agent``'s held items are drawn."""
    r, c = _pixel(spec, spec.positions[agent])
    return r - CELL, c + CELL, r + 2 * CELL, c + 2 * CELL


def centre(spec: WorldSpec, agent: str) -> tuple[int, int]:
    """(row, column) of the centre of ``agent``'s disc; a handoff's line runs between two of them."""
    r, c = _pixel(spec, spec.positions[agent])
    return r + CELL // 2, c + CELL // 2


def _holdings(img: np.ndarray, box: tuple[int, int, int, int], counts: Mapping[str, int]) -> None:
    top, left, bottom, right = box
    width = max(2, (right - left) // max(1, len(counts)))
    for k, (item, n) in enumerate(sorted(counts.items())):
        rows = min(bottom - top, 3 * (int(np.log2(max(n, 1))) + 1))
        _fill(img, bottom - rows, left + k * width, rows, width - 1, item_colour(item))


def _line(img: np.ndarray, a: tuple[int, int], b: tuple[int, int], colour: Sequence[int], width: int = 2) -> None:
    steps = max(abs(b[0] - a[0]), abs(b[1] - a[1]), 1)
    for t in np.linspace(0.0, 1.0, steps + 1):
        r, c = int(round(a[0] + t * (b[0] - a[0]))), int(round(a[1] + t * (b[1] - a[1])))
        _fill(img, r - width // 2, c - width // 2, width, width, colour)


def frame(spec: WorldSpec, truth: GroundTruth, handoffs: Sequence[Mapping[str, Any]] = (),
          roles: Sequence[str] = ()) -> np.ndarray:
    """The top-down picture (module docstring) of ``spec``'s arena as ``truth`` has it; ``handoffs`` are the
    ``data`` of the episode's ``handoff`` events (``from``, ``to``, ``item``, ``count``), ``roles`` the
    agents in role order (their rim colours)."""
    img = np.empty(shape(spec), dtype=np.uint8)
    img[:] = FLOOR
    img[::CELL, :] = GRID
    img[:, ::CELL] = GRID
    for station in spec.stations:
        r, c = _pixel(spec, station.pos)
        colour = KIND_COLOURS.get(station.kind, (150, 150, 150))
        if station.kind == "site":
            for cell in station.cells or (station.pos,):
                cr, cc = _pixel(spec, cell)
                _fill(img, cr + 2, cc + 2, CELL - 4, 2, colour)
                _fill(img, cr + CELL - 4, cc + 2, 2, CELL - 4, colour)
            for x, y, z, block in truth.sites.get(station.name, ()):
                cr, cc = _pixel(spec, (x, y, z))
                _fill(img, cr + 4, cc + 4, CELL - 8, CELL - 8, item_colour(block))
            continue
        _fill(img, r + 1, c + 1, CELL - 2, CELL - 2, colour)
        contents = dict(truth.containers.get(station.name, {}))
        for slot in truth.furnaces.get(station.name, {}).values():
            contents.update(slot)
        _holdings(img, (r + 3, c + 3, r + CELL - 3, c + CELL - 3), contents)
    order = list(roles) or sorted(spec.positions)
    for agent, pos in spec.positions.items():
        r, c = _pixel(spec, pos)
        rim = AGENT_COLOURS[order.index(agent) % len(AGENT_COLOURS)] if agent in order else WHITE
        yy, xx = np.mgrid[0:CELL, 0:CELL]
        d = (yy - CELL / 2 + 0.5) ** 2 + (xx - CELL / 2 + 0.5) ** 2
        patch = img[r:r + CELL, c:c + CELL]
        patch[d <= (CELL / 2 - 1) ** 2] = rim
        patch[d <= (CELL / 2 - 4) ** 2] = WHITE
        _holdings(img, holding_box(spec, agent), truth.inventories.get(agent, {}))
    for h in handoffs:
        if h.get("from") in spec.positions and h.get("to") in spec.positions:
            a, b = centre(spec, h["from"]), centre(spec, h["to"])
            colour = item_colour(str(h.get("item", "")))
            _line(img, a, b, colour)
            mid = ((a[0] + b[0]) // 2, (a[1] + b[1]) // 2)
            _fill(img, mid[0] - 4, mid[1] - 4, 8, 8, colour)
    return img


def text(session: Any, truth: GroundTruth | None) -> str:
    """The episode so far as text (``render_mode="ansi"``): who decided what, what crossed, the outcome and
    what each agent and container holds."""
    s = session
    lines = [f"EPISODE {s.episode.id} template={s.episode.template.id} route={s.setup.route}",
             "ROLES " + " ".join(f"{r}={a}" for r, a in zip(s.episode.roles, s.episode.role_agents))]
    for record in s.trace:
        stage = record.get("stage")
        if "agent" in record and "action" in record:
            action = str(record["action"]).replace("\n", " / ")
            lines.append(f"DECIDE {record['agent']} {stage}: {action}")
        elif stage == "deliver":
            lines.append(f"DELIVER {str(record.get('delivered')).replace(chr(10), ' / ')}")
        elif stage == "execute":
            lines += [f"EVENT {e.actor} {e.op} {'ok' if e.ok else 'FAILED ' + e.reason}" for e in record["events"]]
    for e in s.events:
        if e.kind == "handoff" and e.ok:
            lines.append(f"HANDOFF {e.data.get('from')} -> {e.data.get('to')}: {e.data.get('count')} {e.data.get('item')}")
    if truth is not None:
        for agent, counts in sorted(truth.inventories.items()):
            lines.append(f"HOLDS {agent} " + (",".join(f"{k}:{v}" for k, v in sorted(counts.items())) or "-"))
        for site, cells in sorted(truth.sites.items()):
            if cells:
                lines.append(f"BUILT {site} {len(cells)} blocks")
    lines.append(f"STAGE {'done' if s.done else s.decision.stage}" + (f" OUTCOME {s.outcome}" if s.done else ""))
    if s.done and s.reason:
        lines.append(f"REASON {s.reason}")
    return "\n".join(lines)


__all__ = ["AGENT_COLOURS", "CELL", "KIND_COLOURS", "centre", "frame", "holding_box", "item_colour", "shape", "text"]
