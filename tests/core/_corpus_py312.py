"""Corpus helpers using 3.12+ syntax (PEP 695 type parameters; imported only on 3.12+)."""

import collections
import typing


class Base[T]:
    pass


def first[T](xs: list[T]) -> T:
    return [x for x in xs][0]


type Row = tuple[int, str]


def generics(xs, d):
    """Generic classes, methods and functions defined and called inside the context: a generic
    class's bases are evaluated where its type parameters are in scope (no ``:=`` allowed)."""

    class Pair[T](Base[T], dict[str, T]):
        def swap[U](self, u: U = d["k"]) -> tuple[U, T]:
            return (u, xs[0])

    def bump[V](v: V = d["k"] + 1) -> V:
        return v

    return (Pair().swap(), bump(), first(xs), str(Pair.__type_params__),
            str(Pair.__orig_bases__), str(bump.__type_params__), str(first.__type_params__))


def type_aliases(xs):
    """``type`` statements (values evaluated when asked for), and type variables and classes
    created inside the context, which name the module of the function creating them."""
    type Local[K] = dict[K, type(xs[0])]
    made = typing.TypeVar("T"), typing.ParamSpec("P"), typing.TypeVarTuple("Ts")
    return (str(Row.__value__), str(Local.__value__), str(Local.__type_params__),
            Local.__module__, [m.__module__ for m in made],
            typing.TypeAliasType("Made", int).__module__,
            collections.namedtuple("NT", "a").__module__)
