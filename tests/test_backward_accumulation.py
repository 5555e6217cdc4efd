"""Cotangent accumulation in the backward replay never writes into a value someone can see."""


import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.ops import elementwise as ew


def test_shared_cotangent_is_not_mutated():
    # Add.backward hands the same Tensor to both inputs; x + x accumulates it into itself.
    x = tg.Tensor(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum((x + x) * x))(x).numpy(), [4, 8])
    # the same cotangent Tensor reaching two nodes: each must keep its own value
    a, b = tg.Tensor(np.ones(3)), tg.Tensor(np.ones(3))

    def f(a, b):
        s = a + b  # a and b both get s's cotangent (one Tensor)
        return tnp.sum(s * 3.0) + tnp.sum(a * 2.0)  # a gets a second cotangent added

    ga, gb = tg.grad(f, argnums=(0, 1))(a, b)
    np.testing.assert_array_equal(ga.numpy(), [5, 5, 5])
    np.testing.assert_array_equal(gb.numpy(), [3, 3, 3])


def _keeping_rule(kept: list):
    """``x * 1.0`` whose backward returns ``2 g`` and keeps it in ``kept`` (a rule, or a hook,
    holding on to the cotangent it returned)."""

    class Keep(tg.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            out = g * 2.0
            kept.append(out)
            return out

    return Keep


def test_a_cotangent_someone_kept_is_not_mutated():
    kept = []
    Keep = _keeping_rule(kept)

    x = tg.Tensor(np.array([1.0, -1.0]))
    g = tg.grad(lambda x: tnp.sum(Keep.apply(x) * 3.0) + tnp.sum(x * 5.0))(x)
    np.testing.assert_array_equal(g.numpy(), [11, 11])
    np.testing.assert_array_equal(kept[0].numpy(), [6, 6])  # unchanged by the accumulation


def test_user_cotangent_and_repeated_pullbacks_are_untouched():
    x = tg.Tensor(np.array([1.0, 2.0, 3.0]))
    out, vjp_fn = tg.vjp(lambda x: (x * 2.0, x * 3.0), x)
    c1 = np.array([1.0, 1.0, 1.0])
    c2 = np.array([0.5, 0.5, 0.5])
    ct = (tg.Tensor(c1), tg.Tensor(c2))
    first = vjp_fn(ct)[0].numpy().copy()
    second = vjp_fn(ct)[0].numpy()
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, 2 * c1 + 3 * c2)
    np.testing.assert_array_equal(ct[0].numpy(), c1)
    np.testing.assert_array_equal(ct[1].numpy(), c2)


@pytest.fixture
def count_relu_grad(monkeypatch):
    """Counts ReluGrad applications (the out-of-place path of Relu.backward)."""
    calls = []
    orig = ew.ReluGrad.apply.__func__

    def counting(cls, *args, **kw):
        calls.append(args[0].shape)
        return orig(cls, *args, **kw)

    monkeypatch.setattr(ew.ReluGrad, "apply", classmethod(counting))
    return calls


def test_relu_backward_keeps_where_semantics_for_non_finite_cotangents():
    # sqrt's cotangent is inf where relu gave 0: a floating multiply by the mask would give
    # inf * 0 = NaN there; the bitwise mask gives +0.0, as where does.
    x = tg.Tensor(np.array([-1.0, 4.0, -3.0, 0.0]))
    g = tg.grad(lambda v: tnp.sum(tnp.sqrt(tnp.relu(v))))(x).numpy()
    np.testing.assert_array_equal(g, [0.0, 0.25, 0.0, 0.0])
    assert not np.signbit(g).any()
    # the out-of-place ReluGrad gives the same, bit for bit
    ref = ew.ReluGrad.apply(
        tg.Tensor(np.array([np.inf, 1.0, -np.inf, np.nan, -2.0])),
        tg.Tensor(np.array([0.0, 4.0, 0.0, 0.0, 0.0])),
    ).numpy()
    np.testing.assert_array_equal(ref, [0.0, 1.0, 0.0, 0.0, 0.0])
    assert not np.signbit(ref).any()


def test_relu_backward_never_writes_into_a_cotangent_someone_holds():
    x = tg.Tensor(np.array([-1.0, 2.0, -3.0]))
    out, vjp_fn = tg.vjp(tnp.relu, x)
    c = np.array([5.0, 6.0, 7.0])
    ct = tg.Tensor(c)
    np.testing.assert_array_equal(vjp_fn(ct)[0].numpy(), [0.0, 6.0, 0.0])
    np.testing.assert_array_equal(ct.numpy(), [5.0, 6.0, 7.0])
    np.testing.assert_array_equal(c, [5.0, 6.0, 7.0])
    arr = np.array([1.0, 1.0, 1.0])  # a fresh Tensor over an array the caller keeps
    np.testing.assert_array_equal(vjp_fn(tg.Tensor(arr))[0].numpy(), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(arr, [1.0, 1.0, 1.0])
    # one cotangent Tensor reaching two relus (Add hands the same Tensor to both inputs)
    a, b = tg.Tensor(np.array([1.0, -1.0])), tg.Tensor(np.array([-1.0, 1.0]))
    ga, gb = tg.grad(lambda a, b: tnp.sum((tnp.relu(a) + tnp.relu(b)) * 3.0), (0, 1))(a, b)
    np.testing.assert_array_equal(ga.numpy(), [3.0, 0.0])
    np.testing.assert_array_equal(gb.numpy(), [0.0, 3.0])


def test_relu_backward_under_an_outer_transform(count_relu_grad):
    x = tg.Tensor(np.array([0.5, -0.5, 2.0]))

    def f(x):
        return tnp.sum(tnp.relu(x - 0.1) * x)

    h = tg.grad(lambda x: tnp.sum(tg.grad(f)(x)))(x).numpy()
    np.testing.assert_array_equal(h, np.where(x.numpy() > 0.1, 2.0, 0.0))
    assert count_relu_grad  # the traced cotangent went through ReluGrad


def test_relu_backward_leaves_a_cotangent_a_rule_kept_alone(count_relu_grad):
    kept = []
    Keep = _keeping_rule(kept)

    x = tg.Tensor(np.array([1.0, -1.0, 2.0]))
    g = tg.grad(lambda x: tnp.sum(Keep.apply(tnp.relu(x)) * 3.0))(x)
    np.testing.assert_array_equal(g.numpy(), [6.0, 0.0, 6.0])
    np.testing.assert_array_equal(kept[0].numpy(), [6.0, 6.0, 6.0])  # not masked in place
    assert count_relu_grad == [(3,)]  # the cotangent went through ReluGrad once


