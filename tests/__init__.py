"""The test suite, a package so that test modules of the same name may live in different
directories and import shared helpers by their full name (``from tests.conftest import fd``).

- ``tests/core``: the overdub core (rewriting, dispatch, tagging, contexts, the CLI, tracebacks,
  the transparency corpora);
- ``tests/ad``: overdub_ad (and ``tests/ad/fuzz.py``, the program fuzzer,
  ``python -m tests.ad.fuzz``);
- ``tests/gpu``: overdub_gpu and the array backends;
- ``tests/meta``: the project rather than a package (packaging, layering, docs, examples,
  benchmarks).
"""
