"""Forward mode: tangents ride on values as tag metadata of a per-call context.

``jvp(f, primals, tangents)`` makes a fresh :class:`ForwardContext`, tags each input with its
tangent and overdubs ``f``.  Inside, a C function (or a function with a registered rule) that
receives a tagged value is a primitive of the context: it runs on the plain values and the rule
table gives the output tangent.  Python functions without a rule are recursed into, so user code
needs no change.  Everything the context executes -- the primal call and the rules -- runs
through the enclosing context, if any, which is how nesting differentiates derivatives: a fresh
context (and tag) per call means no perturbation confusion.

This is the general mode.  Before it, ``jvp`` tries the specialised one
(:mod:`overdub_ad.forward._dual`):
scalar code rewritten into its dual, arithmetic expanded in place; it gives the same results
and hands back to the general mode, before any effect, whatever it does not handle.

What the engine does beyond "call the rule" (each one a convention of ``rules/_common.py``):

- a list or tuple argument whose elements carry tangents (``np.concatenate([a, b])``,
  ``math.fsum([x, y])``) gets a tangent of the same structure, ``None`` for plain elements,
  except a list of numbers given to NumPy (``np.sum([x, y])``), which is an array to NumPy
  and to its rule (see ``_arraylike``);
- a rule that must know which arguments carry a derivative (:class:`_rules.Carried`: the ties
  of ``max``) is told;
- a function with several outputs gets a tuple (list) of tangents, ``None`` meaning zero;
- a differentiated value passed by keyword is bound to its position (rules are positional);
- an in-place operation (``a += t``, ``np.add(x, y, out=a)``) gives its rules a copy of the
  mutated argument as it was before the call;
- methods of arrays and numbers are their classes' method descriptors (``x.reshape(2, 3)`` is
  ``np.ndarray.reshape(x, 2, 3)``), which is what the tables register.

Arrays are mutable, so a tangent cannot ride on an array the way it rides on a float: an array
that receives differentiated values in place (``cache[:] = 2 * y``, ``a += t``, ``out=a``,
``grid[i][j] = t``) keeps plain numbers and the tangent of its memory lives in the context
(:class:`_ArrayTangents`), found again through any array viewing that memory.

Lists, tuples, dicts and objects hold plain values: the core keeps the tangents of what is
stored into them aside (two levels down: ``rows.append([x, y])``, ``m.p = {"w": w}``) and
attaches them again when the value is read back through the context.  Where such a container
is read natively instead -- by a C function (``np.array(rows)``: each inner list's members) or
by a derivative's entry point, which takes its pytree arguments apart natively
(``grad(loss)(self.params)``) -- its members are read through the core first (revealed).

Iteration is native in Python; the core makes it a call, ``iter(x)``, under a context that tags
values (this one): iterating a differentiated array yields differentiated rows, and a list whose
members the core keeps metadata of (built by ``append``) yields tagged members.  C functions
that only move values (``list``, ``zip``, ``sorted``, ``dict``...) get the same treatment.

Nothing is silently dropped: a C function without a rule that receives a differentiated value
(directly, in a list, or from an iterator it consumes) raises :class:`MissingRuleError`, unless
what it returns carries no derivative at all (integers, booleans, strings: ``math.floor``,
comparisons, ``len``...); so does a Python function without source, which would run natively.

A function-valued result is differentiated lazily (Manzyuk et al., JFP 2019): the derivative of
``x -> g_x`` at ``x0`` is the function ``y -> d/dx g_x(y)`` at ``x0``, each call a fresh
derivative, so ``derivative(shift)(3.0)`` composes correctly with itself.

Layout: ``_context`` (the context), ``_tangents`` (tangents of arrays written in place), the
dual route -- ``_pass``, ``_pass_expressions`` and ``_pass_common`` (a function's AST becomes its
dual's), ``_dual``, ``_dual_numbers`` and ``_dual_helpers`` (running it) -- and ``_api`` (the
public functions).  Forward mode never imports reverse mode; both import
:mod:`overdub_ad._shared`.
"""

from ._api import D, derivative, jacfwd, jvp
from ._context import ForwardContext

__all__ = ["jvp", "derivative", "D", "jacfwd", "ForwardContext"]
