"""Helper module for the transparency corpus: a module compiled with postponed annotations.

Under ``from __future__ import annotations`` annotations are stored as strings; a rewritten
function must be compiled with the same future flags, or its annotations would be evaluated
(``Undefined`` below does not exist, so evaluating it raises ``NameError``).
"""

from __future__ import annotations

import dataclasses


def scale(x: Undefined, factor: float = 2.0) -> Undefined:  # noqa: F821
    return x * factor


def annotations_of() -> dict:
    def inner(a: Undefined, b: list[int]) -> tuple[Undefined, ...]:  # noqa: F821
        return (a, b)

    return dict(inner.__annotations__)


def local_annotation() -> int:
    value: Undefined = 3  # noqa: F821
    return value + 1


@dataclasses.dataclass
class Pair:
    left: Undefined  # noqa: F821
    right: int = 0

    def total(self) -> Undefined:  # noqa: F821
        return self.left + self.right


def make_pair() -> tuple:
    p = Pair(1, 2)
    return (p.total(), sorted(Pair.__annotations__.items()))
