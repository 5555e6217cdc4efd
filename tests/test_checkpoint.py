"""checkpoint / remat: same values and derivatives, intermediates not kept, recomputed."""

import gc
import weakref

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, numerical_jacobian

RNG = np.random.default_rng(7)


def _t(*shape):
    return tg.Tensor(RNG.uniform(-1, 1, size=shape))


def layer(w, x):
    return tnp.tanh(x @ w)


def net(ws, x, ck):
    f = tg.checkpoint(layer) if ck else layer
    for w in ws:
        x = f(w, x)
    return tnp.sum(x * x)


def test_values_and_gradients_unchanged():
    ws, x = [_t(3, 3) for _ in range(3)], _t(2, 3)
    v0, g0 = tg.value_and_grad(net)(ws, x, False)
    v1, g1 = tg.value_and_grad(net)(ws, x, True)
    assert float(v0) == float(v1)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_derivatives_of_every_order_and_mode():
    ws, x = [_t(3, 3) for _ in range(2)], _t(2, 3)
    check_grads(lambda ws, x: net(ws, x, True), (ws, x), order=2, modes=("fwd", "rev"))
    h0 = tg.hessian(lambda x: net(ws, x, False))(x).numpy()
    h1 = tg.hessian(lambda x: net(ws, x, True))(x).numpy()
    np.testing.assert_allclose(h0, h1, rtol=1e-10, atol=1e-12)


def test_call_forms_and_alias():
    w, x = _t(3, 3), _t(2, 3)
    assert tg.remat is tg.checkpoint
    direct = tg.checkpoint(layer, w, x)  # the seeds' checkpoint(run_function, *tensors)
    np.testing.assert_allclose(direct.numpy(), layer(w, x).numpy())
    g = tg.grad(lambda w: tnp.sum(tg.checkpoint(layer, w, x)))(w)
    np.testing.assert_allclose(g.numpy(), tg.grad(lambda w: tnp.sum(layer(w, x)))(w).numpy())


def test_tape_holds_one_entry_per_checkpointed_call():
    ws, x = [_t(3, 3) for _ in range(4)], _t(2, 3)
    _, plain = tg.trace(lambda ws, x: net(ws, x, False))(ws, x)
    _, ck = tg.trace(lambda ws, x: net(ws, x, True))(ws, x)
    assert [e.oper for e in ck.entries].count("checkpoint") == 4
    assert len(ck) == 4 + 2  # 4 checkpoints, then mul and sum
    assert len(plain) == 4 * 2 + 2  # matmul + tanh per layer
    # the checkpoint entries save only their inputs (w and x), nothing computed inside
    for e in ck.entries:
        if e.oper == "checkpoint":
            assert len(e.ctx.saved_tensors) == 2


class _Probe(tg.Function):
    """Doubles its input and remembers a weak reference to each output array it makes."""

    refs: list = []

    @staticmethod
    def forward(ctx, x):
        out = x * 2.0
        _Probe.refs.append(weakref.ref(out))
        return out

    @staticmethod
    def backward(ctx, g):
        return 2.0 * g


def _probe_fn(x):
    h = _Probe.apply(x)  # an intermediate that h * h saves for its backward
    return h * h


@pytest.mark.parametrize("ck", [False, True])
def test_intermediates_are_not_kept_but_recomputed(ck):
    _Probe.refs.clear()
    x = _t(4)
    f = tg.checkpoint(_probe_fn) if ck else _probe_fn
    out, vjp_fn = tg.vjp(lambda x: tnp.sum(f(x)), x)
    gc.collect()
    assert len(_Probe.refs) == 1
    alive = _Probe.refs[0]() is not None
    assert alive is (not ck)  # kept by the tape without checkpointing, freed with it
    (g,) = vjp_fn(tg.Tensor(np.float64(1.0)))
    np.testing.assert_allclose(g.numpy(), 8.0 * x.numpy())
    assert len(_Probe.refs) == (2 if ck else 1)  # the backward pass recomputed it


def test_static_and_integer_arguments():
    def pick(x, idx, scale):
        return x[idx] * scale

    x, idx = _t(5), tg.Tensor(np.array([0, 3, 3]))

    def f(x):
        return tnp.sum(tg.checkpoint(pick)(x, idx, 2.5) ** 2)

    np.testing.assert_allclose(tg.grad(f)(x).numpy(), numerical_jacobian(f, x), rtol=1e-7)


def test_pytree_outputs_and_jvp():
    def f(p, x):
        return {"a": p["w"] * x, "b": (tnp.sin(x), tnp.sum(p["w"]))}

    p, x = {"w": _t(3)}, _t(3)
    out = tg.checkpoint(f)(p, x)
    ref = f(p, x)
    np.testing.assert_allclose(out["b"][0].numpy(), ref["b"][0].numpy())
    tp, tx = {"w": _t(3)}, _t(3)
    _, t0 = tg.jvp(f, (p, x), (tp, tx))
    _, t1 = tg.jvp(tg.checkpoint(f), (p, x), (tp, tx))
    np.testing.assert_allclose(t1["a"].numpy(), t0["a"].numpy(), rtol=1e-12)
    np.testing.assert_allclose(t1["b"][1].numpy(), t0["b"][1].numpy(), rtol=1e-12)


def test_closure_over_traced_value_is_a_clear_error():
    x = _t(3)
    with pytest.raises(RuntimeError, match="checkpoint: .* not one of its arguments"):
        tg.grad(lambda w: tnp.sum(tg.checkpoint(lambda x: x * w)(x)))(_t(3))


def test_bad_arguments():
    with pytest.raises(TypeError, match="checkpoint: fun must be callable"):
        tg.checkpoint(3)
    with pytest.raises(TypeError, match="checkpoint: output leaf 0 .* is a str"):
        tg.grad(lambda x: tg.checkpoint(lambda x: "no")(x))(_t(2))
