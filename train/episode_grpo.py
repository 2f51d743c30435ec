"""GRPO over whole episodes of the env, each decision from the deciding agent's own local context.

One policy for every role (self-play) or one per role (two policies, each its own weights and optimizer):
a :class:`Learner` is a model with its tokenizer, a sampler and a greedy decoder (both the package's static
decoder, :class:`gencoord_env.agents.lm.generate.Generator`) and, when trainable, its optimizer.
:func:`play_batch` plays a batch of episodes turn by turn: at each turn the deciding agents' observations are
laid out as SFT lays them out (:func:`gencoord_env.agents.lm.prompt.prompt_text`: the prior as the system
turn, the rest as the user turn), each role's learner answers its agents in one batched call, and the
record of each answer's commit tool call (:func:`gencoord_env.agents.formats.commit_record`, Qwen3 JSON or Qwen3.5
XML) is played; an answer without a commit call leaves its episode unfinished (reward 0). No agent sees the
other's context: what passes between them is what the env delivers (the request message), as in the paper.

:func:`grpo_update` is one optimizer step per learner (or ``iterations`` of them on the same batch): the group
advantage of each episode (its reward minus the mean of its group, the ``num_generations`` episodes of one
prompt, divided by the group's standard deviation unless ``scale`` is off) weighs every token its decisions
emitted, summed and divided by the learner's completion tokens in the batch (DAPO's token-level
normalisation, TRL's ``loss_type="dapo"``), no KL term. The policy trained is the sampling distribution
(logits / temperature, as TRL trains it). The first step on a batch is on-policy (importance ratio 1, the
surrogate's gradient is the policy gradient); later iterations clip the ratio to the sampling policy as PPO
does. The raw log-probabilities the update recomputes are compared with those the sampler recorded
(``logprob_gap``): the decoder and the training forward are the same function, so the gap is rounding
(float32: ~1e-7 on the CPU and on an H100).

Example::

    learner = Learner("self", lm.model, lm.tokenizer, trainable=True, lr=1e-4)
    envs = [TurnEnv(parallel_env(pool="train", backend="sim")) for _ in range(64)]
    played = play_batch(envs, [i for i in range(8) for _ in range(8)], {"sender": learner, "receiver": learner}, sample=True)
    stats = grpo_update([learner], played, [staged(p.outcome) for p in played], group=8)
"""
from __future__ import annotations

import math
import statistics
from collections import OrderedDict, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gencoord_env.agents.lm.generate import GenerationConfig, Generator
from gencoord_env.agents.lm.prompt import prompt_text
from gencoord_env.agents.formats import commit_record
from gencoord_env.errors import UsageError
from gencoord_env.outcomes import REWARDS, FailureCode
from gencoord_env.turns import Turn, TurnEnv

__all__ = ["Decision", "Learner", "Played", "advantages", "grpo_update", "play_batch", "reward_of", "static_rollouts"]


