#!/usr/bin/env bash
# The lower end of the dependency range setup.cfg accepts (gymnasium 1.2, pettingzoo 1.25): a fresh
# virtualenv without torch, the package with its test extra, then the tests of the env, its wrappers and
# its learning interfaces (PettingZoo's API and seed tests, Gymnasium's env checker, vector envs).
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
"$venv/bin/pip" install -q 'gymnasium==1.2.*' 'pettingzoo==1.25.*' -e '.[test]'
"$venv/bin/python" -c 'import gymnasium, pettingzoo, importlib.util as u
print("gymnasium", gymnasium.__version__, "pettingzoo", pettingzoo.__version__,
      "torch", "installed" if u.find_spec("torch") else "absent")'
echo "installed in $((SECONDS - start)) s"
"$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup tests/envs tests/wrappers tests/rl/test_interfaces.py
echo "lower bounds passed in $((SECONDS - start)) s"
