"""Pytrees: nested containers of leaves, on top of optree.

A pytree is a leaf or a container of pytrees: dict, list, tuple, namedtuple, ``None`` (an empty
container, never a leaf), ``collections.OrderedDict``/``defaultdict``/``deque``, and any class
given to :func:`register`. Leaves are everything else (Tensors, arrays, numbers). Dict keys are
visited in sorted order, so equal dicts flatten alike. Every function here works in tapegrad's
own optree namespace, so registrations do not leak into other libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optree

__all__ = [
    "NAMESPACE",
    "tree_map",
    "tree_flatten",
    "tree_unflatten",
    "tree_leaves",
    "tree_structure",
    "tree_flatten_with_path",
    "tree_paths",
    "register",
    "register_class",
]

#: optree namespace holding tapegrad's registrations.
NAMESPACE = "tapegrad"


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Flatten ``tree`` into ``(leaves, treedef)``; leaves in depth-first, sorted-key order."""
    return optree.tree_flatten(tree, is_leaf=is_leaf, namespace=NAMESPACE)


def tree_unflatten(treedef, leaves):
    """Rebuild a pytree of ``treedef``'s structure from an iterable of ``leaves``.

    Raises:
        ValueError: if the number of leaves differs from ``treedef.num_leaves``.
    """
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(
            f"tree_unflatten: structure {treedef} has {treedef.num_leaves} leaves, "
            f"got {len(leaves)}"
        )
    return optree.tree_unflatten(treedef, leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list:
    """The leaves of ``tree`` as a list, in :func:`tree_flatten` order."""
    return optree.tree_leaves(tree, is_leaf=is_leaf, namespace=NAMESPACE)


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """The treedef of ``tree`` (its structure without the leaves)."""
    return optree.tree_structure(tree, is_leaf=is_leaf, namespace=NAMESPACE)


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None):
    """Apply ``fn`` leaf-wise: ``fn(leaf, *corresponding leaves of rest)``.

    Args:
        fn: Function of ``1 + len(rest)`` leaves.
        tree: The pytree whose structure the result keeps.
        *rest: Pytrees with the same structure as ``tree`` (or with ``tree``'s structure as a
            prefix).
        is_leaf: Optional predicate that stops the traversal early.

    Raises:
        ValueError: if a tree in ``rest`` does not match ``tree``'s structure.
    """
    return optree.tree_map(fn, tree, *rest, is_leaf=is_leaf, namespace=NAMESPACE)


def tree_flatten_with_path(tree: Any, prefix: str = "", is_leaf=None):
    """Flatten ``tree`` into ``(paths, leaves, treedef)``.

    Each path is a readable access string such as ``"params['bn']['count']"`` (with ``prefix``
    in front), for error messages and for the flat names of checkpoints.
    """
    accessors, leaves, treedef = optree.tree_flatten_with_accessor(
        tree, is_leaf=is_leaf, namespace=NAMESPACE
    )
    return [a.codify(prefix) for a in accessors], leaves, treedef


def tree_paths(tree: Any, prefix: str = "", is_leaf=None) -> list[str]:
    """Readable access strings of every leaf of ``tree`` (see :func:`tree_flatten_with_path`)."""
    return tree_flatten_with_path(tree, prefix, is_leaf)[0]


def register(cls: type, flatten: Callable, unflatten: Callable) -> type:
    """Make ``cls`` a pytree node.

    Args:
        cls: The class to register.
        flatten: ``obj -> (children, aux_data)`` or ``(children, aux_data, entry_names)``;
            ``aux_data`` must be hashable.
        unflatten: ``(aux_data, children) -> obj``.

    Returns:
        ``cls``, so it can be used as a decorator helper.

    Example:
        >>> import tapegrad as tg
        >>> class Pair:
        ...     def __init__(self, a, b):
        ...         self.a, self.b = a, b
        >>> _ = tg.tree.register(Pair, lambda p: ((p.a, p.b), None, ("a", "b")),
        ...                      lambda aux, ch: Pair(*ch))
        >>> tg.tree.tree_leaves(Pair(1, [2, 3]))
        [1, 2, 3]
    """
    optree.register_pytree_node(cls, flatten, unflatten, namespace=NAMESPACE)
    return cls


def register_class(cls: type) -> type:
    """Class decorator: ``cls`` defines ``tree_flatten(self)`` and classmethod
    ``tree_unflatten(aux, children)``, as in JAX."""
    return register(cls, lambda obj: obj.tree_flatten(), cls.tree_unflatten)
