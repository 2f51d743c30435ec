from __future__ import annotations

import re

import pytest
from pettingzoo.test import parallel_api_test

import gencoord_env
from gencoord_env.envs import gencoord_v0
from gencoord_env.envs.gencoord.routes import ROUTES
from gencoord_env.tasks.compose import VIEWS

ROUTE_POOLS = {"forward": "heldout", "single_step": "heldout", "centralized": "heldout",
               "feedback": "goal_capability", "requester_only": "goal_capability"}


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("view", VIEWS)
def test_parallel_api(route: str, view: str) -> None:
    env = gencoord_v0.parallel_env(backend="sim", pool=ROUTE_POOLS[route], route=route, view=view)
    parallel_api_test(env, num_cycles=50)


def test_spaces_are_cached_and_have_an_explicit_charset() -> None:
    env = gencoord_env.parallel_env(backend="sim")
    for a in env.possible_agents:
        assert env.observation_space(a) is env.observation_space(a)
        assert env.action_space(a) is env.action_space(a)
        assert "\n" in env.action_space(a).character_set and ">" in env.action_space(a).character_set


def test_metadata_and_aec_form() -> None:
    assert gencoord_v0.raw_env.metadata["name"] == "gencoord_v0"
    aec = gencoord_v0.env(backend="sim")
    aec.reset(seed=1)
    assert aec.agent_selection in aec.possible_agents


@pytest.mark.parametrize(
    "kwargs,message",
    [({"route": "forwrd"}, "did you mean 'forward'"), ({"view": "ful"}, "did you mean 'full'"),
     ({"backend": "mc"}, "expected one of sim, minecraft"), ({"pool": "heldot"}, "did you mean 'heldout'")],
)
def test_bad_options_say_what_was_expected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        gencoord_env.parallel_env(**{"backend": "sim", **kwargs})


def test_default_backend_is_minecraft() -> None:
    import inspect

    from gencoord_env.envs.gencoord.gencoord import raw_env

    assert inspect.signature(raw_env.__init__).parameters["backend"].default == "minecraft"
    # nothing starts until the world is first needed
    env = gencoord_env.parallel_env()
    assert env.backend == "minecraft" and env._world is None


def test_help_shows_every_argument_typed_and_documented() -> None:
    """``help(gencoord_env.parallel_env)`` (and ``env``) shows raw_env's own arguments with their types and
    defaults, and the module docstring's Arguments section, which names every one of them."""
    import inspect
    import pydoc
    import subprocess
    import sys

    from gencoord_env.envs.gencoord import gencoord

    own = inspect.signature(gencoord.raw_env)
    assert len(own.parameters) == 22
    for make in (gencoord_env.parallel_env, gencoord_env.env, gencoord_v0.parallel_env):
        assert inspect.signature(make).parameters == own.parameters
        page = pydoc.render_doc(make, renderer=pydoc.plaintext)
        assert "**kwargs" not in page and "### Arguments" in page
        for name, p in own.parameters.items():
            assert f"{name}: {p.annotation!r} = {p.default!r}" in page, name
            assert f"``{name}``" in gencoord.arguments_section(), f"the Arguments section never names {name}"
    # the docstring's own signature line lists the same arguments and defaults
    line = re.search(r"``parallel_env\((.*?)\)``", gencoord.__doc__ or "", re.S)
    assert line is not None
    written = dict(part.strip().split("=", 1) for part in line[1].split(","))
    assert written == {name: repr(p.default).replace("'", '"') for name, p in own.parameters.items()}
    assert inspect.signature(gencoord_env.parallel_env).return_annotation == "raw_env"
    # and importing the package does not load the env: the constructors load on first use
    code = "import sys, gencoord_env; print('gencoord_env.envs.gencoord.gencoord' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


@pytest.mark.parametrize("index,error,message", [
    (-1, ValueError, "options['index']=-1 is out of range: pool 'heldout' has 256 episodes (0 to 255)"),
    (256, ValueError, "options['index']=256 is out of range: pool 'heldout' has 256 episodes (0 to 255)"),
    ("3", TypeError, "options['index'] takes an episode number (int), got '3'"),
    (True, TypeError, "options['index'] takes an episode number (int), got True"),
])
def test_an_episode_index_outside_the_pool_is_an_error_not_another_episode(index: object, error: type, message: str) -> None:
    env = gencoord_env.parallel_env(backend="sim", pool="heldout")
    with pytest.raises(error, match=re.escape(message)):
        env.reset(options={"index": index})
    _, infos = env.reset(options={"index": 255})  # the last one is still there
    assert infos["agent_a"]["episode_id"] == env.episodes[255].id


def test_step_before_reset_raises_a_clear_error() -> None:
    env = gencoord_env.parallel_env(backend="sim")
    with pytest.raises(RuntimeError, match="call reset"):
        env.step({})


def test_an_observation_form_is_one_registry_entry(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``observations=`` names an entry of ``OBSERVATION_FORMS``: its spaces and its encoding, nothing else."""
    import gymnasium
    import numpy as np

    from gencoord_env.envs.gencoord import interface
    from gencoord_env.envs.gencoord.interface import ObservationForm

    lines = ObservationForm("lines", lambda i: {"observation": gymnasium.spaces.Box(0, 1 << 20, (), int)},
                            lambda i, text, context, parts: {"observation": text.count("\n") + 1})
    monkeypatch.setitem(interface.OBSERVATION_FORMS, "lines", lines)
    env = gencoord_env.parallel_env(backend="sim", pool="heldout", observations="lines")
    obs, infos = env.reset(seed=0)
    turn = next(a for a, i in infos.items() if i["deciding"])
    assert obs[turn]["observation"] > 20 and env.observation_space(turn).contains(
        {"observation": np.int64(obs[turn]["observation"])})
