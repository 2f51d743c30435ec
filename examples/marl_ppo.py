"""Independent PPO and MAPPO on the parallel menu env: both agents learn, each with its own actor.

``--algo ippo``: each agent's critic reads its own observation. ``--algo mappo``: one centralized critic
reads ``env.state()`` (the centralized view, in the same bag-of-words mode) while the actors stay
decentralized. ``--menu default`` keeps the receiver's copy slot; ``--menu branches`` makes the receiver
map the request's content to its branch. ``--policy mlp``: each actor is a multilayer perceptron over the
bag of words, one logit per slot index; ``--policy slots``: each actor scores every slot from its label
with one shared network (``gencoord_env.agents.slots.SlotNet``: a slot index or a branch name carries no
convention, so the pair must read the fact and the message). ``--learn first`` / ``second``: only the
decisions of that role learn, the rule agent plays the other (``second``: an observation-only receiver
beside the rule sender); ``--listener-first K``: the second role learns alone beside the rule sender for
the first K updates, then both roles learn (the sender from scratch). Trained on the train pool (menu +
bag), judged greedily on every held-out and horizon episode and on the request pool with the request
removed (``RequestRemoval``: the 50% ceiling of private information). Training success per update goes to
a CSV (``RunLog``) from the parallel env's ``EpisodeStatistics``; ``--save`` writes the actors as one
checkpoint (``MenuPolicy.load``; ``gencoord evaluate --first rl:PATH``).

    python examples/marl_ppo.py --algo mappo --menu branches [--policy slots] [--budget small] [--seed N] [--log run.csv]
                                [--engine batched|pipeline] [--orders K [--orders-reward all|mean]]

``--engine batched`` (default) plays the episodes on ``gencoord_env.batched``: the episodes of an update
advance together, one array step per decision, each decision point computed once by the env and shared by
every run of the process (``shared_tree``: the seeds of a sweep, the ippo and mappo runs of one menu) and
kept on disk once complete (``gencoord_env.batched.store``: the next process reads it in about a second); the
learners read rows of the tree's observation tables, their first layers trained on the ~280 bag columns the
pool uses (``Cut``: the same learning on fewer numbers), and the rule agent's slot at each node it plays is
computed once (``PartnerSlots``). ``--engine pipeline`` plays them one by one through ``parallel_env``: the
same learners, the same update, the same evaluation episodes.

``--orders K`` makes a training episode K orders in a row (``gencoord_env.wrappers.OrderSequence``), paid
once at its end (``--orders-reward all``: 1 when every order succeeded; ``mean``: the share that did), so
every one of its 2K decisions gets that one return: the learner must find which decisions earned it. The
judging stays one order per episode (the held-out success of the same policy), and the training curve
counts orders. It plays the pipeline.

PPO here: an episode's reward (0 or 1, at its end) is every one of its decisions' return (episodes have
one or two decisions, 2K with ``--orders K``; no discount); advantage = return - critic value, normalized per batch; clipped
objective, value loss and an entropy bonus; masked logits (a masked slot is never sampled).
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

import gencoord_env
from gencoord_env.agents import make_policy
from gencoord_env.agents.slots import KINDS, MenuPolicy, batch, make_net, mlp
from gencoord_env.batched import OUTCOMES, BatchedEngine, GameTree, PartnerSlots, shared_tree
from gencoord_env.commands.run_log import RunLog
from gencoord_env.wrappers import EpisodeStatistics, OrderSequence, RequestRemoval

BUDGETS = {"one": 1, "tiny": 3, "small": 30, "full": 60}  # PPO updates of EPISODES training episodes each
EPISODES, EPOCHS, MINIBATCH, LR, CLIP, ENTROPY, WIDTH = 256, 4, 128, 2e-3, 0.2, 0.01, 64
AGENTS = ("agent_a", "agent_b")
EVAL_POOLS = ("heldout", "horizon", "request_removed")
LEARN = {"both": (0, 1), "first": (0,), "second": (1,)}
ENGINES = ("batched", "pipeline")
SUCCESS = next(k for k, code in enumerate(OUTCOMES) if code.value == "SUCCESS")


def make_env(pool: str, menu: str, seed: int = 0) -> Any:
    return gencoord_env.parallel_env(backend="sim", pool=pool, actions="menu", observations="bag", menu=menu, seed=seed)


def features(bag: np.ndarray) -> torch.Tensor:
    return torch.log1p(torch.as_tensor(bag, dtype=torch.float32))


class Learners(nn.Module):
    """One actor per agent; critics: one per agent over its observation (ippo) or one over the state (mappo)."""

    def __init__(self, inputs: int, slots: int, algo: str, policy: str = "mlp") -> None:
        super().__init__()
        self.algo, self.policy = algo, policy
        self.actors = nn.ModuleDict({a: make_net(policy, inputs // 2, slots, WIDTH) for a in AGENTS})
        self.critics = nn.ModuleDict({"state": mlp(inputs, 1, WIDTH)} if algo == "mappo" else {a: mlp(inputs, 1, WIDTH) for a in AGENTS})

    def critic(self, agent: str) -> nn.Module:
        return self.critics["state" if self.algo == "mappo" else agent]

    def act(self, agent: str, obs: dict[str, np.ndarray], greedy: bool = False) -> tuple[int, float]:
        with torch.no_grad():
            dist = torch.distributions.Categorical(logits=self.actors[agent](*batch([obs])), validate_args=False)
            action = dist.probs.argmax(-1) if greedy else dist.sample()
            return int(action), float(dist.log_prob(action))

    def policy_of(self, menu: str, about: dict[str, Any] | None = None) -> MenuPolicy:
        """The actors as one policy (``MenuPolicy``: save it, or play it in any env); ``about``: how they were trained."""
        return MenuPolicy(dict(self.actors.items()), self.policy, menu, about=about)


class Partner:
    """Plays the decisions of the roles that do not learn: the rule agent, from the full infos."""

    def __init__(self, env: Any, learned: tuple[int, ...]) -> None:
        self.env, self.learned, self.rule = env.unwrapped, learned, make_policy("rule")

    def plays(self, agent: str) -> bool:
        return self.env.session.episode.role_agents.index(agent) not in self.learned

    def act(self, agent: str) -> str:
        return self.rule.act(self.env.observation_text(agent), self.env.full_infos()[agent])


def collect(env: Any, learners: Learners, episodes: int, learned: tuple[int, ...] = (0, 1)) -> dict[str, dict[str, torch.Tensor]]:
    """Play ``episodes`` episodes; per agent its learned decisions' observations, actions, log-probs and returns."""
    batch_: dict[str, dict[str, list[Any]]] = {a: {k: [] for k in ("obs", "action", "logp", "critic_x", "ret")} for a in AGENTS}
    partner = Partner(env, learned)
    for _ in range(episodes):
        obs, infos = env.reset()
        decided: list[str] = []
        while env.agents:
            turn = next(a for a in env.agents if infos[a]["deciding"])
            if partner.plays(turn):
                obs, rewards, _, _, infos = env.step({turn: partner.act(turn)})
                continue
            action, logp = learners.act(turn, obs[turn])
            b = batch_[turn]
            b["obs"].append(obs[turn])
            b["action"].append(action)
            b["logp"].append(logp)
            b["critic_x"].append(features(env.unwrapped.state() if learners.algo == "mappo" else obs[turn]["observation"]))
            decided.append(turn)
            obs, rewards, _, _, infos = env.step({turn: action})
        for agent in decided:
            batch_[agent]["ret"].append(float(rewards[agent]))
    return {a: stacked(b) for a, b in batch_.items() if b["action"]}


