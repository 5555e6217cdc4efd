import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.core.function import Function


def test_lazy_block_defers_until_realize():
    calls = []

    class Counted(Function):
        @staticmethod
        def forward(ctx, x):
            calls.append(1)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = tg.Tensor(np.arange(6.0).reshape(2, 3))
    with tg.lazy():
        assert tg.is_lazy()
        y = Counted.apply(x)
        z = (tnp.tanh(y) @ tg.Tensor(np.ones((3, 2)))).sum(axis=0)
    assert not tg.is_lazy()
    assert calls == [] and not z.is_realized
    assert z.shape == (2,) and z.dtype == np.float64  # known before running
    r = z.realize()
    assert calls == [1] and r.is_realized and z.is_realized
    expected = (np.tanh(np.arange(6.0).reshape(2, 3) * 2) @ np.ones((3, 2))).sum(axis=0)
    np.testing.assert_allclose(r.numpy(), expected)
    z.realize()
    assert calls == [1]  # computed once


def test_values_needed_realize_automatically():
    with tg.lazy():
        y = tg.Tensor([1.0, 2.0]) * 3.0
        c = y > 4.0
    assert c.dtype == np.bool_
    np.testing.assert_array_equal(c.numpy(), [False, True])
    assert float(y.sum()) == 9.0  # an eager op on a deferred input realizes it
    assert "deferred" not in repr(y)


def test_mode_is_persistent_and_validated():
    try:
        tg.mode("lazy")
        y = tg.Tensor([1.0]) + 1.0
        assert not y.is_realized
    finally:
        tg.mode("eager")
    assert (tg.Tensor([1.0]) + 1.0).is_realized
    with pytest.raises(ValueError, match="eager"):
        tg.mode("fast")


def test_deferred_tensor_and_shape_promise_is_checked():
    d = tg.Tensor.deferred(lambda: np.ones(3), (3,), "float64")
    assert "deferred" in repr(d) and d.shape == (3,)
    np.testing.assert_array_equal((d * 2).numpy(), [2.0, 2.0, 2.0])
    bad = tg.Tensor.deferred(lambda: np.ones(4), (3,), "float64")
    with pytest.raises(RuntimeError, match=r"promised shape \(3,\)"):
        bad.realize()


def test_transforms_run_and_accept_deferred_inputs():
    with tg.lazy():
        x = tg.Tensor([1.0, 2.0]) * 1.0
        g = tg.grad(lambda x: (x * x).sum())(x)
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])
    _, tape = tg.trace(lambda x: x * 3.0)(tg.Tensor([1.0]))
    with tg.lazy():
        lazy_in = tg.Tensor([2.0]) + 0.0
    np.testing.assert_allclose(tape.replay(lazy_in).numpy(), [6.0])


def test_ops_without_shape_inference_run_immediately():
    class NoShape(Function):
        @staticmethod
        def forward(ctx, x):
            return x[:1]

        @classmethod
        def output_shape(cls, *shapes, **params):
            raise NotImplementedError

    with tg.lazy():
        y = NoShape.apply(tg.Tensor([1.0, 2.0]))
    assert y.is_realized and y.shape == (1,)
