"""The seams of DESIGN.md, read from the source: the core imports neither plug-in, and the
plug-ins reach the core only through its public names (`overdub.__all__`,
`overdub.contexts.__all__`), never a private module or a private attribute."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

import overdub
import overdub.contexts

PUBLIC = {"overdub": set(overdub.__all__), "overdub.contexts": set(overdub.contexts.__all__)}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _reaches_into_the_core(path: Path) -> list[str]:
    """Each use in `path` of a core name that is not public."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "overdub":
            public = PUBLIC.get(node.module)
            if public is None:
                found.append(f"line {node.lineno}: from {node.module} import ...")
            else:
                found += [f"line {node.lineno}: {node.module}.{alias.name}"
                          for alias in node.names if alias.name not in public]
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {alias.name}" for alias in node.names
                      if alias.name.startswith("overdub.") and alias.name not in PUBLIC]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id == "overdub" and node.attr not in PUBLIC["overdub"] and \
                node.attr != "contexts":
            found.append(f"line {node.lineno}: overdub.{node.attr}")
    return found


def test_plugins_use_only_the_cores_public_names():
    leaks = {str(path.relative_to(ROOT)): found
             for package in ("overdub_ad", "overdub_gpu") for path in _modules(package)
             if (found := _reaches_into_the_core(path))}
    assert not leaks, f"plug-ins reach past overdub's public API: {leaks}"


def test_the_core_imports_no_plugin():
    for path in _modules("overdub"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] in ("overdub_ad", "overdub_gpu")], \
                f"{path.relative_to(ROOT)} imports a plug-in"


def test_the_check_sees_a_private_import(tmp_path: Path):
    bad = tmp_path / "bad.py"
    bad.write_text("from overdub._context import _state\nimport overdub\noverdub._cache\n"
                   "from overdub import overdub as run, Context\n")
    assert _reaches_into_the_core(bad) == ["line 1: from overdub._context import ...",
                                           "line 3: overdub._cache"]
