"""Threads started under a derivative: refused.

A new thread runs its function natively, outside the context that differentiates (contexts
are per thread): its arithmetic on differentiated values would either fail (``TagError``, in
the thread, where the caller may never see it) or, for values the context keeps beside
objects (``executor.submit(f, x)`` stores ``x`` in a work item), use them as plain numbers and
give a silent zero derivative.  So starting a thread under ``grad``/``derivative`` raises
``MissingRuleError``, and so does handing work to a thread pool (``executor.submit``, which
``executor.map`` calls), whose threads may have been started before: run the work in the
calling thread (``map`` instead of ``executor.map``), or differentiate inside each thread.
"""

from __future__ import annotations

import _thread
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._rules import MissingRuleError, defstandin


def _refused(*args: Any, **kwargs: Any) -> Any:
    raise MissingRuleError(
        "a thread started under a derivative (threading.Thread.start), or work handed to a "
        "thread pool (ThreadPoolExecutor.submit, .map), runs outside the context that "
        "differentiates: its results would carry no derivative; run the work in the calling "
        "thread (map instead of executor.map), or differentiate inside each thread")


for _name in ("start_new_thread", "start_joinable_thread"):
    if hasattr(_thread, _name):
        defstandin(getattr(_thread, _name), _refused)
defstandin(ThreadPoolExecutor.submit, _refused)