def stacked(b: dict[str, list[Any]]) -> dict[str, torch.Tensor]:
    """One agent's decisions as the tensors ``update`` reads: bag, labels, mask, critic_x, action, logp, ret."""
    bag, labels, mask = batch(b["obs"])
    return {"bag": bag, "labels": labels, "mask": mask, "critic_x": torch.stack(b["critic_x"]),
            "action": torch.tensor(b["action"]), "logp": torch.tensor(b["logp"]), "ret": torch.tensor(b["ret"])}


def update(learners: Learners, optim: torch.optim.Optimizer, batch_: dict[str, dict[str, torch.Tensor]]) -> None:
    """PPO epochs over each agent's decisions (``stacked``'s tensors, from either engine)."""
    for agent in AGENTS:
        if agent not in batch_:
            continue
        b = batch_[agent]
        bag, labels, mask, critic_x = b["bag"], b["labels"], b["mask"], b["critic_x"]
        action, old, ret = b["action"], b["logp"], b["ret"]
        actor, critic = learners.actors[agent], learners.critic(agent)
        reads_labels = learners.policy == "slots"  # a bag MLP leaves the labels unread
        for _ in range(EPOCHS):
            for idx in torch.randperm(len(action)).split(MINIBATCH):
                value = critic(critic_x[idx]).squeeze(-1)
                adv = ret[idx] - value.detach()
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(idx) > 1 else adv
                # the masked categorical's log-probabilities and entropy, as torch.distributions.Categorical gives them
                logp = torch.log_softmax(actor(bag[idx], labels[idx] if reads_labels else labels, mask[idx]), -1)
                ratio = (logp.gather(1, action[idx, None]).squeeze(1) - old[idx]).exp()
                policy = -torch.min(ratio * adv, ratio.clamp(1 - CLIP, 1 + CLIP) * adv).mean()
                entropy = -(logp.exp() * logp).sum(-1)
                loss = policy + 0.5 * ((value - ret[idx]) ** 2).mean() - ENTROPY * entropy.mean()
                optim.zero_grad()
                loss.backward()
                optim.step()


