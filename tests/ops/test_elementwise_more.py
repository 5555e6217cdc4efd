"""Example tests of the NumPy elementwise surface added beside the ufunc table: sinc, spacing,
i0, frexp, modf, divmod, nan_to_num, angle(deg=), the integer-only bitwise ops and their
NumPy 2 aliases; complex sign, arcsinh and arccosh; var/std of complex input. Error messages,
conventions at kinks (docs/conventions.md), values against NumPy/SciPy, and gradient
cross-checks against torch.autograd where torch is installed."""

import math

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.ops import elementwise as ew
from tapegrad.testing import check_grads, check_vmap


def T(a, dtype=np.float64):
    return tg.Tensor(np.asarray(a, dtype=dtype))


def grad_sum(f, x):
    return tg.grad(lambda v: tnp.sum(f(v)))(x).numpy()


# -- integer-only ops ------------------------------------------------------------------------
BITWISE2 = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "gcd",
            "lcm", "bitwise_left_shift", "bitwise_right_shift"]


@pytest.mark.parametrize("name", BITWISE2)
def test_integer_only_binary_ops_name_op_and_dtypes_for_floats(name):
    x = T([1.0, 2.0], np.float32)
    op = {"bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift"}.get(name, name)
    with pytest.raises(TypeError, match=rf"^{op}: expects integer.* operands, got float32 and "
                                        r"float32 .*astype\(int\)"):
        getattr(tnp, name)(x, x)
    i, j = np.array([12, 7, -3]), np.array([8, 2, 1])
    want = getattr(np, name)(i, j)
    got = getattr(tnp, name)(T(i, np.int64), T(j, np.int64))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("name", ["invert", "bitwise_not", "bitwise_invert", "bitwise_count"])
def test_integer_only_unary_ops(name):
    i = np.array([0, 5, -6, 255], np.int16)
    want = getattr(np, name)(i)
    got = getattr(tnp, name)(T(i, np.int16))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)
    with pytest.raises(TypeError, match=r"expects integer.* operands, got complex128"):
        getattr(tnp, name)(T([1 + 1j], np.complex128))


def test_bitwise_ops_have_no_gradient_and_operators_still_work():
    i = T([6, 3], np.int64)
    assert (i & 5).numpy().tolist() == [4, 1]
    assert (i << 1).numpy().tolist() == [12, 6]
    with pytest.raises(TypeError, match="bitwise_and: expects integer or boolean operands"):
        T([1.0]) & T([1.0])


# -- new unary rows --------------------------------------------------------------------------
def test_sinc_is_one_at_complex_subnormals():
    # NumPy's sin(y) / y overflows there (np.sinc(2.2e-311j) is inf+nanj); we forwarded it
    z = np.array([2.2e-311j, 2.2e-311 + 0j, -4e-320 + 1e-320j, 1e-9j, 0.25 + 0.5j])
    got = tnp.sinc(T(z, np.complex128)).numpy()
    np.testing.assert_allclose(got[:4], 1.0, rtol=1e-15)
    np.testing.assert_allclose(got[4], np.sinc(z[4]), rtol=1e-15)
    assert got.dtype == np.complex128
    check_grads(tnp.sinc, (T(z, np.complex128),), order=2, modes=("rev", "fwd"))


def test_sinc_matches_numpy_and_its_derivatives_at_zero_are_exact():
    x = np.array([-1.5, -0.3, -1e-9, 0.0, 1e-3, 0.2, 0.25, 0.26, 2.0])
    np.testing.assert_allclose(tnp.sinc(T(x)).numpy(), np.sinc(x), rtol=1e-15)
    assert tnp.sinc(T(x, np.float32)).dtype == np.float32
    d1 = grad_sum(tnp.sinc, T([0.0]))
    d2 = tg.grad(lambda v: tg.grad(lambda w: tnp.sinc(w).sum())(v).sum())(T([0.0])).numpy()
    assert d1[0] == 0.0
    np.testing.assert_allclose(d2[0], -math.pi**2 / 3, rtol=1e-14)
    # both branches of the series switch agree with the closed form to full precision
    xs = np.array([0.2499, 0.2501, -0.1, 0.05])
    want = (np.cos(np.pi * xs) - np.sinc(xs)) / xs
    np.testing.assert_allclose(grad_sum(tnp.sinc, T(xs)), want, rtol=1e-12)


