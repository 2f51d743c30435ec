"""What a learner sees and does: observation and action spaces, and the conversions behind them.

| option | values | observation | action |
| --- | --- | --- | --- |
| ``observations`` | ``text`` (default) | the context as text (``Text``) | |
| | ``tokens`` | ``observation``: int64 ids, ``observation_mask``: int8, both of length ``max_tokens`` | |
| | ``bag`` | ``observation``: float32 word counts over the tokenizer's vocabulary (bag of words), the local context's and the shared prior's side by side (2 x vocabulary) | |
| ``actions`` | ``text`` (default) | | a record as text (``Text``) |
| | ``menu`` | adds ``action_mask`` (int8, length N) | ``Discrete(N)``: a slot of the candidate menu |

With tokens or a menu the observation is a ``Dict`` (PettingZoo's convention: ``observation`` and
``action_mask``); text with text actions stays a plain ``Text``. Spaces are built once per env and are
the same objects on every call.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

from gencoord_env.envs.gencoord.menu import candidates, menu_size
from gencoord_env.envs.gencoord.surfaces import Surface
from gencoord_env.tasks.contexts import Context
from gencoord_env.tokens import Tokenizer, encode_fixed
from gencoord_env.types import Proposal

CHARSET = frozenset(string.printable) - frozenset("\r\x0b\x0c")
MAX_OBSERVATION = 32768
MAX_ACTION = 4096
ACTIONS: tuple[str, ...] = ("text", "menu")
OBSERVATIONS: tuple[str, ...] = ("text", "tokens", "bag")


@dataclass(frozen=True)
class Interface:
    actions: str
    observations: str
    surface: Surface
    tokenizer: Tokenizer | None = None
    max_tokens: int = 1024
    n: int = field(default_factory=menu_size)

    def __post_init__(self) -> None:
        if self.actions == "menu" and self.surface.dialogue:
            raise ValueError(f"actions='menu' needs a structured surface (dsl or json); surface={self.surface.name!r} is a dialogue")
        if self.observations in ("tokens", "bag") and self.tokenizer is None:
            raise ValueError(f"observations={self.observations!r} needs a tokenizer")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")

    @property
    def structured(self) -> bool:
        """True when observations are a Dict (tokens, or a menu's action mask beside the text)."""
        return self.observations != "text" or self.actions == "menu"

    def observation_space(self) -> gymnasium.spaces.Space:
        if self.observations == "tokens":
            assert self.tokenizer is not None
            parts: dict[str, gymnasium.spaces.Space] = {
                "observation": gymnasium.spaces.Box(0, self.tokenizer.vocab_size - 1, (self.max_tokens,), np.int64),
                "observation_mask": gymnasium.spaces.Box(0, 1, (self.max_tokens,), np.int8),
            }
        elif self.observations == "bag":
            assert self.tokenizer is not None
            parts = {"observation": gymnasium.spaces.Box(0.0, float(MAX_OBSERVATION), (2 * self.tokenizer.vocab_size,), np.float32)}
        else:
            parts = {"observation": gymnasium.spaces.Text(max_length=MAX_OBSERVATION, charset=CHARSET)}
        if self.actions == "menu":
            parts["action_mask"] = gymnasium.spaces.Box(0, 1, (self.n,), np.int8)
        if not self.structured:
            return parts["observation"]
        return gymnasium.spaces.Dict(parts)

    def action_space(self) -> gymnasium.spaces.Space:
        if self.actions == "menu":
            return gymnasium.spaces.Discrete(self.n)
        return gymnasium.spaces.Text(max_length=MAX_ACTION, charset=CHARSET)

    # --- observations -------------------------------------------------------------------------------
    def menu(self, context: Context | None) -> tuple[Proposal | None, ...]:
        """The candidate records of a deciding agent's context; a waiting agent has only slot 0."""
        if context is None:
            return (None,)
        return candidates(context)

    def observe(self, text: str, menu: tuple[Proposal | None, ...] | None) -> Any:
        if not self.structured:
            return text
        out: dict[str, Any] = {}
        if self.observations == "tokens":
            assert self.tokenizer is not None
            out["observation"], out["observation_mask"] = encode_fixed(self.tokenizer, text, self.max_tokens)
        elif self.observations == "bag":
            assert self.tokenizer is not None
            # The prior is the same for every decision of a template; counted apart, the local words
            # (private field, messages, history) are not drowned in it.
            local, _, shared = text.partition("\nPRIOR ")
            v = self.tokenizer.vocab_size
            counts = np.zeros(2 * v, dtype=np.float32)
            counts[:v] = np.bincount(self.tokenizer.encode(local), minlength=v)[:v]
            if shared:
                counts[v:] = np.bincount(self.tokenizer.encode("PRIOR " + shared), minlength=v)[:v]
            out["observation"] = counts
        else:
            out["observation"] = text
        if self.actions == "menu":
            mask = np.zeros(self.n, dtype=np.int8)
            if menu is not None:
                for k, c in enumerate(menu[: self.n]):
                    mask[k] = c is not None or k == 0
            out["action_mask"] = mask
        return out

    # --- actions ------------------------------------------------------------------------------------
    def action_text(self, action: Any, menu: tuple[Proposal | None, ...]) -> tuple[str | None, str]:
        """(record text, "") for a usable action; (None, why) for a menu choice that names no candidate."""
        if self.actions == "text" or isinstance(action, str):  # menu mode takes a record too (scripted partners)
            return action, ""
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)):
            return None, f"a menu action is a slot number (int) below {self.n}; got {action!r}"
        k = int(action)
        if not 0 <= k < self.n:
            return None, f"menu slot {k} is out of range; the menu has slots 0..{self.n - 1}"
        chosen = menu[k] if k < len(menu) else None
        if chosen is None:
            available = [i for i, c in enumerate(menu) if c is not None or i == 0]
            return None, f"menu slot {k} is masked at this decision; the available slots are {available}"
        return self.surface.show(chosen), ""

    def candidate_texts(self, menu: tuple[Proposal | None, ...]) -> list[str | None]:
        """The menu as the records the env would write (slot order; None for a masked slot)."""
        return [self.surface.show(c) if c is not None else None for c in menu]


__all__ = ["ACTIONS", "CHARSET", "Interface", "MAX_ACTION", "MAX_OBSERVATION", "OBSERVATIONS"]
