"""Pytrees: nested tuples, lists and dicts of leaves (floats, complex numbers, arrays).

``flatten(tree) -> (leaves, treedef)`` and ``unflatten(treedef, leaves)`` as in JAX; dict keys
are kept in insertion order.  Anything that is not a tuple, list or dict is a leaf (``None``
included, so ``argnums``-style code can pass it through).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class TreeDef:
    """The shape of a pytree: ``kind`` ('leaf', tuple, list or dict), keys, children."""

    __slots__ = ("kind", "keys", "children")

    def __init__(self, kind: Any, keys: tuple[Any, ...] = (),
                 children: tuple[TreeDef, ...] = ()) -> None:
        self.kind = kind
        self.keys = keys
        self.children = children

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, TreeDef) and self.kind is other.kind and self.keys == other.keys
                and self.children == other.children)

    def __hash__(self) -> int:
        return hash((id(self.kind), self.keys, self.children))

    def __repr__(self) -> str:
        if self.kind == "leaf":
            return "*"
        return f"{getattr(self.kind, '__name__', self.kind)}{self.children!r}"


_LEAF = TreeDef("leaf")


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []
    return leaves, _walk(tree, leaves)


_CONTAINERS = frozenset({tuple, list, dict})


# Module-level recursion, not nested closures: a recursive closure is a reference cycle that
# would keep the leaves (a gradient's arrays) alive until the next garbage collection.  Leaves
# are handled by their container (every gradient call flattens its arguments: no call apiece).
def _walk(node: Any, leaves: list[Any]) -> TreeDef:
    kind = type(node)
    if kind is dict:
        keys = tuple(node)
        items: Any = [node[k] for k in keys]
    elif kind is tuple or kind is list:
        keys, items = (), node
    else:
        leaves.append(node)
        return _LEAF
    children = []
    for item in items:
        if type(item) in _CONTAINERS:
            children.append(_walk(item, leaves))
        else:
            leaves.append(item)
            children.append(_LEAF)
    return TreeDef(kind, keys, tuple(children))


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    return _build(treedef, iter(leaves))


def _build(node: TreeDef, items: Any) -> Any:
    kind = node.kind
    if kind is tuple or kind is list:  # a loop: cheaper than a comprehension's frame
        children = []
        for child in node.children:
            children.append(next(items) if child is _LEAF else _build(child, items))
        return children if kind is list else tuple(children)
    if kind is dict:
        return {key: next(items) if child is _LEAF else _build(child, items)
                for key, child in zip(node.keys, node.children)}
    return next(items)  # a leaf


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    leaves, treedef = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])
