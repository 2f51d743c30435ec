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

With a ``Story`` (what ``render()`` passes: ``story(session, truth)``) the frame tells the episode too, in
text drawn from a bitmap font (``data/font.json``, ``write``):

- a banner on top: the template and route, and who decides now; at the end the outcome on green
  (``SUCCESS``) or red (any failure code, with its reason; a truncation on grey);
- in the arena, each agent's role written above its disc, and for the viewer (never in an agent's
  observation) the private fact marked: a yellow ``!`` beside its holder and a yellow frame around each
  station the true binding's terminal fills;
- a panel beside the arena: the roles and their agents (in their rim colours), the private fact
  (``FACT for the viewer: agent_a knows active_binding_id=SITE_B``), then in order each decision's record as
  parsed (``PLAN``), each message delivered (``MESSAGE``), the handoff (``HANDOFF``, or ``HANDOFF none``
  once the episode ended without one) and the outcome.

A frame's shape is fixed for an episode (the layout's arena, a panel of ``PANEL_LINES`` lines), so a
sequence of frames makes a video.
"""
from __future__ import annotations

import json
import textwrap
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gencoord_env.caches import cache
from gencoord_env.data_files import data_path
from gencoord_env.errors import UsageError
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
INK = (230, 230, 230)
FACT = (250, 210, 40)
SUCCESS_BANNER = (40, 140, 60)
FAILURE_BANNER = (180, 40, 40)
RUNNING_BANNER = (60, 60, 70)
PANEL = (24, 26, 30)
PANEL_LINES = 24
BANNER = 24  # pixel rows of the banner above the arena in a composed frame
PANEL_CHARS = 64
#: the colour of each panel line's kind
LINE_COLOURS: Mapping[str, tuple[int, int, int]] = {
    "FACT": FACT, "PLAN": (150, 200, 255), "MESSAGE": (255, 170, 120), "HANDOFF": (150, 230, 160),
    "OUTCOME": WHITE, "ROLE": INK}


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
    """(row, column) of the centre of ``agent``'s disc in the arena (``BANNER`` rows lower in a composed
    frame); a handoff's line runs between two of them."""
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


@cache(maxsize=1)
def _font() -> tuple[int, int, dict[str, np.ndarray]]:
    """(width, height, glyph masks by character) of the bitmap font."""
    data = json.loads(data_path("font.json").read_text(encoding="utf-8"))
    w, h = int(data["width"]), int(data["height"])
    glyphs = {}
    for char, rows in data["glyphs"].items():
        bits = [int(rows[i:i + 2], 16) for i in range(0, len(rows), 2)]
        glyphs[char] = np.array([[(b >> (w - 1 - k)) & 1 for k in range(w)] for b in bits], dtype=bool)
    return w, h, glyphs


def text_size(line: str) -> tuple[int, int]:
    """(height, width) in pixels of ``line`` written by ``write``."""
    w, h, _ = _font()
    return h, w * len(line)


def write(img: np.ndarray, row: int, col: int, line: str, colour: Sequence[int] = INK) -> None:
    """Draw ``line`` into ``img`` with its top-left corner at (row, col), clipped at the edges; a character the
    font lacks is drawn as ``?``."""
    w, h, glyphs = _font()
    for k, char in enumerate(line):
        mask = glyphs.get(char, glyphs["?"])
        r0, c0 = row, col + k * w
        rr, cc = slice(max(r0, 0), min(r0 + h, img.shape[0])), slice(max(c0, 0), min(c0 + w, img.shape[1]))
        part = mask[rr.start - r0:rr.stop - r0, cc.start - c0:cc.stop - c0]
        if part.size:
            img[rr, cc][part] = colour


@dataclass(frozen=True)
class Story:
    """What a frame tells beyond the arena (module docstring): built by ``story`` from a session."""

    title: str
    roles: tuple[tuple[str, str], ...]  # (role, agent) in role order
    facts: tuple[tuple[str, str], ...]  # (agent, "key=value") of every private field, for the viewer
    lines: tuple[tuple[str, str], ...]  # (kind, text) in the order things happened
    now: str  # who decides, or "done"
    outcome: str | None = None  # the outcome's name at the end; None while running or when truncated
    reason: str = ""
    done: bool = False
    marked: tuple[str, ...] = ()  # stations the true binding's terminal names


def story(session: Any, truth: GroundTruth | None = None) -> Story:
    """The story so far of an ``EpisodeSession``: roles, private facts, plans, messages, handoff, outcome."""
    from gencoord_env.dsl import format as format_dsl

    s, episode = session, session.episode
    roles = tuple(zip(episode.roles, episode.role_agents))
    facts = tuple((a, f"{k}={v}") for a in episode.role_agents for k, v in episode.private_fields(a).items())
    lines: list[tuple[str, str]] = []
    for record in s.trace:
        stage = record.get("stage")
        if "agent" in record and "action" in record:
            parsed = record.get("parse")
            if isinstance(parsed, Mapping) or parsed is None:
                plan = f"unreadable ({dict(parsed or {}).get('error', 'no record')})"
            else:
                plan = format_dsl(parsed, max(1, len(episode.agents) - 1)).replace("\n", " / ")
            lines.append(("PLAN", f"{record['agent']} at {stage}: {plan}"))
        elif stage == "deliver":
            delivered = record.get("delivered")
            lines.append(("MESSAGE", f"delivered: {delivered}" if delivered is not None else "nothing arrived"))
    handoffs = [e for e in s.events if e.kind == "handoff"]
    for e in handoffs:
        d = e.data
        lines.append(("HANDOFF", f"{d.get('from')} -> {d.get('to')}: {d.get('count')} {d.get('item')}"
                      + ("" if e.ok else f" FAILED {e.reason}")))
    if s.done and not handoffs:
        lines.append(("HANDOFF", "none"))
    outcome = None if s.outcome is None else str(getattr(s.outcome, "value", s.outcome))
    if s.done:
        lines.append(("OUTCOME", (outcome or "truncated") + (f": {s.reason}" if s.reason else "")))
    stations = {st.name for st in episode.world.stations}
    marked = tuple(sorted({t.where for t in episode.terminal() if t.where in stations and t.count > 0}))
    now = "done" if s.done else f"{s.turn} decides ({s.decision.stage})"
    return Story(f"{episode.template.id}  route={s.setup.route}", roles, facts, tuple(lines), now, outcome, s.reason,
                 s.done, marked)


