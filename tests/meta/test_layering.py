"""The seams of DESIGN.md, read from the source: the core imports neither plug-in, and the
plug-ins reach the core only through its public names (`overdub.__all__`,
`overdub.contexts.__all__`), never a private module or a private attribute."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

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


# -- overdub_ad's engines ------------------------------------------------------------------------

ENGINES = ("forward", "reverse")


def _engine_imports(path: Path) -> set[str]:
    """The overdub_ad subpackages and modules ``path`` imports (absolute names)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("overdub_ad.")}


def test_the_engines_never_import_each_other():
    """forward/ and reverse/ import the shared modules, the rules, routes and pytrees, never
    the other engine (nor hvp/, which composes them)."""
    for engine in ENGINES:
        others = [f"overdub_ad.{other}" for other in (*ENGINES, "hvp") if other != engine]
        for path in _modules(f"overdub_ad/{engine}"):
            bad = [name for name in _engine_imports(path)
                   if any(name == o or name.startswith(o + ".") for o in others)]
            assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_shared_modules_import_no_engine():
    shared = [p for p in _modules("overdub_ad") if p.parent == ROOT / "overdub_ad"]
    assert len(shared) > 10
    for path in shared:
        if path.name in ("__init__.py", "_check_grads.py"):
            continue  # (the public API, and check_grads, which uses both modes, sit above)
        bad = [name for name in _engine_imports(path)
               if name.split(".")[1] in (*ENGINES, "hvp")]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_engine_check_sees_an_import():
    package = ROOT / "overdub_ad" / "forward"
    probe = package / "_layering_probe.py"
    try:
        probe.write_text("from ..reverse._tape import _Node\nfrom .. import _rules\n")
        assert _engine_imports(probe) >= {"overdub_ad.reverse._tape",
                                          "overdub_ad.reverse._tape._Node",
                                          "overdub_ad._rules"}
    finally:
        probe.unlink()
