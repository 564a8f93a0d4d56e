"""Stand-ins for C functions of the standard library that call back into Python.

``re.sub("a", f, s)`` ends in the C method ``Pattern.sub``, which calls ``f`` for each match
behind the context's back; so do ``contextvars.Context.run(f)`` (asyncio's ``loop.call_soon``
callbacks go through it) and json's C scanner and encoder (``object_hook``,
``object_pairs_hook``, ``parse_float``, ``parse_int``, ``parse_constant``, ``default``).  Unlike
the shims of :mod:`._shims`, these run the C code itself: they only hand it, in place of the
user's function, a callable that calls that function through the context's step ``od``.  The
C code sees the same values and stores the same objects; whatever the function returns or
raises reaches it unchanged.

Two kinds of call are looked up here, besides the builtins registered with ``_register``:

- a *bound* C method (``pattern.sub(f, s)``, ``ctx.run(f)``): a new object at each access,
  found by its owner's type and name, then shimmed as its method descriptor
  (``re.Pattern.sub``) with the owner as first argument;
- a call of an *instance* of a C type (json's scanner ``decoder.scan_once(s, 0)``).

The core's lookup (:func:`._shims.shim_for`) finds them in ``_shims.BOUND`` and ``CALLED``.
"""

from __future__ import annotations

import contextvars
import json.decoder
import json.encoder
import json.scanner
import re
import types
from collections.abc import Callable
from typing import Any

from ._shims import BOUND, CALLED, _always, _register
from ._tagging import Tagged

_Fn = Callable[..., Any]
_Applies = Callable[[tuple[Any, ...], dict[str, Any]], bool]
_BuiltinMethod = types.BuiltinMethodType  # type(len), type([].append)

def _through(od: _Fn, fn: Any) -> _Fn:
    """A callable that calls ``fn`` through the context, for C code to call in its place."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return od(fn, *args, **kwargs)
    return call


def _register_method(descriptor: Any, applies: _Applies, shim: _Fn) -> None:
    """Shim C method ``descriptor`` (``re.Pattern.sub``), called unbound or bound."""
    _register(descriptor, applies, shim)
    BOUND.setdefault(descriptor.__objclass__, {})[descriptor.__name__] = descriptor


# -- re: Pattern.sub / Pattern.subn with a callable repl (re.sub, re.subn call them) ------------

def _pattern_repl(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if not args or type(args[0]) is not re.Pattern:
        return False
    repl = args[1] if len(args) > 1 else kwargs.get("repl")
    # (a tagged string is a leaf call's: the C code, given it, would refuse the wrapper)
    return callable(repl) and Tagged not in map(type, (*args[2:], *kwargs.values()))


def _substituting(method: _Fn) -> _Fn:
    def shim(od: _Fn, pattern: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            args = (_through(od, args[0]), *args[1:])
        else:
            kwargs = {**kwargs, "repl": _through(od, kwargs["repl"])}
        return method(pattern, *args, **kwargs)
    return shim


for _method in (re.Pattern.sub, re.Pattern.subn):
    _register_method(_method, _pattern_repl, _substituting(_method))


# -- contextvars.Context.run (asyncio runs its callbacks with it) ------------------------------

def _context_run(od: _Fn, context: Any, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
    return contextvars.Context.run(context, _through(od, fn), *args, **kwargs)


_register_method(contextvars.Context.run,
                 lambda a, k: len(a) >= 2 and type(a[0]) is contextvars.Context
                 and callable(a[1]), _context_run)


# -- json's C scanner and encoder ------------------------------------------------------------
# json's Python code (json.loads, JSONDecoder.decode, JSONEncoder.iterencode) runs under the
# context; it calls the C scanner (``decoder.scan_once(s, idx)``) and builds and calls a C
# encoder (``c_make_encoder(markers, self.default, ...)``), which call the hooks natively.

def _default_constant(parse_constant: Any) -> bool:
    """json.decoder's own ``parse_constant`` (``_CONSTANTS.__getitem__``): no user code."""
    return type(parse_constant) is _BuiltinMethod and \
        parse_constant.__self__ is json.decoder._CONSTANTS  # type: ignore[attr-defined]