def _outline(img: np.ndarray, r: int, c: int, h: int, w: int, colour: Sequence[int], width: int = 2) -> None:
    _fill(img, r, c, width, w, colour)
    _fill(img, r + h - width, c, width, w, colour)
    _fill(img, r, c, h, width, colour)
    _fill(img, r, c + w - width, h, width, colour)


def _panel_lines(tale: Story, order: Sequence[str]) -> list[tuple[str, tuple[int, int, int]]]:
    out: list[tuple[str, tuple[int, int, int]]] = []
    for role, agent in tale.roles:
        rim = AGENT_COLOURS[order.index(agent) % len(AGENT_COLOURS)] if agent in order else WHITE
        out.append((f"ROLE {role}: {agent}", rim))
    for agent, fact in tale.facts:
        out += [(line, FACT) for line in textwrap.wrap(f"FACT for the viewer: {agent} knows {fact}", PANEL_CHARS)]
    for kind, body in tale.lines:
        wrapped = textwrap.wrap(f"{kind} {body}", PANEL_CHARS, subsequent_indent="  ") or [kind]
        out += [(line, LINE_COLOURS.get(kind, INK)) for line in wrapped]
    if len(out) > PANEL_LINES:  # keep the roles, the fact and the latest lines
        head = len(tale.roles) + sum(1 for _, c in out[len(tale.roles):] if c == FACT)
        out = out[:head] + [("...", INK)] + out[-(PANEL_LINES - head - 1):]
    return out


def compose(spec: WorldSpec, truth: GroundTruth, tale: Story, handoffs: Sequence[Mapping[str, Any]] = ()) -> np.ndarray:
    """The arena of ``frame`` with the story told around it (module docstring)."""
    order = [a for _, a in tale.roles]
    arena = frame(spec, truth, handoffs, order)
    fw, fh, _ = _font()
    for name in tale.marked:  # the true binding's stations, for the viewer
        station = next(st for st in spec.stations if st.name == name)
        for cell in station.cells or (station.pos,):
            r, c = _pixel(spec, cell)
            _outline(arena, r - 1, c - 1, CELL + 2, CELL + 2, FACT)
    holders = {a for a, _ in tale.facts}
    for role, agent in tale.roles:
        if agent in spec.positions:
            r, c = _pixel(spec, spec.positions[agent])
            label = role[:10]
            write(arena, r - fh - 1, c + CELL // 2 - fw * len(label) // 2, label, WHITE)
            if agent in holders:
                write(arena, r + 2, c - fw - 1, "!", FACT)
    banner_h, pad = BANNER, 6
    panel_w = PANEL_CHARS * fw + 2 * pad
    body_h = max(arena.shape[0], PANEL_LINES * (fh + 1) + 2 * pad)
    img = np.empty((banner_h + body_h, arena.shape[1] + panel_w, 3), dtype=np.uint8)
    img[:] = PANEL
    img[banner_h:banner_h + arena.shape[0], :arena.shape[1]] = arena
    if tale.done:
        colour = SUCCESS_BANNER if tale.outcome == "SUCCESS" else FAILURE_BANNER if tale.outcome else RUNNING_BANNER
        head = f"{tale.outcome or 'TRUNCATED'}  {tale.title}"
    else:
        colour, head = RUNNING_BANNER, f"{tale.title}  {tale.now}"
    img[:banner_h] = colour
    chars = img.shape[1] // fw - 2
    write(img, 5, fw, head[:chars], WHITE)
    x = arena.shape[1] + pad
    for k, (line, ink) in enumerate(_panel_lines(tale, order)):
        write(img, banner_h + pad + k * (fh + 1), x, line[:PANEL_CHARS], ink)
    return img


def png(img: np.ndarray) -> bytes:
    """``img`` (uint8, H x W x 3) as a PNG file's bytes (zlib only: no imaging library needed)."""
    import struct

    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise UsageError(f"expected a uint8 (H, W, 3) picture, got {img.dtype} {img.shape}")
    h, w, _ = img.shape
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), img.reshape(h, w * 3)], axis=1).tobytes()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


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


__all__ = ["AGENT_COLOURS", "BANNER", "CELL", "KIND_COLOURS", "PANEL_LINES", "Story", "centre", "compose", "frame", "holding_box",
           "item_colour", "png", "shape", "story", "text", "text_size", "write"]
