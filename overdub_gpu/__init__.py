"""overdub_gpu: run NumPy code on another array namespace (CuPy on a GPU, Dask, any array-API
library), and broadcast scalar kernels over whole arrays.

A plug-in written on overdub's public API only.  See ``docs/gpu.md``.

- :class:`ArrayBackendContext` (``xp``) and :class:`GPUContext` (CuPy): NumPy and ``math``
  calls swapped for their counterparts in ``xp`` (the swap table is in ``_table.py``).
- :func:`to_device`, :func:`to_host`: the explicit transfers.
- :func:`broadcast` and the :class:`BranchesToWhere` pass: scalar kernels with ``if``/``else``
  run as whole-array ``where`` code.
- :class:`Float32Literals`: the pass that keeps float32 computations in float32.
"""

from ._context import (ArrayBackendContext, EnclosingTagError, GPUContext, GPUUnavailableError,
                       HostArrayError, ViewWriteError, to_device, to_host)
from ._float32 import Float32Literals
from ._table import MissingCounterpartError, UnsupportedArgumentError
from ._broadcast import BranchesToWhere, VectorizeError, broadcast

__all__ = ["ArrayBackendContext", "GPUContext", "to_device", "to_host", "broadcast",
           "BranchesToWhere", "Float32Literals", "MissingCounterpartError",
           "UnsupportedArgumentError", "HostArrayError", "GPUUnavailableError",
           "VectorizeError", "EnclosingTagError", "ViewWriteError"]
