#!/usr/bin/env bash
# The lower end of the dependency range setup.cfg accepts (gymnasium 1.2, pettingzoo 1.25): a fresh
# virtualenv without torch, the package and the test runner (the test extra's pytest, pytest-xdist and
# hypothesis pins: its Ray, verifiers and OpenEnv took three minutes to install and these tests use none of
# them), then the tests of the env, its wrappers and its learning interfaces (PettingZoo's API and seed
# tests, Gymnasium's env checker, vector envs). Bytecode is compiled on import, not at install (a throwaway
# virtualenv).
# The upper end is what the main test suite installs.
#
#     scripts/lower_bounds.sh [VENV_DIR]    # default: a temporary folder, removed afterwards
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -ge 1 ]]; then
    venv="$1"
else
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    venv="$tmp/venv"
fi
start=$SECONDS
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# the test extra's runner pins (tests/test_packaging.py checks they are the extra's)
runner=('pytest>=8,<9.2' 'pytest-xdist>=3.5' 'hypothesis>=6.100')
"$venv/bin/pip" install -q --no-compile 'gymnasium==1.2.*' 'pettingzoo==1.25.*' "${runner[@]}" -e .
"$venv/bin/python" -c 'import gymnasium, pettingzoo, importlib.util as u
print("gymnasium", gymnasium.__version__, "pettingzoo", pettingzoo.__version__,
      "torch", "installed" if u.find_spec("torch") else "absent")'
echo "installed in $((SECONDS - start)) s"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup tests/envs tests/wrappers tests/rl/test_interfaces.py
echo "lower bounds passed in $((SECONDS - start)) s"
