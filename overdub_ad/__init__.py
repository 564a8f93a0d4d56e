"""overdub_ad: forward- and reverse-mode automatic differentiation as overdub contexts.

Differentiate ordinary Python and NumPy code -- loops, branches, recursion, closures, in-place
writes -- without changing a line of it.  Rules live in tables (``defjvp``/``defvjp``).
"""

from . import rules as _rules_tables  # noqa: F401  (registers the rule tables)
from . import testing  # noqa: F401  (overdub_ad.testing: isolated_rules, force_route)
from ._check_grads import GradCheckError, check_grads
from ._custom import custom_jvp, custom_vjp
from ._pytree import register_pytree
from .forward import D, ForwardContext, derivative, jacfwd, jvp
from .hvp import hessian, hvp
from .reverse import ReverseContext, checkpoint, grad, jacobian, jacrev, value_and_grad, vjp
from ._routes import Explanation, explain
from ._rules import LINEAR, ZERO, MissingRuleError, defjvp, defvjp, nondifferentiable

__all__ = ["jvp", "derivative", "D", "jacfwd", "ForwardContext", "defjvp", "defvjp",
           "nondifferentiable", "ZERO", "LINEAR", "MissingRuleError",
           "vjp", "grad", "value_and_grad", "jacrev", "jacobian", "hessian", "hvp",
           "custom_vjp", "checkpoint", "ReverseContext", "custom_jvp", "check_grads",
           "GradCheckError", "register_pytree", "explain", "Explanation"]
