"""Rewritten code kept on disk: a second process pays nothing to rewrite, and the cache is
never the reason anything fails or runs stale code.

Each in-process test takes a fresh context class (the in-memory cache is per class), so that the
disk is what is asked; the module under test is written to a temporary file, as a user's is.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import overdub._cache as rewriting
from overdub import overdub
from overdub.contexts import CountContext

SOURCE = '''
def work(n):
    total = 0.0
    for i in range(n):
        total += (i % 3) * 0.5 - total * 0.01
    return [round(total, 6) for _ in range(2)]


def outer(n):
    def inner(k):
        return k * 2
    return inner(n)
'''


def _module(tmp_path: Path, name: str, source: str = SOURCE):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".tmp")]


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("OVERDUB_CACHE_DIR", str(folder))
    monkeypatch.delenv("OVERDUB_CACHE", raising=False)
    return folder


def _fresh_count():
    class Fresh(CountContext):
        pass
    return Fresh()


def _no_rewrite(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("rewrote a function the disk cache holds")
    monkeypatch.setattr(rewriting, "_rewrite", refuse)


def test_a_rewrite_is_kept_and_reused_with_the_same_behaviour(tmp_path, cache_dir, monkeypatch):
    module = _module(tmp_path, "kept_mod")
    first = _fresh_count()
    want = overdub(first, module.work, 50)
    assert want == module.work(50) and len(_entries(cache_dir)) == 1
    _no_rewrite(monkeypatch)
    again = _fresh_count()
    assert overdub(again, module.work, 50) == want
    assert again.metadata == first.metadata  # every call and operator seen as before


def test_an_edited_function_is_rewritten_from_its_new_text(tmp_path, cache_dir):
    module = _module(tmp_path, "edited_mod")
    assert overdub(_fresh_count(), module.work, 5) == module.work(5)
    edited = _module(tmp_path, "edited_mod", SOURCE.replace("* 0.5", "* 7.5"))
    assert overdub(_fresh_count(), edited.work, 5) == edited.work(5) != module.work(5)
    assert len(_entries(cache_dir)) == 2


def test_a_corrupt_or_unwritable_cache_is_a_miss_never_an_error(tmp_path, cache_dir,
                                                                monkeypatch):
    module = _module(tmp_path, "corrupt_mod")
    overdub(_fresh_count(), module.work, 5)
    for entry in _entries(cache_dir):
        entry.write_bytes(b"\x00not marshal")
    assert overdub(_fresh_count(), module.work, 5) == module.work(5)
    not_a_folder = tmp_path / "a_file"
    not_a_folder.write_text("")
    monkeypatch.setenv("OVERDUB_CACHE_DIR", str(not_a_folder))
    assert overdub(_fresh_count(), module.work, 6) == module.work(6)


def test_off_keeps_nothing_and_passes_are_not_kept(tmp_path, cache_dir, monkeypatch):
    module = _module(tmp_path, "off_mod")
    monkeypatch.setenv("OVERDUB_CACHE", "off")
    overdub(_fresh_count(), module.work, 5)
    assert not cache_dir.exists()
    monkeypatch.delenv("OVERDUB_CACHE")

    with_pass = type(_fresh_count())(passes=[lambda node: node])
    assert overdub(with_pass, module.work, 5) == module.work(5)
    assert not cache_dir.exists(), _entries(cache_dir)  # no hash of ours captures a pass


def test_a_function_defining_functions_is_kept_with_their_trees(tmp_path, cache_dir,
                                                                 monkeypatch):
    module = _module(tmp_path, "nested_mod")
    first = _fresh_count()
    assert overdub(first, module.outer, 4) == 8
    assert len(_entries(cache_dir)) == 2  # outer's, and inner's (rewritten from outer's tree)
    _no_rewrite(monkeypatch)
    again = _fresh_count()
    assert overdub(again, module.outer, 4) == 8
    assert _by_name(again.metadata) == _by_name(first.metadata)  # (a new inner each call)


def _by_name(counts):
    return {getattr(fn, "__qualname__", repr(fn)): n for fn, n in counts.items()}


CHILD = textwrap.dedent('''
    import importlib.util, sys, time
    import overdub._cache as rewriting
    from overdub import overdub
    from overdub.contexts import CountContext
    if sys.argv[2] == "warm":
        def refuse(*args, **kwargs):
            raise AssertionError("rewrote again")
        rewriting._rewrite = refuse
    spec = importlib.util.spec_from_file_location("child_mod", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ctx = CountContext()
    print(overdub(ctx, module.work, 40), sum(ctx.metadata.values()))
''')


def test_a_second_process_rewrites_nothing(tmp_path, child_env):
    path = tmp_path / "child_mod.py"
    path.write_text(SOURCE)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(child_env, OVERDUB_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("OVERDUB_CACHE", None)
    outputs = []
    for mode in ("cold", "warm"):
        done = subprocess.run([sys.executable, str(script), str(path), mode], env=env,
                              cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1] and outputs[0].strip()
    assert os.listdir(tmp_path / "cache")


def test_an_entry_under_another_entrys_name_is_a_miss(tmp_path, cache_dir):
    module = _module(tmp_path, "swapped_mod")
    want_work, want_outer = module.work(7), module.outer(3)
    overdub(_fresh_count(), module.work, 7)
    overdub(_fresh_count(), module.outer, 3)
    entries = sorted(_entries(cache_dir))
    contents = [path.read_bytes() for path in entries]
    for path, data in zip(entries, contents[1:] + contents[:1]):  # each under the next's name
        path.write_bytes(data)
    assert overdub(_fresh_count(), module.work, 7) == want_work
    assert overdub(_fresh_count(), module.outer, 3) == want_outer


def test_the_cache_folder_may_start_with_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OVERDUB_CACHE_DIR", "~/overdub-cache")
    monkeypatch.delenv("OVERDUB_CACHE", raising=False)
    module = _module(tmp_path, "tilde_mod")
    overdub(_fresh_count(), module.work, 3)
    assert _entries(tmp_path / "overdub-cache")
