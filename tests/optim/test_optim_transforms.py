"""Pure transforms: updates against hand-written NumPy references, step for step."""

import math

import attrs
import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim


def _params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "w": tg.Tensor(rng.normal(size=(3, 2)).astype(dtype)),
        "b": [tg.Tensor(rng.normal(size=(2,)).astype(dtype)), tg.Tensor(np.asarray(0.5, dtype))],
    }


def _grad_seq(params, steps, seed=1):
    rng = np.random.default_rng(seed)
    leaves = tg.tree.tree_leaves(params)
    treedef = tg.tree.tree_structure(params)
    return [
        tg.tree.tree_unflatten(
            treedef, [tg.Tensor(rng.normal(size=p.shape).astype(p.dtype)) for p in leaves]
        )
        for _ in range(steps)
    ]


def _np(tree):
    return [
        np.asarray(x.numpy() if isinstance(x, tg.Tensor) else x) for x in tg.tree.tree_leaves(tree)
    ]


def _run(tx, params, grads_seq):
    state = tx.init(params)
    out = []
    for g in grads_seq:
        updates, state = tx.update(g, state, params)
        params = optim.apply_updates(params, updates)
        out.append(_np(params))
    return out, state


# -- NumPy references (written from the papers / PyTorch docs) -------------------------------
def ref_sgd(p, gs, lr, momentum=0.0, nesterov=False, wd=0.0):
    p = [x.copy() for x in p]
    buf = None
    out = []
    for g in gs:
        g = [gi + wd * pi for gi, pi in zip(g, p)]
        if momentum:
            buf = g if buf is None else [momentum * b + gi for b, gi in zip(buf, g)]
            g = [gi + momentum * b for gi, b in zip(g, buf)] if nesterov else buf
        p = [pi - lr * gi for pi, gi in zip(p, g)]
        out.append(p)
    return out


def ref_adam(p, gs, lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0):
    p = [x.copy() for x in p]
    m = [np.zeros_like(x) for x in p]
    v = [np.zeros_like(x) for x in p]
    out = []
    for t, g in enumerate(gs, start=1):
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
        v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g)]
        mh = [mi / (1 - b1**t) for mi in m]
        vh = [vi / (1 - b2**t) for vi in v]
        p = [pi - lr * wd * pi for pi in p]  # decoupled decay, as in the seeds' Adam
        p = [pi - lr * a / (np.sqrt(b) + eps) for pi, a, b in zip(p, mh, vh)]
        out.append(p)
    return out


def _compare(got, want, rtol=1e-12, atol=1e-12):
    assert len(got) == len(want)
    for step, (gs, ws) in enumerate(zip(got, want)):
        for g, w in zip(gs, ws):
            assert g.dtype == w.dtype, step
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"step {step}")


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"momentum": 0.9},
        {"momentum": 0.9, "nesterov": True},
        {"weight_decay": 0.1},
        {"momentum": 0.5, "nesterov": True, "weight_decay": 0.01},
    ],
)
def test_sgd_matches_numpy_reference(kw):
    params = _params()
    gs = _grad_seq(params, 5)
    got, _ = _run(optim.sgd(0.1, **kw), params, gs)
    want = ref_sgd(
        _np(params),
        [_np(g) for g in gs],
        0.1,
        kw.get("momentum", 0.0),
        kw.get("nesterov", False),
        kw.get("weight_decay", 0.0),
    )
    _compare(got, want)


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adamw_and_adam_match_numpy_reference(wd):
    params = _params()
    gs = _grad_seq(params, 6)
    tx = optim.adamw(1e-2, b1=0.8, b2=0.99, eps=1e-6, weight_decay=wd)
    got, state = _run(tx, params, gs)
    want = ref_adam(_np(params), [_np(g) for g in gs], 1e-2, 0.8, 0.99, 1e-6, wd)
    _compare(got, want)
    assert state[0]["count"] == 6
    if wd == 0.0:
        got_adam, _ = _run(optim.adam(1e-2, b1=0.8, b2=0.99, eps=1e-6), params, gs)
        _compare(got_adam, want)