class Learner:
    """One policy: ``model`` and ``tokenizer`` (in the tool format), its sampler and greedy decoder, and an
    AdamW optimizer when ``trainable``. ``name`` names it in curves and checkpoints. ``backend`` is the
    decoders' (``auto``: the static loop for Qwen / Llama models; ``generate``: ``model.generate``, the same
    tokens, for comparison)."""

    def __init__(self, name: str, model: Any, tokenizer: Any, *, trainable: bool, lr: float = 1e-4,
                 max_new_tokens: int = 192, temperature: float = 1.0, top_p: float = 1.0, seed: int = 0,
                 max_grad_norm: float = 1.0, backend: str = "auto", warmup_steps: int = 0) -> None:
        self.name, self.model, self.tokenizer, self.trainable = name, model, tokenizer, trainable
        self.max_grad_norm = max_grad_norm
        # No torch.compile: prompt widths vary from call to call and a compile per shape costs more than it
        # saves at these sizes; CUDA graphs (on by default on CUDA) still replay the decode step.
        common: dict[str, Any] = dict(max_new_tokens=max_new_tokens, stop_at_record_end=False, compile_decode=False,
                      compile_prefill=False, max_decoders=8, backend=backend)
        self.sampler = Generator(model, tokenizer, GenerationConfig(**common, do_sample=True, temperature=temperature,
                                                                    top_p=top_p, seed=seed))
        self.greedy = Generator(model, tokenizer, GenerationConfig(**common))
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0) if trainable else None
        # Adam's first updates move every weight by about lr whatever the gradient's size: a linear warm-up keeps
        # the first steps from undoing the warm start (lr 1e-3 without it broke the tiny model's calls in one step)
        self.schedule = (torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda k: min(1.0, (k + 1) / warmup_steps))
                         if trainable and warmup_steps > 0 else None)
        if not trainable:
            model.requires_grad_(False)
        self._prompts: OrderedDict[str, list[int]] = OrderedDict()

    def prompt_ids(self, observation: str) -> list[int]:
        """The token ids of one decision's prompt (memoized: a group's episodes share their first observation)."""
        ids = self._prompts.get(observation)
        if ids is None:
            ids = self.tokenizer(prompt_text(self.tokenizer, observation), add_special_tokens=False)["input_ids"]
            self._prompts[observation] = ids
            if len(self._prompts) > 8192:
                self._prompts.popitem(last=False)
        return ids

    def state(self) -> dict[str, Any]:
        """What resuming needs: weights, optimizer and schedule, the sampler's random stream."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict() if self.optimizer else None,
                "schedule": self.schedule.state_dict() if self.schedule else None, "sampler_rng": self.sampler._rng.get_state()}

    def load_state(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        if self.schedule is not None and state.get("schedule") is not None:
            self.schedule.load_state_dict(state["schedule"])
        self.sampler._rng.set_state(state["sampler_rng"])


@dataclass(frozen=True)
class Decision:
    """One model decision: which learner made it for which role, its prompt and completion token ids, the
    sampler's log-probability of each completion token (None when decoded greedily), the committed record
    (None: no commit call)."""

    role: str
    learner: str
    prompt: tuple[int, ...]
    completion: tuple[int, ...]
    logprobs: tuple[float, ...] | None
    record: str | None


@dataclass
class Played:
    """One episode of a batch: its pool index and id, its outcome code (None: unfinished) and decisions."""

    index: int
    episode_id: str
    outcome: str | None = None
    decisions: list[Decision] = field(default_factory=list)


def reward_of(outcome: str | None, kind: str = "staged") -> float:
    """The env's reward table ``kind`` (``staged`` or ``binary``) for an outcome; 0.0 for an unfinished episode."""
    return REWARDS[kind][FailureCode(outcome)] if outcome is not None else 0.0


def play_batch(envs: Sequence[TurnEnv], indices: Sequence[int], policies: Mapping[str, Learner], *, sample: bool,
               max_turns: int = 4) -> list[Played]:
    """Play episode ``indices[k]`` in ``envs[k]`` for every k, each decision by ``policies[role]``; see the module
    docstring. ``sample``: the learners' samplers (else their greedy decoders)."""
    if len(envs) < len(indices):
        raise UsageError(f"got {len(indices)} episodes but {len(envs)} environments")
    turns: list[Turn] = [env.reset(index=int(i)) for env, i in zip(envs, indices)]
    played = [Played(int(i), t.episode_id) for i, t in zip(indices, turns)]
    live = [k for k, t in enumerate(turns) if not t.done]
    for _ in range(max_turns):
        if not live:
            break
        by_learner: dict[str, list[int]] = defaultdict(list)
        learners: dict[str, Learner] = {}
        for k in live:
            role = str(turns[k].role)
            if role not in policies:
                raise KeyError(f"no policy for role {role!r} of episode {turns[k].episode_id}; policies cover {sorted(policies)}")
            learners[policies[role].name] = policies[role]
            by_learner[policies[role].name].append(k)
        still: list[int] = []
        for name, ks in by_learner.items():
            learner = learners[name]
            prompts = [learner.prompt_ids(turns[k].text) for k in ks]
            records = (learner.sampler if sample else learner.greedy).generate_tokens(prompts)
            for k, prompt, rec in zip(ks, prompts, records):
                record = commit_record(rec.text)
                played[k].decisions.append(Decision(str(turns[k].role), name, tuple(prompt), rec.completion_ids,
                                                    rec.logprobs, record))
                if record is None:
                    continue  # no commit call: the episode ends unfinished
                turns[k] = envs[k].act(record)
                if turns[k].done:
                    played[k].outcome = turns[k].outcome
                else:
                    still.append(k)
        live = sorted(still)
    return played


