"""Rewritten code kept on disk, so that a second process pays nothing to rewrite a function
(as pytest keeps the test modules it rewrote as ``.pyc`` files).

An entry is the marshalled rewritten code object and the global names it assigns, in a file
named by a hash of everything the rewrite depends on: the function's own code object
(marshalled: its bytecode, names, constants, file name and positions), the text of its file as
``linecache`` has it (the source the rewrite reads), the categories the context intercepts and
whether it observes, and a salt made of the Python version and the text of overdub's own
modules (a new overdub or Python makes every old entry unreachable), with the trees of the
functions defined inside (pickled: their bodies are rewritten from those trees when called).
Only rewrites without passes are kept: a pass is arbitrary code whose behaviour no hash of
ours can capture.

Never fatal: a cache that cannot be read or written (missing, unwritable, corrupt, another
Python's, an entry under another's name) is a miss, and the rewrite runs as if there were
none.  Like Python's own ``__pycache__``, an entry is code that will run: the folder must be
writable by you alone.  ``OVERDUB_CACHE=off`` turns
it off; ``OVERDUB_CACHE_DIR`` chooses the directory (default ``$XDG_CACHE_HOME/overdub``, or
``~/.cache/overdub``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import marshal
import os
import pickle
import sys
import types
from typing import Any

_OFF = ("0", "off", "false", "no")
_salt: bytes | None = None


def directory() -> str | None:
    """Where entries live, or None when the cache is off (read at each use: tests and users
    may set the variables after import)."""
    if os.environ.get("OVERDUB_CACHE", "").strip().lower() in _OFF:
        return None
    chosen = os.environ.get("OVERDUB_CACHE_DIR")
    if chosen:
        return os.path.expanduser(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "overdub")


def _salted() -> bytes:
    global _salt
    if _salt is None:
        digest = hashlib.sha256(importlib.util.MAGIC_NUMBER + sys.version.encode())
        package = os.path.dirname(os.path.abspath(__file__))
        for name in sorted(os.listdir(package)):
            if name.endswith(".py"):
                digest.update(name.encode())
                with open(os.path.join(package, name), "rb") as fh:
                    digest.update(fh.read())
        _salt = digest.digest()
    return _salt


def key(code: types.CodeType, module_globals: dict[str, Any], categories: frozenset[str],
        observe: bool) -> str | None:
    """The entry's name for ``code`` rewritten so, or None: no source text to hash."""
    try:
        lines = linecache.getlines(code.co_filename, module_globals)
        if not lines:
            return None
        digest = hashlib.sha256(_salted())
        digest.update(marshal.dumps(code))
        digest.update("".join(lines).encode("utf-8", "surrogatepass"))
        digest.update(repr((sorted(categories), observe)).encode())
        return digest.hexdigest()
    except Exception:  # an unmarshallable constant, an unreadable package: no entry
        return None


def load(name: str) -> tuple[types.CodeType, frozenset[str], Any] | None:
    """The entry ``name``: (rewritten code, global names it assigns, the nested functions'
    trees), or None."""
    folder = directory()
    if folder is None:
        return None
    try:
        with open(os.path.join(folder, name), "rb") as fh:
            kept_as, compiled, stores, nested = pickle.loads(fh.read())
        if kept_as != name:  # (a file renamed, or copied over another: not this entry)
            return None
        code = marshal.loads(compiled)
        if type(code) is not types.CodeType or type(stores) is not frozenset or \
                type(nested) is not dict:
            return None
        return code, stores, nested
    except Exception:  # missing (the common case), corrupt, another Python's format
        return None


def store(name: str, code: types.CodeType, stores: frozenset[str], nested: Any) -> None:
    """Write the entry ``name`` (atomically: a reader sees all of it or none).  Entries lie
    side by side in the folder, made when the first is written (one folder to make: this runs
    inside the first call of the function)."""
    folder = directory()
    if folder is None:
        return
    try:
        data = pickle.dumps((name, marshal.dumps(code), stores, nested),
                            protocol=pickle.HIGHEST_PROTOCOL)
        temporary = os.path.join(folder, f".tmp-{os.urandom(8).hex()}")
        try:
            handle = os.open(temporary, _CREATE, 0o600)
        except FileNotFoundError:  # the first entry
            os.makedirs(folder, exist_ok=True)
            handle = os.open(temporary, _CREATE, 0o600)
        try:
            with os.fdopen(handle, "wb") as fh:
                fh.write(data)
            os.replace(temporary, os.path.join(folder, name))
        except BaseException:
            os.unlink(temporary)
            raise
    except Exception:  # unpicklable, unwritable, full, gone: the next process rewrites again
        pass


# A new file of our own (as tempfile.mkstemp opens one, without its name search)
_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_BINARY", 0))