def test_sinc_complex_and_grads():
    z = T([0.3 + 0.2j, -1.2 + 0.5j, 0.0 + 0.1j], np.complex128)
    np.testing.assert_allclose(tnp.sinc(z).numpy(), np.sinc(z.numpy()), rtol=1e-14)
    check_grads(tnp.sinc, (z,), order=2, modes=("rev", "fwd"))


def test_i0_values_dtypes_and_second_derivative_at_zero():
    x = np.array([-3.0, -0.5, 0.0, 0.7, 4.0])
    np.testing.assert_allclose(tnp.i0(T(x)).numpy(), np.i0(x), rtol=1e-14)
    assert tnp.i0(T(x, np.float32)).dtype == np.i0(x.astype(np.float32)).dtype
    assert tnp.i0(T([1, 2], np.int64)).dtype == np.float64
    np.testing.assert_allclose(grad_sum(tnp.i0, T(x)), scipy.special.i1(x), rtol=1e-14)
    second = tg.grad(lambda v: tg.grad(lambda w: tnp.i0(w).sum())(v).sum())(T([0.0]))
    np.testing.assert_allclose(second.numpy(), [0.5])  # I0''(0) = 1/2
    # near 0, not at it: I1(x) / x underflowed to 0 for subnormal x (I0'' came out as 1)
    tiny = T([5e-324, -5e-324, 1e-300, 1e-7])
    second = tg.grad(lambda v: tg.grad(lambda w: tnp.i0(w).sum())(v).sum())(tiny)
    np.testing.assert_allclose(second.numpy(), [0.5, 0.5, 0.5, 0.5], rtol=1e-13)
    third = tg.grad(lambda u: tg.grad(lambda v: tg.grad(lambda w: tnp.i0(w).sum())(v).sum())(
        u).sum())(T([1e-7, 0.3]))
    np.testing.assert_allclose(third.numpy(), [3e-7 / 8, 0.3 * 3 / 8 + 0.3**3 * 5 / 96],
                               rtol=1e-3)
    check_grads(tnp.i0, (T(x),), order=2, modes=("rev", "fwd"))
    with pytest.raises(TypeError, match="i0: not supported for complex values"):
        tnp.i0(T([1j], np.complex128))


def test_spacing_is_numpy_and_piecewise_constant():
    x = np.array([1.0, -2.5, 1e10], np.float32)
    np.testing.assert_array_equal(tnp.spacing(T(x, np.float32)).numpy(), np.spacing(x))
    assert np.all(grad_sum(tnp.spacing, T(x)) == 0)


# -- multi-output ops ------------------------------------------------------------------------
def test_heaviside_passes_the_gradient_to_h0_where_x_is_zero():
    # heaviside(0, h0) is h0 itself: d/dh0 = 1 there (JAX's rule); it used to be 0 everywhere
    x, h = T([0.0, 1.0, -2.0, 0.0]), T([0.3, 0.3, 0.3, 0.7])
    w = np.arange(1.0, 5.0)
    gx, gh = tg.grad(lambda a, b: tnp.sum(tnp.heaviside(a, b) * w), argnums=(0, 1))(x, h)
    np.testing.assert_array_equal(gx.numpy(), 0.0)
    np.testing.assert_array_equal(gh.numpy(), [1.0, 0.0, 0.0, 4.0])
    _, t = tg.jvp(lambda b: tnp.heaviside(x, b), (h,), (T(np.ones(4)),))
    np.testing.assert_array_equal(t.numpy(), [1.0, 0.0, 0.0, 1.0])
    gb = tg.grad(lambda b: tnp.sum(tnp.heaviside(x, b)))(T(0.5))  # a broadcast h0
    assert float(gb) == 2.0
    check_grads(lambda b: tnp.heaviside(x, b), (h,), order=2, modes=("rev", "fwd"))


