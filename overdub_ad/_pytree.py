"""Pytrees: nested tuples, lists, dicts, named tuples, dataclass instances and registered
classes, with leaves (floats, complex numbers, arrays) at the ends.

``flatten(tree) -> (leaves, treedef)`` and ``unflatten(treedef, leaves)`` as in JAX; dict keys
are kept in insertion order, a named tuple's and a dataclass's fields in their declared order.
Anything else is a leaf (``None`` included, so ``argnums``-style code can pass it through).
A class becomes a node with :func:`register_pytree`; named tuples and dataclasses are nodes
without it (rebuilt with ``_make``, and field by field without running ``__init__``).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from overdub import Tagged


class TreeDef:
    """The shape of a pytree: ``kind`` ('leaf', tuple, list, dict, or the class of a named
    tuple, dataclass or registered node), ``keys`` (a dict's keys, a node's aux data),
    children."""

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
        """``*`` for a leaf, ``tuple(*, *)``, ``{'a': *, 'b': *}`` for a dict (its keys shown:
        two dicts of one size differ only by them, and an error saying which structure it
        wanted must show them)."""
        if self.kind == "leaf":
            return "*"
        if self.kind is dict:
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.keys, self.children)) \
                + "}"
        return f"{getattr(self.kind, '__name__', self.kind)}{self.children!r}"


_LEAF = TreeDef("leaf")


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    leaves: list[Any] = []
    return leaves, _walk(tree, leaves)


_CONTAINERS = frozenset({tuple, list, dict})
_Flatten = Callable[[Any], tuple[Iterable[Any], Any]]  # obj -> (children, aux data)
_Unflatten = Callable[[Any, list[Any]], Any]  # (aux data, children) -> obj
_REGISTERED: dict[type, tuple[_Flatten, _Unflatten]] = {}


def register_pytree(cls: type, flatten: _Flatten, unflatten: _Unflatten) -> None:
    """Make instances of ``cls`` pytree nodes: differentiable with respect to, returned from
    differentiated functions, with gradients of the same type.

    ``flatten(obj)`` returns ``(children, aux)``: the values to differentiate, in order, and
    anything else needed to rebuild the object (hashable, compared between trees);
    ``unflatten(aux, children)`` builds an object from them (given gradients or perturbed
    values as children).  Named tuples, dataclasses, ``OrderedDict`` and ``defaultdict`` are
    pytrees without registering; a registration overrides that.  As
    ``jax.tree_util.register_pytree_node``::

        class Interval:
            def __init__(self, lo, hi):
                self.lo, self.hi = lo, hi

        register_pytree(Interval, lambda i: ((i.lo, i.hi), None),
                        lambda aux, children: Interval(*children))
        grad(lambda i: i.hi - 2 * i.lo)(Interval(1.0, 3.0))   # Interval(-2.0, 1.0)

    See also: ``docs/ad.md`` (pytrees).
    """
    if not isinstance(cls, type):
        raise TypeError(f"register_pytree: {cls!r} is not a class")
    if cls in _CONTAINERS:
        raise ValueError(f"register_pytree: {cls.__name__} is a pytree already")
    for name, fn in (("flatten", flatten), ("unflatten", unflatten)):
        if not callable(fn):
            raise TypeError(f"register_pytree: {name} must be callable, not {fn!r}")
    _REGISTERED[cls] = (flatten, unflatten)


def _node(kind: type) -> tuple[_Flatten, _Unflatten] | None:
    """How a ``kind`` is taken apart and rebuilt, if it is a node other than the containers."""
    registered = _REGISTERED.get(kind)
    if registered is not None:
        return registered
    if issubclass(kind, tuple) and hasattr(kind, "_fields") and hasattr(kind, "_make"):
        return _namedtuple_children, _namedtuple_from
    if dataclasses.is_dataclass(kind):
        return _dataclass_children, _dataclass_from
    if kind is collections.OrderedDict:
        return _ordered_children, _ordered_from
    if kind is collections.defaultdict:
        return _defaultdict_children, _defaultdict_from
    return None


# OrderedDict and defaultdict are nodes as in JAX: their values in their keys' order, rebuilt
# as the same kind (a defaultdict with its default_factory)
def _ordered_children(obj: Any) -> tuple[Iterable[Any], Any]:
    keys = tuple(obj)
    return [obj[k] for k in keys], keys


def _ordered_from(keys: tuple[Any, ...], children: list[Any]) -> Any:
    return collections.OrderedDict(zip(keys, children))


def _defaultdict_children(obj: Any) -> tuple[Iterable[Any], Any]:
    keys = tuple(obj)
    return [obj[k] for k in keys], (obj.default_factory, keys)


def _defaultdict_from(aux: tuple[Any, tuple[Any, ...]], children: list[Any]) -> Any:
    return collections.defaultdict(aux[0], zip(aux[1], children))


def _namedtuple_children(obj: tuple[Any, ...]) -> tuple[Iterable[Any], Any]:
    return list(obj), type(obj)  # (read by the context too when revealed: see reveal)


def _namedtuple_from(kind: Any, children: list[Any]) -> Any:
    return kind._make(children)


def _dataclass_children(obj: Any) -> tuple[Iterable[Any], Any]:
    """A dataclass's fields, in order.  An attribute that is not a field (set in
    ``__post_init__``, say) could depend on the fields, and a rebuilt object would lose that
    dependence without a word: such an instance is refused."""
    kind = type(obj)
    names = tuple(f.name for f in dataclasses.fields(obj))
    extra = _not_fields(obj, names)
    if extra:
        raise TypeError(
            f"cannot use a {kind.__name__} as a pytree: its attribute {extra[0]!r} is not a "
            f"dataclass field (declare it with dataclasses.field(init=False), or register "
            f"{kind.__name__} with overdub_ad.register_pytree)")
    return [getattr(obj, name) for name in names], (kind, names)


def _not_fields(obj: Any, names: tuple[str, ...]) -> list[str]:
    """The attributes of dataclass instance ``obj`` that are not among its fields ``names``."""
    return [name for name in getattr(obj, "__dict__", ()) if name not in names]


def _dataclass_from(aux: tuple[type, tuple[str, ...]], children: list[Any]) -> Any:
    """The instance with these field values, set as ``__init__`` would for a frozen class
    too; ``__init__`` and ``__post_init__`` are not run (children may be gradients)."""
    kind, names = aux
    obj = kind.__new__(kind)  # type: ignore[call-overload]  # (a dataclass: any __new__)
    for name, value in zip(names, children):
        object.__setattr__(obj, name, value)
    return obj


# Module-level recursion, not nested closures: a recursive closure is a reference cycle that
# would keep the leaves (a gradient's arrays) alive until the next garbage collection.  Leaves
# are handled by their container (every gradient call flattens its arguments: no call apiece).
def _walk(node: Any, leaves: list[Any]) -> TreeDef:
    kind = type(node)
    if kind in _LEAVES:
        leaves.append(node)
        return _LEAF
    if kind is dict:
        keys = tuple(node)
        items: Any = [node[k] for k in keys]
    elif kind is tuple or kind is list:
        keys, items = (), node
    else:
        custom = _node(kind)
        if custom is None:
            leaves.append(node)
            return _LEAF
        items, keys = custom[0](node)  # the aux data is kept where a dict keeps its keys
    children = []
    for item in items:
        item_kind = type(item)
        if item_kind in _CONTAINERS or (item_kind not in _LEAVES and _node(item_kind)):
            children.append(_walk(item, leaves))
        else:
            leaves.append(item)
            children.append(_LEAF)
    return TreeDef(kind, keys, tuple(children))


# never nodes: no lookup (a differentiated output is a Tagged)
_LEAVES = frozenset({float, int, complex, bool, str, type(None), np.ndarray, np.float64,
                     np.float32, np.complex128, Tagged})


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
    if kind == "leaf":
        return next(items)
    return rebuild_node(node, [next(items) if child is _LEAF else _build(child, items)
                               for child in node.children])


def reveal(tree: Any, read: Callable[..., Any]) -> Any:
    """``tree`` with each named tuple, dataclass or registered object in it taken apart by
    ``read(flatten, obj)`` and rebuilt.  ``read`` is a context's step: run under it, the
    attribute reads come back with the metadata the context keeps for values stored in the
    heap (a differentiated function's output must be revealed before its run ends).  Lists,
    tuples and dicts are walked natively, and are the very same objects if nothing in them
    changed."""
    kind = type(tree)
    if kind in _LEAVES:
        return tree
    if kind is list or kind is tuple:
        items = [reveal(item, read) for item in tree]
        return tree if all(a is b for a, b in zip(items, tree)) else kind(items)
    if kind is dict:
        values = {key: reveal(value, read) for key, value in tree.items()}
        return tree if all(values[k] is tree[k] for k in tree) else values
    return reveal_node(tree, read, lambda child: reveal(child, read))


def reveal_node(tree: Any, read: Callable[..., Any], child: Callable[[Any], Any],
                keep: bool = False) -> Any:
    """A custom node revealed by ``read`` (see :func:`reveal`), its children by ``child``;
    anything else as it is.  ``keep``: ``tree`` itself where each revealed child is the very
    object that taking it apart natively gives (nothing was kept aside: no copy made)."""
    kind = type(tree)
    custom = None if kind in _CONTAINERS or kind in _LEAVES else _node(kind)
    if custom is None:
        return tree
    children, aux = read(custom[0], tree)
    revealed = [child(c) for c in children]
    if keep and all(a is b for a, b in zip(revealed, custom[0](tree)[0])):
        return tree
    return custom[1](aux, revealed)


def is_node(tree: Any) -> bool:
    """Whether :func:`flatten` takes ``tree`` apart as a node other than the containers (a
    named tuple, a dataclass, a registered object): a dataclass instance with attributes that
    are not fields is not one (``flatten`` refuses it, and only as an argument that is
    differentiated: anything else may be given it)."""
    kind = type(tree)
    if kind in _CONTAINERS or kind in _LEAVES or _node(kind) is None:
        return False
    return kind in _REGISTERED or not dataclasses.is_dataclass(kind) or not _not_fields(
        tree, tuple(f.name for f in dataclasses.fields(tree)))


def node_children(tree: Any) -> list[Any] | None:
    """The children of a named tuple, dataclass or registered object; None for anything
    else (containers and leaves)."""
    kind = type(tree)
    if kind in _CONTAINERS or kind in _LEAVES:
        return None
    custom = _node(kind)
    return None if custom is None else list(custom[0](tree)[0])


def rebuild_node(node: TreeDef, children: list[Any]) -> Any:
    """A named tuple, dataclass or registered object of ``node``'s kind, from its children."""
    custom = _node(node.kind)
    assert custom is not None, node  # it was a node when it was flattened
    return custom[1](node.keys, children)


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    leaves, treedef = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def ordered_as(treedef: TreeDef, tree: Any) -> Any:
    """``tree`` with each dict's items in the order of the dict ``treedef`` describes at the
    same place, where the two have the same keys: a dict is one pytree whatever order its
    items were written in (JAX orders them by key).  The very object where nothing moved."""
    kind = type(tree)
    if treedef.kind is dict and kind is dict and len(tree) == len(treedef.keys) and \
            all(k in tree for k in treedef.keys):
        items = [ordered_as(c, tree[k]) for k, c in zip(treedef.keys, treedef.children)]
        if list(tree) == list(treedef.keys) and all(a is b for a, b in zip(items, tree.values())):
            return tree
        return dict(zip(treedef.keys, items))
    if treedef.kind is kind and kind in (tuple, list) and len(tree) == len(treedef.children):
        items = [ordered_as(c, t) for c, t in zip(treedef.children, tree)]
        return tree if all(a is b for a, b in zip(items, tree)) else kind(items)
    return tree
