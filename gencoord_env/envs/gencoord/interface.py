"""What a learner sees and does: observation and action spaces, and the conversions behind them.

| option | values | observation | action |
| --- | --- | --- | --- |
| ``observations`` | ``text`` (default) | the context as text (``Text``) | |
| | ``tokens`` | ``observation``: int64 ids, ``observation_mask``: int8, both of length ``max_tokens`` | |
| | ``bag`` | ``observation``: float32 word counts over the tokenizer's vocabulary (bag of words), the local context's and the shared prior's side by side (2 x vocabulary) | |
| ``actions`` | ``text`` (default) | | a record as text (``Text``) |
| | ``menu`` | adds ``action_mask`` (int8, length N); the text (and so the token ids) gains a ``MENU <slot> <label>`` line per usable slot; with tokens or a bag also ``menu_labels`` (int64, N x ``LABEL_TOKENS``: each slot's label as token ids, padding where masked). A bag does not count the ``MENU`` lines: apart from their slots they are noise to a bag learner (a bag MLP's training success after 30 updates fell from 0.84 to 0.53 with them) | ``Discrete(N)``: a slot of the candidate menu |

Any action value is handled: a text action that is not a ``str``, or a menu action that names no
unmasked slot, is refused with a reason (the session ends the episode with ``PARSE_FAILURE``); a ``str``
over ``MAX_ACTION`` characters is refused by the session before it is parsed.

A slot's label (``menu.labels``: ``branch=SITE_B self=1``) says which branch the slot holds in the terms of
the agent's public view; it never depends on the private field.

The centralized state (``state()``, ``state_space``) is encoded the same way without the menu (no action
mask, no labels): text as
``Text``, tokens as a ``Dict`` of ``observation`` and ``observation_mask``, a bag as its ``Box`` (the shared
prior counted apart, as for an agent's view).

With tokens or a menu the observation is a ``Dict`` (PettingZoo's convention: ``observation`` and
``action_mask``); text with text actions stays a plain ``Text``. Spaces are built once per env and are
the same objects on every call.
"""
from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from gencoord_env.caches import Memo
from gencoord_env.envs.gencoord.menu import MENUS, candidates, labels, menu_key, menu_size
from gencoord_env.envs.gencoord.surfaces import Surface
from gencoord_env.errors import UsageError
from gencoord_env.tasks.contexts import Context
from gencoord_env.tasks.contexts import render_parts
from gencoord_env.tokens import Tokenizer, WordTokenizer, bag_of_words, encode_fixed
from gencoord_env.types import Proposal

CHARSET = frozenset(string.printable) - frozenset("\r\x0b\x0c")
MAX_OBSERVATION = 32768
MAX_ACTION = 4096
ACTIONS: tuple[str, ...] = ("text", "menu")


@dataclass(frozen=True)
class Menu:
    """One decision's menu: the candidate records and their texts in the env's surface (``None``: masked),
    each slot's label (``menu.labels``); ``mask`` the action mask of its slots (read-only; observations get a
    copy)."""

    records: tuple[Proposal | None, ...]
    texts: tuple[str | None, ...]
    mask: np.ndarray | None = field(default=None, compare=False, repr=False)
    labels: tuple[str | None, ...] = ()

    @property
    def block(self) -> str:
        """The menu as the deciding agent's text shows it: ``MENU <slot> <label>`` for every usable slot."""
        return "\n".join(f"MENU {k} {label}" for k, label in enumerate(self.labels)
                         if label is not None and (k == 0 or self.texts[k] is not None))


def brief(value: Any, limit: int = 80) -> str:
    """A one-line ``repr`` of an agent's action for a reason or a trace, at most about ``limit`` characters.

    >>> brief(b"x" * 100, 10)
    "b'xxxxxxxx... (103 characters)"
    """
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - an int too long for str(), or an object whose __repr__ breaks
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


@dataclass(frozen=True)
class ObservationForm:
    """One ``observations=`` value: the spaces of the observation's parts, and the parts of one observation
    (``encode(interface, text, context, render parts)``). A ``plain`` form without a menu is its text alone."""

    name: str
    spaces: Callable[[Interface], dict[str, gymnasium.spaces.Space[Any]]]
    encode: Callable[[Interface, str, Context | None, tuple[str, ...]], dict[str, Any]]
    needs_tokenizer: bool = False
    plain: bool = False
    #: whether the menu's ``MENU`` lines are among what it encodes (a bag leaves them out: counted apart from
    #: their slots, the labels are only noise to a bag learner, which reads them in ``menu_labels``)
    menu_words: bool = True


def _text_spaces(i: Interface) -> dict[str, gymnasium.spaces.Space[Any]]:
    return {"observation": gymnasium.spaces.Text(max_length=MAX_OBSERVATION, charset=CHARSET)}


def _tokens_spaces(i: Interface) -> dict[str, gymnasium.spaces.Space[Any]]:
    assert i.tokenizer is not None
    return {"observation": gymnasium.spaces.Box(0, i.tokenizer.vocab_size - 1, (i.max_tokens,), np.int64),
            "observation_mask": gymnasium.spaces.Box(0, 1, (i.max_tokens,), np.int8)}


