"""Property tests: forward and reverse mode at orders 1 and 2 for every op, and the transform
laws (jacfwd == jacrev, hvp == hessian @ v, linearize == jvp) on drawn shapes and values."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, broadcastable_shapes, floats_in, shapes


class Spec(NamedTuple):
    name: str
    make: object  # data -> (fn, args)
    rtol: float = 1e-5
    atol: float = 1e-6


def _arr(data, shape, low=-3.0, high=3.0, exclude=None, margin=0.2):
    return data.draw(arrays(shape, elements=floats_in(low, high, exclude=exclude, margin=margin)))


def _unary(fn, low=-3.0, high=3.0, exclude=None):
    def make(data):
        s = data.draw(shapes(max_dims=3, max_side=3))
        return fn, (tg.Tensor(_arr(data, s, low, high, exclude)),)

    return make


def _binary(fn, dom_x=(-3.0, 3.0), dom_y=(-3.0, 3.0), exclude_y=None, distinct=False):
    def make(data):
        sx, sy = data.draw(broadcastable_shapes(2, max_dims=3, max_side=3))
        x = _arr(data, sx, *dom_x)
        y = _arr(data, sy, *dom_y, exclude=exclude_y, margin=0.5)
        if distinct:  # stay away from the kink x == y
            assume(np.all(np.abs(np.subtract(x, y)) > 0.05))
        return fn, (tg.Tensor(x), tg.Tensor(y))

    return make


def _axis(data, ndim):
    return data.draw(
        st.one_of(
            st.none(),
            st.integers(-ndim, ndim - 1) if ndim else st.none(),
            st.lists(st.integers(0, max(ndim - 1, 0)), unique=True, max_size=ndim).map(tuple),
        )
    )


def _reduce(op):
    def make(data):
        s = data.draw(shapes(max_dims=3, max_side=3))
        axis = _axis(data, len(s))
        keepdims = data.draw(st.booleans())
        if op is tnp.mean:  # the mean of an empty axis is NaN in NumPy too
            axes = range(len(s)) if axis is None else np.atleast_1d(axis) % max(len(s), 1)
            assume(all(s[a] > 0 for a in axes) if len(s) else True)
        return (lambda x: op(x, axis=axis, keepdims=keepdims)), (tg.Tensor(_arr(data, s)),)

    return make


def _reshape(data):
    s = data.draw(shapes(max_dims=3, max_side=3))
    target = data.draw(st.sampled_from([(-1,), tuple(reversed(s)), (1,) + tuple(s)]))
    return (lambda x: tnp.reshape(x, target)), (tg.Tensor(_arr(data, s)),)


def _transpose(data):
    s = data.draw(shapes(max_dims=3, max_side=3))
    perm = tuple(data.draw(st.permutations(range(len(s)))))
    return (lambda x: tnp.transpose(x, perm)), (tg.Tensor(_arr(data, s)),)


def _broadcast(data):
    s = data.draw(shapes(max_dims=2, max_side=3))
    lead = data.draw(st.integers(0, 3))
    target = (lead,) + tuple(data.draw(st.sampled_from([1, 2])) if d == 1 else d for d in s)
    return (lambda x: tnp.broadcast_to(x, target)), (tg.Tensor(_arr(data, s)),)


def _getitem(data):
    n = data.draw(st.integers(1, 4))
    s = (n, data.draw(st.integers(0, 3)))
    idx = data.draw(
        st.one_of(
            st.just((slice(None, None, -1), slice(1, None))),
            st.lists(st.integers(0, n - 1), max_size=5).map(lambda v: np.array(v, dtype=np.int64)),
            st.integers(-n, n - 1),
        )
    )
    return (lambda x: x[idx]), (tg.Tensor(_arr(data, s)),)


def _scatter_add(data):
    n = data.draw(st.integers(1, 4))
    idx = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5)))
    g = _arr(data, (len(idx), 2))
    zeros = tg.Tensor(np.zeros((n, 2)))

    def scatter(g):  # ScatterAdd, as the transpose of x[idx]
        return tg.vjp(lambda z: z[idx], zeros)[1](g)[0]

    return scatter, (tg.Tensor(g),)


def _matmul(data):
    n, k, m = (data.draw(st.integers(1, 3)) for _ in range(3))
    kind = data.draw(st.sampled_from(["mm", "mv", "vm", "vv", "batched"]))
    sa = {"mm": (n, k), "mv": (n, k), "vm": (k,), "vv": (k,), "batched": (2, n, k)}[kind]
    sb = {"mm": (k, m), "mv": (k,), "vm": (k, m), "vv": (k,), "batched": (1, k, m)}[kind]
    return tnp.matmul, (tg.Tensor(_arr(data, sa)), tg.Tensor(_arr(data, sb)))


def _where(data):
    sc, sx, sy = data.draw(broadcastable_shapes(3, max_dims=3, max_side=3))
    cond = data.draw(arrays(sc, dtype=np.bool_, elements=st.booleans()))
    return (lambda x, y: tnp.where(cond, x, y)), (
        tg.Tensor(_arr(data, sx)),
        tg.Tensor(_arr(data, sy)),
    )


OPS = [
    Spec("neg", _unary(lambda x: -x)),
    Spec("exp", _unary(tnp.exp, -2.0, 2.0)),
    Spec("log", _unary(tnp.log, 0.3, 3.0)),
    Spec("sin", _unary(tnp.sin)),
    Spec("cos", _unary(tnp.cos)),
    Spec("tanh", _unary(tnp.tanh)),
    Spec("sqrt", _unary(tnp.sqrt, 0.3, 3.0)),
    Spec("abs", _unary(tnp.abs, exclude=[0.0])),
    Spec("sign", _unary(tnp.sign, exclude=[0.0])),
    Spec("pow_scalar", _unary(lambda x: x**3)),
    Spec("astype", _unary(lambda x: tnp.astype(tnp.astype(x, np.float32), np.float64)), 2e-2, 1e-2),
    Spec("add", _binary(tnp.add)),
    Spec("sub", _binary(tnp.subtract)),
    Spec("mul", _binary(tnp.multiply)),
    Spec("div", _binary(tnp.divide, exclude_y=[0.0])),
    Spec("pow", _binary(tnp.power, dom_x=(0.5, 2.0), dom_y=(-2.0, 2.0))),
    Spec("maximum", _binary(tnp.maximum, distinct=True)),
    Spec("minimum", _binary(tnp.minimum, distinct=True)),
    Spec("where", _where),
    Spec("sum", _reduce(tnp.sum)),
    Spec("mean", _reduce(tnp.mean)),
    Spec("reshape", _reshape),
    Spec("transpose", _transpose),
    Spec("broadcast_to", _broadcast),
    Spec("getitem", _getitem),
    Spec("scatter_add", _scatter_add),
    Spec("matmul", _matmul),
]


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
@given(data=st.data())
def test_fwd_and_rev_grads_orders_1_and_2(spec, data):
    fn, args = spec.make(data)
    check_grads(fn, args, order=2, modes=("fwd", "rev"), rtol=spec.rtol, atol=spec.atol)


@pytest.mark.parametrize("spec", OPS, ids=lambda s: s.name)
@given(data=st.data())
def test_tangents_match_outputs_shape_and_dtype(spec, data):
    fn, args = spec.make(data)
    tangents = tuple(tg.Tensor(np.ones(a.shape)) for a in args)
    out, t = tg.jvp(fn, args, tangents)
    assert t.shape == out.shape and t.dtype == out.dtype


@given(data=st.data())
def test_stop_gradient_has_zero_derivative_in_both_modes(data):
    # Finite differences see stop_gradient as the identity, so check it against the rule.
    s = data.draw(shapes(max_dims=3, max_side=3))
    x, t = tg.Tensor(_arr(data, s)), tg.Tensor(_arr(data, s))
    _, tout = tg.jvp(lambda x: tg.stop_gradient(x) * x, (x,), (t,))
    np.testing.assert_allclose(tout.numpy(), x.numpy() * t.numpy(), rtol=1e-12)
    g = tg.grad(lambda x: tnp.sum(tg.stop_gradient(x) * x))(x)
    np.testing.assert_allclose(g.numpy(), x.numpy(), rtol=1e-12)


# -- laws of the derived transforms ------------------------------------------------------
def _composite(w):
    def f(x):
        h = tnp.tanh(x @ w)
        return tnp.sum(h * tnp.exp(0.3 * h), axis=-1) + tnp.log(1.5 + tnp.sin(tnp.sum(x)))

    return f


@given(data=st.data())
def test_jacfwd_equals_jacrev_and_linearize_equals_jvp(data):
    n = data.draw(st.integers(1, 4))
    k = data.draw(st.integers(1, 3))
    b = data.draw(st.integers(1, 3))
    w = tg.Tensor(_arr(data, (n, k), -1.0, 1.0))
    x = tg.Tensor(_arr(data, (b, n), -1.0, 1.0))
    f = _composite(w)
    np.testing.assert_allclose(
        tg.jacfwd(f)(x).numpy(), tg.jacrev(f)(x).numpy(), rtol=1e-9, atol=1e-12
    )
    v = tg.Tensor(_arr(data, (b, n)))
    _, f_jvp = tg.linearize(f, x)
    np.testing.assert_allclose(
        f_jvp(v).numpy(), tg.jvp(f, (x,), (v,))[1].numpy(), rtol=1e-9, atol=1e-12
    )


@given(data=st.data())
def test_hvp_equals_hessian_times_v_and_hessian_is_symmetric(data):
    n = data.draw(st.integers(1, 5))
    w = tg.Tensor(_arr(data, (n, 2), -1.0, 1.0))
    x = tg.Tensor(_arr(data, (n,), -1.0, 1.0))
    v = tg.Tensor(_arr(data, (n,)))

    def f(x):
        return tnp.sum(_composite(w)(tnp.reshape(x, (1, n))))

    h = tg.hessian(f)(x).numpy()
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(tg.hvp(f, (x,), (v,)).numpy(), h @ v.numpy(), rtol=1e-9, atol=1e-11)
