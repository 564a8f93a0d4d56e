"""Helpers for the transparency corpus that must not live in a test module.

pytest rewrites ``assert`` statements in test modules, so a function there that uses ``assert``
no longer compiles from its own source; overdub detects that and (correctly) runs it natively.
Functions whose feature *is* ``assert`` live here instead.
"""


def ternary_and_assert():
    x = 3
    kind = "big" if x > 2 else "small"
    assert x == 3, "unreachable"
    try:
        assert x == 4, f"x was {x}"
    except AssertionError as exc:
        return kind, str(exc)

