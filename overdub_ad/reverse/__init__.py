"""Reverse mode: a tape recorded by a context, swept backwards with the ``defvjp`` rules.

``vjp(f, *primals)`` makes a fresh :class:`ReverseContext`, tags each input leaf with a tape
node and overdubs ``f``.  A C function (or one with a rule) receiving a tagged value is a
primitive: it runs on plain values (through the enclosing context, if any) and appends an entry
``(fn, primal arguments, output, argument nodes)`` to the tape; its output is tagged with a new
node.  The pullback walks the tape backwards, calling each argument's rule on the output
cotangent and summing into the argument's node (broadcast dimensions summed away).

Nesting: the backward sweep runs *under the context that encloses the call* (via a bare inner
context, which forwards everything to its parent), so ``grad(grad(f))`` differentiates the
sweep itself and ``jacfwd(grad(f))`` pushes tangents through it: Hessians are
forward-over-reverse.  With no enclosing context, scalar arithmetic on floats is recorded as
its local partial derivatives (one multiply per argument in the sweep) and the sweep
accumulates into buffers it owns, in place.

Mutation: arrays are versioned.  Writing into an array (``a[i] = v``, ``a += b``,
``np.add(a, b, out=a)``, ``np.copyto``, ``a.fill``, ``a.sort()``) records a functional update on
the tape and makes the array stand for its new node; a write into a *view* (``a[i][j] = v``,
``b = a[1:]; b += 1``) updates the array it views, and views read after a write see the new
values.  Values an entry needs that are later overwritten in place are copied first (also
the arguments a ``checkpoint`` recomputes from and what a ``custom_vjp``'s ``fwd`` kept), so
the backward pass sees the values the forward pass used; ``vjp``, whose pullback runs after
the caller got control back, copies every array the tape holds when ``f`` returns.  The array
object itself is never replaced: a preallocated cache outside the function keeps working, and
holds plain numbers.

Containers: a differentiated value stored into a list, dict or deque (a subclass's too;
``append``, ``insert``, ``extend``, ``xs[i] = v``, ``d[k] = v``, ``setdefault``, a C
constructor such as ``OrderedDict(a=x)``, a store spelled as a call of the C method,
``list.append(xs, v)``: see :mod:`overdub_ad._stores`) is stored as it is, so that native
iteration (``for v in xs``, ``sum(xs)``, ``np.stack(xs)``) keeps its derivative; when ``f``
returns, those containers get plain values back.  Iterating a differentiated array (``for
row in x``, ``list(x)``, ``zip(x, y)``, ``a, b = x``) is seen through a pass that makes
iteration a call (``iter(...)``).

Coverage: a NumPy function without a rule whose implementation is Python (``np.polyval``,
``np.cov``, ``np.linalg.pinv``...) is differentiated through NumPy's own code; the C functions
NumPy's code calls directly are the public functions' rules.  A C function without a rule, or
a Python function without source, that receives a differentiated value -- also inside a list
-- raises :class:`MissingRuleError`: a derivative is never silently dropped.

A function-valued result has a function for its gradient (Jacobian), applied lazily as forward
mode's derivative of one is: ``grad(lambda x: lambda y: x * y)(2.0)`` is ``y -> y``.

Layout: ``_tape`` (nodes, entries, cotangent helpers), ``_calls`` (classification of calls),
``_context`` (the context; its methods for recording, writes and containers live in
``_recording``, ``_mutation`` and ``_containers``), ``_plans`` (NumPy calls on arrays),
``_specialise`` and ``_regions`` (scalar code compiled to its gradient), ``_sweep`` (the
backward pass) and ``_api`` (the public functions).  Reverse mode never imports forward mode;
both import :mod:`overdub_ad._shared` and :mod:`overdub_ad._stores`.
"""

from ._api import checkpoint, grad, jacobian, jacrev, value_and_grad, vjp
from ._context import ReverseContext

__all__ = ["vjp", "grad", "value_and_grad", "jacrev", "jacobian", "checkpoint", "ReverseContext"]
