"""Every ```python block in README.md and docs/*.md runs, and its asserts hold.

Each block is written to its own file and run from there with ``runpy.run_path``: overdub rewrites
functions from their source file, and code executed from a string has none.  A block runs in a
fresh namespace as ``__main__`` (as if saved to a file and run with ``python file.py``), so it
must be self-contained.  A block whose fence reads ```python no-run is shown but not run.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^`\n]*)$")


def _blocks(page: Path) -> list[tuple[int, str, str]]:
    """``(line of the opening fence, info string, code)`` for each fenced block of ``page``."""
    blocks = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, info, start = match["indent"], match["info"].strip(), i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            line = lines[i]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{page.name}:{start + 1}: unclosed code fence")
        i += 1
        blocks.append((start + 1, info, "\n".join(body) + "\n"))
    return blocks


def _cases() -> list:
    cases = []
    for page in PAGES:
        rel = page.relative_to(ROOT).as_posix()
        for line, info, code in _blocks(page):
            words = info.split()
            if not words or words[0] != "python":
                continue
            marks = [pytest.mark.skip(reason="marked no-run")] if "no-run" in words[1:] else []
            cases.append(pytest.param(rel, line, code, id=f"{rel}:{line}", marks=marks))
    return cases


CASES = _cases()


def test_docs_have_examples() -> None:
    assert len(CASES) >= 20, "the docs lost their runnable examples"
    assert all("assert" in case.values[2] for case in CASES
               if not case.marks), "every runnable block should check its outcome with assert"


@pytest.mark.parametrize("page, line, code", CASES)
def test_doc_block(page: str, line: int, code: str, tmp_path: Path) -> None:
    path = tmp_path / f"doc_block_{line}.py"
    path.write_text(code, encoding="utf-8")
    runpy.run_path(str(path), run_name="__main__")


# docs/api.md documents the public API with Sphinx autodoc directives (``.. autofunction::
# overdub.tag`` ...) in ```{eval-rst} blocks; an alias (``overdub_ad.D is derivative``) may get a
# hand-written ``.. py:function::`` instead of a second copy of the same docstring.
API_MODULES = ("overdub", "overdub.contexts", "overdub_ad", "overdub_ad.testing", "overdub_gpu")
DIRECTIVE = re.compile(r"^\.\. (?P<kind>auto\w+|py:\w+):: (?P<target>[\w.]+)", re.MULTILINE)


def test_api_page_documents_every_public_name() -> None:
    import importlib

    public = {f"{module}.{name}": getattr(importlib.import_module(module), name)
              for module in API_MODULES for name in importlib.import_module(module).__all__}
    generated, written = set(), set()
    for _, info, code in _blocks(ROOT / "docs" / "api.md"):
        if info == "{eval-rst}":
            for match in DIRECTIVE.finditer(code):
                if match["kind"] != "py:module":
                    is_auto = match["kind"].startswith("auto")
                    (generated if is_auto else written).add(match["target"])
    top_level = {target for target in generated | written
                 if target.rpartition(".")[0] in API_MODULES}
    missing = sorted(public.keys() - top_level)
    assert not missing, f"docs/api.md has no directive for {missing}"
    stale = sorted(top_level - public.keys())
    assert not stale, f"docs/api.md documents {stale}, which are not in __all__"
    not_aliases = sorted(name for name in written & top_level
                         if not any(public[name] is public[other]
                                    for other in generated & public.keys()))
    assert not not_aliases, f"docs/api.md writes out {not_aliases} instead of using autodoc"