def test_frexp_values_and_mantissa_gradient_at_powers_of_two():
    x = np.array([3.0, -0.75, 0.0, 1.0, 8.0, -4.0])
    m, e = tnp.frexp(T(x))
    wm, we = np.frexp(x)
    np.testing.assert_array_equal(m.numpy(), wm)
    np.testing.assert_array_equal(e.numpy(), we)
    assert e.dtype == np.int32 and tnp.frexp(T(x, np.float32))[0].dtype == np.float32
    g = tg.grad(lambda v: tnp.frexp(v)[0].sum())(T(x)).numpy()
    np.testing.assert_array_equal(g, 2.0 ** -we)  # one-sided away from 0 at powers of two
    check_grads(lambda v: tnp.frexp(v)[0], (T([3.0, -0.7, 5.5]),), order=2, modes=("rev", "fwd"))
    with pytest.raises(TypeError, match="frexp: not supported for complex values"):
        tnp.frexp(T([1j], np.complex128))


def test_modf_and_divmod_values_and_gradients():
    x = np.array([3.7, -2.25, 0.5])
    f, i = tnp.modf(T(x))
    wf, wi = np.modf(x)
    np.testing.assert_array_equal(f.numpy(), wf)
    np.testing.assert_array_equal(i.numpy(), wi)
    assert grad_sum(lambda v: tnp.modf(v)[0], T(x)).tolist() == [1.0, 1.0, 1.0]
    assert grad_sum(lambda v: tnp.modf(v)[1], T(x)).tolist() == [0.0, 0.0, 0.0]
    y = np.array([2.0, 0.8, -0.3])
    q, r = tnp.divmod(T(x), T(y))
    wq, wr = np.divmod(x, y)
    np.testing.assert_array_equal(q.numpy(), wq)
    np.testing.assert_array_equal(r.numpy(), wr)
    q2, r2 = divmod(T(x), T(y))  # Python's divmod on Tensors
    np.testing.assert_array_equal(r2.numpy(), wr)
    gx, gy = tg.grad(lambda a, b: tnp.divmod(a, b)[1].sum(), argnums=(0, 1))(T(x), T(y))
    np.testing.assert_array_equal(gx.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gy.numpy(), -wq)
    check_grads(lambda a, b: tnp.divmod(a, b)[1], (T(x), T(y)), order=2, modes=("rev", "fwd"))
    # integers: NumPy's integer divmod, no gradient needed
    iq, ir = tnp.divmod(T([7, -7], np.int64), 3)
    assert iq.numpy().tolist() == [2, -3] and ir.numpy().tolist() == [1, 2]


@pytest.mark.parametrize("name", ["frexp", "modf"])
def test_two_output_unary_ops_batch(name):
    x = T(np.random.default_rng(0).normal(size=(3, 4)))
    check_vmap(getattr(tnp, name), (x,))
    check_vmap(tg.grad(lambda v: getattr(tnp, name)(v)[0].sum()), (x,))


def test_divmod_batches_with_shared_operand():
    x = T(np.random.default_rng(1).normal(size=(3, 4)))
    check_vmap(tnp.divmod, (x, T([1.5, 0.7, -2.0, 3.0])), in_axes=(0, None))
    check_vmap(tg.grad(lambda a, b: tnp.divmod(a, b)[1].sum(), argnums=1),
               (x, T([1.5, 0.7, -2.0, 3.0])), in_axes=(0, None))


