"""The derivatives of ``logaddexp``, ``sigmoid`` and ``softplus`` on arrays: scipy's ``expit``
formula ``1 / (1 + exp(-t))`` written in NumPy (no ``scipy.special`` import), with the same
values at infinities and NaN, eager, under ``jit`` and in a fused kernel."""

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.special as sp

import tapegrad as tg
import tapegrad.core.fusion as fusion
import tapegrad.numpy as tnp
from tapegrad.ops.elementwise import array_ns

INF, NAN = np.inf, np.nan
VALUES = [-INF, -800.0, -2.0, 0.0, 3.0, 800.0, INF, NAN]


def _expected_dx(x: float, y: float) -> float:
    """d/dx logaddexp(x, y) as tapegrad defines it: ``expit(x - y)``; 1/2 where ``x - y`` is
    NaN (equal infinities, a NaN operand)."""
    t = float(x) - float(y)
    return 0.5 if t != t else float(sp.expit(t))


def _pairs():
    x, y = np.meshgrid(np.array(VALUES), np.array(VALUES), indexing="ij")
    return x.ravel(), y.ravel()


def _grads(f):
    x, y = _pairs()
    gx, gy = f(tg.Tensor(x), tg.Tensor(y))
    return x, y, gx.numpy(), gy.numpy()


def _loss(a, b):
    return tnp.sum(tnp.logaddexp(a, b))


@pytest.mark.parametrize("how", ["eager", "jit", "fused"])
def test_logaddexp_gradient_at_infinities_nan_and_ties(how):
    grad = tg.grad(_loss, argnums=(0, 1))
    if how == "jit":
        grad = tg.jit(grad)
    elif how == "fused":
        if not fusion.available():
            pytest.skip("numba is not installed")
        grad = tg.jit(grad, fuse=True)
        grad(*[tg.Tensor(v) for v in _pairs()])  # records; the kernels run from the next call
    x, y, gx, gy = _grads(grad)
    want_x = np.array([_expected_dx(a, b) for a, b in zip(x, y)])
    want_y = np.array([_expected_dx(b, a) for a, b in zip(x, y)])
    for got, want in ((gx, want_x), (gy, want_y)):
        # exp is NumPy's (or the C library's in a kernel): within a few ulp of scipy's expit
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(np.float64).eps, atol=0)
    tie = x == y  # equal infinities (and finite ties) split the cotangent equally
    assert (gx[tie] == 0.5).all() and (gy[tie] == 0.5).all()
    plus = (x == INF) & (y < INF)
    assert (gx[plus] == 1.0).all() and (gy[plus] == 0.0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_array_sigmoid_is_expits_formula_within_two_ulp(dtype):
    t = np.concatenate([np.linspace(-760, 760, 4001), [-INF, INF, 0.0, -0.0]]).astype(dtype)
    with np.errstate(over="ignore"):  # (as every rule runs: exp(-t) overflows to inf)
        got = array_ns(np).sigmoid(t)
    want = sp.expit(t)
    assert got.dtype == dtype
    np.testing.assert_array_max_ulp(got, want, maxulp=2)


@pytest.mark.parametrize("name", ["sigmoid", "softplus"])
def test_sigmoid_and_softplus_gradients_match_expit(name):
    x = np.linspace(-40.0, 40.0, 161)
    fn = getattr(tnp, name)
    got = tg.grad(lambda a: tnp.sum(fn(a)))(tg.Tensor(x)).numpy()
    want = sp.expit(x) * sp.expit(-x) if name == "sigmoid" else sp.expit(x)
    np.testing.assert_allclose(got, want, rtol=8 * np.finfo(np.float64).eps, atol=0)


_NO_SCIPY = """
import sys
import numpy as np
import tapegrad as tg, tapegrad.numpy as tnp
x = tg.Tensor(np.linspace(-3.0, 3.0, 7))
f = lambda a: tnp.sum(tnp.logaddexp(a, 0.5) + tnp.sigmoid(a) + tnp.softplus(a))
tg.grad(f)(x)
tg.jit(tg.grad(f))(x)
tg.grad(tg.grad(lambda a: tnp.sum(tnp.logaddexp(a, 0.5))))(tg.Tensor(0.25))
print("scipy.special" in sys.modules)
"""


def test_first_and_second_order_rules_do_not_import_scipy_special():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", _NO_SCIPY], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False"]