def _tokens(i: Interface, text: str, context: Context | None, parts: tuple[str, ...]) -> dict[str, Any]:
    assert i.tokenizer is not None
    ids, mask = encode_fixed(i.tokenizer, parts, i.max_tokens)
    return {"observation": ids, "observation_mask": mask}


def _bag_spaces(i: Interface) -> dict[str, gymnasium.spaces.Space[Any]]:
    assert i.tokenizer is not None
    return {"observation": gymnasium.spaces.Box(0.0, float(MAX_OBSERVATION), (2 * i.tokenizer.vocab_size,), np.float32)}


def _bag(i: Interface, text: str, context: Context | None, parts: tuple[str, ...]) -> dict[str, Any]:
    assert i.tokenizer is not None
    # The prior is the same for every decision of a template; counted apart, the local words (private
    # field, messages, history, the menu) are not drowned in it.
    if context is None or context.peer_view is not None:
        return {"observation": bag_of_words(i.tokenizer, parts)}
    at = parts.index(context.prior.text)
    return {"observation": bag_of_words(i.tokenizer, parts[:at], parts[at])}


#: The observation forms by name, as ``SURFACES`` holds the surfaces: a new form is one entry here.
OBSERVATION_FORMS: dict[str, ObservationForm] = {f.name: f for f in (
    ObservationForm("text", _text_spaces, lambda i, text, context, parts: {"observation": text}, plain=True),
    ObservationForm("tokens", _tokens_spaces, _tokens, needs_tokenizer=True),
    ObservationForm("bag", _bag_spaces, _bag, needs_tokenizer=True, menu_words=False),
)}

#: A waiting agent's menu: slot 0 only, whose action is ignored.
WAITING = Menu((None,), (None,))
#: token ids kept of each slot's label in ``menu_labels`` (a label is a few words: ``branch=SITE_B self=1``)
LABEL_TOKENS = 16
_LABEL_IDS = Memo("envs.interface.label_ids", maxsize=1 << 12)
#: menus by (surface, N, ``menu_key``): a decision met again (every reset meets its first one) reuses its menu
_MENUS = Memo("envs.interface.menus", maxsize=1 << 15)
_IDLE_MASKS = Memo("envs.interface.idle_masks", maxsize=64)


def with_menu(parts: tuple[str, ...], menu: Menu) -> tuple[str, ...]:
    """A deciding agent's ``render_parts`` with its menu's block after the history and messages, before the
    shared prior (so token views keep it when they cut the tail)."""
    return (*parts[:3], menu.block, *parts[3:]) if menu.labels else parts


def _label_ids(i: Interface, menu: Menu | None) -> np.ndarray:
    """(N, LABEL_TOKENS) int64: the token ids of each usable slot's label, padding elsewhere (read-only)."""
    assert i.tokenizer is not None
    labels = menu.labels if menu is not None else ()
    key = (i.tokenizer.serial, i.n, labels) if isinstance(i.tokenizer, WordTokenizer) else None
    found = _LABEL_IDS.get(key) if key is not None else None
    if found is None:
        found = np.full((i.n, LABEL_TOKENS), i.tokenizer.pad_id, dtype=np.int64)
        for k, label in enumerate(labels[: i.n]):
            if label is not None and menu is not None and (k == 0 or menu.texts[k] is not None):
                ids = i.tokenizer.encode(label)[:LABEL_TOKENS]
                found[k, : len(ids)] = ids
        found.flags.writeable = False
        if key is not None:
            _LABEL_IDS.put(key, found)
    return found


def _mask(records: tuple[Proposal | None, ...], n: int) -> np.ndarray:
    """Slot 0 and every slot with a record, read-only."""
    mask = np.zeros(n, dtype=np.int8)
    mask[0] = 1
    for k, c in enumerate(records[:n]):
        if c is not None:
            mask[k] = 1
    mask.flags.writeable = False
    return mask


