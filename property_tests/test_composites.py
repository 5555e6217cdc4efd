"""Composite functions at order 3 (issue 3), and log_softmax's stability at extremes."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, floats_in

COMPOSITES = {
    "logsumexp_tanh": lambda x: tnp.logsumexp(tnp.tanh(x) * 2.0),
    "softmax_weighted": lambda x: (F.softmax(x) * tnp.sin(x)).sum(),
    "log_softmax_mean": lambda x: F.log_softmax(x * 0.7).mean(),
    "sigmoid_softplus": lambda x: (tnp.sigmoid(x) * tnp.softplus(-x)).sum(),
    "norm_of_outer": lambda x: tnp.norm(tnp.outer(x, tnp.exp(x * 0.3)) + 1.0),  # away from 0
    "gelu_poly": lambda x: (F.gelu(x) * x**2 - tnp.cos(x)).sum(),
    "rational": lambda x: (x / (1.0 + x * x)).sum() ** 2,
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
@given(data=st.data())
def test_composites_at_order_three(name, data):
    n = data.draw(st.integers(1, 4))
    x = data.draw(arrays((n,), np.float64, floats_in(-1.5, 1.5)))
    check_grads(COMPOSITES[name], (tg.Tensor(x),), order=3, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
def test_log_softmax_is_exact_and_finite_at_extremes(dtype, data):
    n = data.draw(st.integers(2, 5))
    x = data.draw(arrays((n,), dtype, floats_in(-1e4, 1e4, width=np.dtype(dtype).itemsize * 8)))
    out = F.log_softmax(tg.Tensor(x))
    x64 = x.astype(np.float64)
    m = x64.max()
    ref = x64 - (m + np.log(np.exp(x64 - m).sum()))
    assert out.dtype == dtype
    tol = 1e-3 * (1 + np.abs(ref)) if dtype == np.float32 else 1e-9 * (1 + np.abs(ref))
    assert np.all(np.abs(out.numpy() - ref) <= tol)
    g = tg.grad(lambda t: (F.log_softmax(t) * tg.Tensor(np.linspace(0, 1, n).astype(dtype))).sum())(
        tg.Tensor(x)
    )
    assert np.all(np.isfinite(g.numpy()))
