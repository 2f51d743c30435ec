"""The package's front doors: what a user runs or plugs into another framework, built on the library below.

| module | what it is |
|---|---|
| ``cli`` | the ``gencoord`` command (``setup``, ``rollout``, ``serve``; ``doctor``, ``replay``, ``experiment`` and ``train`` load their modules when named) |
| ``doctor`` | ``gencoord doctor``: what an episode needs, checked in order, each failure with its fix |
| ``replay`` | ``gencoord replay``: re-run a recorded episode and compare; ``--show`` prints its accounting |
| ``arenas`` | many episodes at once: K arenas of one Minecraft sidecar (or K sim worlds) |
| ``distributed`` | the same over Ray actors (``--workers N``) |
| ``experiments/`` | ``gencoord experiment``: the paper's evaluations as data, a runner, statistics, tables and figures |
| ``serve`` | ``gencoord serve``: the env as an OpenEnv server |
| ``openenv_server`` | that server as the OpenEnv package ``gencoord_v0_env/`` deploys it (``$GENCOORD_SERVE``, ``$PORT``) |
| ``wire``, ``client`` | what crosses its wire (typed action, observation, state); ``GencoordEnvClient``, its typed OpenEnv client |
| ``llm_rl`` | TRL's ``environment_factory``: language-model agents playing whole episodes through a tool |
| ``verifiers_env`` | the env as a verifiers environment (id ``gencoord_verifiers``) |
| ``run_log`` | a training run's scalars as CSV rows (and TensorBoard) |

These modules may play policies (``gencoord_env.agents``); the library (``gencoord_env``'s other folders)
imports nothing from here, and ``tests/test_imports.py`` holds both rules.
"""