@dataclass(frozen=True)
class Interface:
    actions: str
    observations: str
    surface: Surface
    tokenizer: Tokenizer | None = None
    max_tokens: int = 1024
    n: int = field(default_factory=menu_size)
    menu_kind: str = "default"  # menu.MENUS

    def __post_init__(self) -> None:
        if self.actions == "menu" and self.surface.dialogue:
            raise UsageError(f"actions='menu' needs a structured surface (dsl or json); surface={self.surface.name!r} is a dialogue")
        if self.form.needs_tokenizer and self.tokenizer is None:
            raise UsageError(f"observations={self.observations!r} needs a tokenizer")
        if self.menu_kind not in MENUS:
            raise UsageError(f"unknown menu {self.menu_kind!r}; expected one of {list(MENUS)}")
        if self.max_tokens < 1:
            raise UsageError(f"max_tokens must be positive, got {self.max_tokens}")

    @property
    def form(self) -> ObservationForm:
        return OBSERVATION_FORMS[self.observations]

    @property
    def structured(self) -> bool:
        """True when observations are a Dict (tokens, or a menu's action mask beside the text)."""
        return not self.form.plain or self.actions == "menu"

    def observation_space(self) -> gymnasium.spaces.Space[Any]:
        parts = self.form.spaces(self)
        if self.actions == "menu":
            parts["action_mask"] = gymnasium.spaces.Box(0, 1, (self.n,), np.int8)
            if self.form.needs_tokenizer:
                assert self.tokenizer is not None
                parts["menu_labels"] = gymnasium.spaces.Box(0, self.tokenizer.vocab_size - 1, (self.n, LABEL_TOKENS), np.int64)
        if not self.structured:
            return parts["observation"]
        return gymnasium.spaces.Dict(parts)

    def state_space(self) -> gymnasium.spaces.Space[Any]:
        """The space of the centralized state: the observation's, without the menu (mask and labels)."""
        space = self.observation_space()
        if not isinstance(space, gymnasium.spaces.Dict):
            return space
        parts = {k: v for k, v in space.spaces.items() if k not in ("action_mask", "menu_labels")}
        return gymnasium.spaces.Dict(parts) if len(parts) > 1 else parts["observation"]

    def state(self, parts: tuple[str, ...]) -> Any:
        """The centralized state from the blocks of a centralized context's text (``render_parts``: head,
        local observation, history and messages, the shared prior, the uploaded peer views)."""
        if self.observations == "tokens":
            assert self.tokenizer is not None
            ids, mask = encode_fixed(self.tokenizer, parts, self.max_tokens)
            return {"observation": ids, "observation_mask": mask}
        if self.observations == "bag":
            assert self.tokenizer is not None
            return bag_of_words(self.tokenizer, parts[:3] + parts[4:], parts[3])
        return "\n".join(parts)

    def action_space(self) -> gymnasium.spaces.Space[Any]:
        if self.actions == "menu":
            return gymnasium.spaces.Discrete(self.n)
        return gymnasium.spaces.Text(max_length=MAX_ACTION, charset=CHARSET)

    # --- observations -------------------------------------------------------------------------------
    def menu(self, context: Context | None) -> Menu:
        """The menu of a deciding agent's context; a waiting agent has only slot 0."""
        if context is None:
            return WAITING
        key = menu_key(context, self.menu_kind)
        menu = _MENUS.get((self.surface.name, self.n, key))
        if menu is None:
            records = candidates(context, key, self.menu_kind)
            peers = max(1, len(context.team) - 1)  # a team's records may address every other agent
            texts = tuple(self.surface.write(c, peers) if c is not None else None for c in records)
            menu = _MENUS.put((self.surface.name, self.n, key),
                              Menu(records, texts, _mask(records, self.n), labels(context, key, self.menu_kind)[: self.n]))
        return menu

    def observe(self, text: str, menu: Menu | None, context: Context | None = None,
                parts: tuple[str, ...] | None = None) -> Any:
        """The observation of one agent: ``text`` as rendered (with its menu's lines), ``context`` the deciding
        agent's context (``parts``: its ``render_parts``, without the menu, when the caller has them)."""
        if not self.structured:
            return text
        if parts is None:
            parts = render_parts(context) if context is not None else (text,)
        if context is not None and menu is not None and self.actions == "menu" and self.form.menu_words:
            parts = with_menu(parts, menu)
        out = self.form.encode(self, text, context, parts)
        if self.actions == "menu":
            mask = menu.mask if menu is not None else None
            if mask is None:
                mask = _IDLE_MASKS.get(self.n)
                if mask is None:
                    mask = _IDLE_MASKS.put(self.n, _mask((), self.n))
            out["action_mask"] = mask.copy()
            if self.form.needs_tokenizer:
                out["menu_labels"] = _label_ids(self, menu).copy()
        return out

    # --- actions ------------------------------------------------------------------------------------
    def action_text(self, action: Any, menu: Menu) -> tuple[str | None, str]:
        """(record text, "") for a usable action; (None, why) for one that names no record: a text action that
        is not a str, a menu choice that names no candidate. The session checks a str's length."""
        if isinstance(action, str):  # menu mode takes a record too (scripted partners)
            return action, ""
        if self.actions == "text":
            return None, f"expected the action to be a str, got {type(action).__name__}"
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            return None, f"a menu action is a slot number (int) below {self.n}; got {brief(action)}"
        k = int(action)
        if not 0 <= k < self.n:
            return None, f"menu slot {brief(k)} is out of range; the menu has slots 0..{self.n - 1}"
        text = menu.texts[k] if k < len(menu.texts) else None
        if text is None:
            available = [i for i, t in enumerate(menu.texts) if t is not None or i == 0]
            return None, f"menu slot {k} is masked at this decision; the available slots are {available}"
        return text, ""


__all__ = ["ACTIONS", "CHARSET", "Interface", "LABEL_TOKENS", "MAX_ACTION", "MAX_OBSERVATION", "Menu", "OBSERVATION_FORMS",
           "ObservationForm", "WAITING", "brief", "with_menu"]
