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

ROOT = Path(__file__).resolve().parent.parent
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


# Public names whose reference section is still to be written; a name added to __all__ must be
# documented in docs/api.md or listed here on purpose.


def test_api_page_covers_every_public_name() -> None:
    import overdub
    import overdub.contexts

    headings = [line for line in (ROOT / "docs" / "api.md").read_text(encoding="utf-8").splitlines()
                if line.startswith("#")]
    public = [*overdub.__all__, *overdub.contexts.__all__]
    missing = [name for name in public if not any(f"`{name}" in h or f"class {name}" in h
                                                  or f".{name}(" in h for h in headings)]
    assert not missing, f"docs/api.md has no section for {missing}"