def _scanner_hooks(scanner: Any) -> bool:
    """Whether the C scanner calls a hook of the user's (the defaults are C's own code)."""
    return scanner.object_hook is not None or scanner.object_pairs_hook is not None or \
        scanner.parse_float is not float or scanner.parse_int is not int or \
        not _default_constant(scanner.parse_constant)


class _Hooks:
    """What a C scanner is made from (it reads these attributes), with the user's hooks called
    through the context."""

    def __init__(self, od: _Fn, scanner: Any) -> None:
        def seen(hook: Any) -> Any:
            return hook if hook is None else _through(od, hook)
        self.strict = scanner.strict
        self.object_hook = seen(scanner.object_hook)
        self.object_pairs_hook = seen(scanner.object_pairs_hook)
        # float and int stay themselves: the scanner converts those in C, by identity
        self.parse_float = scanner.parse_float if scanner.parse_float is float else \
            _through(od, scanner.parse_float)
        self.parse_int = scanner.parse_int if scanner.parse_int is int else \
            _through(od, scanner.parse_int)
        self.parse_constant = scanner.parse_constant \
            if _default_constant(scanner.parse_constant) else \
            _through(od, scanner.parse_constant)


def _scan(od: _Fn, scanner: Any, *args: Any, **kwargs: Any) -> Any:
    # A scanner keeps nothing between calls (its memo is emptied after each): one made for
    # this call from the same settings scans as the user's would.
    return type(scanner)(_Hooks(od, scanner))(*args, **kwargs)


def _encoder(encoder_type: type) -> _Fn:
    def shim(od: _Fn, *args: Any, **kwargs: Any) -> Any:
        # (markers, default, encoder, indent, ...): only ``default`` is the user's code
        if len(args) >= 2 and callable(args[1]):
            args = (args[0], _encoded(od, args[1]), *args[2:])
        elif callable(kwargs.get("default")):
            kwargs = {**kwargs, "default": _encoded(od, kwargs["default"])}
        return encoder_type(*args, **kwargs)
    return shim


def _encoded(od: _Fn, default: Any) -> _Fn:
    """The encoder's ``default`` hook called through the context, what it returns given with
    its tagged numbers as their values: the encoder writes a number it recognises by its type
    as text (a tagged one it would hand to the hook again), and text holds no metadata."""
    def call(obj: Any) -> Any:
        return _values(od(default, obj))
    return call


def _values(x: Any) -> Any:
    """``x`` with the tagged values in it, in lists, tuples and dicts, as their values."""
    kind = type(x)
    if kind is Tagged:
        while type(x) is Tagged:
            x = x.value
        return x
    if kind is list or kind is tuple:
        items = [_values(v) for v in x]
        return x if all(a is b for a, b in zip(items, x)) else kind(items)
    if kind is dict:
        pairs = {_values(k): _values(v) for k, v in x.items()}
        return x if all(a is b for a, b in zip(pairs.values(), x.values())) and \
            all(a is b for a, b in zip(pairs, x)) else pairs
    return x


_c_scanner = json.scanner.c_make_scanner  # type: ignore[attr-defined]
if _c_scanner is not None:  # (None where json has no C accelerator: its Python code runs)
    CALLED[_c_scanner] = (lambda a, k: _scanner_hooks(a[0]) and Tagged not in map(type, a[1:]),
                          _scan)  # (a tagged text: a leaf call's, see _pattern_repl)
_c_encoder = json.encoder.c_make_encoder  # type: ignore[attr-defined]
if _c_encoder is not None:
    _register(_c_encoder, _always, _encoder(_c_encoder))
