"""Which contexts are running, per thread and asyncio task (only for nesting and tags).

Rewritten code finds its own context through a closure cell; this variable is consulted only
when a context is entered (to find the enclosing one) and when a tagged value is used natively
(to check that its context is running).
"""

from __future__ import annotations

import contextvars
from typing import Any

# The innermost State being run; each State links to the one it was entered in (``enclosing``).
active: contextvars.ContextVar[Any] = contextvars.ContextVar("overdub_active", default=None)


def running(ctx: Any) -> bool:
    state = active.get()
    while state is not None:
        if state.ctx is ctx:
            return True
        state = state.enclosing
    return False


def current_context() -> Any:
    """The innermost context whose run the caller is part of, or None outside any run.

    For plug-ins that choose a faster path when nothing is watching: code that runs inside a
    context's run (called from rewritten code, or natively from a leaf) must let that context
    see what it computes.  Per thread and asyncio task.

    Example::

        def f():
            return current_context()

        ctx = CountContext()
        overdub(ctx, f) is ctx      # True
        current_context() is None   # True, outside any run
    """
    state = active.get()
    return None if state is None else state.ctx


def enable_tags(ctx: Any) -> None:
    """Called by ``tag``: from now on ``ctx`` handles tagged values (see ``_dispatch``)."""
    ctx.__dict__["_overdub_tags"] = True
    state = ctx.__dict__.get("_overdub_state")
    if state is not None and not state.tags:
        state.enable_tags()
