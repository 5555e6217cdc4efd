"""Pytrees: nested containers of leaves, on top of optree.

A pytree is a leaf or a container of pytrees: dict, list, tuple, namedtuple, ``None`` (an empty
container, never a leaf), ``collections.OrderedDict``/``defaultdict``/``deque``, any class given
to :func:`register`, :func:`register_class` or :func:`register_dataclass`, every ``attrs``
class (registered the first time one is flattened; see :func:`register_attrs`) and every
``tapegrad.nn.Module``. Leaves are everything else (Tensors, arrays, numbers, functions). Dict
keys are visited in sorted order, so equal dicts flatten alike. Every function here works in
tapegrad's own optree namespace, so registrations do not leak into other libraries.

Besides JAX's ``jax.tree_util`` functions, this module has Equinox's tools for trees that mix
arrays with other leaves: :func:`partition`, :func:`combine` and :func:`filter` with the
filters :func:`is_array` and :func:`is_inexact_array`, and :func:`tree_at` for out-of-place
edits. ``ravel_pytree`` (one flat vector and back) is :func:`tapegrad.ravel_pytree`, also at
JAX's place ``tapegrad.flatten_util.ravel_pytree``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import optree

from tapegrad.core.tensor import Tensor

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
    "register_dataclass",
    "register_attrs",
    "static_key",
    "is_array",
    "is_inexact_array",
    "partition",
    "combine",
    "filter",
    "tree_at",
    "held_leaves",
]

#: optree namespace holding tapegrad's registrations.
NAMESPACE = "tapegrad"

_IsLeaf = Callable[[Any], bool] | None

# -- automatic registration of attrs classes ---------------------------------------------------
_REGISTERED: set = set()  # classes registered through this module
_PLAIN: set = set()  # leaf types known to need no registration (fast path)
_HELD: set = set()  # node types whose non-floating leaves differentiation holds constant


def _auto_register(leaves: list) -> bool:
    """Register every unregistered ``attrs`` class among ``leaves`` (tapegrad's own records,
    such as Tensor, stay leaves). Returns True if any was registered (flatten again)."""
    found = False
    for leaf in leaves:
        t = type(leaf)
        if t in _PLAIN:
            continue
        if t not in _REGISTERED and attrs.has(t) and not t.__module__.startswith("tapegrad"):
            _register_fields(t, *_attrs_fields(t, None, None, "attrs class"))
            found = True
        else:
            _PLAIN.add(t)
    return found


def tree_flatten(tree: Any, is_leaf: _IsLeaf = None):
    """Flatten ``tree`` into ``(leaves, treedef)``; leaves in depth-first, sorted-key order.

    Example:
        >>> import tapegrad as tg
        >>> leaves, treedef = tg.tree.tree_flatten({"b": [1, 2], "a": (3, None)})
        >>> leaves
        [3, 1, 2]
    """
    while True:
        leaves, treedef = optree.tree_flatten(tree, is_leaf=is_leaf, namespace=NAMESPACE)
        if not _auto_register(leaves):
            return leaves, treedef


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


def tree_leaves(tree: Any, is_leaf: _IsLeaf = None) -> list:
    """The leaves of ``tree`` as a list, in :func:`tree_flatten` order."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: _IsLeaf = None):
    """The treedef of ``tree`` (its structure without the leaves)."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: _IsLeaf = None):
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
    leaves, treedef = tree_flatten(tree, is_leaf)
    if not rest:
        return treedef.unflatten([fn(x) for x in leaves])
    try:
        columns = [treedef.flatten_up_to(r) for r in rest]
    except ValueError:
        for r in rest:  # an attrs class only the other trees hold: register it, then retry
            tree_flatten(r, is_leaf)
        columns = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten([fn(*xs) for xs in zip(leaves, *columns)])


def tree_flatten_with_path(tree: Any, prefix: str = "", is_leaf=None):
    """Flatten ``tree`` into ``(paths, leaves, treedef)``.

    Each path is a readable access string such as ``"params['bn']['count']"`` or
    ``"model.hidden.weight"`` (with ``prefix`` in front), for error messages and for the flat
    names of checkpoints.
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    return [a.codify(prefix) for a in treedef.accessors()], leaves, treedef


def tree_paths(tree: Any, prefix: str = "", is_leaf=None) -> list[str]:
    """Readable access strings of every leaf of ``tree`` (see :func:`tree_flatten_with_path`)."""
    return tree_flatten_with_path(tree, prefix, is_leaf)[0]


