"""A ``def`` found from its own lines is the one the whole file holds.

The first call of a function parses only the function's lines (``_source.locate_def``: its end
read off the code's line table, its class off ``co_qualname``), not its module; the whole-file
lookup (``_source.locate``) stays for lambdas and whatever the quick one cannot place.  Both must
give the same tree, at the same positions, with the same class (private names are mangled with
it): checked on every function of a sample of the standard library, and on the shapes that make
the end of a ``def`` hard to see from its instructions.
"""

from __future__ import annotations

import ast
import collections
import gc
import importlib
import inspect
import sys
import textwrap
import threading
import types

import pytest

from overdub import Context, overdub
from overdub import _source

_MODULES = ["json.decoder", "json.encoder", "textwrap", "collections", "inspect", "ast",
            "argparse", "dataclasses", "functools", "string", "fractions", "statistics",
            "difflib", "pprint", "configparser", "enum", "typing", "shlex", "calendar"]


def _functions(module):
    seen = set()
    stack = [module]
    while stack:
        holder = stack.pop()
        for value in list(vars(holder).values()):
            if isinstance(value, type) and value.__module__ == module.__name__ and \
                    id(value) not in seen:
                seen.add(id(value))
                stack.append(value)
            function = getattr(value, "__func__", value)
            if isinstance(function, property):
                function = function.fget
            if isinstance(function, types.FunctionType) and id(function) not in seen and \
                    function.__module__ == module.__name__:
                seen.add(id(function))
                yield function


def _same(quick, whole):
    assert ast.dump(quick.node, include_attributes=True) == \
        ast.dump(whole.node, include_attributes=True)
    assert quick.class_name == whole.class_name


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's code has no co_qualname")
@pytest.mark.parametrize("name", _MODULES)
def test_a_def_from_its_lines_is_the_files(name):
    module = importlib.import_module(name)
    compared = 0
    for function in _functions(module):
        code = function.__code__
        if code.co_name == "<lambda>":
            continue
        quick = _source.locate_def(code, function.__globals__)
        if quick is None:
            continue
        whole = _source.locate(code, function.__globals__, lambda located: 1)
        assert not isinstance(whole, _source.NoSource), (function, whole)
        _same(quick, whole)
        compared += 1
    assert compared >= 5


_AWKWARD = '''
import functools


class Outer:
    class __Inner:
        def __secret(self):
            return self.__hidden

        def calls(self):
            def nested():
                return self.__secret()
            return nested()

    def ends_in_a_bracket(self, x):
        return [
            x,
            x + 1,
]

    def ends_in_a_string(self):
        return """
text at column 0
"""

    @functools.lru_cache(maxsize=None)
    @staticmethod
    def decorated(x):
        return x


def trailing_global():
    global G
    G = 1


def ends_in_a_comment(x):
    y = x
    # a comment at the def's indent
    return y
# and one at column 0


async def coroutine(x):
    return x


def generic(x):
    return (lambda y: y)(x)
'''


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10's code has no co_qualname")
def test_awkward_ends_and_classes(tmp_path, monkeypatch):
    path = tmp_path / "awkward_defs.py"
    path.write_text(textwrap.dedent(_AWKWARD))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("awkward_defs")
    codes = []
    stack = [c for c in module.__dict__.values() if isinstance(c, types.FunctionType)]
    for klass in (module.Outer, vars(module.Outer)["_Outer__Inner"]):
        for value in vars(klass).values():
            value = getattr(value, "__wrapped__", value)
            value = getattr(value, "__func__", value)
            if isinstance(value, types.FunctionType):
                stack.append(value)
    while stack:
        function = stack.pop()
        codes.append(function.__code__)
    for code in list(codes):
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    located = 0
    for code in codes:
        if code.co_name == "<lambda>":
            continue
        quick = _source.locate_def(code, module.__dict__)
        whole = _source.locate(code, module.__dict__, lambda located: 1)
        assert not isinstance(whole, _source.NoSource), (code, whole)
        if quick is not None:
            _same(quick, whole)
            located += 1
    assert located >= 8
    # and they run under a context as natively (the private names mangled with their class)
    inner = vars(module.Outer)["_Outer__Inner"]()
    inner._Inner__hidden = 5
    inner._Outer__Inner__hidden = 7
    assert overdub(Context(), inner.calls) == inner.calls()
    assert overdub(Context(), module.Outer().ends_in_a_bracket, 1) == [1, 2]
    assert overdub(Context(), module.Outer().ends_in_a_string) == "\ntext at column 0\n"


class _Counting(Context):
    def prehook(self, fn, /, *args, **kwargs):
        pass


def _rewritten_first_time(n):
    total = 0
    for i in range(n):
        total += i * 2 - 1
    return total


def test_rewriting_leaves_the_collector_as_the_user_had_it():
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()

            class Fresh(_Counting):  # a new class: the function is rewritten for it
                pass
            assert overdub(Fresh(), _rewritten_first_time, 5) == _rewritten_first_time(5)
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_rewriting_in_threads_leaves_the_collector_enabled():
    assert gc.isenabled()
    errors = []

    def work():
        try:
            for _ in range(20):
                class Fresh(_Counting):
                    pass
                assert overdub(Fresh(), _rewritten_first_time, 3) == 5 - 2
        except BaseException as error:  # (reported below)
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and gc.isenabled()


def test_inspect_and_collections_functions_still_run_under_a_context():
    # functions located by their lines, rewritten, run as natively
    assert overdub(_Counting(), inspect.signature, test_a_def_from_its_lines_is_the_files) == \
        inspect.signature(test_a_def_from_its_lines_is_the_files)
    point = collections.namedtuple("point", "x y")
    assert overdub(_Counting(), point(1, 2)._replace, y=3) == point(1, 3)
