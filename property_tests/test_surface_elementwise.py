"""Property tests of the elementwise NumPy surface added beside the ufunc table (sinc, i0,
spacing, frexp, modf, divmod, nan_to_num, angle(deg=), the integer-only ops) and of the complex
rules of sign, arcsinh, arccosh, var and std: forward values and dtypes against NumPy/SciPy on
drawn broadcasting shapes (size-0 and size-1 dims included), gradients at orders 1 and 2 in
both modes against finite differences (complex inputs where NumPy takes them), and the
batching rule of every new primitive against a Python loop."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import broadcastable_shapes, floats_in

INTS = [float(k) for k in range(-3, 4)]
ANY = floats_in(-3.0, 3.0)
AWAY_FROM_INTS = floats_in(-3.0, 3.0, exclude=INTS, margin=0.05)
NONZERO = floats_in(-3.0, 3.0, exclude=[0.0], margin=0.2)
# every power of two in the domain [-3, 3] beyond the margin 0.05 around 0: frexp jumps there
POW2 = [0.0] + [2.0**k * s for k in range(-4, 3) for s in (1, -1)]


class Op(NamedTuple):
    name: str
    fn: Callable  # Tensors in, Tensor (or tuple) out
    ref: Callable  # NumPy on arrays
    domains: tuple  # one strategy of float64 values per argument
    complex_ok: bool = False  # also checked with complex128 arguments
    grad: bool = True
    # imaginary parts of complex draws; ops with a branch cut keep finite differences off it
    imag: st.SearchStrategy = floats_in(-1.5, 1.5)
    eps: float | None = None  # finite-difference step (None: check_grads' default)


def _sinc(z):
    """NumPy's sinc, 1 where it overflows (complex subnormals: ``np.sinc(2.2e-311j)`` is
    ``inf+nanj``)."""
    z = np.asarray(z)
    tiny = np.abs(z) < 1e-8
    dtype = np.sinc(np.zeros(1, z.dtype)).dtype
    return np.where(tiny, 1.0, np.sinc(np.where(tiny, 1.0, z))).astype(dtype)


def _first(f):
    return lambda *a: f(*a)[0]


def _second(f):
    return lambda *a: f(*a)[1]


OPS = [
    Op("sinc", tnp.sinc, _sinc, (ANY,), complex_ok=True),
    Op("sinc_near_zero", tnp.sinc, np.sinc, (floats_in(-0.3, 0.3),)),
    Op("i0", tnp.i0, np.i0, (ANY,)),
    Op("spacing", tnp.spacing, np.spacing, (ANY,)),
    Op("frexp_mantissa", _first(tnp.frexp), _first(np.frexp),
       (floats_in(-3.0, 3.0, exclude=POW2, margin=0.05),)),
    Op("frexp_exponent", _second(tnp.frexp), _second(np.frexp), (ANY,), grad=False),
    Op("modf_fraction", _first(tnp.modf), _first(np.modf), (AWAY_FROM_INTS,)),
    Op("modf_integral", _second(tnp.modf), _second(np.modf), (AWAY_FROM_INTS,)),
    Op("divmod_quotient", _first(tnp.divmod), _first(np.divmod),
       (AWAY_FROM_INTS, st.sampled_from([1.0, 2.0, -1.0, 3.0]))),
    Op("divmod_remainder", _second(tnp.divmod), _second(np.divmod),
       (AWAY_FROM_INTS, st.sampled_from([1.0, 2.0, -1.0, 3.0]))),
    Op("nan_to_num", tnp.nan_to_num, np.nan_to_num, (ANY,), complex_ok=True),
    # angle's cut is the negative real axis, arcsinh's the imaginary axis beyond +-1j
    Op("angle_deg", lambda z: tnp.angle(z, deg=True), lambda z: np.angle(z, deg=True),
       (NONZERO,), complex_ok=True, imag=floats_in(-1.5, 1.5, exclude=[0.0], margin=0.2),
       eps=2e-5),  # degrees scale the second differences' error by 57
    Op("sign", tnp.sign, np.sign, (NONZERO,), complex_ok=True),
    Op("arcsinh", tnp.arcsinh, np.arcsinh, (ANY,), complex_ok=True, imag=floats_in(-0.9, 0.9)),
    Op("arccosh", tnp.arccosh, np.arccosh, (floats_in(1.2, 4.0),), complex_ok=True),
]
IDS = [op.name for op in OPS]


def _draw(data, op, dtype, min_side=0, max_side=3):
    shapes = data.draw(broadcastable_shapes(len(op.domains), max_dims=3, min_side=min_side,
                                            max_side=max_side))
    out = []
    for s, d in zip(shapes, op.domains):
        a = data.draw(hnp.arrays(np.float64, s, elements=d))
        if np.dtype(dtype).kind == "c":
            a = a + 1j * data.draw(hnp.arrays(np.float64, s, elements=op.imag))
        out.append(a.astype(dtype))
    return out


@pytest.mark.parametrize("op", OPS, ids=IDS)
@given(data=st.data())
def test_forward_matches_numpy(op, data):
    dtypes = [np.float32, np.float64] + ([np.complex128] if op.complex_ok else [])
    dtype = data.draw(st.sampled_from(dtypes))
    arrays = _draw(data, op, dtype)
    got = op.fn(*[tg.Tensor(a) for a in arrays])
    want = np.asarray(op.ref(*arrays))
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    rtol = 2e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("op", [o for o in OPS if o.grad], ids=[o.name for o in OPS if o.grad])
@given(data=st.data())
def test_grads_orders_1_and_2_both_modes(op, data):
    dtype = data.draw(st.sampled_from([np.float64] + ([np.complex128] if op.complex_ok else [])))
    arrays = _draw(data, op, dtype, min_side=1)
    check_grads(op.fn, tuple(tg.Tensor(a) for a in arrays), order=2, modes=("rev", "fwd"),
                eps=op.eps)


def test_nan_to_num_grads_away_from_the_replaced_entries():
    x = tg.Tensor(np.array([np.nan, 0.3, np.inf, -1.2, -np.inf]))
    g = tg.grad(lambda v: tnp.sum(tnp.nan_to_num(v) ** 2))(x).numpy()
    np.testing.assert_array_equal(g, [0.0, 0.6, 0.0, -2.4, 0.0])


# -- complex rules of var/std ----------------------------------------------------------------
@given(data=st.data(), fn=st.sampled_from(["var", "std"]), ddof=st.integers(0, 1),
       keepdims=st.booleans())
def test_var_std_complex(data, fn, ddof, keepdims):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4))
    axis = data.draw(st.sampled_from([None] + list(range(len(shape)))))
    re = data.draw(hnp.arrays(np.float64, shape, elements=ANY))
    im = data.draw(hnp.arrays(np.float64, shape, elements=ANY))
    z = re + 1j * im
    n = z.size if axis is None else shape[axis]
    if np.std(z, axis=axis).min() < 0.1 or n <= ddof:
        return  # std's kink (zero spread; second differences grow like 1/std**3) and undefined
        # variances are tested elsewhere
    f = lambda v: getattr(tnp, fn)(v, axis=axis, ddof=ddof, keepdims=keepdims)  # noqa: E731
    got = f(tg.Tensor(z))
    want = getattr(np, fn)(z, axis=axis, ddof=ddof, keepdims=keepdims)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    check_grads(f, (tg.Tensor(z),), order=2, modes=("rev", "fwd"))


# -- integer-only ops ------------------------------------------------------------------------
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "gcd",
           "lcm", "bitwise_left_shift", "bitwise_right_shift"]
BITWISE1 = ["invert", "bitwise_not", "bitwise_invert", "bitwise_count"]


@pytest.mark.parametrize("name", BITWISE + BITWISE1)
@given(data=st.data(), dtype=st.sampled_from([np.int8, np.int32, np.int64, np.uint16]))
def test_integer_ops_match_numpy_and_batch(name, data, dtype, ):
    arity = 1 if name in BITWISE1 else 2
    shapes = data.draw(broadcastable_shapes(arity, max_dims=2, max_side=3))
    hi = 6 if "shift" in name else 100
    lo = 0 if np.dtype(dtype).kind == "u" or "shift" in name else -100
    arrays = [data.draw(hnp.arrays(dtype, s, elements=st.integers(lo, hi))) for s in shapes]
    fn, ref = getattr(tnp, name), getattr(np, name)
    got, want = fn(*[tg.Tensor(a) for a in arrays]), np.asarray(ref(*arrays))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
    b = data.draw(st.integers(0, 3))
    batch = [data.draw(hnp.arrays(dtype, (b,) + s, elements=st.integers(lo, hi)))
             for s in shapes]
    check_vmap(fn, tuple(tg.Tensor(a) for a in batch))


# -- batching rules of the new primitives ----------------------------------------------------
BATCHED = {
    "sinc": tnp.sinc,
    "i0": tnp.i0,
    "i0_derivative": tg.grad(lambda v: tnp.sum(tnp.i0(v))),  # I1, and its rule under vmap(grad)
    "spacing": tnp.spacing,
    "sign_complex": lambda x: tnp.sign(x * (1 + 0.5j)),
    "frexp": tnp.frexp,
    "modf": tnp.modf,
    "divmod": lambda x: tnp.divmod(x, 0.7),
    "nan_to_num": lambda x: tnp.nan_to_num(tnp.log(x)),
}


@pytest.mark.parametrize("name", sorted(BATCHED))
@given(data=st.data(), b=st.integers(0, 3))
def test_vmap_and_vmap_of_grad(name, data, b):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    x = data.draw(hnp.arrays(np.float64, (b,) + shape, elements=NONZERO))
    f = BATCHED[name]
    check_vmap(f, (tg.Tensor(x),))

    def loss(v):
        out = f(v)
        out = out[0] if isinstance(out, tuple) else out
        return tnp.sum(tnp.real(out) * 1.5)

    check_vmap(tg.grad(loss), (tg.Tensor(x),))