# -- registration --------------------------------------------------------------------------------
class _AttrEntry(optree.GetAttrEntry):
    """A path entry read with ``getattr``, printed dotted (``model.0.weight``, as PyTorch names a
    parameter) even where the name is not an identifier."""

    __slots__ = ()

    def codify(self, node: str = "") -> str:
        return f"{node}.{self.name}"


def register(
    cls: type,
    flatten: Callable,
    unflatten: Callable,
    *,
    attribute_names: bool = False,
    static_non_float: bool = False,
) -> type:
    """Make ``cls`` a pytree node.

    Args:
        cls: The class to register.
        flatten: ``obj -> (children, aux_data)`` or ``(children, aux_data, entry_names)``;
            ``aux_data`` must be hashable (see :func:`static_key`) and compare equal for
            equal structures: ``jit`` keys its compiled programs on it.
        unflatten: ``(aux_data, children) -> obj``. It must accept any children (tracers,
            gradients, ``None`` from :func:`partition`), so it should not validate them.
        attribute_names: The entry names are attribute names: paths print as ``obj.name``
            rather than ``obj['name']``.
        static_non_float: ``grad``, ``value_and_grad`` and ``vjp`` hold the leaves of this node
            (at any depth) that are integer or boolean arrays constant instead of refusing
            them; their gradient is ``None``. ``tapegrad.nn.Module`` uses it for random keys
            and counters.

    Returns:
        ``cls``, so it can be used as a decorator helper.

    Raises:
        ValueError: if ``cls`` is already registered.

    Example:
        >>> import tapegrad as tg
        >>> class Pair:
        ...     def __init__(self, a, b):
        ...         self.a, self.b = a, b
        >>> _ = tg.tree.register(Pair, lambda p: ((p.a, p.b), None, ("a", "b")),
        ...                      lambda aux, ch: Pair(*ch), attribute_names=True)
        >>> tg.tree.tree_leaves(Pair(1, [2, 3]))
        [1, 2, 3]
        >>> tg.tree.tree_paths(Pair(1, [2, 3]), "p")
        ['p.a', 'p.b[0]', 'p.b[1]']
    """
    entry = _AttrEntry if attribute_names else optree.AutoEntry
    optree.register_pytree_node(cls, flatten, unflatten, path_entry_type=entry,  # pyright: ignore[reportArgumentType]
                                namespace=NAMESPACE)
    _REGISTERED.add(cls)
    _PLAIN.discard(cls)
    if static_non_float:
        _HELD.add(cls)
    return cls


def register_class(cls: type) -> type:
    """Class decorator: ``cls`` defines ``tree_flatten(self)`` and classmethod
    ``tree_unflatten(aux, children)``, as in JAX."""
    return register(cls, lambda obj: obj.tree_flatten(), cls.tree_unflatten)


def _float_nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def static_key(value: Any) -> Any:
    """A hashable key standing for ``value`` as static data: two values get equal keys when
    they are equal in kind and content.

    Lists, tuples, dicts and sets are compared element by element, NumPy arrays by dtype, shape
    and content, NaN equals NaN, and any other unhashable object by identity. Registered nodes
    use it so that their ``aux_data`` can hold such values and still key ``jit``'s programs.

    Example:
        >>> import tapegrad as tg
        >>> tg.tree.static_key([1, {"a": 2.0}]) == tg.tree.static_key([1, {"a": 2.0}])
        True
        >>> tg.tree.static_key(1) == tg.tree.static_key(1.0)   # int and float differ
        False
    """
    t = type(value)
    if t in (list, tuple) or isinstance(value, (list, tuple)):
        return (t, tuple(static_key(v) for v in value))
    if isinstance(value, dict):
        return (t, frozenset((k, static_key(v)) for k, v in value.items()))
    if isinstance(value, (set, frozenset)):
        return (t, frozenset(static_key(v) for v in value))
    if isinstance(value, np.ndarray):
        return (t, value.dtype.str, value.shape, value.tobytes())
    if _float_nan(value):
        return (t, "nan")
    try:
        hash(value)
    except TypeError:
        return (t, "id", id(value))
    return (t, value)


class _Meta:
    """Static (aux) values of a registered record: compared and hashed by :func:`static_key`."""

    __slots__ = ("values", "_key")

    def __init__(self, values: tuple):
        self.values = values
        self._key = None

    def key(self):
        if self._key is None:
            self._key = static_key(self.values)
        return self._key

    def __eq__(self, other):
        return type(other) is _Meta and (self.values is other.values or self.key() == other.key())

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return repr(self.values)


