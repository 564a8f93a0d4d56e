"""The derivative-rule tables, one module per family; importing this package registers them all.

- ``_scalar``: ``math``, ``cmath``, ``operator`` and builtins (``abs``, ``pow``, ``min``, ``max``,
  ``sum``, ``float``, ``complex``...);
- ``_ufuncs``: NumPy's elementwise functions (ufuncs, ``where``, ``clip``, ``real``...);
- ``_ufunc_methods``: stand-ins for ``np.add.outer``, ``np.maximum.reduce``, ``.accumulate``;
- ``_reductions``: ``sum``, ``mean``, ``prod``, ``max``, ``std``, ``cumsum``, ``trace``...;
- ``_shape``: reshaping, joining, splitting, padding and array building;
- ``_indexing``: ``x[idx]``, ``take``, ``choose``, ``sort``...;
- ``_products``: ``matmul``, ``einsum``, ``dot``, ``kron``, ``outer``, ``cross`` and the other
  products;
- ``_linalg``: ``np.linalg`` (``solve``, ``inv``, ``det``, decompositions, norms), and the
  matrix helpers ``_products`` and ``_scipy_linalg`` share;
- ``_fft``: ``np.fft``;
- ``_statistics``: the ``statistics`` module's means and spreads (which sum as fractions);
- ``_random``: NumPy's random samplers (``normal``, ``uniform``...), by reparametrisation;
- ``_strided``: ``sliding_window_view`` (a stand-in: indexing) and ``as_strided`` (refused);
- ``_threads``: starting a thread under a derivative (refused: it runs outside the context);
- ``_special``: ``scipy.special``, when SciPy is installed (its partials in shape parameters
  and orders computed by ``_special_params``);
- ``_scipy_linalg``: ``scipy.linalg`` (solves, factorizations, ``expm``/``logm``/``sqrtm``...);
- ``_scipy_stats``: ``scipy.stats``' distribution methods (stand-ins: the formulas restated);
- ``_scipy_signal``: ``scipy.signal``'s convolutions and correlations of any dimension;
- ``_scipy_solvers``: SciPy's ``quad``, ``odeint``, ``solve_ivp``, root finders and ``minimize``
  (stand-ins whose primitives differentiate the callback at the solution; ``_ode_adjoint``, the
  adjoint system reverse mode solves backwards for ``odeint``/``solve_ivp``);
- ``_evaluation``: stand-ins for ``eval`` and ``exec`` of source text, run as functions;
- ``_quantiles``: stand-ins for ``np.quantile`` and ``np.percentile`` (sorted, then NumPy's
  interpolation);
- ``_vectorize``: stand-ins for ``np.vectorize``, ``np.apply_along_axis``, ``np.apply_over_axes``
  and ``np.piecewise``, whose calls of the user's function the context then sees.

Each module states its conventions in its docstring; the shared ones (batch dimensions of
tangents, container arguments, several outputs) are in ``_common``.  The engine reads the tables
through ``overdub_ad._rules`` and never imports a family module itself.
"""

from . import (_evaluation, _fft, _indexing, _linalg, _products, _quantiles, _random,  # noqa
               _reductions, _scalar, _scipy_linalg, _scipy_signal, _scipy_solvers,
               _scipy_stats, _shape, _special, _statistics, _strided, _threads,
               _ufunc_methods, _ufuncs, _vectorize)
from .._rules import mark_shipped

mark_shipped()

__all__: list[str] = []