# -- composites --------------------------------------------------------------------------------
def test_nan_to_num_values_defaults_and_gradient():
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0])
    for dtype in (np.float32, np.float64):
        got = tnp.nan_to_num(T(x, dtype))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), np.nan_to_num(x.astype(dtype)))
    got = tnp.nan_to_num(T(x), nan=-1.0, posinf=9.0, neginf=-9.0)
    np.testing.assert_array_equal(got.numpy(), np.nan_to_num(x, nan=-1.0, posinf=9.0,
                                                              neginf=-9.0))
    assert grad_sum(tnp.nan_to_num, T(x)).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    z = np.array([complex(np.nan, 2.0), complex(1.0, np.inf), 3 + 4j], np.complex64)
    got = tnp.nan_to_num(T(z, np.complex64))
    assert got.dtype == np.complex64
    np.testing.assert_array_equal(got.numpy(), np.nan_to_num(z))
    ints = T([1, 2], np.int64)
    assert tnp.nan_to_num(ints) is ints


def test_angle_in_degrees():
    z = np.array([1 + 1j, -1 + 0.1j, -1j])
    np.testing.assert_allclose(tnp.angle(T(z, np.complex128), deg=True).numpy(),
                               np.angle(z, deg=True))
    check_grads(lambda v: tnp.angle(v, deg=True), (T(z, np.complex128),), order=2,
                modes=("rev", "fwd"))


# -- complex inputs of existing ops (these failed before) --------------------------------------
Z = np.array([0.3 + 0.7j, -1.2 - 0.4j, 2.0 + 0.1j, -0.5 + 1.5j])


def test_complex_sign_value_and_wirtinger_gradient():
    z = T(Z, np.complex128)
    np.testing.assert_allclose(tnp.sign(z).numpy(), np.sign(Z))
    check_grads(tnp.sign, (z,), order=2, modes=("rev", "fwd"))
    # |sign(z)| = 1 is constant: its gradient vanishes; Re(sign(z)) = x / |z|
    g = tg.grad(lambda v: tnp.sum(tnp.real(tnp.sign(v))))(z).numpy()
    x, y, r = Z.real, Z.imag, np.abs(Z)
    np.testing.assert_allclose(g, y * y / r**3 - 1j * (-x * y / r**3), rtol=1e-12)
    g0 = tg.grad(lambda v: tnp.sum(tnp.abs(tnp.sign(v)) ** 2))(z).numpy()
    np.testing.assert_allclose(g0, 0, atol=1e-12)
    # at 0 the sign has no limit: gradient 0, never NaN
    assert tg.grad(lambda v: tnp.sum(tnp.real(tnp.sign(v))))(T([0j], np.complex128)).numpy() == 0
    # real sign stays piecewise constant
    assert np.all(grad_sum(tnp.sign, T([-1.0, 0.0, 2.0])) == 0)


@pytest.mark.parametrize("name", ["arcsinh", "arccosh"])
def test_complex_inverse_hyperbolic_gradients_follow_numpys_branch(name):
    # the left half-plane is where sqrt(z**2 - 1) and sqrt(z - 1) sqrt(z + 1) differ
    z = T(np.array([-2 + 0.1j, -0.5 - 2j, 0.3 + 0.2j, 1.5 - 0.7j]), np.complex128)
    np.testing.assert_allclose(getattr(tnp, name)(z).numpy(), getattr(np, name)(z.numpy()))
    check_grads(getattr(tnp, name), (z,), order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std_of_complex_input(fn):
    rng = np.random.default_rng(3)
    z = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    for kw in ({}, {"axis": 1}, {"axis": 0, "ddof": 1, "keepdims": True}):
        got = getattr(tnp, fn)(T(z, np.complex128), **kw)
        want = getattr(np, fn)(z, **kw)
        assert got.dtype == want.dtype == np.float64
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-13)
        check_grads(lambda v, kw=kw: getattr(tnp, fn)(v, **kw), (T(z, np.complex128),),
                    order=2, modes=("rev", "fwd"))
    assert getattr(tnp, fn)(T(z, np.complex64)).dtype == np.float32
    # var(z) = var(Re z) + var(Im z): the gradient is 2 conj(z - mean) / n (JAX's convention)
    g = tg.grad(lambda v: tnp.var(v))(T(z, np.complex128)).numpy()
    np.testing.assert_allclose(g, 2 * np.conj(z - z.mean()) / z.size, rtol=1e-12)


