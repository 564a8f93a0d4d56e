"""Generators, coroutines and asynchronous generators that ``overdub`` returns, consumed after
it returned: each resumption is a run of the context.

``overdub(ctx, gen)`` returns the generator ``gen()`` made; its body, rewritten, calls the
context's hooks whenever it runs, but the code it resumes would otherwise see no current
context, and a run nested in it would not be the context's.  So ``overdub`` hands back a
wrapper of the same kind whose every step enters the context as ``overdub`` does
(:meth:`_dispatch.State.enter`).  A generator made and consumed inside the run is not wrapped.
"""

from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable
from typing import Any

from . import _dispatch
from ._frames import hide_machinery


def _resume(state: _dispatch.State, step: Any, value: Any) -> Any:
    """``step(value)`` -- a generator's or coroutine's ``send``, ``throw`` or ``close`` -- as a
    run of ``state``'s context, entered as ``overdub`` enters it: the code it resumes sees
    the context as the current one, and nested runs in it are the context's."""
    entered = state.enter()
    try:
        return step(value)
    finally:
        state.leave(entered)


def _generator_in(state: _dispatch.State, gen: Any) -> Any:
    """``gen``, returned by ``overdub``, consumed later: each resumption is a run of the
    context (``yield from`` would resume it in whatever runs, or none).  What the body yields,
    returns and raises passes through unchanged, as through ``yield from``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = _resume(state, gen.send if error is None else gen.throw,
                           value if error is None else error)
        except StopIteration as stop:
            return stop.value
        except BaseException as exc:
            hide_machinery(exc)  # (the frames the traceback names: the user's)
            raise
        error = None
        try:
            value = yield item
        except GeneratorExit:
            try:
                _resume(state, _close, gen)
            except BaseException as exc:
                hide_machinery(exc)
                raise
            raise
        except BaseException as exc:  # thrown in: thrown into the body, as yield from does
            error = exc


def _close(gen: Any) -> None:
    gen.close()


class _Steps:
    """What a coroutine returned by ``overdub`` awaits: the coroutine, each of its steps a
    run of the context (see :func:`_generator_in`)."""

    __slots__ = ("state", "coroutine")

    def __init__(self, state: _dispatch.State, coroutine: Any) -> None:
        self.state, self.coroutine = state, coroutine

    def __await__(self) -> Any:
        return _generator_in(self.state, self.coroutine)


async def _coroutine_in(state: _dispatch.State, coroutine: Any) -> Any:
    """``coroutine``, returned by ``overdub``, awaited later (``asyncio.run``): still a
    coroutine, whose steps are runs of the context."""
    try:
        return await _Steps(state, coroutine)
    except BaseException as exc:
        hide_machinery(exc)
        raise


def _coroutine_for(state: _dispatch.State, coroutine: Any) -> Any:
    """:func:`_coroutine_in` for ``coroutine``, which is closed, if never started, when the
    wrapper goes: a wrapper closed (or dropped) before it was awaited never starts the user's
    coroutine, which would then warn that it "was never awaited" where ``co().close()`` is
    silent."""
    wrapper = _coroutine_in(state, coroutine)
    weakref.finalize(wrapper, _close_unstarted, coroutine).atexit = False
    return wrapper


def _close_unstarted(coroutine: Any) -> None:
    if inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:  # (closing it runs none
        coroutine.close()  # of its code)


async def _async_generator_in(state: _dispatch.State, agen: Any) -> Any:
    """``agen``, returned by ``overdub``, iterated later (``async for``): each step of each
    ``asend``, ``athrow`` and ``aclose`` a run of the context."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            item = await _Steps(state, agen.asend(value) if error is None else
                                agen.athrow(error))
        except StopAsyncIteration:
            return
        except BaseException as exc:
            hide_machinery(exc)
            raise
        error = None
        try:
            value = yield item
        except GeneratorExit:
            try:
                await _Steps(state, agen.aclose())
            except BaseException as exc:
                hide_machinery(exc)
                raise
            raise
        except BaseException as exc:
            error = exc


def suspended(state: _dispatch.State, out: Any) -> Any:
    """What overdub() returns for the generator, coroutine or asynchronous generator ``out``
    its function returned: the same kind of object, named as ``out`` is, whose resumptions
    are runs of the context."""
    wrapper = SUSPENDED[type(out)](state, out)
    wrapper.__name__, wrapper.__qualname__ = out.__name__, out.__qualname__
    return wrapper


# (a function that makes none pays one dict lookup)
SUSPENDED: dict[type, Callable[[_dispatch.State, Any], Any]] = {
    types.GeneratorType: _generator_in, types.CoroutineType: _coroutine_for,
    types.AsyncGeneratorType: _async_generator_in}