def advantages(rewards: Sequence[float], group: int, scale: bool = True) -> list[float]:
    """Each reward minus its group's mean (consecutive runs of ``group``), divided by the group's population
    standard deviation when ``scale`` (a group without variance: 0 everywhere)."""
    if group < 1 or len(rewards) % group:
        raise UsageError(f"{len(rewards)} rewards do not split into groups of {group}")
    out: list[float] = []
    for start in range(0, len(rewards), group):
        chunk = rewards[start : start + group]
        mean = statistics.fmean(chunk)
        std = statistics.pstdev(chunk)
        out += [0.0 if std == 0 else (r - mean) / (std + 1e-4 if scale else 1.0) for r in chunk]
    return out


def _completion_logprobs(model: Any, rows: Sequence[tuple[tuple[int, ...], tuple[int, ...]]], pad_id: int,
                         temperature: float = 1.0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """For each (prompt, completion) row, log p(completion token | prompt, earlier completion tokens) under the
    sampling distribution (logits / ``temperature``, what the update trains) and under the raw logits (what the
    decoder records), from one right-padded forward pass (logits only where completion tokens are predicted)."""
    device = next(model.parameters()).device
    width = max(len(p) + len(c) for p, c in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, (p, c) in enumerate(rows):
        ids[r, : len(p) + len(c)] = torch.tensor(p + c, dtype=torch.long)
        mask[r, : len(p) + len(c)] = 1
    decoder = getattr(model, model.base_model_prefix)
    hidden = decoder(input_ids=ids.to(device), attention_mask=mask.to(device)).last_hidden_state
    row_index = torch.cat([torch.full((len(c),), r, dtype=torch.long) for r, (_, c) in enumerate(rows)])
    col_index = torch.cat([torch.arange(len(p) - 1, len(p) + len(c) - 1) for p, c in rows])
    targets = torch.cat([torch.tensor(c, dtype=torch.long) for _, c in rows]).to(device)[:, None]
    logits = model.lm_head(hidden[row_index.to(device), col_index.to(device)]).float()
    raw = logits.log_softmax(-1).gather(-1, targets).squeeze(-1)
    tempered = raw if temperature == 1.0 else (logits / temperature).log_softmax(-1).gather(-1, targets).squeeze(-1)
    sizes = [len(c) for _, c in rows]
    return list(tempered.split(sizes)), list(raw.detach().split(sizes))


def _chunks(work: Sequence[tuple[Decision, float]], micro_tokens: int) -> list[list[tuple[Decision, float]]]:
    """``work`` (sorted by length) in micro-batches of at most ``micro_tokens`` padded tokens (one row at least)."""
    out, start = [], 0
    while start < len(work):
        end = start + 1
        while end < len(work) and (end + 1 - start) * (len(work[end][0].prompt) + len(work[end][0].completion)) <= micro_tokens:
            end += 1
        out.append(list(work[start:end]))
        start = end
    return out


def grpo_update(learners: Sequence[Learner], played: Sequence[Played], rewards: Sequence[float], group: int, *,
                scale: bool = True, micro_tokens: int = 16384, temperature: float = 1.0, iterations: int = 1,
                clip: float = 0.2) -> dict[str, dict[str, float]]:
    """GRPO optimizer steps for every trainable learner over the decisions it made in ``played``; see the module
    docstring. ``iterations`` > 1 takes that many steps on the same batch with PPO's clipped ratio to the
    sampling policy (``clip``), as GRPO's inner iterations do; the first step's ratio is 1. The policy trained is
    the sampling distribution (logits / ``temperature``), as in TRL. Returns per learner: ``loss`` and
    ``grad_norm`` (first step), ``tokens``, ``decisions``, ``trained_decisions``, ``clipped`` (share of tokens
    whose ratio left the clip range in the last step) and ``logprob_gap`` (mean |recomputed - sampled| raw
    log-probability)."""
    if iterations < 1:
        raise UsageError(f"iterations must be >= 1, got {iterations}")
    adv = advantages(rewards, group, scale)
    stats: dict[str, dict[str, float]] = {}
    for learner in learners:
        if not learner.trainable or learner.optimizer is None:
            continue
        mine = [(d, adv[k]) for k, p in enumerate(played) for d in p.decisions if d.learner == learner.name and d.completion]
        tokens = sum(len(d.completion) for d, _ in mine)
        work = sorted(((d, a) for d, a in mine if a != 0.0), key=lambda x: len(x[0].prompt) + len(x[0].completion))
        chunks = _chunks(work, micro_tokens)
        model, opt = learner.model, learner.optimizer
        model.train()
        pad_id = learner.tokenizer.pad_token_id if learner.tokenizer.pad_token_id is not None else 0
        old: list[list[torch.Tensor]] = []
        loss_first, grad_first, gap, gap_n, clipped, counted = 0.0, 0.0, 0.0, 0, 0.0, 0
        for it in range(iterations if work else 0):
            opt.zero_grad(set_to_none=True)
            loss_total, clipped, counted = 0.0, 0.0, 0
            for ci, chunk in enumerate(chunks):
                logps, raws = _completion_logprobs(model, [(d.prompt, d.completion) for d, _ in chunk], pad_id, temperature)
                if it == 0:
                    old.append([lp.detach() for lp in logps])
                    for (d, _), raw in zip(chunk, raws):
                        if d.logprobs is not None:
                            gap += float((raw.cpu() - torch.tensor(d.logprobs)).abs().sum())
                            gap_n += len(d.logprobs)
                device = logps[0].device
                loss = torch.zeros((), device=device)
                for (_, a), lp, lp_old in zip(chunk, logps, old[ci]):
                    ratio = torch.exp(lp - lp_old)
                    surrogate = torch.minimum(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a)
                    loss = loss - surrogate.sum()
                    clipped += float(((ratio < 1 - clip) | (ratio > 1 + clip)).sum())
                    counted += lp.numel()
                loss = loss / max(1, tokens)
                loss.backward()
                loss_total += float(loss.detach())
            grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), learner.max_grad_norm))
            opt.step()
            if it == 0:
                loss_first, grad_first = loss_total, grad_norm
        opt.zero_grad(set_to_none=True)
        if learner.schedule is not None:
            learner.schedule.step()  # per batch of episodes: the warm-up counts GRPO steps
        model.eval()
        stats[learner.name] = {"loss": loss_first, "grad_norm": grad_first if math.isfinite(grad_first) else float("nan"),
                               "tokens": float(tokens), "decisions": float(len(mine)), "trained_decisions": float(len(work)),
                               "clipped": clipped / counted if counted else 0.0, "lr": opt.param_groups[0]["lr"],
                               "logprob_gap": gap / gap_n if gap_n else float("nan")}
    return stats


