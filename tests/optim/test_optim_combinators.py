"""masked, multi_transform and MultiSteps against NumPy references and (where installed) Optax."""

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import io, optim


def _params(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "w": tg.Tensor(rng.normal(size=(3, 2)).astype(dtype)),
        "b": tg.Tensor(rng.normal(size=(2,)).astype(dtype)),
        "head": {"k": tg.Tensor(rng.normal(size=(4,)).astype(dtype)),
                 "s": tg.Tensor(np.asarray(0.5, dtype))},
    }  # fmt: skip


def _grad_seq(params, steps, seed=1):
    rng = np.random.default_rng(seed)
    return [
        tg.tree.tree_map(lambda p: tg.Tensor(rng.normal(size=p.shape).astype(p.dtype)), params)
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
        params, state = optim.apply_gradients(tx, g, state, params)
        out.append(_np(params))
    return out, state


def _compare(got, want, rtol=1e-12, atol=1e-14):
    assert len(got) == len(want)
    for step, (gs, ws) in enumerate(zip(got, want)):
        assert len(gs) == len(ws)
        for g, w in zip(gs, ws):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"step {step}")


# NumPy references, leaves in flatten order: b, head.k, head.s, w (dict keys sorted).
def ref_adam_leaf(p, gs, lr, b1=0.9, b2=0.999, eps=1e-8):
    m, v, out = np.zeros_like(p), np.zeros_like(p), []
    for t, g in enumerate(gs, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        out.append(p)
    return out


def ref_sgd_leaf(p, gs, lr):
    out = []
    for g in gs:
        p = p - lr * g
        out.append(p)
    return out


def _per_leaf(params, gs, fns):
    """Run a per-leaf reference ``fns[i](p, [g_i...])`` and regroup by step."""
    cols = [fn(p, [g[i] for g in gs]) for i, (fn, p) in enumerate(zip(fns, _np(params)))]
    return [list(step) for step in zip(*cols)]


# -- masked ---------------------------------------------------------------------------------
MASKS = {
    "full tree": {"w": True, "b": False, "head": {"k": True, "s": False}},
    "prefix": {"w": True, "b": False, "head": True},
    "callable": lambda tree: tg.tree.tree_map(lambda x: x.ndim >= 1 and x.shape[0] > 2, tree),
}
# Which leaves (flatten order b, head.k, head.s, w) each mask selects.
SELECTED = {
    "full tree": [False, True, False, True],
    "prefix": [False, True, True, True],
    "callable": [False, True, False, True],
}


@pytest.mark.parametrize("name", sorted(MASKS))
def test_masked_applies_inner_only_to_selected_leaves(name):
    params = _params()
    gs = _grad_seq(params, 5)
    tx = optim.chain(optim.masked(optim.adam(0.1), MASKS[name]), optim.scale(-0.5))
    got, state = _run(tx, params, gs)
    fns = [
        (lambda p, g: ref_adam_leaf(p, g, -0.5 * 0.1))  # -0.5 * (-0.1 * adam direction)
        if sel
        else (lambda p, g: ref_sgd_leaf(p, g, 0.5))
        for sel in SELECTED[name]
    ]
    _compare(got, _per_leaf(params, [_np(g) for g in gs], fns))
    # the inner state covers the selected leaves only; the others are None (empty nodes)
    mu = state[0]["inner_state"][0]["mu"]
    assert len(tg.tree.tree_leaves(mu)) == sum(SELECTED[name])
    assert mu["b"] is None
    assert state[0]["inner_state"][0]["count"] == 5


def test_masked_with_weight_decay_on_matrices_only():
    params = _params()
    tx = optim.chain(
        optim.masked(
            optim.add_decayed_weights(0.5), lambda p: tg.tree.tree_map(lambda x: x.ndim > 1, p)
        ),
        optim.sgd(1.0),
    )
    zeros = tg.tree.tree_map(lambda p: p * 0.0, params)
    new, _ = optim.apply_gradients(tx, zeros, tx.init(params), params)
    np.testing.assert_allclose(new["w"].numpy(), 0.5 * params["w"].numpy())
    for k in ("b",):
        np.testing.assert_array_equal(new[k].numpy(), params[k].numpy())
    np.testing.assert_array_equal(new["head"]["k"].numpy(), params["head"]["k"].numpy())


def test_masked_all_true_is_inner_and_all_false_is_identity():
    params = _params()
    gs = _grad_seq(params, 3)
    inner = optim.sgd(0.1, momentum=0.9)
    _compare(_run(optim.masked(inner, True), params, gs)[0], _run(inner, params, gs)[0], 0, 0)
    got, state = _run(optim.masked(inner, False), params, gs)
    _compare(got, _run(optim.identity(), params, gs)[0], 0, 0)
    assert tg.tree.tree_leaves(state) == []


def test_masked_errors():
    params = _params()
    g = _grad_seq(params, 1)[0]
    with pytest.raises(ValueError, match="masked: the mask's structure must be params"):
        optim.masked(optim.sgd(0.1), {"w": True}).init(params)
    with pytest.raises(TypeError, match=r"mask's entry for params\['w'\] is a int"):
        optim.masked(optim.sgd(0.1), {"w": 1, "b": True, "head": True}).init(params)
    with pytest.raises(TypeError, match="inner must be a gradient transformation"):
        optim.masked(lambda g: g, True)
    with pytest.raises(TypeError, match="mask must be a pytree of Python bools"):
        optim.masked(optim.sgd(0.1), np.array([True]))
    tx = optim.masked(optim.sgd(0.1), True)
    with pytest.raises(TypeError, match="masked: state must be the dict from init"):
        tx.update(g, (), params)


# -- multi_transform ------------------------------------------------------------------------------
def test_multi_transform_matches_reference():
    params = _params()
    gs = _grad_seq(params, 5)
    labels = {"w": "adam", "b": "sgd", "head": {"k": "adam", "s": "frozen"}}
    tx = optim.multi_transform(
        {"adam": optim.adam(0.1), "sgd": optim.sgd(0.3), "frozen": optim.sgd(0.0)}, labels
    )
    got, state = _run(tx, params, gs)
    fns = [
        lambda p, g: ref_sgd_leaf(p, g, 0.3),
        lambda p, g: ref_adam_leaf(p, g, 0.1),
        lambda p, g: ref_sgd_leaf(p, g, 0.0),
        lambda p, g: ref_adam_leaf(p, g, 0.1),
    ]
    _compare(got, _per_leaf(params, [_np(g) for g in gs], fns))
    assert sorted(state["inner_states"]) == ["adam", "frozen", "sgd"]
    assert state["inner_states"]["adam"][0]["count"] == 5
    assert len(tg.tree.tree_leaves(state["inner_states"]["adam"][0]["mu"])) == 2


def test_multi_transform_with_callable_and_prefix_labels():
    params = _params()
    gs = _grad_seq(params, 3)
    by_rank = optim.multi_transform(
        {"matrix": optim.sgd(0.1), "other": optim.sgd(0.0)},
        lambda p: tg.tree.tree_map(lambda x: "matrix" if x.ndim == 2 else "other", p),
    )
    prefix = optim.multi_transform(
        {"matrix": optim.sgd(0.1), "other": optim.sgd(0.0)},
        {"w": "matrix", "b": "other", "head": "other"},
    )
    got, _ = _run(by_rank, params, gs)
    _compare(got, _run(prefix, params, gs)[0], 0, 0)
    np.testing.assert_array_equal(got[-1][0], params["b"].numpy())


def test_multi_transform_errors():
    params = _params()
    with pytest.raises(ValueError, match=r"params\['b'\] has label 'x', which has no transf"):
        optim.multi_transform({"a": optim.sgd(0.1)}, {"w": "a", "b": "x", "head": "a"}).init(params)
    with pytest.raises(ValueError, match="param_labels' structure must be params"):
        optim.multi_transform({"a": optim.sgd(0.1)}, {"w": "a"}).init(params)
    with pytest.raises(TypeError, match="transforms must be a mapping"):
        optim.multi_transform([optim.sgd(0.1)], "a")
    with pytest.raises(TypeError, match=r"transforms\['a'\] is a float"):
        optim.multi_transform({"a": 0.1}, "a")
    tx = optim.multi_transform({"a": optim.sgd(0.1)}, "a")
    with pytest.raises(TypeError, match="one inner state per label"):
        tx.update(params, {"inner_states": {}}, params)


# -- MultiSteps ----------------------------------------------------------------------------------
def ref_multisteps(p, gs, k_of, inner_ref, mean=True):
    """Parameters after each call: zero updates except every k-th call, which steps the inner
    optimizer (given as ``inner_ref(p, list_of_accumulated_grads)``) on the mean gradient."""
    out, acc, inner_grads, n = [], [], [], 0
    for g in gs:
        acc.append(g)
        if len(acc) == k_of(n):
            total = sum(acc)
            inner_grads.append(total / len(acc) if mean else total)
            p_now = inner_ref(p, inner_grads)[-1]
            acc, n = [], n + 1
            out.append(p_now)
        else:
            out.append(out[-1] if out else p)
    return out


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("mean", [True, False])
def test_multisteps_matches_reference(k, mean):
    params = _params()
    gs = _grad_seq(params, 7)
    tx = optim.MultiSteps(optim.adam(0.1), k, use_grad_mean=mean)
    state = tx.init(params)
    got = []
    for i, g in enumerate(gs):
        updates, state = tx.update(g, state, params)
        if (i + 1) % k:
            assert all(not np.any(u) for u in _np(updates))  # zeros between inner updates
            assert not tx.has_updated(state)
        else:
            assert tx.has_updated(state)
        params = optim.apply_updates(params, updates)
        got.append(_np(params))
    assert state["gradient_step"] == 7 // k and state["mini_step"] == 7 % k
    assert state["inner_opt_state"][0]["count"] == 7 // k
    assert all(type(state[c]) is int for c in ("mini_step", "gradient_step"))
    p0 = _params()
    adam_ref = lambda q, gg: ref_adam_leaf(q, gg, 0.1)  # noqa: E731
    cols = [
        ref_multisteps(p, [_np(g)[i] for g in gs], lambda n: k, adam_ref, mean)
        for i, p in enumerate(_np(p0))
    ]
    _compare(got, [list(s) for s in zip(*cols)], rtol=1e-11)


def test_multisteps_with_schedule_and_sgd_equals_large_batch_steps():
    params = _params()
    gs = _grad_seq(params, 9)
    k_of = lambda n: n + 1  # noqa: E731  1, then 2, then 3 mini-steps per update
    tx = optim.MultiSteps(optim.sgd(0.5, momentum=0.9), k_of)
    got, state = _run(tx, params, gs)
    assert state["gradient_step"] == 3 and state["mini_step"] == 3

    def momentum_ref(p, grads):
        b, out = 0.0, []
        for g in grads:
            b = 0.9 * b + g
            p = p - 0.5 * b
            out.append(p)
        return out

    cols = [ref_multisteps(p, [_np(g)[i] for g in gs], k_of, momentum_ref)
            for i, p in enumerate(_np(params))]  # fmt: skip
    _compare(got, [list(s) for s in zip(*cols)], rtol=1e-11)


def test_multisteps_matches_optax_where_installed(optax_x64):
    optax = optax_x64.optax
    import jax.numpy as jnp

    params = _params()
    gs = _grad_seq(params, 8)
    for mine, theirs in [
        (optim.MultiSteps(optim.adam(0.1), 3),
         optax.MultiSteps(optax.adam(0.1), 3, accumulator_dtype=jnp.float64)),
        (optim.MultiSteps(optim.sgd(0.1), lambda n: 2 + n, use_grad_mean=False),
         optax.MultiSteps(optax.sgd(0.1), lambda n: 2 + n, use_grad_mean=False,
                          accumulator_dtype=jnp.float64)),
        (optim.masked(optim.adam(0.1), {"w": True, "b": False, "head": True}),
         optax.masked(optax.adam(0.1), {"w": True, "b": False, "head": True})),
        (optim.multi_transform({"a": optim.adam(0.1), "s": optim.sgd(0.2)},
                               {"w": "a", "b": "s", "head": {"k": "s", "s": "a"}}),
         optax.multi_transform({"a": optax.adam(0.1), "s": optax.sgd(0.2)},
                               {"w": "a", "b": "s", "head": {"k": "s", "s": "a"}})),
    ]:  # fmt: skip
        got, _ = _run(mine, params, gs)
        _compare(got, optax_x64.run(theirs, params, gs), rtol=1e-11, atol=1e-13)


def test_multisteps_passes_value_to_reduce_on_plateau():
    inner = optim.chain(optim.sgd(1.0), optim.reduce_on_plateau(patience=1, factor=0.5))
    tx = optim.MultiSteps(inner, 2)
    params = {"w": tg.Tensor(np.array([0.0]))}
    g = {"w": tg.Tensor(np.array([1.0]))}
    state = tx.init(params)
    for v in [2.0, 2.0, 2.0, 2.0]:  # the inner sees only every second value
        params, state = optim.apply_gradients(tx, g, state, params, value=v)
    plateau = state["inner_opt_state"][-1]
    assert plateau["scale"] == 0.5 and plateau["best_value"] == 2.0


def test_multisteps_state_round_trips_through_io(tmp_path):
    params = _params()
    gs = _grad_seq(params, 5)
    tx = optim.MultiSteps(optim.adam(0.1), 2)
    p, state = params, tx.init(params)
    for g in gs[:3]:
        p, state = optim.apply_gradients(tx, g, state, p)
    io.save(tmp_path / "s", {"p": p, "s": state})
    back = io.load(tmp_path / "s")
    p2, s2 = back["p"], back["s"]
    assert s2["mini_step"] == 1 and type(s2["mini_step"]) is int
    for g in gs[3:]:
        p, state = optim.apply_gradients(tx, g, state, p)
        p2, s2 = optim.apply_gradients(tx, g, s2, p2)
    for a, b in zip(_np(p), _np(p2)):
        np.testing.assert_array_equal(a, b)


def test_multisteps_errors():
    with pytest.raises(ValueError, match="every_k_schedule must be >= 1"):
        optim.MultiSteps(optim.sgd(0.1), 0)
    with pytest.raises(TypeError, match="every_k_schedule must be an int >= 1 or a callable"):
        optim.MultiSteps(optim.sgd(0.1), 2.0)
    with pytest.raises(TypeError, match="inner must be a gradient transformation"):
        optim.MultiSteps("adam", 2)
    params = _params()
    g = _grad_seq(params, 1)[0]
    tx = optim.MultiSteps(optim.sgd(0.1), lambda n: 0)
    with pytest.raises(ValueError, match="every_k_schedule returned 0"):
        tx.update(g, tx.init(params), params)
    tx = optim.MultiSteps(optim.sgd(0.1), 2)
    with pytest.raises(TypeError, match="MultiSteps: state must be the dict from init"):
        tx.update(g, {}, params)
    with pytest.raises(ValueError, match=r"MultiSteps: grads\['w'\] has shape \(2,\)"):
        tx.update({**g, "w": tg.Tensor(np.ones(2))}, tx.init(params), params)
    assert tx.inner_opt is tx.inner and tx.gradient_transformation() is tx