def _register_fields(cls: type, data: tuple, meta: tuple) -> type:
    """Register ``cls`` with ``data`` attribute names as children and ``meta`` as static data;
    instances are rebuilt without calling ``__init__``."""

    def flatten(obj):
        return (
            [getattr(obj, n) for n in data],
            _Meta(tuple(getattr(obj, n) for n in meta)),
            data,
        )

    def unflatten(aux, children):
        obj = object.__new__(cls)
        for n, v in zip(data, children):
            object.__setattr__(obj, n, v)
        for n, v in zip(meta, aux.values):
            object.__setattr__(obj, n, v)
        return obj

    return register(cls, flatten, unflatten, attribute_names=True)


def _split_fields(who: str, cls: type, names: list, static: list, data_fields, meta_fields,
                  drop: tuple = ()) -> tuple:
    """``(data, meta)`` from explicit lists, or else from the fields' ``static`` metadata."""
    if data_fields is None and meta_fields is None:
        return tuple(n for n in names if n not in static), tuple(static)
    data = tuple(data_fields or ())
    meta = tuple(meta_fields or ())
    for what, given in (("data_fields", data_fields), ("meta_fields", meta_fields)):
        if isinstance(given, str):
            raise TypeError(f"{who}: {what} must be a sequence of field names, got the string "
                            f"{given!r}; write [{given!r}]")
    known = set(names)
    unknown = sorted((set(data) | set(meta) | set(drop)) - known)
    both = sorted(set(data) & set(meta))
    missing = sorted(known - set(data) - set(meta) - set(drop))
    if unknown or both or missing:
        raise ValueError(
            f"{who}: the fields of {cls.__name__} are {names}; data_fields and meta_fields must "
            f"name each of them once (unknown: {unknown}, in both: {both}, in neither: "
            f"{missing})"
        )
    return data, meta


def register_dataclass(
    nodetype: type,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
    drop_fields: Sequence[str] = (),
) -> type:
    """Make a dataclass a pytree node (JAX's ``jax.tree_util.register_dataclass``).

    ``data_fields`` are children (their leaves are differentiated, traced, batched);
    ``meta_fields`` are static: part of the structure, compared by value (a new value makes
    ``jit`` compile again). Without either list, a field is static when declared with
    ``dataclasses.field(metadata={"static": True})`` and a child otherwise. Instances are
    rebuilt without calling ``__init__`` (a ``__post_init__`` that validates is not run on
    tracers or gradients). Usable as a decorator.

    Args:
        nodetype: A dataclass (frozen or not, slotted or not).
        data_fields: Names of the child fields.
        meta_fields: Names of the static fields.
        drop_fields: Fields left out of both (``init=False`` fields rebuilt by the class);
            they are missing from rebuilt instances.

    Returns:
        ``nodetype``.

    Raises:
        TypeError: if ``nodetype`` is not a dataclass, or a field list is a string.
        ValueError: if the lists do not name every field exactly once, or the class is
            already registered.

    Example:
        >>> import dataclasses
        >>> import tapegrad as tg
        >>> @tg.tree.register_dataclass
        ... @dataclasses.dataclass(frozen=True)
        ... class Affine:
        ...     w: tg.Tensor
        ...     b: tg.Tensor
        ...     name: str = dataclasses.field(default="affine", metadata={"static": True})
        >>> affine = Affine(tg.Tensor([1.0]), tg.Tensor([0.0]))
        >>> g = tg.grad(lambda m: (m.w * 3.0 + m.b).sum())(affine)
        >>> g.w, g.b, g.name
        (Tensor([3.], dtype=float32), Tensor([1.], dtype=float32), 'affine')
    """
    who = "register_dataclass"
    if not (isinstance(nodetype, type) and dataclasses.is_dataclass(nodetype)):
        raise TypeError(f"{who}: expected a dataclass, got {nodetype!r}; decorate it with "
                        "@dataclasses.dataclass first (or use register/register_attrs)")
    fields = dataclasses.fields(nodetype)
    names = [f.name for f in fields]
    static = [f.name for f in fields if f.metadata.get("static", False)]
    data, meta = _split_fields(who, nodetype, names, static, data_fields, meta_fields,
                               tuple(drop_fields))
    return _register_fields(nodetype, data, meta)


def _attrs_fields(cls, data_fields, meta_fields, who) -> tuple:
    fields = attrs.fields(cls)
    names = [f.name for f in fields]
    static = [f.name for f in fields if f.metadata.get("static", False)]
    return _split_fields(who, cls, names, static, data_fields, meta_fields)


