import collections

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import tree


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


# -- dataclasses and attrs classes -----------------------------------------------------------------
import dataclasses  # noqa: E402

import attrs  # noqa: E402


def test_register_dataclass_children_and_static_fields_as_jax():
    @tree.register_dataclass
    @dataclasses.dataclass(frozen=True)
    class Affine:
        w: tg.Tensor
        b: tg.Tensor
        tag: str = dataclasses.field(default="a", metadata={"static": True})

    a = Affine(tg.Tensor(np.array([1.0, 2.0])), tg.Tensor(np.array(0.5)))
    leaves, treedef = tree.tree_flatten(a)
    assert leaves == [a.w, a.b]  # the static field is no leaf
    back = tree.tree_unflatten(treedef, leaves)
    assert isinstance(back, Affine) and back.tag == "a" and back.w is a.w
    assert tree.tree_paths(a, "a") == ["a.w", "a.b"]
    g = tg.grad(lambda m: (m.w * m.b).sum())(a)
    assert isinstance(g, Affine) and g.tag == "a"
    np.testing.assert_array_equal(g.w.numpy(), [0.5, 0.5])
    assert float(g.b) == 3.0
    # the static field is part of the structure: jit compiles once per value
    f = tg.jit(lambda m: m.w * (2.0 if m.tag == "a" else 3.0))
    np.testing.assert_array_equal(f(a).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(f(Affine(a.w, a.b, "b")).numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(f(Affine(a.w * 2.0, a.b)).numpy(), [4.0, 8.0])
    assert f.cache_size() == 2


def test_register_dataclass_explicit_fields_and_errors():
    @dataclasses.dataclass
    class P:
        x: object
        n: int

    tree.register_dataclass(P, data_fields=["x"], meta_fields=["n"])
    leaves, treedef = tree.tree_flatten(P(np.ones(2), 3))
    assert len(leaves) == 1 and tree.tree_unflatten(treedef, [5]).n == 3
    assert tree.tree_structure(P(1, 3)) != tree.tree_structure(P(1, 4))

    @dataclasses.dataclass
    class Q:
        x: object
        n: int

    with pytest.raises(ValueError, match=r"in neither: \['n'\]"):
        tree.register_dataclass(Q, data_fields=["x"], meta_fields=[])
    with pytest.raises(ValueError, match=r"in both: \['x'\]"):
        tree.register_dataclass(Q, data_fields=["x", "n"], meta_fields=["x"])
    with pytest.raises(ValueError, match=r"unknown: \['y'\]"):
        tree.register_dataclass(Q, data_fields=["x", "n", "y"], meta_fields=[])
    with pytest.raises(TypeError, match="sequence of field names"):
        tree.register_dataclass(Q, data_fields="x", meta_fields=["n"])
    with pytest.raises(TypeError, match="expected a dataclass"):
        tree.register_dataclass(int)
    with pytest.raises(ValueError):  # twice
        tree.register_dataclass(P, data_fields=["x"], meta_fields=["n"])


def test_unregistered_dataclass_is_a_leaf_as_in_jax():
    @dataclasses.dataclass
    class Config:
        lr: float

    c = Config(0.1)
    assert tree.tree_leaves({"c": c}) == [c]


def test_attrs_classes_are_registered_on_first_use():
    @attrs.define
    class Layer:
        w: object
        scale: object
        name: str = attrs.field(default="layer", metadata={"static": True})

    @attrs.frozen
    class Net:
        layers: list
        depth: int = attrs.field(default=2, metadata={"static": True})

    net = Net([Layer(tg.Tensor(np.array([1.0, 2.0])), tg.Tensor(np.array(3.0)), "a"),
               Layer(tg.Tensor(np.array([-1.0])), tg.Tensor(np.array(2.0)))])
    leaves, treedef = tree.tree_flatten(net)
    assert [lf.shape for lf in leaves] == [(2,), (), (1,), ()]
    back = tree.tree_unflatten(treedef, leaves)
    assert isinstance(back, Net) and back.depth == 2 and back.layers[0].name == "a"
    assert tree.tree_paths(net, "net")[0] == "net.layers[0].w"

    def loss(net):
        return sum((layer.w * layer.scale).sum() for layer in net.layers)

    g = tg.grad(loss)(net)
    assert isinstance(g, Net) and isinstance(g.layers[1], Layer)
    np.testing.assert_array_equal(g.layers[0].w.numpy(), [3.0, 3.0])
    assert float(g.layers[0].scale) == 3.0 and float(g.layers[1].scale) == -1.0
    # a frozen attrs class rebuilt from new leaves is a new, still frozen, instance
    doubled = tree.tree_map(lambda v: v * 2.0, net)
    assert doubled is not net and float(doubled.layers[1].scale) == 4.0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        doubled.depth = 3  # pyright: ignore[reportAttributeAccessIssue]
    # explicit registration after the automatic one is refused
    with pytest.raises(ValueError):
        tree.register_attrs(Net)


def test_register_attrs_explicit_fields_and_tapegrad_records_stay_leaves():
    @attrs.define
    class Box:
        value: object
        label: str

    tree.register_attrs(Box, data_fields=["value"], meta_fields=["label"])
    leaves, treedef = tree.tree_flatten(Box(np.ones(1), "x"))
    assert len(leaves) == 1 and tree.tree_unflatten(treedef, [7]).label == "x"
    with pytest.raises(TypeError, match="expected an attrs class"):
        tree.register_attrs(dict)
    t = tg.Tensor(np.ones(2))
    assert tree.tree_leaves([t]) == [t]  # Tensor is an attrs record, and a leaf


# -- partition, combine, filter -----------------------------------------------------------------
def test_partition_combine_filter_with_is_array():
    fn = np.tanh
    t = {"w": np.ones(2), "n": 3, "f": fn, "i": np.arange(2), "x": 2.5,
         "t": tg.Tensor(np.array(1.0, np.float32))}
    arrays, rest = tree.partition(t, tree.is_array)
    assert arrays["n"] is None and arrays["f"] is None and arrays["x"] is None
    assert arrays["w"] is t["w"] and arrays["i"] is t["i"] and arrays["t"] is t["t"]
    assert rest["f"] is fn and rest["w"] is None
    back = tree.combine(arrays, rest)
    assert all(back[k] is t[k] for k in t)
    inexact = tree.filter(t, tree.is_inexact_array)
    assert inexact["i"] is None and inexact["w"] is t["w"] and inexact["t"] is t["t"]
    assert tree.filter(t, tree.is_inexact_array, inverse=True)["i"] is t["i"]
    marked = tree.filter(t, tree.is_array, replace="-")
    assert marked["n"] == "-" and marked["w"] is t["w"]


def test_partition_with_a_prefix_filter_spec_and_errors():
    t = {"enc": [np.ones(1), np.ones(2)], "dec": (np.ones(3), "x")}
    kept, rest = tree.partition(t, {"enc": True, "dec": tree.is_array})
    assert kept["enc"][1] is t["enc"][1] and kept["dec"][1] is None and rest["dec"][1] == "x"
    kept, _ = tree.partition(t, {"enc": [False, True], "dec": False})
    assert kept["enc"][0] is None and kept["enc"][1] is t["enc"][1]
    with pytest.raises(ValueError, match="filter_spec must be a bool, a callable or a pytree"):
        tree.partition(t, {"enc": True})
    with pytest.raises(TypeError, match="filter_spec leaves must be bools or callables"):
        tree.partition(t, {"enc": 1, "dec": True})
    with pytest.raises(TypeError, match="must return a bool"):
        tree.partition(t, lambda x: "yes")
    with pytest.raises(ValueError, match="combine: the trees have different structures"):
        tree.combine([1, None], [None])
    with pytest.raises(TypeError, match="at least one tree"):
        tree.combine()
    assert tree.is_inexact_array(np.ones(1, np.complex64)) and not tree.is_inexact_array(1.0)
    assert not tree.is_array([1.0]) and tree.is_array(np.float32(1.0))


# -- tree_at --------------------------------------------------------------------------------------
def test_tree_at_replaces_leaves_and_subtrees_out_of_place():
    t = {"a": [np.zeros(1), np.ones(2)], "b": {"c": 3, "d": None}}
    new = tree.tree_at(lambda t: t["a"][1], t, replace="x")
    assert new["a"][1] == "x" and t["a"][1].shape == (2,) and new["a"][0] is t["a"][0]
    new = tree.tree_at(lambda t: t["b"], t, replace=(1, 2))
    assert new["b"] == (1, 2) and t["b"] == {"c": 3, "d": None}
    new = tree.tree_at(lambda t: (t["a"][0], t["b"]["c"]), t, replace=(7, 8))
    assert new["a"][0] == 7 and new["b"]["c"] == 8
    new = tree.tree_at(lambda t: [t["a"], t["b"]["c"]], t, replace_fn=lambda v: ("was", v))
    assert new["a"][0] == "was" and new["a"][1][1] is t["a"][1] and new["b"]["c"] == ("was", 3)
    new = tree.tree_at(lambda t: t["b"]["d"], t, replace=5, is_leaf=lambda x: x is None)
    assert new["b"]["d"] == 5
    whole = tree.tree_at(lambda t: t, t, replace=0)
    assert whole == 0


def test_tree_at_errors_name_the_problem():
    t = {"a": [1, 2], "b": None}
    with pytest.raises(TypeError, match="exactly one of replace= and replace_fn="):
        tree.tree_at(lambda t: t["a"], t)
    with pytest.raises(TypeError, match="exactly one of replace= and replace_fn="):
        tree.tree_at(lambda t: t["a"], t, replace=1, replace_fn=abs)
    with pytest.raises(TypeError, match="not a node of the tree"):
        tree.tree_at(lambda t: [9, 9], t, replace=(0, 0))
    with pytest.raises(TypeError, match="not a node of the tree"):
        tree.tree_at(lambda t: "nope", t, replace=0)
    with pytest.raises(TypeError, match="is_leaf=lambda x: x is None"):
        tree.tree_at(lambda t: t["b"], t, replace=0)
    with pytest.raises(ValueError, match="sequence of 2 values"):
        tree.tree_at(lambda t: (t["a"][0], t["a"][1]), t, replace=0)
    with pytest.raises(ValueError, match="same node twice"):
        tree.tree_at(lambda t: (t["a"], t["a"]), t, replace=(0, 0))
    with pytest.raises(TypeError, match="where must be a function"):
        tree.tree_at("a", t, replace=0)  # pyright: ignore[reportArgumentType]


def test_static_key_equal_values_equal_keys():
    k = tree.static_key
    assert k([1, {"a": (2.0, "s")}]) == k([1, {"a": (2.0, "s")}])
    assert hash(k({"x": [1], "y": 2})) == hash(k({"y": 2, "x": [1]}))
    assert k(float("nan")) == k(float("nan"))
    assert k(np.arange(3)) == k(np.arange(3)) and k(np.arange(3)) != k(np.arange(3.0))
    assert k(1) != k(1.0) != k(True) and k((1,)) != k([1])
    obj = object()
    assert k([obj]) == k([obj]) and k([object()]) != k([object()])
    unhashable = type("U", (), {"__hash__": None})()
    assert k(unhashable) == k(unhashable)


def test_ravel_pytree_is_reachable_where_jax_has_it():
    assert tg.flatten_util.ravel_pytree is tg.ravel_pytree
    flat, unravel = tg.flatten_util.ravel_pytree({"w": np.ones((2, 2)), "b": np.zeros(2)})
    assert flat.shape == (6,) and unravel(flat)["w"].shape == (2, 2)