def static_rollouts(trainer_class: type) -> type:
    """``trainer_class`` (TRL's ``GRPOTrainer`` or a subclass) with every generation turn, the tool loop's
    included, sampled through the package's static decoder instead of ``model.generate``: TRL's loss, data
    and tool handling, this package's decoding (temperature and top-p; the records' log-probabilities are
    handed back as TRL's sampling log-probabilities). vLLM, images and sampling settings the decoder does
    not have (``top_k``, ``min_p``, ``repetition_penalty``, ``generation_kwargs``) fall back to TRL's own path.

    Example::

        from trl import GRPOTrainer
        trainer = static_rollouts(GRPOTrainer)(model=model, processing_class=tokenizer, reward_funcs=[staged_reward],
                                               args=args, environment_factory=GencoordToolEnv.factory(plays="both"))
    """

    class StaticRollouts(trainer_class):
        def _generate_single_turn(self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int,
                                  has_tool_images: bool = False) -> Any:
            a = self.args
            plain = (not self.use_vllm and images is None and not multimodal_fields and not a.top_k and a.min_p is None
                     and a.repetition_penalty == 1.0 and not a.generation_kwargs)
            if not plain:
                return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
            model = self.accelerator.unwrap_model(self.model)
            was_training = model.training  # the Generator puts the model in eval mode; TRL logs by the mode
            gen = getattr(self, "_static_generator", None)
            if gen is None:
                gen = self._static_generator = Generator(model, self.processing_class, GenerationConfig(
                    max_new_tokens=self.max_completion_length, stop_at_record_end=False, do_sample=True,
                    temperature=self.temperature, top_p=self.top_p, seed=a.seed, compile_decode=False,
                    compile_prefill=False, max_decoders=8))
            records = gen.generate_tokens([list(p) for p in prompt_ids])
            model.train(was_training)
            return [list(r.completion_ids) for r in records], [list(r.logprobs or ()) for r in records]

    StaticRollouts.__name__ = StaticRollouts.__qualname__ = f"StaticRollouts{trainer_class.__name__}"
    return StaticRollouts