def register_attrs(
    cls: type,
    data_fields: Sequence[str] | None = None,
    meta_fields: Sequence[str] | None = None,
) -> type:
    """Make an ``attrs`` class a pytree node, choosing its static fields.

    Every ``attrs`` class (``@attrs.define``, ``@attrs.frozen``, ``@attr.s``) outside tapegrad
    is registered automatically the first time a tapegrad pytree function (``grad``, ``jit``,
    ``tree_map``, ...) meets an instance: its fields are children, except those declared with
    ``attrs.field(metadata={"static": True})``, which are static. Call this function (or use it
    as a decorator) to register a class up front or to choose the static fields by name, as
    :func:`register_dataclass` does for dataclasses. Instances are rebuilt without calling
    ``__init__`` (no validators run on tracers or gradients), frozen classes included.

    Args:
        cls: An attrs class.
        data_fields: Names of the child fields.
        meta_fields: Names of the static fields.

    Returns:
        ``cls``.

    Raises:
        TypeError: if ``cls`` is not an attrs class.
        ValueError: if the lists do not name every field exactly once, or the class is already
            registered (explicitly, or automatically by an earlier use).

    Example:
        >>> import attrs
        >>> import tapegrad as tg
        >>> @tg.tree.register_attrs
        ... @attrs.frozen
        ... class Scale:
        ...     factor: tg.Tensor
        ...     label: str = attrs.field(default="s", metadata={"static": True})
        >>> tg.grad(lambda s: (s.factor ** 2).sum())(Scale(tg.Tensor([3.0])))
        Scale(factor=Tensor([6.], dtype=float32), label='s')
    """
    who = "register_attrs"
    if not (isinstance(cls, type) and attrs.has(cls)):
        raise TypeError(f"register_attrs: expected an attrs class, got {cls!r}")
    return _register_fields(cls, *_attrs_fields(cls, data_fields, meta_fields, who))


# -- filters, partition and combine (Equinox) ---------------------------------------------------
def is_array(x: Any) -> bool:
    """Whether ``x`` is an array leaf: a Tensor, a NumPy array or scalar, or a CuPy array.

    Python numbers, strings, functions and other objects are not (Equinox's ``is_array``).
    """
    return isinstance(x, (Tensor, np.ndarray, np.generic)) or hasattr(
        x, "__cuda_array_interface__"
    )


def is_inexact_array(x: Any) -> bool:
    """Whether ``x`` is an array leaf (see :func:`is_array`) of a floating or complex dtype:
    the leaves :func:`tapegrad.filter_grad` differentiates (Equinox's ``is_inexact_array``)."""
    return is_array(x) and np.dtype(x.dtype).kind in "fcV"


def _mask(filter_spec, tree, is_leaf, who: str) -> list:
    """One bool per leaf of ``tree``: ``filter_spec`` (a bool, a callable, or a pytree prefix of
    ``tree`` holding them) applied to it."""

    def expand(spec, sub):
        if isinstance(spec, (bool, np.bool_)):
            return [bool(spec)] * len(tree_leaves(sub, is_leaf))
        if callable(spec):
            out = []
            for leaf in tree_leaves(sub, is_leaf):
                keep = spec(leaf)
                if not isinstance(keep, (bool, np.bool_)):
                    raise TypeError(f"{who}: the filter {spec!r:.60} returned a "
                                    f"{type(keep).__name__} for a leaf; it must return a bool")
                out.append(bool(keep))
            return out
        raise TypeError(f"{who}: filter_spec leaves must be bools or callables (such as "
                        f"tg.tree.is_inexact_array), got {type(spec).__name__} {spec!r:.40}")

    is_node = type(filter_spec) in _REGISTERED  # a Module is callable, but a spec tree here
    if isinstance(filter_spec, (bool, np.bool_)) or (callable(filter_spec) and not is_node):
        return expand(filter_spec, tree)
    spec_leaves, spec_def = tree_flatten(filter_spec)
    try:
        subs = spec_def.flatten_up_to(tree)
    except ValueError as e:
        raise ValueError(f"{who}: filter_spec must be a bool, a callable or a pytree prefix of "
                         f"the tree: {e}") from None
    return [m for spec, sub in zip(spec_leaves, subs) for m in expand(spec, sub)]