# -- torch cross-checks ------------------------------------------------------------------------
def _torch_grad(fn, x):
    torch = pytest.importorskip("torch")
    t = torch.tensor(x, requires_grad=True)
    out = fn(torch, t)
    (g,) = torch.autograd.grad(out.sum() if not out.is_complex() else out.real.sum(), t)
    return g.numpy()


@pytest.mark.parametrize("name,tfn", [
    ("sinc", lambda torch, t: torch.sinc(t)),
    ("i0", lambda torch, t: torch.special.i0(t)),
    ("cbrt", lambda torch, t: torch.sign(t) * torch.abs(t) ** (1 / 3)),
    ("exp2", lambda torch, t: torch.exp2(t)),
    ("fabs", lambda torch, t: torch.abs(t)),
    ("deg2rad", lambda torch, t: torch.deg2rad(t)),
    ("nan_to_num", lambda torch, t: torch.nan_to_num(t)),
])
def test_unary_gradients_match_torch(name, tfn):
    x = np.array([-1.3, -0.2, 0.4, 0.9, 2.2])
    np.testing.assert_allclose(grad_sum(getattr(tnp, name), T(x)), _torch_grad(tfn, x),
                               rtol=1e-10)


@pytest.mark.parametrize("name,tfn", [
    ("fmod", lambda torch, a, b: torch.fmod(a, b)),
    ("copysign", lambda torch, a, b: torch.copysign(a, b)),
    ("logaddexp2", lambda torch, a, b: torch.logaddexp2(a, b)),
    ("float_power", lambda torch, a, b: torch.float_power(a, b)),
    ("hypot", lambda torch, a, b: torch.hypot(a, b)),
])
def test_binary_gradients_match_torch(name, tfn):
    torch = pytest.importorskip("torch")
    x, y = np.array([0.4, 1.7, 2.9]), np.array([0.7, -1.1, 1.3])
    a, b = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
    ga, gb = torch.autograd.grad(tfn(torch, a, b).sum(), (a, b), allow_unused=True)
    ours = tg.grad(lambda u, v: tnp.sum(getattr(tnp, name)(u, v)), argnums=(0, 1))(T(x), T(y))
    np.testing.assert_allclose(ours[0].numpy(), ga.numpy(), rtol=1e-10)
    want_b = np.zeros_like(y) if gb is None else gb.numpy()
    np.testing.assert_allclose(ours[1].numpy(), want_b, rtol=1e-10, atol=1e-15)


def test_complex_sign_gradient_is_the_conjugate_of_torchs():
    # torch.sgn is the complex sign; torch's gradient of a real loss is df/dx + i df/dy, ours
    # (JAX's) df/dx - i df/dy.
    torch = pytest.importorskip("torch")
    w = np.array([0.5 - 1j, 2 + 0.3j, -1 + 1j, 0.2 + 0.1j])
    t = torch.tensor(Z, requires_grad=True)
    (gt,) = torch.autograd.grad((torch.sgn(t) * torch.tensor(w)).real.sum(), t)
    ours = tg.grad(lambda v: tnp.sum(tnp.real(tnp.sign(v) * w)))(T(Z, np.complex128))
    np.testing.assert_allclose(ours.numpy(), np.conj(gt.numpy()), rtol=1e-12)


def test_complex_var_gradient_is_the_conjugate_of_torchs():
    torch = pytest.importorskip("torch")
    t = torch.tensor(Z, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.var(t, unbiased=False), t)
    ours = tg.grad(tnp.var)(T(Z, np.complex128))
    np.testing.assert_allclose(ours.numpy(), np.conj(gt.numpy()), rtol=1e-12)


