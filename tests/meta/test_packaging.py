"""What `pip install .` ships is the whole tree: every module of the three packages is in the
built wheel and in the installed package, and the README's package map names each one once."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests.conftest import PACKAGES, ROOT, SOURCE_MODE, installed_location

import overdub


def _tree_files() -> set[str]:
    """The shipped files of the three packages in the checkout, as paths relative to it."""
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and \
                    (path.suffix == ".py" or path.name == "py.typed"):
                found.add(path.relative_to(ROOT).as_posix())
    return found


def test_the_tree_has_every_package_and_their_markers() -> None:
    files = _tree_files()
    for package in PACKAGES:
        assert f"{package}/__init__.py" in files and f"{package}/py.typed" in files
    assert "overdub_ad/rules/__init__.py" in files


def test_the_built_wheel_holds_every_module_of_the_tree(tmp_path: Path) -> None:
    # Built from a copy: in the checkout, setuptools would reuse a stale build/ directory, and
    # a file the configuration leaves out could still reach the wheel from there.
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, tree / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tree / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(tmp_path), str(tree)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = tmp_path.glob("overdub-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name for name in archive.namelist() if name.split("/")[0] in PACKAGES}
    missing = sorted(_tree_files() - shipped)
    assert not missing, f"the wheel leaves out {missing}"


@pytest.mark.skipif(SOURCE_MODE, reason="OVERDUB_TEST_SOURCE=1: testing the source tree")
def test_the_installed_package_holds_every_module_of_the_tree() -> None:
    assert overdub.__file__ is not None
    site = installed_location(overdub.__file__)
    assert site is not None
    missing = sorted(path for path in _tree_files() if not (site / path).is_file())
    assert not missing, f"the installed package lacks {missing}: reinstall, or fix packaging"


def _readme_layout() -> list[str]:
    """The paths the README's "Package layout" block names, from its indentation (two spaces a
    level; a name ending in '/' opens a directory)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Package layout", 1)[1].split("```", 2)[1]
    paths: list[str] = []
    parents: list[str] = []
    for line in block.splitlines():
        match = re.match(r"( *)(\S+)", line)
        if match is None:
            continue
        depth, name = len(match.group(1)) // 2, match.group(2)
        if depth > len(parents):
            continue                          # a description continued on the next line
        del parents[depth:]
        if name.endswith("/"):
            parents.append(name.rstrip("/"))
        elif name.endswith(".py") or name == "py.typed":
            paths.append("/".join([*parents, name]))
    return paths


def test_the_readme_names_every_module_once() -> None:
    named = _readme_layout()
    twice = sorted({path for path in named if named.count(path) > 1})
    assert not twice, f"README.md's package layout names {twice} more than once"
    modules = {path for path in _tree_files() if path.endswith(".py")}
    assert not modules - set(named), \
        f"README.md's package layout does not name {sorted(modules - set(named))}"
    assert not set(named) - modules, \
        f"README.md's package layout names files that do not exist: {sorted(set(named) - modules)}"
