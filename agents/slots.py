"""Menu learners in torch, and their checkpoints as policies: ``SlotNet`` reads each slot's label and scores
every slot with one shared network (other-play's symmetrization, built into the policy class); ``BagMLP``
is the plain multilayer perceptron over the bag of words (one logit per slot index).

The env's menu observation (``actions="menu"``, ``observations="bag"``) carries, beside the bag of words
and the action mask, ``menu_labels``: the token ids of each usable slot's label (``branch=SITE_B self=1``;
``gencoord_env.envs.gencoord.menu``). ``SlotNet`` embeds a label's grammar words (``branch``, ``self``,
``task``, digits, ...) and gives every other word (a branch id) one shared embedding plus how often that
word occurs in the agent's local text (the bag's first half, which leaves the menu out): the private fact
for the sender, the request's content for the receiver. Relabelling the branches of a template permutes the slots' scores and
nothing else, so the only way to tell the branches apart is to read the fact or the message: a pair of
learners cannot settle on "always the first slot" or "always SITE_A", the 0.5 convention that bag MLPs
lock into on ``menu="branches"``.

    >>> net = SlotNet(WordTokenizer.default().vocab_size)
    >>> policy = MenuPolicy({"agent_a": net}, kind="slots", menu="branches")
    >>> # policy.act(observation, info) -> the chosen slot's record as text

``MenuPolicy`` plays trained actors behind the one policy interface (``act(observation, info)``), in any
env on the structured surfaces, text actions included: it builds its own menu observation from the
deciding agent's typed context (``info["context"]``, what the observation text renders) with the menu
kind it was trained on, and answers with the chosen slot's record as text. ``save`` / ``MenuPolicy.load``
keep every actor of a run in one file. Needs torch (the ``rl`` extra).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from gencoord_env.envs.gencoord.interface import LABEL_TOKENS, Interface, with_menu
from gencoord_env.envs.gencoord.surfaces import SURFACES
from gencoord_env.errors import DataError, UsageError
from gencoord_env.tasks.contexts import Context, render_parts
from gencoord_env.tokens import WordTokenizer

#: the words a label is written in (``menu.labels``); every other label word names a branch
GRAMMAR: tuple[str, ...] = ("empty", "request", "requests", "branch", "self", "task", "=", "+", *"0123456789")
_PAD, _NAME = 0, 1  # embedding rows: padding, any branch name; the grammar words follow
KINDS: tuple[str, ...] = ("slots", "mlp")
FORMAT = "gencoord-menu-policy-v1"


class SlotNet(nn.Module):
    """Slot logits from (bag, menu_labels, action_mask) batches."""

    def __init__(self, vocab_size: int, slots: int = 0, width: int = 64) -> None:
        super().__init__()
        tok = WordTokenizer.default()
        if tok.vocab_size != vocab_size:
            raise UsageError(f"vocab_size {vocab_size} is not the package tokenizer's ({tok.vocab_size})")
        self.vocab_size, self.width = vocab_size, width
        kind = torch.full((vocab_size,), _NAME, dtype=torch.long)
        kind[tok.pad_id] = _PAD
        for k, word in enumerate(GRAMMAR):
            kind[tok.ids[word]] = 2 + k
        self.register_buffer("kind", kind, persistent=False)
        self.embed = nn.Embedding(2 + len(GRAMMAR), width, padding_idx=_PAD)
        self.position = nn.Parameter(torch.randn(LABEL_TOKENS, width) * 0.1)
        self.match = nn.Linear(1, width)
        self.context = nn.Sequential(nn.Linear(2 * vocab_size, width), nn.Tanh())
        self.score = nn.Sequential(nn.Linear(2 * width, width), nn.Tanh(), nn.Linear(width, 1))

    def slots(self, bag: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """(B, N, width): each slot's label read against the local text."""
        local = bag[:, : self.vocab_size]
        b, n, length = labels.shape
        said = local.gather(1, labels.reshape(b, n * length)).reshape(b, n, length)  # each label word in the local text
        kind = self.kind[labels]
        names = (kind == _NAME).to(local.dtype)
        tokens = self.embed(kind) + self.position + self.match(torch.log1p(said * names).unsqueeze(-1))
        return (tokens * (kind != _PAD).unsqueeze(-1).to(local.dtype)).sum(2)

    def forward(self, bag: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        slots = self.slots(bag, labels)
        context = self.context(torch.log1p(bag)).unsqueeze(1).expand(-1, slots.shape[1], -1)
        return self.score(torch.cat([slots, context], -1)).squeeze(-1).masked_fill(~mask, -1e9)


class BagMLP(nn.Module):
    """One logit per slot index from the bag of words alone (the labels unread)."""

    def __init__(self, vocab_size: int, slots: int, width: int = 64) -> None:
        super().__init__()
        self.vocab_size, self.width = vocab_size, width
        self.net = mlp(2 * vocab_size, slots, width)

    def forward(self, bag: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(torch.log1p(bag)).masked_fill(~mask, -1e9)


def mlp(inputs: int, outputs: int, width: int = 64) -> nn.Module:
    return nn.Sequential(nn.Linear(inputs, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, outputs))


def make_net(kind: str, vocab_size: int, slots: int, width: int = 64) -> nn.Module:
    if kind not in KINDS:
        raise UsageError(f"unknown menu learner {kind!r}; expected one of {list(KINDS)}")
    return (SlotNet if kind == "slots" else BagMLP)(vocab_size, slots, width)


def batch(observations: Sequence[Mapping[str, np.ndarray]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(bag, labels, mask) tensors of menu observations in the ``bag`` form."""
    return (torch.as_tensor(np.stack([o["observation"] for o in observations]), dtype=torch.float32),
            torch.as_tensor(np.stack([o["menu_labels"] for o in observations]), dtype=torch.long),
            torch.as_tensor(np.stack([o["action_mask"] for o in observations]) == 1))


class MenuPolicy:
    """Trained actors behind ``act(observation, info)`` (see the module docstring); greedy unless
    ``sample``. A run trains one actor per agent id, each in every role: by default the deciding agent's own
    actor answers (the first actor for an agent id the run did not have); ``actor`` makes one answer for all."""

    def __init__(self, nets: Mapping[str, nn.Module], kind: str, menu: str, actor: str | None = None,
                 surface: str = "dsl", sample: bool = False, seed: int = 0, about: Mapping[str, Any] | None = None) -> None:
        if not nets:
            raise UsageError("a menu policy needs at least one actor")
        self.nets = dict(nets)
        if actor is not None and actor not in self.nets:
            raise UsageError(f"no actor {actor!r} in this checkpoint; it holds {sorted(self.nets)}")
        self.actor = actor
        self.net = self.nets[actor or next(iter(self.nets))]
        self.kind, self.menu, self.sample = kind, menu, sample
        self.interface = Interface("menu", "bag", SURFACES[surface], WordTokenizer.default(), menu_kind=menu)
        self.generator = torch.Generator().manual_seed(seed)
        self.about = dict(about or {})
        self.name = f"{kind}:{actor or 'own'}"
        self.model_calls = 0

    def actor_for(self, agent: str) -> str:
        """The name of the actor that answers for ``agent``."""
        if self.actor is not None:
            return self.actor
        return agent if agent in self.nets else next(iter(self.nets))

    def observe(self, context: Context) -> tuple[dict[str, np.ndarray], tuple[str | None, ...]]:
        """(the menu observation of ``context`` as the env builds it, the records of its slots as text)."""
        menu = self.interface.menu(context)
        parts = render_parts(context)
        return self.interface.observe("\n".join(with_menu(parts, menu)), menu, context, parts), menu.texts

    def act(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[str], infos: Sequence[dict[str, Any]]) -> list[str]:
        seen = []
        for info in infos:
            if not isinstance(info.get("context"), Context):
                raise UsageError("a menu policy reads the deciding agent's typed context: pass the full infos "
                                 "(infos='full', or env.full_infos()) of the deciding agent")
            seen.append(self.observe(info["context"]))
        answers: list[str] = [""] * len(seen)
        actors = [self.actor_for(i["context"].agent) for i in infos]
        for actor in dict.fromkeys(actors):
            ks = [k for k, a in enumerate(actors) if a == actor]
            with torch.no_grad():
                logits = self.nets[actor](*batch([seen[k][0] for k in ks]))
            if self.sample:
                slots = torch.multinomial(torch.softmax(logits, -1), 1, generator=self.generator).squeeze(-1).tolist()
            else:
                slots = logits.argmax(-1).tolist()
            for k, slot in zip(ks, slots):
                answers[k] = seen[k][1][slot] or ""
        self.model_calls += len(seen)
        return answers

    def save(self, path: str | Path) -> Path:
        """One file: every actor's weights and what rebuilds them (kind, menu, sizes, ``about``)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        first = self.net
        slots = self.interface.n  # the menu size the nets were built for
        torch.save({"format": FORMAT, "kind": self.kind, "menu": self.menu, "vocab_size": first.vocab_size,
                    "slots": slots, "width": first.width, "about": self.about,
                    "actors": {k: v.state_dict() for k, v in self.nets.items()}}, path)
        return path

    @classmethod
    def load(cls, path: str | Path, actor: str | None = None, **kwargs: Any) -> MenuPolicy:
        """A saved run's actor (``actor``: its agent id; default the first)."""
        try:
            data = torch.load(Path(path), map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise FileNotFoundError(f"no menu-policy checkpoint at {path}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DataError(f"{path} is not a menu-policy checkpoint (expected format {FORMAT!r})")
        nets = {}
        for name, state in data["actors"].items():
            nets[name] = make_net(data["kind"], data["vocab_size"], data["slots"], data["width"])
            nets[name].load_state_dict(state)
            nets[name].eval()
        return cls(nets, data["kind"], data["menu"], actor, about=data.get("about"), **kwargs)


__all__ = ["BagMLP", "FORMAT", "GRAMMAR", "KINDS", "MenuPolicy", "SlotNet", "batch", "make_net", "mlp"]
