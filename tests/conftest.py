"""What every test module shares: the check that the suite tests what users install.

`python -m pytest`, run from a checkout, puts the checkout first on `sys.path`, where `import
overdub` would find the source tree rather than the package pip installed, and a file left out
of the wheel would go unnoticed.  So the checkout is taken off `sys.path` before anything imports
the packages, and the session stops at once unless all three come from site-packages.

Developers who run the tests against the source tree (an editable install, or none) say so:
`OVERDUB_TEST_SOURCE=1 python -m pytest`.  CI never sets it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("overdub", "overdub_ad", "overdub_gpu")
SOURCE_MODE = os.environ.get("OVERDUB_TEST_SOURCE") == "1"

if not SOURCE_MODE:
    sys.path[:] = [entry for entry in sys.path if Path(entry or os.curdir).resolve() != ROOT]

import overdub  # noqa: E402
import overdub_ad  # noqa: E402
import overdub_gpu  # noqa: E402


def installed_location(module_file: str) -> Path | None:
    """The site-packages directory a module was imported from, or None if it is elsewhere."""
    site = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    for parent in Path(module_file).resolve().parents:
        if parent in site:
            return parent
    return None


def _check_installed() -> None:
    for module in (overdub, overdub_ad, overdub_gpu):
        assert module.__file__ is not None
        if installed_location(module.__file__) is None:
            pytest.exit(
                f"tests/conftest.py: {module.__name__} was imported from {module.__file__}, "
                "not from site-packages: the suite tests the installed package.  Install it "
                "with `python -m pip install \".[test]\"` (not editable), or set "
                "OVERDUB_TEST_SOURCE=1 to test the source tree on purpose.", returncode=4)


if not SOURCE_MODE:
    _check_installed()


@pytest.fixture
def child_env() -> dict[str, str]:
    """The environment for a child Python that must import the same overdub as this run: the
    installed package as it is, or (OVERDUB_TEST_SOURCE=1) the source tree, put on PYTHONPATH.
    A child run in the checkout's root with `-m` would still find the sources: give it another
    working directory."""
    env = dict(os.environ)
    if SOURCE_MODE:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def fd(f, x, h=1e-6):
    """Central differences of ``f`` (any output shape) at ``x`` (a float or an array): the
    Jacobian, ``out.shape + x.shape``.  The finite differences the AD tests compare with."""
    import numpy as np
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return (np.asarray(f(float(x) + h)) - np.asarray(f(float(x) - h))) / (2 * h)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = h
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * h))
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + x.shape)


def _differentiates(module: object) -> bool:
    """Whether a test module uses overdub_ad (a name it imported from there)."""
    for value in vars(module).values():
        name = value.__name__ if isinstance(value, type(sys)) else \
            getattr(value, "__module__", None)
        if isinstance(name, str) and name.split(".")[0] == "overdub_ad":
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests of modules that use overdub_ad with `ad`: CI runs them a second time with
    every derivative on the reference route (OVERDUB_AD_ROUTE=reference python -m pytest -m ad)."""
    marked: dict[object, bool] = {}
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            if module not in marked:
                marked[module] = _differentiates(module)
            if marked[module]:
                item.add_marker(pytest.mark.ad)


@pytest.fixture(autouse=True)
def _routes_the_test_names(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test marked `default_routes` is about a fast route itself (that it runs, what it
    declines): it runs with the default choice of routes even in the reference run."""
    if request.node.get_closest_marker("default_routes") is None:
        yield
        return
    from overdub_ad.testing import force_route
    with force_route(None):
        yield
