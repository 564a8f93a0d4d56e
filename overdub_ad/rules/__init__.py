"""The derivative-rule tables, one module per family; importing this package registers them all.

- ``_scalar``: ``math``, ``cmath``, ``operator`` and builtins (``abs``, ``pow``, ``min``, ``max``,
  ``sum``, ``float``, ``complex``...);
- ``_ufuncs``: NumPy's elementwise functions (ufuncs, ``where``, ``clip``, ``real``...);
- ``_reductions``: ``sum``, ``mean``, ``prod``, ``max``, ``std``, ``cumsum``, ``trace``...;
- ``_shape``: reshaping, joining, splitting, padding and array building;
- ``_indexing``: ``x[idx]``, ``take``, ``choose``, ``sort``...;
- ``_linalg``: ``matmul``, ``einsum``, products and ``np.linalg``;
- ``_fft``: ``np.fft``;
- ``_special``: ``scipy.special``, when SciPy is installed.

Each module states its conventions in its docstring; the shared ones (batch dimensions of
tangents, container arguments, several outputs) are in ``_common``.  The engine reads the tables
through ``overdub_ad._rules`` and never imports a family module itself.
"""

from . import _fft, _indexing, _linalg, _reductions, _scalar, _shape, _special, _ufuncs  # noqa
from .._rules import mark_shipped

mark_shipped()

__all__: list[str] = []
