"""``optim.apply_if_finite``: Optax's semantics (checked against optax where installed), its
state fields, validation, and use under ``tg.jit``."""

from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import optim

# gradients for 8 steps: finite ones and steps poisoned with NaN or inf in one leaf
STEPS = [
    {"a": [1.0, -2.0], "b": [0.5]},
    {"a": [np.nan, 1.0], "b": [0.5]},
    {"a": [1.0, 1.0], "b": [np.inf]},
    {"a": [-np.inf, 1.0], "b": [0.1]},
    {"a": [0.3, 0.2], "b": [-0.5]},
    {"a": [np.nan, np.nan], "b": [np.nan]},
    {"a": [2.0, 1.0], "b": [0.0]},
    {"a": [0.1, 0.1], "b": [0.1]},
]


def _tree(d):
    return {k: tg.Tensor(np.asarray(v, np.float64)) for k, v in d.items()}


def _run(tx, params):
    state = tx.init(params)
    out = []
    for g in STEPS:
        updates, state = tx.update(_tree(g), state, params)
        params = optim.apply_updates(params, updates)
        out.append(({k: v.numpy().copy() for k, v in params.items()},
                    int(state.notfinite_count), bool(state.last_finite),
                    int(state.total_notfinite)))
    return out


@pytest.mark.parametrize("max_errors", [0, 1, 2, 10])
@pytest.mark.parametrize("inner", ["sgd", "adam"])
def test_matches_optax(max_errors, inner):
    optax = pytest.importorskip("optax")
    jnp = pytest.importorskip("jax.numpy")
    import jax

    jax.config.update("jax_enable_x64", True)
    try:
        ours = _run(optim.apply_if_finite(getattr(optim, inner)(0.1), max_errors),
                    _tree({"a": [1.0, 2.0], "b": [3.0]}))
        tx = optax.apply_if_finite(getattr(optax, inner)(0.1), max_errors)
        params = {"a": jnp.asarray([1.0, 2.0]), "b": jnp.asarray([3.0])}
        state = tx.init(params)
        for step, g in zip(ours, STEPS):
            updates, state = tx.update({k: jnp.asarray(v) for k, v in g.items()}, state, params)
            params = optax.apply_updates(params, updates)
            for k in params:
                np.testing.assert_allclose(step[0][k], np.asarray(params[k]), rtol=1e-12,
                                           atol=1e-12, equal_nan=True)
            assert step[1:] == (int(state.notfinite_count), bool(state.last_finite),
                                int(state.total_notfinite))
    finally:
        jax.config.update("jax_enable_x64", False)


def test_skips_non_finite_steps_and_counts_them():
    steps = _run(optim.apply_if_finite(optim.sgd(1.0), 1), _tree({"a": [0.0, 0.0], "b": [0.0]}))
    # step 0 finite: applied; 1 NaN: skipped; 2 inf (2 in a row > 1): applied anyway
    np.testing.assert_array_equal(steps[0][0]["a"], [-1.0, 2.0])
    np.testing.assert_array_equal(steps[1][0]["a"], [-1.0, 2.0])
    assert steps[1][1:] == (1, False, 1)
    assert np.isinf(steps[2][0]["b"]).all() and steps[2][1:] == (2, False, 2)
    assert steps[4][1:] == (0, True, 3)


def test_state_has_optax_s_fields_and_dtypes():
    tx = optim.apply_if_finite(optim.adam(1e-3), max_consecutive_errors=3)
    state = tx.init({"w": tg.Tensor([1.0])})
    assert isinstance(state, optim.ApplyIfFiniteState)
    assert state._fields == ("notfinite_count", "last_finite", "total_notfinite", "inner_state")
    assert state.notfinite_count.dtype == np.int32 and state.total_notfinite.dtype == np.int32
    assert state.last_finite.dtype == np.bool_ and bool(state.last_finite)
    _, state = tx.update({"w": tg.Tensor([np.nan])}, state)
    assert state.notfinite_count.dtype == np.int32 and state.last_finite.dtype == np.bool_


def test_skipped_steps_leave_the_inner_state_alone():
    tx = optim.apply_if_finite(optim.adam(0.1), 5)
    params = {"w": tg.Tensor([1.0, 2.0])}
    s0 = tx.init(params)
    _, s1 = tx.update({"w": tg.Tensor([1.0, 1.0])}, s0, params)
    u, s2 = tx.update({"w": tg.Tensor([np.inf, 1.0])}, s1, params)
    assert np.all(u["w"].numpy() == 0)
    assert s2.inner_state is s1.inner_state


def test_works_under_jit_and_in_the_stateful_shell():
    tx = optim.apply_if_finite(optim.sgd(0.5), 2)
    params = {"w": tg.Tensor([1.0, 1.0])}
    state = tx.init(params)
    step = tg.jit(lambda g, s, p: optim.apply_gradients(tx, g, s, p))
    for g in ([1.0, 1.0], [np.nan, 0.0], [2.0, 2.0]):
        params, state = step({"w": tg.Tensor(g)}, state, params)
    np.testing.assert_array_equal(params["w"].numpy(), [-0.5, -0.5])
    assert int(state.total_notfinite) == 1 and int(state.notfinite_count) == 0


@pytest.mark.parametrize("kwargs, error, match", [
    ({"inner": "adam", "max_consecutive_errors": 1}, TypeError, "inner must be a gradient"),
    ({"inner": optim.sgd(0.1), "max_consecutive_errors": -1}, ValueError, ">= 0"),
    ({"inner": optim.sgd(0.1), "max_consecutive_errors": 1.5}, TypeError, "must be an int"),
    ({"inner": optim.sgd(0.1), "max_consecutive_errors": True}, TypeError, "must be an int"),
    ({"inner": optim.sgd(0.1), "max_consecutive_error": 1}, TypeError,
     "max_consecutive_errors"),
])
def test_arguments_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        optim.apply_if_finite(**kwargs)


def test_update_refuses_another_state():
    tx = optim.apply_if_finite(optim.sgd(0.1), 1)
    with pytest.raises(TypeError, match="ApplyIfFiniteState"):
        tx.update({"w": tg.Tensor([1.0])}, {"count": 0})
