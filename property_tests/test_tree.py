"""Property tests for ``tapegrad.core.tree`` over drawn nested pytrees: dicts, lists, tuples,
namedtuples, ``None``, a registered dataclass, an attrs class (registered on first use) and a
Module, holding arrays of every kind of shape (size-0 and size-1 dims included), integer
arrays, Python numbers, strings and functions.

- flatten/unflatten round-trips (the same leaves, the same structure);
- ``tree_map`` with the identity rebuilds an equal tree;
- ``partition``/``combine`` round-trip for every filter, and each part holds exactly the leaves
  its filter chose;
- ``tree_at`` replaces exactly the leaves it selects and changes nothing else;
- ``static_key`` gives equal keys (and hashes) to equal values;
- ``filter_grad`` of a sum of squares is twice the floating leaves, ``None`` elsewhere.
"""

import collections
import dataclasses

import attrs
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
from tapegrad import nn
from tapegrad.core import tree as T
from tapegrad.testing.strategies import floats_in, shapes

Pair = collections.namedtuple("Pair", "left right")


@T.register_dataclass
@dataclasses.dataclass
class Node:
    value: object
    label: str = dataclasses.field(default="node", metadata={"static": True})


@attrs.define
class Box:
    content: object
    tag: int = attrs.field(default=0, metadata={"static": True})


class Holder(nn.Module):
    """A Module holding a drawn array as a parameter and a drawn value as configuration."""

    def __init__(self, w, config):
        super().__init__()
        self.w = tg.Tensor(w)
        self.config = config


def _named(fn):
    return fn


FUNCS = [np.tanh, np.sin, _named]

float_arrays = shapes(max_dims=3, max_side=3).flatmap(
    lambda s: hnp.arrays(np.float64, s, elements=floats_in(-3.0, 3.0)))
int_arrays = shapes(max_dims=2, max_side=3).flatmap(
    lambda s: hnp.arrays(np.int64, s, elements=st.integers(-5, 5)))
leaves = st.one_of(
    float_arrays,
    int_arrays,
    float_arrays.map(tg.Tensor),
    st.integers(-3, 3),
    st.floats(-2.0, 2.0, allow_nan=False),
    st.text(max_size=3),
    st.sampled_from(FUNCS),
)


def _containers(children):
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text("abcde", min_size=1, max_size=2), children, max_size=3),
        st.tuples(children, children).map(lambda t: Pair(*t)),
        children.map(Node),
        st.tuples(children, st.integers(0, 2)).map(lambda t: Box(*t)),
        st.tuples(float_arrays, st.sampled_from([1, "relu", (2, 3)])).map(
            lambda t: Holder(*t)),
        st.none(),
    )


trees = st.recursive(leaves, _containers, max_leaves=12)


def _same(a, b) -> bool:
    """Structurally equal, leaves identical (``is``)."""
    la, ta = T.tree_flatten(a)
    lb, tb = T.tree_flatten(b)
    return ta == tb and len(la) == len(lb) and all(x is y for x, y in zip(la, lb))


@given(trees)
def test_flatten_unflatten_round_trips(tree):
    leaves, treedef = T.tree_flatten(tree)
    back = T.tree_unflatten(treedef, leaves)
    assert _same(back, tree)
    assert treedef.num_leaves == len(leaves) == len(T.tree_paths(tree))
    assert _same(T.tree_map(lambda x: x, tree), tree)


@given(trees, st.sampled_from([T.is_array, T.is_inexact_array, lambda x: isinstance(x, str)]))
def test_partition_and_combine_round_trip(tree, keep):
    leaves = T.tree_leaves(tree)
    kept, rest = T.partition(tree, keep)
    assert _same(T.combine(kept, rest), tree)
    kept_leaves = T.tree_leaves(kept)
    assert [id(x) for x in kept_leaves] == [id(x) for x in leaves if keep(x)]
    assert [id(x) for x in T.tree_leaves(rest)] == [id(x) for x in leaves if not keep(x)]
    assert _same(T.filter(tree, keep, inverse=True), rest)


@given(trees, st.data())
def test_tree_at_replaces_exactly_the_selected_leaves(tree, data):
    leaves, treedef = T.tree_flatten(tree)
    if not leaves:
        return
    picked = data.draw(st.sets(st.integers(0, len(leaves) - 1), min_size=1))
    order = sorted(picked)

    def where(t):
        flat = T.tree_leaves(t)
        return tuple(flat[i] for i in order)

    new = T.tree_at(where, tree, replace=tuple(f"new{i}" for i in order))
    got, new_def = T.tree_flatten(new)
    assert new_def == treedef
    for i, (old, now) in enumerate(zip(leaves, got, strict=True)):
        assert now == f"new{i}" if i in picked else now is old
    assert all(a is b for a, b in zip(T.tree_leaves(tree), leaves, strict=True))  # untouched


@given(trees)
def test_static_key_equal_values_have_equal_keys(tree):
    leaves = [x for x in T.tree_leaves(tree) if not isinstance(x, tg.Tensor)]
    copies = [x.copy() if isinstance(x, np.ndarray) else x for x in leaves]
    a, b = T.static_key(leaves), T.static_key(copies)
    assert a == b and hash(a) == hash(b)
    if any(isinstance(x, np.ndarray) and x.size for x in leaves):
        changed = [x + 1 if isinstance(x, np.ndarray) else x for x in copies]
        assert T.static_key(changed) != a


@given(trees)
def test_filter_grad_gives_the_floating_leaves_their_gradient_and_none_elsewhere(tree):
    def loss(t):
        return sum(((x * x).sum() for x in T.tree_leaves(t) if T.is_inexact_array(x)),
                   tg.Tensor(np.float64(0.0)))

    grads = tg.filter_grad(loss)(tree)
    want = T.filter(tree, T.is_inexact_array)
    g_leaves, g_def = T.tree_flatten(grads)
    w_leaves, w_def = T.tree_flatten(want)
    assert g_def == w_def
    for g, w in zip(g_leaves, w_leaves, strict=True):
        np.testing.assert_array_equal(g.numpy(), 2 * np.asarray(w.numpy() if isinstance(
            w, tg.Tensor) else w))