def partition(tree: Any, filter_spec: Any, replace: Any = None, is_leaf: _IsLeaf = None):
    """Split ``tree`` in two trees of its structure: the leaves ``filter_spec`` keeps, and the
    rest (Equinox's ``partition``).

    Each tree has ``replace`` (default ``None``, an empty subtree) where the other has a leaf,
    so :func:`combine` puts them back together, and a function of the first tree can be
    differentiated, jitted or batched while the second holds what it cannot trace (integers,
    strings, functions, keys)::

        params, static = tg.tree.partition(model, tg.tree.is_inexact_array)
        grads = tg.grad(lambda p: loss(tg.tree.combine(p, static), x))(params)

    Args:
        tree: Any pytree (a Module included).
        filter_spec: A bool, a function ``leaf -> bool`` (such as :func:`is_inexact_array`), or
            a pytree prefix of ``tree`` holding bools and functions, applied to the leaves under
            each of its leaves.
        replace: What stands where a leaf went to the other tree.
        is_leaf: Passed to the flattening of ``tree``.

    Returns:
        ``(kept, rest)``.

    Raises:
        TypeError: for a ``filter_spec`` leaf that is neither a bool nor a callable, or a
            filter that returns something other than a bool.
        ValueError: if a ``filter_spec`` pytree is not a prefix of ``tree``.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> tree = {"w": np.ones(2), "n": 3, "act": "relu"}
        >>> kept, rest = tg.tree.partition(tree, tg.tree.is_array)
        >>> kept["w"], kept["n"], rest["n"], rest["act"]
        (array([1., 1.]), None, 3, 'relu')
        >>> tg.tree.combine(kept, rest) == tree
        True
    """
    leaves, treedef = tree_flatten(tree, is_leaf)
    mask = _mask(filter_spec, tree, is_leaf, "partition")
    kept = [x if m else replace for x, m in zip(leaves, mask)]
    rest = [replace if m else x for x, m in zip(leaves, mask)]
    return treedef.unflatten(kept), treedef.unflatten(rest)


def filter(  # noqa: A001  (Equinox's name)
    tree: Any, filter_spec: Any, inverse: bool = False, replace: Any = None,
    is_leaf: _IsLeaf = None,
):
    """The leaves of ``tree`` that ``filter_spec`` keeps, ``replace`` (``None``) elsewhere:
    ``partition(...)[0]``, or ``[1]`` with ``inverse=True`` (Equinox's ``filter``).

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> tg.tree.filter([np.ones(1), "tag", np.zeros(1, np.int64)], tg.tree.is_inexact_array)
        [array([1.]), None, None]
    """
    kept, rest = partition(tree, filter_spec, replace, is_leaf)
    return rest if inverse else kept


def combine(*trees: Any, is_leaf: _IsLeaf = None):
    """Merge trees of one structure leaf by leaf, taking each leaf from the first tree where it
    is not ``None`` (Equinox's ``combine``; the inverse of :func:`partition`).

    Raises:
        TypeError: if no tree is given.
        ValueError: if the trees' structures differ (``None`` counting as a leaf).
    """
    if not trees:
        raise TypeError("combine: give at least one tree")

    def first(*xs):
        return next((x for x in xs if x is not None), None)

    def leafish(x):
        return x is None or (is_leaf is not None and is_leaf(x))

    for t in trees:
        tree_flatten(t, is_leaf)
    try:
        return optree.tree_map(first, *trees, is_leaf=leafish, none_is_leaf=True,
                               namespace=NAMESPACE)
    except ValueError as e:
        raise ValueError(f"combine: the trees have different structures: {e}") from None


