"""Frame-sensitive builtins (``exec``, ``eval``, ``locals``, ``vars``, ``dir``, ``globals``,
``sys._getframe``) under contexts, when their names are rebound and when they are called by other
names: as native.  (Found from outside: a user's function called ``exec`` got the frame's
namespaces as extra arguments, a user's ``dir()`` had its result filtered as a namespace;
``L = locals; L()`` and ``from sys import _getframe as gf; gf()`` read a dispatcher's frame.)
This module rebinds ``exec`` and ``dir`` for its own functions, so they live apart."""

import sys

import pytest

from overdub import Context, overdub
from overdub.contexts import CountContext


class Nothing(Context):
    """Intercepts every call, does nothing with them."""

    def prehook(self, fn, *args, **kwargs):
        pass


def exec(text, *rest):  # noqa: A001  (a module function named as the builtin, on purpose)
    return f"mine:{len(rest)}"


def dir(*args):  # noqa: A001
    return "my dir"


def calls_its_own_exec():
    return exec("abc")


def calls_a_parameter_named_eval(eval):  # noqa: A002
    return eval("1+1")


def calls_its_own_dir():
    return dir()


def calls_a_local_named_eval():
    eval = len  # noqa: A001
    return eval("abc")


import builtins  # noqa: E402

_LOCALS, _VARS, _GLOBALS, _DIR = locals, vars, globals, builtins.dir
_GETFRAME = sys._getframe


def locals_by_another_name():
    x = 1
    return sorted(_LOCALS()), sorted(_VARS()), _DIR()


def globals_by_another_name():
    return _GLOBALS() is globals()


def getframe_by_another_name():
    return _GETFRAME().f_code.co_name, _caller_by_another_name()


def _caller_by_another_name():
    return _GETFRAME(1).f_code.co_name


@pytest.mark.parametrize("context", [Context, Nothing, CountContext])
@pytest.mark.parametrize("f, args", [
    (calls_its_own_exec, ()), (calls_a_parameter_named_eval, (lambda s: "p:" + s,)),
    (calls_its_own_dir, ()), (calls_a_local_named_eval, ()), (locals_by_another_name, ()),
    (globals_by_another_name, ()), (getframe_by_another_name, ())],
    ids=lambda v: getattr(v, "__name__", "args"))
def test_frame_sensitive_names_as_native(f, args, context):
    assert overdub(context(), f, *args) == f(*args)
