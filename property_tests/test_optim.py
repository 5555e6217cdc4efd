"""Hypothesis laws of tapegrad.optim and tapegrad.io over drawn pytrees and values."""

import tempfile

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import io, optim
from tapegrad.testing import strategies as tst

DTYPES = st.sampled_from([np.float32, np.float64])


@st.composite
def float_trees(draw, min_leaves=0):
    """Pytrees (dicts, lists, tuples, None) of floating Tensors and NumPy arrays, with
    scalar, size-1 and size-0 shapes."""
    n = draw(st.integers(min_leaves, 4))
    leaves = []
    for _ in range(n):
        dtype = draw(DTYPES)
        arr = draw(tst.arrays(draw(tst.shapes(max_dims=3, max_side=3)), dtype))
        leaves.append(tg.Tensor(arr) if draw(st.booleans()) else arr)
    layout = draw(st.sampled_from(["dict", "nested", "list", "tuple"]))
    if layout == "dict":
        return {f"k{i}": v for i, v in enumerate(leaves)}
    if layout == "nested":
        return {"a": leaves[: n // 2], "b": (tuple(leaves[n // 2 :]), None)}
    return leaves if layout == "list" else tuple(leaves)


def _np(x):
    return np.asarray(x.numpy() if isinstance(x, tg.Tensor) else x)


def _like(tree, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    return tg.tree.tree_map(
        lambda p: tg.Tensor((scale * rng.normal(size=np.shape(p))).astype(np.asarray(p).dtype)),
        tree,
    )


@given(tree=float_trees())
def test_apply_zero_updates_is_identity(tree):
    zeros = optim.tree_zeros_like(tree)
    out = optim.apply_updates(tree, zeros)
    assert tg.tree.tree_structure(out) == tg.tree.tree_structure(tree)
    for a, b in zip(tg.tree.tree_leaves(out), tg.tree.tree_leaves(tree)):
        assert type(a) is type(b)
        assert _np(a).dtype == _np(b).dtype
        np.testing.assert_array_equal(_np(a), _np(b))


@given(tree=float_trees(), seed=st.integers(0, 2**16), max_norm=st.floats(0.01, 10.0))
def test_clip_by_global_norm_bounds_the_norm(tree, seed, max_norm):
    grads = _like(tree, seed, scale=5.0)
    norm = float(optim.global_norm(grads))
    tx = optim.clip_by_global_norm(max_norm)
    out, _ = tx.update(grads, tx.init(tree))
    new = float(optim.global_norm(out))
    assert new <= max_norm * (1 + 1e-5)
    if norm <= max_norm:  # within bounds: unchanged
        for a, b in zip(tg.tree.tree_leaves(out), tg.tree.tree_leaves(grads)):
            np.testing.assert_array_equal(_np(a), _np(b))
    else:  # rescaled to the bound, direction kept
        np.testing.assert_allclose(new, max_norm, rtol=1e-4)
        for a, b in zip(tg.tree.tree_leaves(out), tg.tree.tree_leaves(grads)):
            np.testing.assert_allclose(_np(a), _np(b) * (max_norm / norm), rtol=1e-4, atol=1e-6)


@given(tree=float_trees(min_leaves=1), seed=st.integers(0, 2**16), s=st.floats(0.1, 4.0))
def test_chain_is_sequential_composition(tree, seed, s):
    grads = _like(tree, seed)
    a, b = optim.scale(s), optim.adam(0.1)
    ua, _ = a.update(grads, a.init(tree))
    want, _ = b.update(ua, b.init(tree), tree)
    chained = optim.chain(a, b)
    got, state = chained.update(grads, chained.init(tree), tree)
    assert len(state) == 1 + len(b.transforms)
    for x, y in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)):
        np.testing.assert_array_equal(_np(x), _np(y))


@given(tree=float_trees(), seed=st.integers(0, 2**16))
def test_optimizer_state_dict_round_trips_through_io(tree, seed):
    opt = optim.Adam(tree, lr=0.01, weight_decay=0.1)
    opt.step(_like(tree, seed))
    sd = opt.state_dict()
    with tempfile.TemporaryDirectory() as d:
        io.save(f"{d}/o", sd)
        back = io.load(f"{d}/o", like=sd)
    other = optim.Adam(tree, lr=0.01, weight_decay=0.1)
    other.load_state_dict(back)
    assert other.timestep == 1 and other.hyperparams == opt.hyperparams
    for x, y in zip(tg.tree.tree_leaves(other.opt_state), tg.tree.tree_leaves(opt.opt_state)):
        assert type(x) is type(y)
        np.testing.assert_array_equal(_np(x), _np(y))


scalar_leaves = st.one_of(
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=5),
)
array_leaves = st.one_of(
    tst.shapes(max_dims=3, max_side=3).flatmap(
        lambda s: st.sampled_from([np.float32, np.float64, np.int64, np.bool_]).flatmap(
            lambda dt: tst.arrays(
                s,
                dt,
                elements=None
                if dt in (np.float32, np.float64)
                else (st.integers(-(2**62), 2**62) if dt == np.int64 else st.booleans()),
            )
        )
    ),
)
trees = st.recursive(
    st.one_of(scalar_leaves, array_leaves, array_leaves.map(tg.Tensor), st.none()),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.lists(kids, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 9)), kids, max_size=3),
    ),
    max_leaves=8,
)


def _assert_exact(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_exact(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_exact(x, y)
    elif isinstance(a, (tg.Tensor, np.ndarray)):
        assert _np(a).dtype == _np(b).dtype and _np(a).shape == _np(b).shape
        np.testing.assert_array_equal(_np(a), _np(b))
    else:
        assert a == b


@given(tree=trees)
def test_io_round_trip_is_exact(tree):
    with tempfile.TemporaryDirectory() as d:
        io.save(f"{d}/t", tree)
        _assert_exact(io.load(f"{d}/t"), tree)
        _assert_exact(io.load(f"{d}/t", like=tree), tree)
