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


# -- the new optimizers and wrappers ------------------------------------------------------------
def _leaf_list(tree):
    return [_np(x) for x in tg.tree.tree_leaves(tree)]


NEW_TXS = {
    "rmsprop": lambda: optim.rmsprop(0.01, centered=True, momentum=0.9, weight_decay=0.1),
    "adagrad": lambda: optim.adagrad(0.1, lr_decay=0.1, initial_accumulator_value=0.1),
    "lion": lambda: optim.lion(0.01, weight_decay=0.1),
    "MultiSteps": lambda: optim.MultiSteps(optim.adam(0.1), 2),
    "reduce_on_plateau": lambda: optim.chain(optim.sgd(0.1), optim.reduce_on_plateau(patience=1)),
}


@given(
    name=st.sampled_from(sorted(NEW_TXS)),
    tree=float_trees(),
    seed=st.integers(0, 2**16),
    steps=st.integers(1, 3),
)
def test_new_transforms_keep_structure_shapes_and_dtypes(name, tree, seed, steps):
    tx = NEW_TXS[name]()
    state, params = tx.init(tree), tree
    for i in range(steps):
        params, state = optim.apply_gradients(tx, _like(tree, seed + i), state, params, value=1.0)
    assert tg.tree.tree_structure(params) == tg.tree.tree_structure(tree)
    for a, b in zip(tg.tree.tree_leaves(params), tg.tree.tree_leaves(tree)):
        assert type(a) is type(b)
        assert _np(a).dtype == _np(b).dtype and _np(a).shape == _np(b).shape
        assert np.all(np.isfinite(_np(a)))


@given(tree=float_trees(min_leaves=1), seed=st.integers(0, 2**16), wd=st.floats(0.0, 1.0))
def test_lion_moves_each_element_by_at_most_lr_times_one_plus_decay(tree, seed, wd):
    lr = 0.01
    tx = optim.lion(lr, weight_decay=wd)
    state = tx.init(tree)
    for i in range(3):
        updates, state = tx.update(_like(tree, seed + i), state, tree)
        for u, p in zip(_leaf_list(updates), _leaf_list(tree)):
            bound = lr * (1 + wd * np.abs(p.astype(np.float64)))
            assert np.all(np.abs(u) <= bound * (1 + 1e-6) + 1e-12)


@st.composite
def tree_and_flags(draw):
    tree = draw(float_trees(min_leaves=1))
    flags = [draw(st.booleans()) for _ in tg.tree.tree_leaves(tree)]
    return tree, flags


@given(tf=tree_and_flags(), seed=st.integers(0, 2**16))
def test_masked_equals_inner_on_selected_leaves_and_identity_elsewhere(tf, seed):
    tree, flags = tf
    treedef = tg.tree.tree_structure(tree)
    mask = tg.tree.tree_unflatten(treedef, flags)
    grads = [_like(tree, seed + i) for i in range(3)]
    inner, tx = optim.adam(0.1), optim.masked(optim.adam(0.1), mask)
    s_in, s = inner.init(tree), tx.init(tree)
    for g in grads:
        want, s_in = inner.update(g, s_in, tree)  # adam is leafwise: a subset changes nothing
        got, s = tx.update(g, s, tree)
        for f, a, w, gi in zip(flags, _leaf_list(got), _leaf_list(want), _leaf_list(g)):
            np.testing.assert_array_equal(a, w if f else gi)


@given(tf=tree_and_flags(), seed=st.integers(0, 2**16))
def test_multi_transform_picks_each_leafs_transformation(tf, seed):
    tree, flags = tf
    labels = tg.tree.tree_unflatten(
        tg.tree.tree_structure(tree), ["a" if f else "s" for f in flags]
    )
    a, s_ = optim.adam(0.1), optim.sgd(0.1, momentum=0.9)
    tx = optim.multi_transform({"a": a, "s": s_}, labels)
    sa, ss, st_ = a.init(tree), s_.init(tree), tx.init(tree)
    for i in range(3):
        g = _like(tree, seed + i)
        ua, sa = a.update(g, sa, tree)
        us, ss = s_.update(g, ss, tree)
        got, st_ = tx.update(g, st_, tree)
        for f, x, wa, ws in zip(flags, _leaf_list(got), _leaf_list(ua), _leaf_list(us)):
            np.testing.assert_array_equal(x, wa if f else ws)


@given(
    tree=float_trees(min_leaves=1),
    seed=st.integers(0, 2**16),
    k=st.integers(1, 4),
    groups=st.integers(1, 3),
)
def test_multisteps_equals_inner_on_mean_gradients(tree, seed, k, groups):
    inner = optim.sgd(0.5, momentum=0.9)
    tx = optim.MultiSteps(inner, k)
    s, s_in = tx.init(tree), inner.init(tree)
    p, p_in = tree, tree
    for grp in range(groups):
        gs = [_like(tree, seed + grp * k + j) for j in range(k)]
        for j, g in enumerate(gs):
            p, s = optim.apply_gradients(tx, g, s, p)
            assert bool(tx.has_updated(s)) == (j == k - 1)
        mean = tg.tree.tree_map(
            lambda *xs: tg.Tensor(np.mean([_np(x).astype(np.float64) for x in xs], axis=0)
                                  .astype(_np(xs[0]).dtype)), *gs
        )  # fmt: skip
        p_in, s_in = optim.apply_gradients(inner, mean, s_in, p_in)
    for a, b in zip(_leaf_list(p), _leaf_list(p_in)):
        tol = 1e-4 if a.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@given(
    values=st.lists(st.floats(-10, 10) | st.sampled_from([1.0, 1.0, 1.0]), min_size=1, max_size=30),
    patience=st.integers(1, 4),
    cooldown=st.integers(0, 3),
    accumulation_size=st.integers(1, 3),
    min_scale=st.sampled_from([0.0, 0.05]),
)
def test_reduce_on_plateau_scale_only_falls_and_tensor_rule_agrees(
    values, patience, cooldown, accumulation_size, min_scale
):
    tx = optim.reduce_on_plateau(
        factor=0.5, patience=patience, cooldown=cooldown, atol=0.01,
        accumulation_size=accumulation_size, min_scale=min_scale,
    )  # fmt: skip
    g = {"w": tg.Tensor(np.array([1.0, 2.0]))}
    numbers = tx.init(g)
    # the rule tg.jit replays: the same state as 0-d Tensors
    tensors = {k: tg.Tensor(np.asarray(v)) for k, v in numbers.items()}
    last = 1.0
    for v in values:
        _, numbers = tx.update(g, numbers, value=v)
        _, tensors = tx.update(g, tensors, value=tg.Tensor(np.asarray(v)))
        assert min_scale <= numbers["scale"] <= last
        last = numbers["scale"]
        for k, x in numbers.items():  # the same float64 arithmetic: equal exactly
            assert tensors[k].item() == x, k
            assert tensors[k].dtype == (np.int64 if type(x) is int else np.float64)
