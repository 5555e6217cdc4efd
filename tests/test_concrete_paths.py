"""First-order backward rules that compute on raw arrays (``function._all_concrete``) give
exactly what their tapegrad-op form gives, and step aside whenever a transform records."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import function
from tapegrad.nn import functional as F


def _grads(fn, args, monkeypatch, concrete):
    if not concrete:
        monkeypatch.setattr("tapegrad.ops.linalg._all_concrete", lambda *ts: False)
        monkeypatch.setattr("tapegrad.nn.functional._all_concrete", lambda *ts: False)
    out = tg.grad(fn, argnums=tuple(range(len(args))))(*args)
    monkeypatch.undo()
    return [o.numpy() for o in out]


@pytest.mark.parametrize("x_shape", [(5, 3), (2, 4, 3)])
def test_linear_backward_fast_path_is_exact(monkeypatch, x_shape):
    rng = np.random.default_rng(0)
    x = tg.Tensor(rng.standard_normal(x_shape).astype(np.float32))
    w = tg.Tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = tg.Tensor(rng.standard_normal(4).astype(np.float32))

    def f(x, w, b):
        return tnp.sum(tnp.tanh(F.linear(x, w, b)))

    fast = _grads(f, (x, w, b), monkeypatch, True)
    slow = _grads(f, (x, w, b), monkeypatch, False)
    for a, s in zip(fast, slow):
        assert a.dtype == s.dtype and a.shape == s.shape
        np.testing.assert_array_equal(a, s)


def test_matmul_backward_fast_path_is_exact(monkeypatch):
    rng = np.random.default_rng(1)
    a = tg.Tensor(rng.standard_normal((4, 6)))
    b = tg.Tensor(rng.standard_normal((6, 2)))

    def f(a, b):
        return tnp.sum(tnp.sin(a @ b))

    for u, v in zip(_grads(f, (a, b), monkeypatch, True), _grads(f, (a, b), monkeypatch, False)):
        np.testing.assert_array_equal(u, v)


def test_fast_paths_step_aside_under_recording_transforms():
    """Second order (the backward recorded by an outer grad) and jit tracing must not see
    constants where a traced value belongs: both agree with the analytic answer."""
    rng = np.random.default_rng(2)
    x = tg.Tensor(rng.standard_normal((3, 2)))
    w = tg.Tensor(rng.standard_normal((2, 2)))

    def f(w):
        return tnp.sum((x @ w) ** 3)

    # d/dw sum((xw)^3) = x.T (3 (xw)^2); its directional derivative along v is
    # x.T (6 (xw) * (x v))
    v = tg.Tensor(rng.standard_normal((2, 2)))
    hv = tg.hvp(f, (w,), (v,))
    xa, wa, va = x.numpy(), w.numpy(), v.numpy()
    np.testing.assert_allclose(hv.numpy(), xa.T @ (6 * (xa @ wa) * (xa @ va)), rtol=1e-12)
    g = tg.jit(tg.grad(f))
    for _ in range(2):  # trace, then replay
        np.testing.assert_allclose(g(w).numpy(), xa.T @ (3 * (xa @ wa) ** 2), rtol=1e-12)
    w2 = tg.Tensor(rng.standard_normal((2, 2)))
    np.testing.assert_allclose(g(w2).numpy(), xa.T @ (3 * (xa @ w2.numpy()) ** 2), rtol=1e-12)


def test_fast_paths_step_aside_in_lazy_mode():
    """Inside ``tg.lazy()`` the backward ops are deferred like every other op: the raw-array
    path must not run on deferred arrays."""
    rng = np.random.default_rng(3)
    x = tg.Tensor(rng.standard_normal((3, 2)))
    w = tg.Tensor(rng.standard_normal((2, 2)))
    b = tg.Tensor(rng.standard_normal(2))

    def f(w, b):
        return tnp.sum((x @ w) ** 3) + tnp.sum(F.linear(x, w, b) ** 2)

    eager = [g.numpy() for g in tg.grad(f, argnums=(0, 1))(w, b)]
    with tg.lazy():
        lazy = tg.grad(f, argnums=(0, 1))(w, b)
    for e, g in zip(eager, lazy):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-12)


def test_all_concrete():
    t = tg.Tensor(1.0)
    assert function._all_concrete(t, t)
    assert not function._all_concrete(t, 1.0)
    seen = []
    tg.grad(lambda x: seen.append(function._all_concrete(x)) or x * 1.0)(t)
    assert seen == [False]
