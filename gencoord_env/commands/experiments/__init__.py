"""The paper's evaluations, reproducible from one command: ``gencoord experiment NAME``.

| module | job |
| --- | --- |
| ``specs`` | the experiments and their conditions as data, with the paper's figures |
| ``runner`` | deterministic cluster selection; run every condition on one shared world |
| ``analysis`` | episode rows -> one record per condition (rates, costs, intervals, paired effects); the method matrix |
| ``stats`` | cluster means, cluster bootstrap, paired bootstrap, Clopper-Pearson (scipy) |
| ``report`` / ``plot`` | rich tables, ``results.json``, ``results.csv``, ``episodes.jsonl``, ``matrix.csv``, PNG |
| ``cli`` | ``main(argv)`` behind ``gencoord experiment`` |

>>> from gencoord_env.commands.experiments import EXPERIMENTS
>>> list(EXPERIMENTS)[:2]
['goal-capability', 'request']
"""
from __future__ import annotations

from gencoord_env.commands.experiments.specs import EXPERIMENTS, Condition, Experiment, experiment

__all__ = ["EXPERIMENTS", "Condition", "Experiment", "experiment"]
