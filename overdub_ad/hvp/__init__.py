"""Second derivatives, forward over reverse: ``hessian`` (``jacfwd(grad(f))``) and ``hvp``.

``hvp`` tries its routes in order: ``_compiled`` (the Hessian-vector product generated from a
straight-line NumPy function's source), ``_tape`` (forward mode over the recorded reverse
tape), then ``jvp(grad(f))``.  This package composes the two engines; neither imports it.
"""

from ._api import hessian, hvp

__all__ = ["hessian", "hvp"]
