"""Found from outside and in review, session 15.

1. A dict item stored during the derivative under a plain key, then read by the differentiated
   key (``d[1.0] = 5.0; d[x]``), raised MissingRuleError saying the item was "stored before
   this derivative began".  It has no derivative with respect to the key either way; the
   message now names both cases.
"""

from __future__ import annotations

import pytest

from overdub_ad import MissingRuleError, grad, jvp
from overdub_ad.testing import REFERENCE, force_route

# (each test runs on both routes itself: nothing for CI's reference-route pass to add)
pytestmark = pytest.mark.every_route

ROUTES = pytest.mark.parametrize("route", [None, REFERENCE], ids=["default", "reference"])


@ROUTES
def test_item_stored_under_a_plain_key_during_the_derivative_is_named_so(route):
    def f(x):
        table = {}
        table[1.0] = 5.0
        return table[x] * x

    assert f(1.0) == 5.0
    with force_route(route):
        for run in (lambda: grad(f)(1.0), lambda: jvp(f, (1.0,), (1.0,))):
            with pytest.raises(MissingRuleError, match="under a key that was not differentiated"):
                run()