def per_cluster(learners: Learners, pool: str, menu: str, learned: tuple[int, ...] = (0, 1), every: int = 1) -> dict[str, float]:
    """Greedy success of each cluster (the mean of its role permutations) over every ``every``-th episode of
    ``pool`` (``request_removed``: the request pool, REQ removed)."""
    env = RequestRemoval(make_env("request", menu)) if pool == "request_removed" else make_env(pool, menu)
    partner = Partner(env, learned)
    wins: dict[str, list[float]] = {}
    for k in range(0, len(env.unwrapped.episodes), every):
        obs, infos = env.reset(options={"index": k})
        while env.agents:
            turn = next(a for a in env.agents if infos[a]["deciding"])
            action = partner.act(turn) if partner.plays(turn) else learners.act(turn, obs[turn], greedy=True)[0]
            obs, rewards, _, _, infos = env.step({turn: action})
        wins.setdefault(env.unwrapped.session.episode.cluster.id, []).append(rewards[turn])
    return {c: float(np.mean(v)) for c, v in wins.items()}


def success(learners: Learners, pool: str, menu: str, learned: tuple[int, ...] = (0, 1), every: int = 1) -> float:
    """Greedy success over every ``every``-th episode of ``pool`` (``per_cluster``'s mean)."""
    return float(np.mean(list(per_cluster(learners, pool, menu, learned, every).values())))


