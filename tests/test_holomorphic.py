"""``holomorphic=True`` on grad, value_and_grad, jacfwd, jacrev and hessian (JAX's semantics):
the complex derivative ``f'(z)`` of a holomorphic function, never its conjugate, at orders 1
and 2, against analytic derivatives and complex finite differences; the real-valued convention
beside it (``grad(real(f)) == f'``); and the errors that point to the flag."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.linalg as tsl

POINTS = [0.3 + 0.7j, -1.2 + 0.4j, 0.8 - 1.1j]
COEFFS = np.array([1.5 - 0.5j, -2.0, 0.25j, 3.0 + 1.0j])  # a cubic with complex coefficients

# name, f on Tensors, f' and f'' on NumPy complex numbers
HOLOMORPHIC = [
    ("square", lambda z: z**2, lambda z: 2 * z, lambda z: 2 + 0 * z),
    ("cube_minus_2z_plus_exp", lambda z: z**3 - 2 * z + tnp.exp(z),
     lambda z: 3 * z**2 - 2 + np.exp(z), lambda z: 6 * z + np.exp(z)),
    ("exp", tnp.exp, np.exp, np.exp),
    ("sin", tnp.sin, np.cos, lambda z: -np.sin(z)),
    ("cos", tnp.cos, lambda z: -np.sin(z), lambda z: -np.cos(z)),
    ("tanh", tnp.tanh, lambda z: 1 / np.cosh(z) ** 2,
     lambda z: -2 * np.tanh(z) / np.cosh(z) ** 2),
    ("reciprocal", lambda z: 1 / z, lambda z: -1 / z**2, lambda z: 2 / z**3),
    ("log", tnp.log, lambda z: 1 / z, lambda z: -1 / z**2),
    ("sqrt", tnp.sqrt, lambda z: 0.5 / np.sqrt(z), lambda z: -0.25 / np.sqrt(z) ** 3),
    ("polyval", lambda z: tnp.polyval(tg.Tensor(COEFFS), z),
     lambda z: np.polyval(np.polyder(COEFFS), z), lambda z: np.polyval(np.polyder(COEFFS, 2), z)),
    ("exp_of_sin", lambda z: tnp.exp(tnp.sin(z)), lambda z: np.cos(z) * np.exp(np.sin(z)),
     lambda z: (np.cos(z) ** 2 - np.sin(z)) * np.exp(np.sin(z))),
]
IDS = [h[0] for h in HOLOMORPHIC]


def _z(v, dtype=np.complex128):
    return tg.Tensor(np.asarray(v, dtype=dtype))


@pytest.mark.parametrize("name,f,d1,d2", HOLOMORPHIC, ids=IDS)
@pytest.mark.parametrize("z0", POINTS)
def test_grad_is_the_complex_derivative_to_order_two(name, f, d1, d2, z0):
    g = tg.grad(f, holomorphic=True)(_z(z0))
    assert g.dtype == np.complex128 and g.shape == ()
    np.testing.assert_allclose(complex(g), d1(z0), rtol=1e-12)
    gg = tg.grad(tg.grad(f, holomorphic=True), holomorphic=True)(_z(z0))
    np.testing.assert_allclose(complex(gg), d2(z0), rtol=1e-10)
    v, g2 = tg.value_and_grad(f, holomorphic=True)(_z(z0))
    np.testing.assert_allclose(complex(v), complex(f(_z(z0))), rtol=1e-14)
    np.testing.assert_allclose(complex(g2), d1(z0), rtol=1e-12)


@pytest.mark.parametrize("name,f,d1,d2", HOLOMORPHIC, ids=IDS)
def test_grad_matches_complex_differences_in_both_directions(name, f, d1, d2):
    z0, h = POINTS[0], 1e-6
    fz = lambda z: complex(f(_z(z)))  # noqa: E731
    along_x = (fz(z0 + h) - fz(z0 - h)) / (2 * h)
    along_y = (fz(z0 + 1j * h) - fz(z0 - 1j * h)) / (2j * h)
    g = complex(tg.grad(f, holomorphic=True)(_z(z0)))
    np.testing.assert_allclose(g, along_x, rtol=1e-7)
    np.testing.assert_allclose(g, along_y, rtol=1e-7)  # not the conjugate: that differs here
    assert abs(g - np.conj(along_x)) > 1e-3


@pytest.mark.parametrize("name,f,d1,d2", HOLOMORPHIC, ids=IDS)
def test_real_and_imaginary_parts_agree_with_the_holomorphic_derivative(name, f, d1, d2):
    # JAX's convention for a real-valued g: dg/dx - i dg/dy. By Cauchy-Riemann that is f' for
    # g = real(f) and -1j f' for g = imag(f) (PyTorch's .grad holds the conjugates).
    z0 = POINTS[1]
    gr = complex(tg.grad(lambda z: tnp.real(f(z)))(_z(z0)))
    gi = complex(tg.grad(lambda z: tnp.imag(f(z)))(_z(z0)))
    np.testing.assert_allclose(gr, d1(z0), rtol=1e-12)
    np.testing.assert_allclose(gi, -1j * d1(z0), rtol=1e-12)


def test_complex64_inputs_keep_their_dtype():
    g = tg.grad(lambda z: z**2, holomorphic=True)(_z(1 + 2j, np.complex64))
    assert g.dtype == np.complex64
    np.testing.assert_allclose(complex(g), 2 + 4j, rtol=1e-6)


@pytest.mark.parametrize("name,f,d1,d2", HOLOMORPHIC, ids=IDS)
def test_jacobians_of_an_elementwise_map_are_diagonal_derivatives(name, f, d1, d2):
    v = np.array(POINTS)
    want = np.diag(d1(v))
    for jac in (tg.jacfwd, tg.jacrev, tg.jacobian):
        j = jac(f, holomorphic=True)(_z(v))
        assert j.dtype == np.complex128
        np.testing.assert_allclose(j.numpy(), want, rtol=1e-10, atol=1e-14)
    h = tg.hessian(lambda z: tnp.sum(f(z)), holomorphic=True)(_z(v))
    np.testing.assert_allclose(h.numpy(), np.diag(d2(v)), rtol=1e-9, atol=1e-14)


def _cfd_jacobian(f, a, h=1e-6):
    """Complex finite-difference Jacobian of a holomorphic ``f`` at complex array ``a``."""
    out = np.asarray(f(a))
    jac = np.zeros(out.shape + a.shape, complex)
    for idx in np.ndindex(a.shape):
        e = np.zeros(a.shape, complex)
        e[idx] = h
        jac[(...,) + idx] = (np.asarray(f(a + e)) - np.asarray(f(a - e))) / (2 * h)
    return jac


A = np.array([[0.3 + 0.2j, 0.5, -0.1j], [0.1j, -0.4 + 0.1j, 0.2], [0.25, 0.3 - 0.3j, 0.6j]])


@pytest.mark.parametrize(
    "f,ref_grad",
    [
        (lambda a: tnp.trace(a @ a @ a), lambda a: 3 * (a @ a).T),
        (tnp.linalg.det, lambda a: np.linalg.det(a) * np.linalg.inv(a).T),
        (lambda a: tnp.sum(tnp.linalg.inv(a)),
         lambda a: -np.outer(np.linalg.inv(a).T @ np.ones(3), np.linalg.inv(a) @ np.ones(3))),
        (lambda a: tnp.trace(tsl.expm(a)), lambda a: scipy.linalg.expm(a).T),
        (lambda a: tnp.trace(tsl.logm(a + 2 * np.eye(3))),
         lambda a: np.linalg.inv(a + 2 * np.eye(3)).T),
        (lambda a: tnp.trace(tsl.sqrtm(a + 2 * np.eye(3))),
         lambda a: 0.5 * np.linalg.inv(scipy.linalg.sqrtm(a + 2 * np.eye(3))).T),
    ],
    ids=["trace_cube", "det", "sum_inv", "trace_expm", "trace_logm", "trace_sqrtm"],
)
def test_matrix_functions_against_analytic_derivatives(f, ref_grad):
    g = tg.grad(f, holomorphic=True)(_z(A))
    np.testing.assert_allclose(g.numpy(), ref_grad(A), rtol=1e-8, atol=1e-12)
    # order 2: the Hessian against complex differences of the (analytic) first derivative
    h = tg.hessian(f, holomorphic=True)(_z(A)).numpy()
    np.testing.assert_allclose(h, _cfd_jacobian(ref_grad, A), rtol=1e-5, atol=1e-7)


def test_matrix_valued_jacobians_agree_with_complex_differences():
    f = lambda a: a @ a  # noqa: E731
    jf = tg.jacfwd(f, holomorphic=True)(_z(A)).numpy()
    jr = tg.jacrev(f, holomorphic=True)(_z(A)).numpy()
    want = _cfd_jacobian(lambda a: a @ a, A)
    np.testing.assert_allclose(jf, want, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(jr, jf, rtol=1e-12, atol=1e-14)


def test_argnums_has_aux_pytrees_vmap_and_jit():
    z, w = _z(1 + 1j), _z(0.5 - 2j)
    gz, gw = tg.grad(lambda a, b: a * b**2, argnums=(0, 1), holomorphic=True)(z, w)
    np.testing.assert_allclose(complex(gz), (0.5 - 2j) ** 2)
    np.testing.assert_allclose(complex(gw), 2 * (1 + 1j) * (0.5 - 2j))
    g, aux = tg.grad(lambda a: (tnp.exp(a), "aux"), has_aux=True, holomorphic=True)(z)
    assert aux == "aux" and np.isclose(complex(g), np.exp(1 + 1j))
    gp = tg.grad(lambda p: p["a"] ** 2 * p["b"], holomorphic=True)({"a": z, "b": w})
    np.testing.assert_allclose(complex(gp["a"]), 2 * (1 + 1j) * (0.5 - 2j))
    np.testing.assert_allclose(complex(gp["b"]), (1 + 1j) ** 2)
    zs = _z(np.array(POINTS))
    batched = tg.vmap(tg.grad(tnp.sin, holomorphic=True))(zs)
    np.testing.assert_allclose(batched.numpy(), np.cos(np.array(POINTS)), rtol=1e-12)
    jitted = tg.jit(tg.grad(tnp.sin, holomorphic=True))
    for p in POINTS:
        np.testing.assert_allclose(complex(jitted(_z(p))), np.cos(p), rtol=1e-12)


def test_holomorphic_derivatives_pass_check_grads_in_both_modes():
    from tapegrad.testing import check_grads

    d = tg.grad(lambda z: z**3 + tnp.exp(z), holomorphic=True)
    check_grads(d, (_z(0.3 + 0.7j),), order=2, modes=("rev", "fwd"))


# -- errors ------------------------------------------------------------------------------------
def test_grad_of_a_complex_output_names_holomorphic():
    for vg in (tg.grad, tg.value_and_grad):
        with pytest.raises(TypeError, match=r"grad: .*complex dtype complex128.*holomorphic=True"):
            vg(lambda z: z**2)(_z(1 + 1j))
    # a complex output of real inputs too (JAX: grad(lambda x: x ** 2 + 1j)(3.0) raises)
    with pytest.raises(TypeError, match="holomorphic=True.*real part or abs"):
        tg.grad(lambda x: x**2 + 1j)(tg.Tensor(3.0))


def test_holomorphic_needs_complex_inputs_and_outputs():
    with pytest.raises(TypeError, match=r"grad: holomorphic=True needs complex inputs, but x has "
                                        r"dtype float32"):
        tg.grad(lambda x: x**2, holomorphic=True)(tg.Tensor(3.0))
    with pytest.raises(TypeError, match=r"holomorphic=True needs complex inputs, but "
                                        r"p\['b'\] has dtype float64"):
        tg.grad(lambda p: p["a"] * p["b"], holomorphic=True)({"a": _z(1j), "b": tg.Tensor(2.0)
                                                                  .astype("float64")})
    with pytest.raises(TypeError, match="grad: holomorphic=True needs complex outputs"):
        tg.grad(tnp.abs, holomorphic=True)(_z(1j))
    with pytest.raises(TypeError, match="jacfwd: holomorphic=True needs complex inputs"):
        tg.jacfwd(tnp.sin, holomorphic=True)(tg.Tensor([1.0]))
    with pytest.raises(TypeError, match="jacrev: holomorphic=True needs complex inputs"):
        tg.jacrev(tnp.sin, holomorphic=True)(tg.Tensor([1.0]))
    with pytest.raises(TypeError, match="jacfwd: holomorphic=True needs complex outputs"):
        tg.jacfwd(tnp.abs, holomorphic=True)(_z([1j]))
    with pytest.raises(TypeError, match="jacrev: holomorphic=True needs complex outputs"):
        tg.jacrev(tnp.abs, holomorphic=True)(_z([1j]))
    with pytest.raises(TypeError, match="holomorphic=True needs complex inputs"):
        tg.hessian(lambda x: tnp.sum(x**3), holomorphic=True)(tg.Tensor([1.0]))


def test_jacobians_without_holomorphic_refuse_ambiguous_complex_directions():
    # jacfwd used to give df/dx alone for a complex input and jacrev df/dx - i df/dy: JAX's
    # rule refuses both ambiguous cases instead
    with pytest.raises(TypeError, match=r"jacfwd: primals\[0\] has complex dtype.*"
                                        r"holomorphic=True"):
        tg.jacfwd(lambda z: tnp.abs(z) ** 2)(_z([1 + 2j]))
    with pytest.raises(TypeError, match=r"jacrev: output leaf 0 has complex dtype.*"
                                        r"holomorphic=True"):
        tg.jacrev(tnp.exp)(_z([1 + 2j]))
    with pytest.raises(TypeError, match="jacrev: output leaf 0 has complex dtype"):
        tg.jacrev(lambda x: x * 1j)(tg.Tensor([1.0]))
    with pytest.raises(TypeError, match="jacfwd: .*complex dtype"):
        tg.hessian(lambda z: tnp.sum(tnp.abs(z) ** 2))(_z([1 + 2j]))
    # what stays allowed: jacrev of a real function of complex inputs (grad's convention) and
    # jacfwd of a complex function of real inputs (one real direction per entry)
    j = tg.jacrev(lambda z: tnp.abs(z) ** 2)(_z([1 + 2j]))
    np.testing.assert_allclose(j.numpy(), [[2 - 4j]])
    j = tg.jacfwd(lambda x: x * (1 + 2j))(tg.Tensor(np.array([1.0])))
    np.testing.assert_allclose(j.numpy(), [[1 + 2j]])
