import collections

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import tree


def test_flatten_unflatten_roundtrip_all_kinds():
    P = collections.namedtuple("P", "a b")
    t = {"b": [1, (2, None)], "a": P(3, {"z": 4, "y": 5}), "c": collections.OrderedDict(q=6)}
    leaves, treedef = tree.tree_flatten(t)
    assert leaves == [3, 5, 4, 1, 2, 6]  # sorted dict keys, depth first; None is no leaf
    assert tree.tree_unflatten(treedef, leaves) == t
    assert tree.tree_structure(t) == treedef
    assert tree.tree_leaves(t) == leaves
    assert tree.tree_map(lambda v: v * 10, t)["a"].a == 30


def test_paths():
    paths = tree.tree_paths({"bn": {"count": 1}, "w": [1, 2]}, "params")
    assert paths == ["params['bn']['count']", "params['w'][0]", "params['w'][1]"]


def test_registered_class():
    @tree.register_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten(self):
            return (self.a, self.b), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    p = Pair(tg.Tensor(np.float64(2.0)), tg.Tensor(np.float64(3.0)))
    g = tg.grad(lambda p: p.a * p.b)(p)
    assert isinstance(g, Pair) and float(g.a) == 3.0 and float(g.b) == 2.0


def test_unflatten_wrong_count():
    _, treedef = tree.tree_flatten([1, 2])
    with pytest.raises(ValueError, match="2 leaves, got 3"):
        tree.tree_unflatten(treedef, [1, 2, 3])


def test_tree_map_structure_mismatch():
    with pytest.raises(ValueError):
        tree.tree_map(lambda a, b: a + b, [1, 2], [1, 2, 3])
