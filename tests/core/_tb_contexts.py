"""Contexts for test_tracebacks, kept out of that file so their frames are not user frames."""

import operator

from overdub import Context


class Observe(Context):
    """Prehook only: the cheapest intercept-everything mode (operators inline)."""

    def prehook(self, fn, /, *args, **kwargs):
        pass


class Hooks(Context):
    """Pre- and posthook: operators go through the full dispatchers."""

    def prehook(self, fn, /, *args, **kwargs):
        pass

    def posthook(self, out, fn, /, *args, **kwargs):
        pass


class Stepping(Context):
    """Overrides the whole step."""

    def overdub(self, fn, /, *args, **kwargs):
        return super().overdub(fn, *args, **kwargs)


class PrimitiveOnly(Context):
    """Intercepts only what its primitive needs (calls and `*`)."""


@PrimitiveOnly.primitive(operator.mul)
def _mul(ctx, a, b):
    return a * b