# -- the table's second derivatives ------------------------------------------------------------
_DOMAINS = {"log": (0.2, 3), "log1p": (-0.5, 3), "log2": (0.2, 3), "log10": (0.2, 3),
            "sqrt": (0.2, 3), "arcsin": (-0.9, 0.9), "arccos": (-0.9, 0.9),
            "arccosh": (1.2, 3), "arctanh": (-0.9, 0.9)}
_REAL_ONLY = {"i0", "erf", "erfc", "cbrt", "sigmoid", "softplus"}
_SMOOTH_UNARY = [r for r in ew.UNARY if r.deriv is not None and not r.piecewise]
_SMOOTH_BINARY = [r for r in ew.BINARY if not r.piecewise and (r.dx or r.dy)]


def _values(a):
    return np.asarray(a.numpy() if isinstance(a, tg.Tensor) else a)


def _partials_by_forward_mode(formula, args):
    """The partial derivatives of the elementwise ``formula`` in each of ``args`` (the others
    held fixed), by forward mode along ones."""
    out = []
    for i, a in enumerate(args):
        def along(t, i=i):
            v = list(args)
            v[i] = t
            return formula(*v)

        out.append(tg.jvp(along, (a,), (tg.Tensor(np.ones(a.shape, a.dtype)),))[1].numpy())
    return out


def _close(got, want, shape):
    got = np.zeros(shape) if got is None else np.broadcast_to(_values(got), shape)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("row", _SMOOTH_UNARY, ids=lambda r: r.name)
@pytest.mark.parametrize("cplx", [False, True], ids=["real", "complex"])
def test_a_unary_rows_second_derivatives_are_the_partials_of_its_derivative(row, cplx):
    """``d2`` (the rule of the fused backward's own backward, written out so that no rule calls
    a transform) gives the partial derivatives of the row's ``deriv(x, out)`` in ``x`` and in
    ``out``, as forward mode through the formula finds them; at the special points too
    (``sinc`` and ``i0`` at 0)."""
    from tapegrad.ops._registry import ns

    if cplx and row.name in _REAL_ONLY:
        pytest.skip("a real-only function")
    rng = np.random.default_rng(3)
    x = rng.uniform(*_DOMAINS.get(row.name, (-2, 2)), size=7)
    x[:3] = {"sinc": [0.0, 0.1, -0.2], "i0": [0.0, 0.5, -1.0]}.get(row.name, x[:3])
    if cplx:
        x = x + 0.3j * rng.uniform(-1, 1, size=7)
    X = tg.Tensor(x)
    Y = getattr(ns, row.name)(X)
    want = _partials_by_forward_mode(lambda a, b: row.deriv(ns, a, b), [X, Y])
    for got, w in zip(row.d2(ns, X, Y), want):
        _close(got, w, x.shape)


@pytest.mark.parametrize("row", _SMOOTH_BINARY, ids=lambda r: r.name)
def test_a_binary_rows_second_derivatives_are_the_partials_of_its_derivatives(row):
    """``d2(wrt)`` gives the partial derivatives of ``dx`` (``wrt=0``) and ``dy`` (``wrt=1``)
    in ``x``, ``y`` and ``out``, as forward mode through the formulas (the origin too for
    ``arctan2`` and ``hypot``, where the formulas take their guarded branch)."""
    from tapegrad.ops._registry import ns

    rng = np.random.default_rng(4)
    x, y = rng.uniform(0.3, 2, size=6), rng.uniform(-2, 2, size=6)
    x[0] = y[0] = 0.0 if row.name in ("arctan2", "hypot") else x[0]
    X, Y = tg.Tensor(x), tg.Tensor(y)
    O = getattr(ns, row.name)(X, Y)
    for wrt, d in ((0, row.dx), (1, row.dy)):
        if d is None:
            continue
        want = _partials_by_forward_mode(lambda a, b, o, d=d: d(ns, a, b, o), [X, Y, O])
        for got, w in zip(row.d2(ns, wrt, X, Y, O), want):
            _close(got, w, x.shape)
