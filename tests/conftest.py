"""What every test module shares: the check that the suite tests what users install.

`python -m pytest`, run from a checkout, puts the checkout first on `sys.path`, where `import
overdub` would find the source tree rather than the package pip installed, and a file left out
of the wheel would go unnoticed.  So the checkout is taken off `sys.path` before anything imports
the packages, and the session stops at once unless all three come from site-packages.

Developers who run the tests against the source tree (an editable install, or none) say so:
`OVERDUB_TEST_SOURCE=1 python -m pytest`.  CI never sets it.

Also here, one of each for every test module: ``fd`` (the finite differences derivatives are
checked against), the ``rng`` fixture (random points), ``weird_identity`` (a value taken the
long way round through the heap), the ``child_env`` fixture (a child Python that imports the
same packages), the ``ad`` marker of the modules that use overdub_ad, and the ``default_routes``
marker.  Test modules import the helpers by their full name: ``from tests.conftest import fd``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import numpy as np
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

# The rewrites overdub keeps on disk for the next process (overdub._persist) go to a folder of
# this run's own: a test run neither reads a user's cache nor leaves one behind.
if "OVERDUB_CACHE_DIR" not in os.environ:
    os.environ["OVERDUB_CACHE_DIR"] = tempfile.mkdtemp(prefix="overdub-tests-cache-")
    atexit.register(shutil.rmtree, os.environ["OVERDUB_CACHE_DIR"], ignore_errors=True)


# Speed is measured by benchmarks/, never asserted by a test: hypothesis's per-example deadline
# (200 ms) would only make a test's outcome depend on the machine's load (CI runs the reference
# route beside the main run).
hypothesis.settings.register_profile("overdub", deadline=None)
hypothesis.settings.load_profile("overdub")


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


def holds_tagged(x: Any) -> bool:
    """Whether ``x`` is, or a dict, list, tuple or set in ``x`` holds, a ``Tagged`` wrapper:
    what must not stay in data that existed before a run once it has returned."""
    if type(x) is overdub.Tagged:
        return True
    if isinstance(x, dict):
        return any(holds_tagged(v) for v in x.values())
    if isinstance(x, (list, tuple, set)):
        return any(holds_tagged(v) for v in x)
    return False


def fd(f: Callable[[Any], Any], x: Any, h: float = 1e-6, *, order: int = 2) -> Any:
    """Central differences of ``f`` (any output shape) at ``x`` (a float or an array): the
    Jacobian, ``out.shape + x.shape``.  The finite differences the AD tests compare with.

    ``order=4`` takes the fourth-order stencil (two more calls per column), for comparisons
    tighter than the second-order stencil's error of ~``h**2``.  A derivative along a direction
    ``v`` (complex ones included) is ``fd(lambda t: f(x + t * v), 0.0)``."""
    x = np.asarray(x, dtype=float)
    if order == 2:
        def along(g: Callable[[Any], Any], e: Any) -> Any:
            return (np.asarray(g(e)) - np.asarray(g(-e))) / (2 * h)
    elif order == 4:
        def along(g: Callable[[Any], Any], e: Any) -> Any:
            return (np.asarray(g(-2 * e)) - 8 * np.asarray(g(-e)) + 8 * np.asarray(g(e))
                    - np.asarray(g(2 * e))) / (12 * h)
    else:
        raise ValueError(f"fd: order must be 2 or 4, got {order!r}")
    if x.ndim == 0:
        return along(lambda e: f(float(x) + e), h)
    cols = []
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = h
        cols.append(along(lambda step: f(x + step), e.reshape(x.shape)))
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + x.shape)


#: The seed of the ``rng`` fixture.
RNG_SEED = 20240501


@pytest.fixture
def quiet_singular_points() -> Iterator[None]:
    """NumPy's warnings at singular points (a divide by zero in ``1 / 0``, ``np.log(0.0)``),
    which the tests of singular points mean to reach."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def same(got: Any, want: Any, what: str = "", *, scalar_for_any_shape: bool = False) -> None:
    """``got`` is ``want`` exactly: ``nan`` matches ``nan``, infinities match by sign (a pytree
    of numbers or arrays).  ``scalar_for_any_shape``: a number stands for an array of its value
    (an API that answers one number for a constant array)."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want), (what, got, want)
        for g, w in zip(got, want):
            same(g, w, what, scalar_for_any_shape=scalar_for_any_shape)
        return
    g = np.asarray(got, dtype=float)
    assert g.shape == np.shape(want) or (scalar_for_any_shape and g.shape == ()), \
        (what, got, want)
    assert np.array_equal(g, np.asarray(want, dtype=float), equal_nan=True), (what, got, want)


@pytest.fixture
def rng() -> np.random.Generator:
    """A NumPy generator of the test's own, seeded with ``RNG_SEED``: what a test draws from it
    is the same on every run and in any selection of tests (a generator kept at module level
    hands each test what the tests before it left, so ``-k`` changes the points)."""
    return np.random.default_rng(RNG_SEED)


class _Bar:
    def __init__(self, x: Any, y: Any, z: Any) -> None:
        self.x, self.y, self.z = x, y, z


class _Foo:
    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


def weird_identity(x: Any) -> Any:
    """Cassette.jl's "weird identity" (``foo_bar_identity`` in its tagging tests): ``x`` taken
    the long way round through the heap -- fields of objects aliased, overwritten and copied
    into fresh objects, elements of a float64 array (an int comes out a float) written and read
    by index and through ``list``, a list appended to -- ending where it started.  What a
    context attached to ``x`` (a tag's metadata, a tangent, a tape node) must come out with."""
    bar = _Bar(x, x + 1, x + 2)
    foo = _Foo(bar, "ha")
    foo.b = bar                                # a second reference to the same object
    foo.a = _Bar(4, 5, 6)                      # the first one replaced by constants
    foo.b.y = foo.b.x                          # a field overwritten with x ...
    foo.b.x = foo.b.z                          # ... and x's own field with x + 2
    foo2 = _Foo(_Bar(foo.b.z, foo.b.x, foo.b.y), foo.a)  # copied into fresh objects
    foo2.a.x = foo2.a.z                        # x again
    store = np.zeros(3)                        # float64
    store[1] = foo2.a.x
    items = list(store)                        # read back through a list of its elements,
    store[2] = items[1]                        # written back, and read by index
    box = [store[0]]
    box.append(store[2])
    return [box[1]][0]


def _differentiates(module: object) -> bool:
    """Whether a test module is about overdub_ad: one in tests/ad, or one elsewhere that uses
    it (a name it imported from there)."""
    path = getattr(module, "__file__", None)
    if path is not None and Path(path).resolve().parent == ROOT / "tests" / "ad":
        return True
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
