"""Property tests of ``holomorphic=True``: on drawn shapes (size 0 and 1 included) and drawn
complex points away from each op's branch cuts and poles, ``grad(sum(f), holomorphic=True)``
is the elementwise complex derivative (complex finite differences along both the real and the
imaginary axis: the conjugate would fail the second), its own holomorphic gradient is ``f''``,
and ``jacfwd == jacrev`` with ``holomorphic=True`` is the diagonal of ``f'``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing.strategies import floats_in, shapes

WIDE = ((-1.5, 1.5), (-1.0, 1.0))
RIGHT = ((0.3, 2.0), (-1.0, 1.0))  # log, sqrt, 1/z: away from the cut and the pole at 0
INSIDE = ((-0.7, 0.7), (-0.8, 0.8))  # arcsin, arccos, arctanh: cuts on |re| > 1
NARROW_IM = ((-1.0, 1.0), (-0.7, 0.7))  # arctan, arcsinh: cuts on |im| > 1

OPS = [  # name, function, (real range, imaginary range)
    ("exp", tnp.exp, WIDE), ("expm1", tnp.expm1, WIDE), ("exp2", tnp.exp2, WIDE),
    ("sin", tnp.sin, WIDE), ("cos", tnp.cos, WIDE), ("tan", tnp.tan, ((-1.0, 1.0), (-1, 1))),
    ("sinh", tnp.sinh, WIDE), ("cosh", tnp.cosh, WIDE), ("tanh", tnp.tanh, WIDE),
    ("square", tnp.square, WIDE), ("cube", lambda z: z**3, WIDE),
    ("log", tnp.log, RIGHT), ("log2", tnp.log2, RIGHT), ("log10", tnp.log10, RIGHT),
    ("log1p", tnp.log1p, ((-0.5, 2.0), (-1.0, 1.0))), ("sqrt", tnp.sqrt, RIGHT),
    ("reciprocal", tnp.reciprocal, RIGHT), ("power_2_5", lambda z: z**2.5, RIGHT),
    ("arcsin", tnp.arcsin, INSIDE), ("arccos", tnp.arccos, INSIDE),
    ("arctanh", tnp.arctanh, INSIDE), ("arctan", tnp.arctan, NARROW_IM),
    ("arcsinh", tnp.arcsinh, NARROW_IM), ("arccosh", tnp.arccosh, ((1.3, 3.0), (-1.0, 1.0))),
    ("sinc", tnp.sinc, ((0.2, 1.5), (-0.8, 0.8))),
    ("exp_times_sin", lambda z: tnp.exp(z) * tnp.sin(z), WIDE),
]
H = 1e-6


def _draw(data, ranges):
    shape = data.draw(shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    (r0, r1), (i0, i1) = ranges
    re = data.draw(hnp.arrays(np.float64, shape, elements=floats_in(r0, r1)))
    im = data.draw(hnp.arrays(np.float64, shape, elements=floats_in(i0, i1)))
    return re + 1j * im


def _cfd(f, z, direction):
    """Elementwise complex difference quotient of ``f`` along ``direction`` (1 or 1j)."""
    step = H * direction
    hi = f(tg.Tensor(z + step)).numpy()
    lo = f(tg.Tensor(z - step)).numpy()
    return (hi - lo) / (2 * step)


@pytest.mark.parametrize("name,f,ranges", OPS, ids=[o[0] for o in OPS])
@given(data=st.data())
def test_holomorphic_grad_is_the_complex_derivative(name, f, ranges, data):
    z = _draw(data, ranges)
    d1 = tg.grad(lambda w: tnp.sum(f(w)), holomorphic=True)
    g = d1(tg.Tensor(z))
    assert g.shape == z.shape and g.dtype == np.complex128
    for direction in (1, 1j):
        np.testing.assert_allclose(g.numpy(), _cfd(f, z, direction), rtol=1e-6, atol=1e-7)
    # order 2: the holomorphic gradient of the (elementwise) first derivative
    gg = tg.grad(lambda w: tnp.sum(d1(w)), holomorphic=True)(tg.Tensor(z))
    np.testing.assert_allclose(gg.numpy(), _cfd(d1, z, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gg.numpy(), _cfd(d1, z, 1j), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name,f,ranges", OPS, ids=[o[0] for o in OPS])
@given(data=st.data())
def test_holomorphic_jacobians_agree(name, f, ranges, data):
    z = _draw(data, ranges).reshape(-1)
    jf = tg.jacfwd(f, holomorphic=True)(tg.Tensor(z)).numpy()
    jr = tg.jacrev(f, holomorphic=True)(tg.Tensor(z)).numpy()
    assert jf.shape == jr.shape == (z.size, z.size)
    np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
    d = tg.grad(lambda w: tnp.sum(f(w)), holomorphic=True)(tg.Tensor(z)).numpy()
    np.testing.assert_allclose(jf, np.diag(d), rtol=1e-10, atol=1e-12)
