"""``logaddexp``'s derivatives (scipy's ``expit`` formula in NumPy): values against scipy, and
first and second order against finite differences, over broadcasting shapes (size-0 and
size-1 dims included)."""

import numpy as np
import scipy.special as sp
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, broadcastable_shapes, floats_in


def _sum_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """``a`` summed back over the dimensions broadcasting added to ``shape``."""
    a = a.sum(tuple(range(a.ndim - len(shape))))
    return a.sum(tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)


@given(data=st.data())
def test_logaddexp_gradient_values_and_second_order(data):
    sx, sy = data.draw(broadcastable_shapes(2, max_side=3))
    x = data.draw(arrays(sx, elements=floats_in(-30.0, 30.0)))
    y = data.draw(arrays(sy, elements=floats_in(-30.0, 30.0)))
    gx, gy = tg.grad(lambda a, b: tnp.sum(tnp.logaddexp(a, b)), argnums=(0, 1))(
        tg.Tensor(x), tg.Tensor(y))
    shape = np.broadcast_shapes(sx, sy)
    tol = 64 * np.finfo(np.float64).eps
    for got, want, s in ((gx, sp.expit(x - y), sx), (gy, sp.expit(y - x), sy)):
        assert got.shape == s
        np.testing.assert_allclose(got.numpy(), _sum_to(np.broadcast_to(want, shape), s),
                                   rtol=tol, atol=tol)
    x2 = data.draw(arrays(sx, elements=floats_in(-4.0, 4.0)))
    y2 = data.draw(arrays(sy, elements=floats_in(-4.0, 4.0)))
    check_grads(lambda a, b: tnp.logaddexp(a, b), (tg.Tensor(x2), tg.Tensor(y2)), order=2)