class Tables:
    """The learners' inputs on the batched engine: the tree's observation rows (bag, menu labels) and the
    critic's features (log of the bag, of the state with mappo) as tensors, each row converted once and the
    tensors extended as the tree meets new observations. Each form of a part (the bag as counts for the actors,
    as the log of the counts for ippo's critics) keeps tensors of its own."""

    def __init__(self, engine: BatchedEngine, columns: dict[str, np.ndarray | None] | None = None) -> None:
        self.engine = engine
        self.parts: dict[tuple[str, str, str], torch.Tensor] = {}
        #: the input columns each reader keeps ("actor", "observations", "states": the critic's); None: all
        self.columns: dict[str, np.ndarray | None] = dict(columns or {})

    def _rows(self, form: str, part: str, rows: str, convert: Callable[[np.ndarray], torch.Tensor],
              index: np.ndarray) -> torch.Tensor:
        table = self.engine.table(part, rows)
        have = self.parts.get((form, part, rows))
        if have is None or len(have) != len(table):  # only the new rows: the old ones do not change
            new = convert(np.array(table[0 if have is None else len(have):]))
            have = self.parts[(form, part, rows)] = new if have is None else torch.cat([have, new])
        return have[torch.as_tensor(index, dtype=torch.long)]

    def actor(self, index: np.ndarray, mask: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(bag, labels, mask) of observation rows ``index``, as ``slots.batch`` gives them."""
        cut = self.columns.get("actor")
        bag = self._rows("counts", "observation", "observations",
                         lambda a: torch.as_tensor(a if cut is None else a[:, cut], dtype=torch.float32), index)
        labels = self._rows("ids", "menu_labels", "observations", lambda a: torch.as_tensor(a, dtype=torch.long), index)
        return bag, labels, torch.as_tensor(mask)

    def critic(self, index: np.ndarray, rows: str = "observations") -> torch.Tensor:
        cut = self.columns.get(rows)
        return self._rows("features", "observation", rows, lambda a: features(a if cut is None else a[:, cut]), index)


class Cut:
    """The learners trained on the input columns the train pool uses: the first layer of each bag MLP actor and
    of each critic keeps only the weights of the columns that are nonzero somewhere in the complete tree's table
    it reads (``columns``: about 280 of the 3,884 bag words). The weights of the other columns get zero
    gradients on every training observation, and Adam leaves a weight whose gradients were always zero where it
    is (its moments stay 0), so training the cut layers is training the whole ones on fewer numbers; ``restore``
    writes the cut weights back into the whole layers (the columns a held-out observation may use beside them
    keep their initial weights, as they would have). The slot scorer's actors read label words anywhere in the
    bag and are not cut."""

    def __init__(self, learners: Learners, columns: dict[str, np.ndarray]) -> None:
        self.learners, self.columns = learners, columns
        self._cut: list[tuple[nn.Sequential, nn.Linear, torch.Tensor]] = []
        for actor in learners.actors.values():
            if learners.policy == "mlp":
                self._replace(actor.net, columns["actor"])
        for critic in learners.critics.values():
            self._replace(critic, columns["states" if learners.algo == "mappo" else "observations"])

    def _replace(self, net: nn.Sequential, columns: np.ndarray) -> None:
        whole = net[0]
        index = torch.as_tensor(columns, dtype=torch.long)
        cut = nn.utils.skip_init(nn.Linear, len(columns), whole.out_features)  # no draw: the run's random stream stays
        with torch.no_grad():
            cut.weight.copy_(whole.weight[:, index])
            cut.bias.copy_(whole.bias)
        net[0] = cut
        self._cut.append((net, whole, index))

    def restore(self) -> Learners:
        """The learners with their whole first layers, holding what the cut ones learnt."""
        with torch.no_grad():
            for net, whole, index in self._cut:
                whole.weight[:, index] = net[0].weight
                whole.bias.copy_(net[0].bias)
                net[0] = whole
        self._cut = []
        return self.learners


def used_columns(table: np.ndarray) -> np.ndarray:
    """The columns of ``table`` (rows x columns) that are nonzero in some row."""
    return np.flatnonzero((np.asarray(table) != 0).any(0))


def collect_batched(engine: BatchedEngine, learners: Learners, tables: Tables | None = None, greedy: bool = False,
                    episodes: np.ndarray | None = None, partner: PartnerSlots | None = None
                    ) -> tuple[dict[str, dict[str, torch.Tensor]], np.ndarray]:
    """Play ``engine.num_envs`` episodes at once (drawn, or ``episodes``) to their ends: per agent its learned
    decisions as ``collect`` gives them, and each episode's outcome (an index of ``OUTCOMES``). ``partner``
    plays the roles that do not learn; ``tables``: kept by the caller between calls, so that each observation
    row is converted once."""
    tables = tables or Tables(engine)
    batch_ = engine.reset(episodes=episodes)
    n = engine.num_envs
    live, outcome = np.ones(n, dtype=bool), np.full(n, -1)
    ret = np.zeros((n, len(AGENTS)), dtype=np.float32)
    taken: dict[str, list[dict[str, Any]]] = {a: [] for a in AGENTS}
    while live.any():
        learning = live.copy()
        if partner is not None:
            scripted = live & partner.plays(engine.node)
            actions = partner.slots(engine.node)
            learning &= ~scripted
        else:
            actions = np.zeros(n, dtype=np.int64)
        for k, agent in enumerate(AGENTS):
            rows = np.flatnonzero(learning & (batch_.turn == k))
            if not rows.size:
                continue
            bag, labels, mask = tables.actor(batch_.obs[rows, k], batch_.action_mask[rows])
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=learners.actors[agent](bag, labels, mask), validate_args=False)
                action = dist.probs.argmax(-1) if greedy else dist.sample()
            actions[rows] = action.numpy()
            if not greedy:
                critic = (tables.critic(engine.tree.state_rows[engine.node[rows]], "states") if learners.algo == "mappo"
                          else tables.critic(batch_.obs[rows, k]))
                taken[agent].append({"bag": bag, "labels": labels, "mask": mask, "critic_x": critic, "action": action,
                                     "logp": dist.log_prob(action), "row": rows})
        batch_ = engine.step(actions)
        ended = live & (batch_.terminated | batch_.truncated)
        ret[ended], outcome[ended] = batch_.reward[ended], batch_.outcome[ended]
        live &= ~ended
    out = {}
    for k, agent in enumerate(AGENTS):
        if taken[agent]:
            b = {key: torch.cat([t[key] for t in taken[agent]]) for key in ("bag", "labels", "mask", "critic_x", "action", "logp")}
            b["ret"] = torch.as_tensor(ret[np.concatenate([t["row"] for t in taken[agent]]), k])
            out[agent] = b
    return out, outcome


def train_tree(menu: str) -> GameTree:
    """The complete tree the batched runs of ``menu`` train on (with the state, for mappo's critic), shared by
    every run of the process and read from the store (``gencoord_env.batched.store``) once computed."""
    return shared_tree(pool="train", menu=menu, observations="bag", state=True, complete=True)


def eval_tree(pool: str, menu: str) -> GameTree:
    """The complete tree of an evaluation pool (``request_removed``: the request pool, REQ removed)."""
    removed = pool == "request_removed"
    return shared_tree(("RequestRemoval",) if removed else (), pool="request" if removed else pool, menu=menu,
                       observations="bag", complete=True)


def per_cluster_batched(learners: Learners, pool: str, menu: str, learned: tuple[int, ...] = (0, 1),
                        every: int = 1) -> dict[str, float]:
    """``per_cluster`` on the batched engine: every ``every``-th episode of the pool at once, greedily, the rule
    agent in the roles that do not learn."""
    tree = eval_tree(pool, menu)
    episodes = np.arange(0, tree.episodes, every)
    engine = BatchedEngine(tree, len(episodes), autoreset=False)
    _, outcome = collect_batched(engine, learners, greedy=True, episodes=episodes, partner=rule_partner(tree, learned))
    wins: dict[str, list[float]] = {}
    for index, won in zip(episodes, outcome == SUCCESS):
        wins.setdefault(tree.env.unwrapped.episodes[index].cluster.id, []).append(float(won))
    return {c: float(np.mean(v)) for c, v in wins.items()}


def success_batched(learners: Learners, pool: str, menu: str, learned: tuple[int, ...] = (0, 1), every: int = 1) -> float:
    """``success`` on the batched engine (``per_cluster_batched``'s mean)."""
    return float(np.mean(list(per_cluster_batched(learners, pool, menu, learned, every).values())))


def rule_partner(tree: Any, learned: tuple[int, ...]) -> PartnerSlots | None:
    """The rule agent in the roles that do not learn, on the batched engine (None when both learn)."""
    others = tuple(r for r in (0, 1) if r not in learned)
    return PartnerSlots(tree, make_policy("rule"), others) if others else None


def engine_for(engine: str | None, orders: int = 1) -> str:
    """The engine a run plays: ``engine``, or when none is named the batched one, except for sequences of orders,
    which play the pipeline (a batched engine asked for them is refused)."""
    if engine is not None and engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {list(ENGINES)}")
    if engine == "batched" and orders > 1:
        raise ValueError("--engine batched plays one order per episode; --orders plays the pipeline")
    return engine or ("pipeline" if orders > 1 else "batched")


def train(algo: str, menu: str, updates: int, seed: int = 0, log: Callable[..., None] | None = None,
          policy: str = "mlp", learn: str = "both", listener_first: int = 0,
          episodes: int = EPISODES, engine: str | None = None, orders: int = 1,
          orders_reward: str = "all", cut: bool = True) -> tuple[Learners, list[float]]:
    """Train for ``updates`` PPO updates of ``episodes`` episodes (of ``orders`` orders each); the training
    success of each update's orders (also passed to ``log``). ``cut``: on the batched engine, train the first
    layers on the columns the pool uses (``Cut``: the same learning, on fewer numbers)."""
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # one thread: the thread count changes the order of reductions and so the run
    cutter: Cut | None = None
    if engine_for(engine, orders) == "batched":  # one complete tree per menu, with the state: every run shares it
        tree = train_tree(menu)
        batched = BatchedEngine(tree, episodes, seed=seed, autoreset=False)
        space = tree.env.observation_space(AGENTS[0])
        columns = {"observations": used_columns(tree.observations.table("observation")),
                   "states": used_columns(tree.states.table(""))}
        columns["actor"] = columns["observations"] if policy == "mlp" else None
        tables = Tables(batched, columns if cut else None)
        partners = {learned: rule_partner(batched.tree, learned) for learned in {LEARN["second"], LEARN[learn]}}
    else:
        env = EpisodeStatistics(make_env("train", menu, seed), window=episodes * orders)  # inside: counts orders
        if orders > 1:
            env = OrderSequence(env, orders, orders_reward)
        space, batched = env.observation_space(AGENTS[0]), None
    learners = Learners(space["observation"].shape[0], space["action_mask"].shape[0], algo, policy)
    if batched is not None and cut:
        cutter = Cut(learners, {k: v for k, v in columns.items() if v is not None})
    # fused: one kernel per step instead of one per parameter and operation; about a third of an update's
    # CPU time on the 3,884-word bags
    optim = torch.optim.Adam(learners.parameters(), lr=LR, fused=True)
    curve = []
    for k in range(updates):
        learned = LEARN["second"] if k < listener_first else LEARN[learn]
        if batched is not None:
            decisions, outcome = collect_batched(batched, learners, tables, partner=partners[learned])
            update(learners, optim, decisions)
            curve.append(float(np.mean(outcome == SUCCESS)))
        else:
            update(learners, optim, collect(env, learners, episodes, learned))
            curve.append(float(np.mean(env.successes)))
        if log is not None:
            log((k + 1) * episodes, train_success=curve[-1])
    return (cutter.restore() if cutter is not None else learners), curve


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=("ippo", "mappo"), default="mappo")
    parser.add_argument("--menu", choices=("default", "branches"), default="default")
    parser.add_argument("--policy", choices=KINDS, default="mlp", help="actor: bag MLP, or the label-reading slot scorer")
    parser.add_argument("--learn", choices=sorted(LEARN), default="both", help="roles that learn; the rule agent plays the others")
    parser.add_argument("--listener-first", type=int, default=0, metavar="K",
                        help="the first K updates train the second role beside the rule sender")
    parser.add_argument("--budget", choices=BUDGETS, default="full")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None, help="CSV file for the training curve (RunLog)")
    parser.add_argument("--save", default=None, help="checkpoint file for the trained actors (MenuPolicy)")
    parser.add_argument("--engine", choices=ENGINES, default=None,
                        help="the batched engine (default, unless --orders), or the pipeline one episode at a time")
    parser.add_argument("--no-eval", action="store_true", help="train (and save) only; gencoord evaluate judges the checkpoint")
    parser.add_argument("--orders", type=int, default=1, metavar="K",
                        help="K orders per training episode, paid at its end (OrderSequence; plays the pipeline)")
    parser.add_argument("--orders-reward", choices=("all", "mean"), default="all",
                        help="with --orders: 1 when every order succeeded, or the share that did")
    args = parser.parse_args(argv)
    if args.orders < 1:
        parser.error(f"--orders must be at least 1, got {args.orders}")
    try:
        engine = engine_for(args.engine, args.orders)
    except ValueError as error:
        parser.error(str(error))
    run_log = RunLog(args.log) if args.log else None
    start, cpu = time.perf_counter(), time.process_time()
    learners, curve = train(args.algo, args.menu, BUDGETS[args.budget], args.seed, run_log.write if run_log else None,
                            args.policy, args.learn, args.listener_first, engine=engine, orders=args.orders,
                            orders_reward=args.orders_reward)
    seconds = time.perf_counter() - start
    result: dict[str, Any] = {"curve": curve, "seconds": seconds, "episodes": len(curve) * EPISODES, "engine": engine,
                              "orders": len(curve) * EPISODES * args.orders}
    if args.save:
        about = {k: getattr(args, k) for k in ("algo", "menu", "policy", "learn", "listener_first", "budget", "seed",
                                               "orders", "orders_reward")}
        about.update(seconds=round(seconds, 1), curve=curve)
        result["checkpoint"] = str(learners.policy_of(args.menu, about).save(args.save))
    run = f"{args.algo} {args.policy} menu={args.menu} learn={args.learn} seed={args.seed} engine={engine}" + (
        f" orders={args.orders} ({args.orders_reward})" if args.orders > 1 else "")
    if args.no_eval:
        print(f"{run}: {result['episodes']} training episodes ({seconds:.0f} s)")
        return result
    learned = LEARN[args.learn]
    if engine == "batched":
        clusters = {pool: per_cluster_batched(learners, pool, args.menu, learned) for pool in EVAL_POOLS}
    else:
        clusters = {pool: per_cluster(learners, pool, args.menu, learned) for pool in EVAL_POOLS}
    result.update({pool: float(np.mean(list(c.values()))) for pool, c in clusters.items()}, clusters=clusters,
                  wall_seconds=time.perf_counter() - start, cpu_seconds=time.process_time() - cpu)
    print(f"{run}: " + ", ".join(f"{p} {result[p]:.3f}" for p in EVAL_POOLS)
          + f" after {result['episodes']} training episodes ({seconds:.0f} s training, {result['wall_seconds']:.0f} s "
          f"with evaluation)")
    return result


if __name__ == "__main__":
    main()