def test_adam_float32_keeps_dtype_and_is_close():
    params = _params(np.float32)
    gs = _grad_seq(params, 4)
    got, state = _run(optim.adam(1e-3), params, gs)
    want = ref_adam(
        [x.astype(np.float64) for x in _np(params)],
        [[x.astype(np.float64) for x in _np(g)] for g in gs],
        1e-3,
    )
    for gs_, ws in zip(got, want):
        for g, w in zip(gs_, ws):
            assert g.dtype == np.float32
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert all(x.dtype == np.float32 for x in _np(state[0]["mu"]))


def test_matches_torch_where_installed():
    torch = pytest.importorskip("torch")
    params = _params()
    gs = _grad_seq(params, 4)
    for make_tx, make_torch in [
        (lambda: optim.adamw(1e-2, eps=1e-8, weight_decay=0.1),
         lambda ps: torch.optim.AdamW(ps, lr=1e-2, eps=1e-8, weight_decay=0.1)),
        (lambda: optim.sgd(0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
         lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ]:  # fmt: skip
        got, _ = _run(make_tx(), params, gs)
        tp = [torch.tensor(x, requires_grad=True) for x in _np(params)]
        topt = make_torch(tp)
        for step, g in enumerate(gs):
            for t, gi in zip(tp, _np(g)):
                t.grad = torch.tensor(gi)
            topt.step()
            for t, mine in zip(tp, got[step]):
                np.testing.assert_allclose(t.detach().numpy(), mine, rtol=1e-10, atol=1e-12)


def test_schedule_learning_rate_counts_updates_from_zero():
    sched = optim.exponential_decay(1.0, transition_steps=1, decay_rate=0.5)
    params = {"w": tg.Tensor(np.zeros(2))}
    tx = optim.sgd(sched)
    state = tx.init(params)
    g = {"w": tg.Tensor(np.ones(2))}
    seen = []
    for _ in range(3):
        u, state = tx.update(g, state, params)
        seen.append(float(u["w"].numpy()[0]))
    assert seen == [-1.0, -0.5, -0.25]
    assert state[-1] == {"count": 3}


def test_clip_by_global_norm_rescales_only_above_bound():
    g = {"a": tg.Tensor(np.array([3.0, 0.0])), "b": tg.Tensor(np.array([[4.0]]))}  # norm 5
    tx = optim.clip_by_global_norm(1.0)
    out, state = tx.update(g, tx.init(g))
    np.testing.assert_allclose(out["a"].numpy(), [0.6, 0.0])
    np.testing.assert_allclose(out["b"].numpy(), [[0.8]])
    assert state == {}
    out, _ = optim.clip_by_global_norm(10.0).update(g, {})
    np.testing.assert_array_equal(out["a"].numpy(), [3.0, 0.0])


def test_global_norm_orders():
    g = [tg.Tensor(np.array([3.0, -4.0])), tg.Tensor(np.array([[1.0, -2.0]]))]
    flat = np.array([3.0, -4.0, 1.0, -2.0])
    for ord_ in (1, 2, 3.0, 0.5, math.inf):
        want = np.linalg.norm(flat, ord_) if ord_ >= 1 else np.sum(np.abs(flat) ** ord_) ** 2
        np.testing.assert_allclose(float(optim.global_norm(g, ord_)), want, rtol=1e-12)
    assert float(optim.global_norm([])) == 0.0
    assert optim.global_norm([tg.Tensor(np.zeros(2, np.float32))]).dtype == np.float32
    with pytest.raises(ValueError, match="ord must be"):
        optim.global_norm(g, 0)


def test_global_norm_is_differentiable():
    x = tg.Tensor(np.array([3.0, 4.0]))
    got = tg.grad(lambda x: optim.global_norm({"x": x}))(x)
    np.testing.assert_allclose(got.numpy(), [0.6, 0.8])


def test_chain_applies_in_order_and_flattens():
    g = {"w": tg.Tensor(np.array([3.0, 4.0]))}
    a = optim.chain(optim.clip_by_global_norm(1.0), optim.scale(10.0))
    b = optim.chain(optim.scale(10.0), optim.clip_by_global_norm(1.0))
    ua, _ = a.update(g, a.init(g))
    ub, _ = b.update(g, b.init(g))
    np.testing.assert_allclose(ua["w"].numpy(), [6.0, 8.0])
    np.testing.assert_allclose(ub["w"].numpy(), [0.6, 0.8])
    nested = optim.chain(optim.identity(), optim.chain(optim.scale(2.0), optim.sgd(0.1)))
    assert len(nested.transforms) == 3
    assert len(nested.init(g)) == 3


def test_apply_updates_keeps_leaf_kinds_and_dtypes():
    params = {
        "t": tg.Tensor(np.ones(2, np.float32)),
        "a": np.ones(3, np.float64),
        "s": np.float32(1.0),
    }
    updates = {
        "t": tg.Tensor(np.full(2, 0.5, np.float64)),
        "a": tg.Tensor(np.full(3, 0.25)),
        "s": tg.Tensor(np.asarray(2.0, np.float32)),
    }
    out = optim.apply_updates(params, updates)
    assert isinstance(out["t"], tg.Tensor) and out["t"].dtype == np.float32
    assert type(out["a"]) is np.ndarray and out["a"].dtype == np.float64
    assert isinstance(out["s"], np.float32) and out["s"] == 3.0
    np.testing.assert_array_equal(params["a"], np.ones(3))  # untouched


def test_numpy_params_work_end_to_end():
    params = {"w": np.array([1.0, -1.0])}
    tx = optim.adam(0.1)
    state = tx.init(params)
    updates, state = tx.update({"w": np.array([2.0, -3.0])}, state, params)
    new = optim.apply_updates(params, updates)
    np.testing.assert_allclose(new["w"], [0.9, -0.9], rtol=1e-6)


def test_update_is_differentiable_through_a_step():
    # d/dw of loss(w - lr * grad(loss)(w)) with loss = sum(w**2): (1 - 2 lr)**2 * 2w
    def after_step(w):
        g = tg.grad(lambda v: (v * v).sum())(w)
        u, _ = optim.sgd(0.1).update({"w": g}, optim.sgd(0.1).init({"w": w}))
        new = optim.apply_updates({"w": w}, u)["w"]
        return (new * new).sum()

    w = tg.Tensor(np.array([1.0, 2.0]))
    np.testing.assert_allclose(tg.grad(after_step)(w).numpy(), 0.64 * 2 * np.array([1.0, 2.0]))


def test_transforms_are_frozen_records():
    tx = optim.adam(1e-3)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        tx.transforms = ()
    assert tx == optim.adam(1e-3)
    assert "ScaleByAdam(b1=0.9, b2=0.999, eps=1e-08, amsgrad=False)" in repr(tx)


def test_state_and_inputs_are_not_mutated():
    params = _params()
    before = _np(params)
    tx = optim.adamw(0.1, weight_decay=0.1)
    state = tx.init(params)
    state_before = _np(state)
    g = _grad_seq(params, 1)[0]
    tx.update(g, state, params)
    for x, y in zip(_np(params), before):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(_np(state), state_before):
        np.testing.assert_array_equal(x, y)


def test_errors():
    params = {"w": tg.Tensor(np.ones(3))}
    with pytest.raises(TypeError, match="different pytree structures"):
        optim.apply_updates(params, {"v": tg.Tensor(np.ones(3))})
    with pytest.raises(ValueError, match=r"shape \(1,\).*\(3,\)"):
        optim.apply_updates(params, {"w": tg.Tensor(np.ones(1))})
    with pytest.raises(TypeError, match="dtype int64"):
        optim.adam(0.1).init({"w": np.arange(3)})
    with pytest.raises(TypeError, match="leaf params\\['w'\\] is a float"):
        optim.apply_updates({"w": 1.0}, {"w": 1.0})
    with pytest.raises(ValueError, match="needs params"):
        optim.add_decayed_weights(0.1).update(params, {})
    with pytest.raises(ValueError, match="nesterov=True needs momentum"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(ValueError, match="b1 must be in"):
        optim.adam(0.1, b1=1.0)
    with pytest.raises(TypeError, match="b2 must be a number, got str"):
        optim.adam(0.1, b2="0.9")
    with pytest.raises(ValueError, match="learning_rate must be finite"):
        optim.sgd(-1.0)
    with pytest.raises(TypeError, match="learning_rate must be a number or a schedule"):
        optim.adam("fast")
    with pytest.raises(ValueError, match="max_norm must be"):
        optim.clip_by_global_norm(0.0)
    with pytest.raises(TypeError, match="argument 1 is a int"):
        optim.chain(optim.identity(), 3)
    with pytest.raises(TypeError, match="state must be a tuple of 2"):
        optim.adam(0.1).update(params, {})
    with pytest.raises(ValueError, match="scale_by_adam.*shape"):
        tx = optim.adam(0.1)
        tx.update({"w": tg.Tensor(np.ones(1))}, tx.init(params), params)


# -- apply_gradients: tx.update + apply_updates in one call ----------------------------------
_TXS = {
    "sgd": lambda: optim.sgd(0.1),
    "momentum": lambda: optim.sgd(0.05, momentum=0.9),
    "nesterov+decay": lambda: optim.sgd(0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "adam": lambda: optim.adam(0.1),
    "adamw": lambda: optim.adamw(0.1, weight_decay=0.1),
    "clip+sgd schedule": lambda: optim.chain(
        optim.clip_by_global_norm(0.5), optim.sgd(optim.exponential_decay(0.1, 1, 0.5))
    ),
    "trace alone": lambda: optim.trace(0.9),  # its updates are its own state
    "identity": lambda: optim.identity(),  # its updates are the caller's gradients
}


def _copies(tree):
    return [a.copy() for a in _np(tree)]


@pytest.mark.parametrize("name", sorted(_TXS))
def test_apply_gradients_equals_update_then_apply_and_mutates_nothing(name):
    params = _params()
    grads = _grad_seq(params, 3)
    tx = _TXS[name]()
    p1, s1 = params, tx.init(params)
    p2, s2 = params, tx.init(params)
    for g in grads:
        held = (p1, g, s1)
        before = [_copies(t) for t in held]
        p1, s1 = optim.apply_gradients(tx, g, s1, p1)
        u, s2 = tx.update(g, s2, p2)
        p2 = optim.apply_updates(p2, u)
        for x, y in zip(_np(p1) + _np(s1), _np(p2) + _np(s2)):
            np.testing.assert_array_equal(x, y)
        for tree, old in zip(held, before):  # the caller's params, gradients and state
            for x, y in zip(_np(tree), old):
                np.testing.assert_array_equal(x, y)
    assert tg.tree.tree_structure(p1) == tg.tree.tree_structure(params)


def test_apply_gradients_leaves_old_params_and_state_untouched():
    params = _params()
    tx = optim.sgd(0.05, momentum=0.9)
    state = tx.init(params)
    before_p, g = _copies(params), _grad_seq(params, 1)[0]
    new, new_state = optim.apply_gradients(tx, g, state, params)
    state_before = _copies(new_state)
    newer, _ = optim.apply_gradients(tx, g, new_state, new)
    for x, y in zip(_np(params), before_p):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(_np(new_state), state_before):  # momentum buffers kept by the old state
        np.testing.assert_array_equal(x, y)
    assert not any(np.array_equal(a, b) for a, b in zip(_np(newer), _np(new)))


def test_apply_gradients_never_writes_into_the_callers_gradients():
    params = _params()
    g = _grad_seq(params, 1)[0]
    g_before = _np(g)
    tx = optim.identity()  # the updates are the caller's gradients themselves
    new, _ = optim.apply_gradients(tx, g, tx.init(params), params)
    for a, b in zip(_np(g), g_before):
        np.testing.assert_array_equal(a, b)
    for n, p, gi in zip(*(tg.tree.tree_leaves(t) for t in (new, params, g))):
        np.testing.assert_array_equal(n.numpy(), p.numpy() + gi.numpy())


def test_apply_gradients_general_leaves_and_errors():
    params = {"w": np.array([1.0, 2.0]), "b": tg.Tensor(np.float32(0.5))}
    grads = {"w": np.array([0.5, 0.5]), "b": tg.Tensor(np.float32(1.0))}
    tx = optim.sgd(0.1)
    new, _ = optim.apply_gradients(tx, grads, tx.init(params), params)
    assert isinstance(new["w"], np.ndarray) and isinstance(new["b"], tg.Tensor)
    np.testing.assert_allclose(new["w"], [0.95, 1.95])
    np.testing.assert_allclose(new["b"].numpy(), 0.4, rtol=1e-6)
    np.testing.assert_array_equal(params["w"], [1.0, 2.0])
    w = {"w": tg.Tensor(np.ones(2))}
    with pytest.raises(TypeError, match="different pytree structures"):
        optim.apply_gradients(tx, {"v": tg.Tensor(np.ones(2))}, tx.init(w), w)
    with pytest.raises(TypeError, match="different pytree structures"):  # a subtree for a leaf
        optim.apply_gradients(tx, {"w": [tg.Tensor(np.ones(2))]}, tx.init(w), w)


def test_apply_gradients_is_differentiable_through_a_step():
    def after_step(w):
        g = tg.grad(lambda v: (v * v).sum())(w)
        tx = optim.sgd(0.1)
        new, _ = optim.apply_gradients(tx, {"w": g}, tx.init({"w": w}), {"w": w})
        return (new["w"] * new["w"]).sum()

    w = tg.Tensor(np.array([1.0, 2.0]))
    np.testing.assert_allclose(tg.grad(after_step)(w).numpy(), 0.64 * 2 * np.array([1.0, 2.0]))


def test_apply_gradients_with_an_empty_chain_adds_the_gradients():
    params = _params()
    g = _grad_seq(params, 1)[0]
    tx = optim.chain()  # no transforms: the updates are the gradients themselves
    new, state = optim.apply_gradients(tx, g, tx.init(params), params)
    assert state == ()
    for n, p, gi in zip(*(tg.tree.tree_leaves(t) for t in (new, params, g))):
        np.testing.assert_array_equal(n.numpy(), p.numpy() + gi.numpy())


# -- rmsprop, adagrad, lion: NumPy references from the published update equations ----------------
def ref_rmsprop(p, gs, lr, alpha=0.99, eps=1e-8, wd=0.0, momentum=0.0, centered=False):
    # PyTorch's documented algorithm (torch.optim.RMSprop), written out.
    p = [x.copy() for x in p]
    v = [np.zeros_like(x) for x in p]
    m = [np.zeros_like(x) for x in p]
    b = [np.zeros_like(x) for x in p]
    out = []
    for g in gs:
        g = [gi + wd * pi for gi, pi in zip(g, p)]
        v = [alpha * vi + (1 - alpha) * gi**2 for vi, gi in zip(v, g)]
        if centered:
            m = [alpha * mi + (1 - alpha) * gi for mi, gi in zip(m, g)]
            d = [np.sqrt(vi - mi**2) + eps for vi, mi in zip(v, m)]
        else:
            d = [np.sqrt(vi) + eps for vi in v]
        step = [gi / di for gi, di in zip(g, d)]
        if momentum:
            b = [momentum * bi + si for bi, si in zip(b, step)]
            step = b
        p = [pi - lr * si for pi, si in zip(p, step)]
        out.append(p)
    return out


def ref_adagrad(p, gs, lr, lr_decay=0.0, wd=0.0, init_acc=0.0, eps=1e-10):
    # Duchi et al. 2011, diagonal form, with PyTorch's lr_decay and L2 term.
    p = [x.copy() for x in p]
    s = [np.full_like(x, init_acc) for x in p]
    out = []
    for t, g in enumerate(gs, start=1):
        g = [gi + wd * pi for gi, pi in zip(g, p)]
        s = [si + gi**2 for si, gi in zip(s, g)]
        clr = lr / (1 + (t - 1) * lr_decay)
        p = [pi - clr * gi / (np.sqrt(si) + eps) for pi, gi, si in zip(p, g, s)]
        out.append(p)
    return out


def ref_lion(p, gs, lr, b1=0.9, b2=0.99, wd=1e-3):
    # Chen et al. 2023, Algorithm 2 (decoupled weight decay).
    p = [x.copy() for x in p]
    m = [np.zeros_like(x) for x in p]
    out = []
    for g in gs:
        u = [np.sign((1 - b1) * gi + b1 * mi) for gi, mi in zip(g, m)]
        m = [(1 - b2) * gi + b2 * mi for gi, mi in zip(g, m)]
        p = [pi - lr * (ui + wd * pi) for pi, ui in zip(p, u)]
        out.append(p)
    return out


RMSPROP_KW = [
    {},
    {"centered": True},
    {"momentum": 0.9},
    {"alpha": 0.9, "eps": 1e-3, "weight_decay": 0.1, "momentum": 0.5, "centered": True},
]
ADAGRAD_KW = [
    {},
    {"lr_decay": 0.1},
    {"weight_decay": 0.1, "initial_accumulator_value": 0.5, "eps": 1e-3, "lr_decay": 0.01},
]
LION_KW = [{}, {"b1": 0.8, "b2": 0.95, "weight_decay": 0.1}, {"weight_decay": 0.0}]


def _ref_kw(kw, names):
    return {names.get(k, k): v for k, v in kw.items()}


@pytest.mark.parametrize("kw", RMSPROP_KW)
def test_rmsprop_matches_numpy_reference(kw):
    params = _params()
    gs = _grad_seq(params, 6)
    got, state = _run(optim.rmsprop(0.01, **kw), params, gs)
    want = ref_rmsprop(
        _np(params), [_np(g) for g in gs], 0.01, **_ref_kw(kw, {"weight_decay": "wd"})
    )
    _compare(got, want, rtol=1e-11)
    (rms,) = [s for s in state if "nu" in s]  # the centered form also keeps the mean gradient
    assert sorted(rms) == (["mu", "nu"] if kw.get("centered") else ["nu"])


@pytest.mark.parametrize("kw", ADAGRAD_KW)
def test_adagrad_matches_numpy_reference(kw):
    params = _params()
    gs = _grad_seq(params, 6)
    got, state = _run(optim.adagrad(0.1, **kw), params, gs)
    names = {"weight_decay": "wd", "initial_accumulator_value": "init_acc"}
    want = ref_adagrad(_np(params), [_np(g) for g in gs], 0.1, **_ref_kw(kw, names))
    _compare(got, want, rtol=1e-11)
    counts = [s["count"] for s in state if "count" in s]
    assert counts == [6] and type(counts[0]) is int


@pytest.mark.parametrize("kw", LION_KW)
def test_lion_matches_numpy_reference(kw):
    params = _params()
    gs = _grad_seq(params, 6)
    got, _ = _run(optim.lion(0.01, **kw), params, gs)
    want = ref_lion(_np(params), [_np(g) for g in gs], 0.01, **_ref_kw(kw, {"weight_decay": "wd"}))
    _compare(got, want, rtol=1e-12)


@pytest.mark.parametrize(
    "make", [lambda: optim.rmsprop(1e-3, centered=True, momentum=0.9),
             lambda: optim.adagrad(1e-2, lr_decay=0.1), lambda: optim.lion(1e-3)],
    ids=["rmsprop", "adagrad", "lion"],
)  # fmt: skip
def test_new_optimizers_float32_keep_dtype(make):
    params = _params(np.float32)
    got, state = _run(make(), params, _grad_seq(params, 3))
    assert all(x.dtype == np.float32 for x in got[-1])
    arrays = [x for x in tg.tree.tree_leaves(state) if isinstance(x, tg.Tensor)]
    assert arrays and all(x.dtype == np.float32 for x in arrays)


def test_lion_steps_are_signs_times_learning_rate():
    params = {"w": tg.Tensor(np.array([1.0, -1.0, 2.0]))}
    g = {"w": tg.Tensor(np.array([3.0, -1e-9, 0.0]))}
    tx = optim.lion(0.1, weight_decay=0.0)
    u, state = tx.update(g, tx.init(params), params)
    np.testing.assert_array_equal(u["w"].numpy(), [-0.1, 0.1, 0.0])
    np.testing.assert_allclose(state[0]["mu"]["w"].numpy(), [0.03, -1e-11, 0.0])


def test_new_optimizers_match_torch_where_installed():
    torch = pytest.importorskip("torch")
    params = _params()
    gs = _grad_seq(params, 5)
    cases = []
    for kw in RMSPROP_KW:
        cases.append(
            (optim.rmsprop(0.01, **kw), lambda ps, kw=kw: torch.optim.RMSprop(ps, lr=0.01, **kw))
        )
    for kw in ADAGRAD_KW:
        cases.append(
            (optim.adagrad(0.1, **kw), lambda ps, kw=kw: torch.optim.Adagrad(ps, lr=0.1, **kw))
        )
    for tx, make_torch in cases:
        got, _ = _run(tx, params, gs)
        tp = [torch.tensor(x, requires_grad=True) for x in _np(params)]
        topt = make_torch(tp)
        for step, g in enumerate(gs):
            for t, gi in zip(tp, _np(g)):
                t.grad = torch.tensor(gi)
            topt.step()
            for t, mine in zip(tp, got[step]):
                np.testing.assert_allclose(t.detach().numpy(), mine, rtol=1e-10, atol=1e-13)


def test_lion_and_rmsprop_match_optax_where_installed(optax_x64):
    optax = optax_x64.optax
    params = _params()
    gs = _grad_seq(params, 6)
    pairs = [
        (optim.lion(0.01), optax.lion(0.01)),
        (optim.lion(0.02, b1=0.7, b2=0.9, weight_decay=0.1),
         optax.lion(0.02, b1=0.7, b2=0.9, weight_decay=0.1)),
        # Optax's rmsprop with PyTorch's eps placement and decay gives the same steps.
        (optim.rmsprop(0.01, alpha=0.9, centered=True, momentum=0.8),
         optax.rmsprop(0.01, decay=0.9, eps=1e-8, eps_in_sqrt=False, centered=True, momentum=0.8)),
    ]  # fmt: skip
    for mine, theirs in pairs:
        got, _ = _run(mine, params, gs)
        want = optax_x64.run(theirs, params, gs)
        _compare(got, want, rtol=1e-10, atol=1e-13)


def test_new_optimizer_errors():
    with pytest.raises(ValueError, match="rmsprop: alpha must be in"):
        optim.rmsprop(0.1, alpha=1.5)
    with pytest.raises(ValueError, match="rmsprop: eps must be a finite number >= 0"):
        optim.rmsprop(0.1, eps=-1.0)
    with pytest.raises(ValueError, match="rmsprop: momentum must be in"):
        optim.rmsprop(0.1, momentum=-0.1)
    with pytest.raises(ValueError, match="adagrad: lr_decay must be"):
        optim.adagrad(0.1, lr_decay=-0.1)
    with pytest.raises(ValueError, match="adagrad: initial_accumulator_value must be"):
        optim.adagrad(0.1, initial_accumulator_value=float("nan"))
    with pytest.raises(ValueError, match="adagrad: learning_rate must be finite"):
        optim.adagrad(-0.1)
    with pytest.raises(TypeError, match="lion: b1 must be a number, got str"):
        optim.lion(0.1, b1="0.9")
    with pytest.raises(ValueError, match="lion: weight_decay must be"):
        optim.lion(0.1, weight_decay=-1.0)
    params = {"w": tg.Tensor(np.ones(3))}
    for tx in (optim.rmsprop(0.1, centered=True), optim.adagrad(0.1), optim.lion(0.1)):
        with pytest.raises(ValueError, match=r"shape \(2,\)"):
            tx.update({"w": tg.Tensor(np.ones(2))}, tx.init(params), params)
        with pytest.raises(TypeError, match="dtype int64"):
            tx.init({"w": np.arange(3)})


# -- reduce_on_plateau ----------------------------------------------------------------------------
def ref_reduce_on_plateau(values, factor=0.1, patience=10, rtol=1e-4, atol=0.0, cooldown=0,
                          accumulation_size=1, min_scale=0.0):  # fmt: skip
    """The scale after each value, from Optax's documented rule, written out."""
    scale, best, plateau, cool, acc = 1.0, np.inf, 0, 0, []
    out = []
    for v in values:
        acc.append(v)
        if len(acc) == accumulation_size:
            avg = np.mean(acc)
            acc = []
            if avg < (1 - rtol) * best - atol:
                best, plateau = avg, 0
            else:
                plateau += 1
            if cool > 0:
                cool, plateau = cool - 1, 0
            elif plateau == patience:
                scale, plateau, cool = max(scale * factor, min_scale), 0, cooldown
        out.append(scale)
    return out


PLATEAU_VALUES = [5.0, 4.0, 4.0, 3.9999, 4.1, 4.0, 3.0, 3.0, 3.0, 3.0, 2.9, 3.0, 3.0, 3.0, 3.0,
                  3.0, 3.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]  # fmt: skip
PLATEAU_KW = [
    {"patience": 2},
    {"patience": 2, "factor": 0.5, "cooldown": 2},
    {"patience": 1, "factor": 0.5, "atol": 0.5, "rtol": 0.0, "min_scale": 0.2},
    {"patience": 1, "accumulation_size": 3, "factor": 0.5},
]


@pytest.mark.parametrize("kw", PLATEAU_KW)
def test_reduce_on_plateau_matches_reference(kw):
    tx = optim.reduce_on_plateau(**kw)
    g = {"w": tg.Tensor(np.array([1.0, -2.0]))}
    state = tx.init(g)
    scales = []
    for v in PLATEAU_VALUES:
        u, state = tx.update(g, state, value=v)
        np.testing.assert_allclose(u["w"].numpy(), state["scale"] * np.array([1.0, -2.0]))
        scales.append(state["scale"])
    want = ref_reduce_on_plateau(PLATEAU_VALUES, **kw)
    np.testing.assert_allclose(scales, want, rtol=1e-15)
    assert min(want) < 1.0  # the sequence does reach a plateau
    assert all(type(state[k]) is int for k in ("plateau_count", "cooldown_count", "count"))


@pytest.mark.parametrize("kw", PLATEAU_KW)
def test_reduce_on_plateau_matches_optax_where_installed(optax_x64, kw):
    optax = optax_x64.optax
    params = _params()
    gs = _grad_seq(params, len(PLATEAU_VALUES))
    mine = optim.chain(optim.sgd(0.1), optim.reduce_on_plateau(**kw))
    theirs = optax.chain(optax.sgd(0.1), optax.contrib.reduce_on_plateau(**kw))
    got, state = _run_values(mine, params, gs, PLATEAU_VALUES)
    want = optax_x64.run(theirs, params, gs, PLATEAU_VALUES)
    _compare(got, want, rtol=1e-12, atol=1e-14)


def _run_values(tx, params, grads_seq, values):
    state = tx.init(params)
    out = []
    for g, v in zip(grads_seq, values):
        params, state = optim.apply_gradients(tx, g, state, params, value=v)
        out.append(_np(params))
    return out, state


def test_reduce_on_plateau_takes_tensor_losses_and_errors():
    tx = optim.chain(optim.sgd(1.0), optim.reduce_on_plateau(patience=1, factor=0.5))
    params = {"w": tg.Tensor(np.array([0.0]))}
    g = {"w": tg.Tensor(np.array([1.0]))}
    state = tx.init(params)
    for v in (tg.Tensor(np.asarray(2.0)), np.float32(2.0), tg.Tensor(np.asarray(3, np.int64))):
        u, state = tx.update(g, state, params, value=v)
    assert state[-1]["scale"] == 0.25 and state[-1]["best_value"] == 2.0
    with pytest.raises(TypeError, match="update needs the loss"):
        tx.update(g, state, params)
    with pytest.raises(ValueError, match=r"real scalar \(the loss\), got shape \(2,\)"):
        tx.update(g, state, params, value=tg.Tensor(np.ones(2)))
    with pytest.raises(TypeError, match="value must be a number or a 0-d Tensor, got str"):
        tx.update(g, state, params, value="low")
    with pytest.raises(TypeError, match="state must be the dict from init"):
        optim.reduce_on_plateau().update(g, {}, value=1.0)
    with pytest.raises(ValueError, match=r"factor must be in \(0, 1\)"):
        optim.reduce_on_plateau(factor=1.0)
    with pytest.raises(ValueError, match="rtol and atol cannot both be 0"):
        optim.reduce_on_plateau(rtol=0.0, atol=0.0)
    with pytest.raises(ValueError, match="patience must be an int >= 1"):
        optim.reduce_on_plateau(patience=0)
    with pytest.raises(TypeError, match="accumulation_size must be an int >= 1"):
        optim.reduce_on_plateau(accumulation_size=2.5)
    with pytest.raises(ValueError, match="min_scale must be in"):
        optim.reduce_on_plateau(min_scale=2.0)


def test_extra_arguments_reach_only_the_transforms_that_take_them():
    seen = []

    @attrs.frozen
    class Spy(optim.GradientTransformation):
        def init(self, params):
            return {}

        def update(self, grads, state, params=None, *, value=None, other=None):
            seen.append((value, other))
            return grads, state

    tx = optim.chain(optim.sgd(0.1), Spy(), optim.clip_by_global_norm(1.0))
    params = {"w": tg.Tensor(np.ones(2))}
    g = {"w": tg.Tensor(np.ones(2))}
    tx.update(g, tx.init(params), params, value=1.5, unused=3)
    optim.apply_gradients(tx, g, tx.init(params), params, other="x")
    assert seen == [(1.5, None), (None, "x")]
