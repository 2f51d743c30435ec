"""Procedural tasks: endless matched pairs of task templates generated from the shared prior.

``procedural_episodes(seed)`` is the single entry point. It returns a lazy, read-only sequence of
``Episode`` values that reads as endless (``len`` is ``2**31 - 1``); item ``k`` is a pure function of
``(seed, k)``:

- ``k // 4`` is the matched pair: one generated template, one public instance (order quantity, world
  variant, decoy objects) under both of the template's bindings;
- ``k // 2`` is the cluster (one binding of that pair; which one comes first follows the clusters' opaque
  ids, as in ``gencoord_env.tasks.pools``);
- ``k % 2`` is the role permutation (0: ``agent_a`` is the sender).

>>> eps = procedural_episodes(seed=0)
>>> a, b = eps[0], eps[2]  # the two clusters of pair 0
>>> a.template.id == b.template.id and a.binding != b.binding
True

Consumers index the sequence or take a finite slice (``eps[:400]``); iterating it never ends, so neither
does ``tuple(eps)``. Pairs are built on first use and kept in a bounded memo (``gencoord_env.caches``).
Besides the sequence: ``generate(seed, pair)`` returns one checked pair (template, extended prior,
clusters, and why earlier draws of it were redrawn); ``signature`` and ``held_out`` say what is held out;
``template_problems`` and ``instance_problems`` are the checks, usable on any template.

Every episode carries a ``Prior`` that extends the package's prior with its generated template (and the
codebook entries of its bindings), so ``Episode``, the composer, the reference commitments, the contexts
and the whole pipeline work unchanged. Generated templates use the same frozen ``TemplateSpec`` /
``NodeSpec`` values as ``data/tasks.json``; their ``split`` is ``"procedural"`` and their ids name the
draw, ``proc<seed>_<pair>_<draw>`` (never a prior template id, never a binding name).

What is generated
    A template is a public task DAG over the eight catalog skills, built from the rule table
    (``data/recipes.json``): 2x2 crafts, crafting-table crafts, furnace smelting
    (``transform.supply_input`` / ``supply_fuel`` / ``collect_output``, input or fuel first, sometimes a
    ``control.wait``), chained up to three transformations, with every source item the table uses
    (``oak_log``, ``oak_planks``, ``stick``, ``coal``, ``cobblestone``, ``stone``, ``sand``, ``glass``,
    ``raw_iron``, ``iron_ingot``, ``oak_slab``). Quantities are whole recipe batches (``A*q``), so every
    count is exact. One of four families decides what the two bindings change:

    ============== ==========================================================================================
    family         the bindings differ in
    ============== ==========================================================================================
    destination    where the receiver's result goes: which chest, or which build site
    recipe         which transformation, hence which item is handed off and what ends up at the destination
                   (the sender may do part of the chain before the handoff)
    allocation     who does which part of the work: a part moves between sender and receiver, and the
                   remaining work changes (2 or 3 parts, each a chain ending in a chest or a site)
    active_branch  the receiver's continuation after a shared handoff (what the handed items become, and
                   whether they are stored, built or kept; leftovers stay in the receiver's inventory)
    ============== ==========================================================================================

    Each role-local path has at most five tasks (the Short DSL's limit): the sender's two to five (it
    always obtains and hands off), the receiver's one to five. The order of steps varies: fuel before or
    after input and the sender's own part before or after its handoff are drawn into the DAG's edges;
    where the DAG leaves the order open (several obtains, independent parts), the listing order is drawn,
    and the composer follows it.

What every generated template satisfies (checked before it is served; a failing draw is redrawn)
    - two bindings, equally represented (each pair holds both), in a drawn slot order;
    - each binding's branch has exactly one sender-to-receiver handoff and a ``bind``-tagged receiver task;
    - binding-specific terminal predicates, derived by exact accounting of each branch's world effect;
    - stages never decrease along an edge (acquire, build, handoff, transform, terminal);
    - the reference commitments of both bindings - what the rule agents send and realize - pass the
      contract and succeed in the sim under both role permutations, at the pair's order quantity and at
      the template's largest one; the consistent plan of the other binding executes, delivers its handoff
      and fails the terminal predicate (paired worlds are disjoint);
    - ``signature(template)`` is not that of a held-out template (``split`` ``horizon`` or ``visibility``
      in ``data/tasks.json``), and a template with a core template's signature never has that template's
      crossproduct quantity (``CROSSPRODUCT_Q``), nor any quantity whose grounded counts equal it.

``signature`` compares structure up to ids and quantities: per branch, the multiset of tasks (actor
role, skill, items, the *kind* of each station it names) with their predecessors, ignoring node ids,
binding ids, quantities and listing order. Station names count as ids: storing planks in ``depot`` or
``chest_a`` has the signature of ``chest_ab_planks``, so neither is generated.

Receiver views are identical across a pair by construction: the pair shares the template, the order
quantity, the world variant and the decoys, and the source stock covers either branch.

The bindings' ids name the changed field in the codebook's style: the destination (``CHEST_A``,
``DEPOT``, ``SITE_B``), the product (``STICKS``, ``TORCH``, ``STONE_BRICKS``), the receiver's part
(``RECEIVER_SITE_A``) or the continuation (``TORCH_BRANCH``). In every even-numbered pair the two
bindings are instead named by two codes of the public codebook (``data/tasks.json``: ``BUILD``, ``ROOF``,
``STORAGE_BRANCH``, ...; :func:`codebook_names`), consistently in every node, terminal and context: the
codes are dealt two per pair from a seeded shuffle of the codebook, so every code is named once in each run
of 2 x (codes / 2) pairs (the first 26 pairs, 208 forward rows, name all 26), each time in another pairing.
Codes are public vocabulary, not held-out structure: a model pretrained on these pairs has read every code
in a private line and copied it into a request, and because a code means something different in every
pair, it can only succeed by reading the code it is shown, never by remembering which code a template
uses. Naturalized private facts (``private_fact`` other than ``"id"``) are not available
for generated bindings.

The code, one job a module (each imports only those above it):

=============== =============================================================================================
``steps``       the rule table as transformation steps, the public layout, the budgets of a draw
``quantities``  amounts linear in the order quantity (``Lin``), fuel fixed once the largest ``q`` is known
``programs``    one binding's branch as task drafts, drawn job by job (obtain, transform, hand off, end)
``families``    the four families: how each draws its two branch programs
``templates``   from two programs to one template: quantities fixed, world effects, terminals, the merge
``held_out``    ``signature`` and ``held_out``: what generation must never produce
``checks``      ``template_problems`` and ``instance_problems``
``pairs``       ``generate`` (one checked pair), ``ProceduralEpisodes`` and ``procedural_episodes``
=============== =============================================================================================
"""
from __future__ import annotations

from gencoord_env.tasks.procedural.checks import instance_problems, template_problems
from gencoord_env.tasks.procedural.families import FAMILIES
from gencoord_env.tasks.procedural.held_out import HeldOut, held_out, signature
from gencoord_env.tasks.procedural.pairs import (CODEBOOK_EVERY, LENGTH, MAX_ATTEMPTS, ProceduralEpisodes, ProceduralPair,
                                                 codebook_names, draw, extend_prior, generate, procedural_episodes,
                                                 rename_bindings, template_id)
from gencoord_env.tasks.procedural.quantities import Lin
from gencoord_env.tasks.procedural.steps import Step, source_items, steps_from
from gencoord_env.tasks.procedural.templates import POOL

__all__ = [
    "CODEBOOK_EVERY", "FAMILIES", "LENGTH", "MAX_ATTEMPTS", "POOL", "HeldOut", "Lin", "ProceduralEpisodes",
    "ProceduralPair", "Step", "codebook_names", "draw", "extend_prior", "generate", "held_out", "instance_problems",
    "procedural_episodes", "rename_bindings", "signature", "source_items", "steps_from", "template_id",
    "template_problems",
]