# -- tree_at (Equinox) ----------------------------------------------------------------------------
class _Marker:
    """Stands for leaf ``index`` while ``tree_at``'s ``where`` runs (found by identity)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self):
        return f"<leaf {self.index}>"


_MISSING = object()


def tree_at(
    where: Callable[[Any], Any],
    pytree: Any,
    replace: Any = _MISSING,
    replace_fn: Any = _MISSING,
    is_leaf: _IsLeaf = None,
):
    """A copy of ``pytree`` with the nodes ``where`` selects replaced (Equinox's ``tree_at``).

    ``where(pytree)`` returns a node of the tree (a leaf or a subtree, such as a Module's
    submodule) or a tuple/list of nodes; each is replaced by ``replace`` (one value, or a
    sequence with one value per node) or by ``replace_fn(node)``. Nothing is modified: the
    containers on the way are rebuilt (a Module through its pytree registration, without
    ``__init__``). Nodes are found by identity, so ``where`` must return parts of the tree it
    is given (``lambda m: m.hidden.weight``), not new values computed from it. To select a
    ``None`` (an absent bias), pass ``is_leaf=lambda x: x is None``.

    Args:
        where: ``pytree -> node`` or ``pytree -> tuple of nodes``.
        pytree: Any pytree.
        replace: The new value(s) (give this or ``replace_fn``).
        replace_fn: ``node -> new value`` applied to each selected node.
        is_leaf: Passed to the flattening of ``pytree``.

    Returns:
        The new pytree.

    Raises:
        TypeError: if neither or both of ``replace``/``replace_fn`` are given, or ``where``
            returns something that is not a node of the tree (naming what it returned).
        ValueError: if ``replace`` is a sequence of the wrong length, or a node is selected
            twice.

    Example:
        >>> import tapegrad as tg
        >>> params = {"w": tg.Tensor([1.0, 2.0]), "b": tg.Tensor([0.0])}
        >>> new = tg.tree.tree_at(lambda p: p["b"], params, replace=tg.Tensor([5.0]))
        >>> new["b"], params["b"]
        (Tensor([5.], dtype=float32), Tensor([0.], dtype=float32))
        >>> tg.tree.tree_at(lambda p: (p["w"], p["b"]), params, replace_fn=lambda x: x * 0.0)["w"]
        Tensor([0., 0.], dtype=float32)
    """
    who = "tree_at"
    if (replace is _MISSING) == (replace_fn is _MISSING):
        raise TypeError(f"{who}: give exactly one of replace= and replace_fn=")
    if not callable(where):
        raise TypeError(f"{who}: where must be a function pytree -> node(s), got "
                        f"{type(where).__name__}")
    leaves, treedef = tree_flatten(pytree, is_leaf)
    markers = [_Marker(i) for i in range(len(leaves))]
    marked = treedef.unflatten(markers)
    picked = where(marked)

    # every subtree of the marked tree, by identity (the leaves are the markers)
    nodes: dict = {}

    def visit(x):
        nodes[id(x)] = x
        return False

    optree.tree_flatten(marked, is_leaf=visit, namespace=NAMESPACE)
    if id(picked) in nodes and (picked is not None or is_leaf is not None):
        targets = [picked]
        single = True
    elif isinstance(picked, (tuple, list)):
        targets = list(picked)
        single = False
    else:
        targets, single = [picked], True
    for t in targets:
        if id(t) not in nodes or (t is None and is_leaf is None):
            raise TypeError(
                f"{who}: where returned {_shown(t)}, which is not a node of the tree; return "
                "parts of the tree it is given (for example lambda m: m.hidden.weight), or a "
                "tuple of them" + (
                    "; to select a None, pass is_leaf=lambda x: x is None" if t is None else "")
            )
    ids = [id(t) for t in targets]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{who}: where selected the same node twice")
    if replace is not _MISSING and not single:
        if not isinstance(replace, (tuple, list)) or len(replace) != len(targets):
            raise ValueError(f"{who}: where selected {len(targets)} nodes, so replace must be a "
                             f"sequence of {len(targets)} values, got {_shown(replace)}")
        values = list(replace)
    elif replace is not _MISSING:
        values = [replace]
    else:
        values = None

    def restore(x):
        return tree_map(lambda m: leaves[m.index] if isinstance(m, _Marker) else m, x,
                        is_leaf=lambda m: isinstance(m, _Marker))

    chosen = set(ids)
    cut_leaves, cut_def = optree.tree_flatten(marked, is_leaf=lambda x: id(x) in chosen,
                                              namespace=NAMESPACE)
    out = []
    for x in cut_leaves:
        if id(x) in chosen:
            j = ids.index(id(x))
            out.append(values[j] if values is not None else replace_fn(restore(x)))  # pyright: ignore[reportCallIssue]
        else:
            out.append(leaves[x.index] if isinstance(x, _Marker) else x)
    return cut_def.unflatten(out)


def _shown(v) -> str:
    s = repr(v)
    return f"{type(v).__name__} {s[:57] + '...' if len(s) > 60 else s}"


# -- differentiation of nodes with non-floating state ---------------------------------------------
def held_leaves(treedef) -> frozenset:
    """Indices of the leaves of ``treedef`` that lie inside a node registered with
    ``static_non_float=True`` (a Module): where ``grad`` holds integer leaves constant."""
    if not _HELD:
        return frozenset()
    return frozenset(
        i for i, acc in enumerate(treedef.accessors()) if any(e.type in _HELD for e in acc)
    )
