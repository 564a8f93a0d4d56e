"""``locals()`` and text run by one-argument ``exec``/``eval`` inside a rewritten function behave
as they do natively: ``locals()`` is the frame's own dict (where ``exec`` leaves what it binds),
and the text runs through the context."""

import sys

import pytest

from overdub import Context, overdub
from overdub.contexts import CountContext


class Nothing(Context):
    """Intercepts every call, does nothing with them."""

    def prehook(self, fn, *args, **kwargs):
        pass


def held_locals(x):
    scope = locals()
    exec("z = x * 2", globals(), scope)
    return scope["z"], "z" in locals()


def exec_then_locals(x):
    exec("z = x + 1")
    return locals()["z"]


def exec_into_globals(x):
    exec("global _ns_result; _ns_result = x * 3")
    return _ns_result  # noqa: F821 (bound by the text)


def eval_of_the_frame(x):
    y = x * 5
    return eval("x + y")


def exec_defining_a_function(x):
    exec("def helper(v):\n    return v * v\nz = helper(x)")
    return locals()["z"]


FUNCTIONS = [held_locals, exec_then_locals, exec_into_globals, eval_of_the_frame,
             exec_defining_a_function]


@pytest.mark.parametrize("f", FUNCTIONS, ids=[f.__name__ for f in FUNCTIONS])
@pytest.mark.parametrize("context", [Nothing, CountContext])
def test_frame_namespaces_as_native(f, context):
    want = f(3)
    assert overdub(context(), f, 3) == want
    assert overdub(context(), f, 3) == want  # (the rewritten code again)


def test_one_argument_exec_goes_through_the_context():
    ctx = CountContext()
    assert overdub(ctx, exec_then_locals, 4) == 5
    assert ctx.counts[exec] == 1


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="PEP 667: locals() is a snapshot")
def test_locals_is_the_frames_own_dict():
    def f():
        first = locals()
        second = locals()
        return first is second
    assert f() is True
    assert overdub(CountContext(), f) is True
