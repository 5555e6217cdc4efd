"""Example tests for the rest of ``tapegrad.numpy.linalg``: eig, eigh, qr, pinv, lstsq, complex
svd/norm/vdot and the composites. Conventions at repeated eigen- and singular values, errors
and their messages, lazy shapes and dtypes, and gradients cross-checked against
``torch.autograd`` (whose complex gradients are the conjugates of tapegrad's, JAX's
convention). Randomised checks over shapes live in property_tests/test_surface_linalg.py."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import ops
from tapegrad.testing import check_grads, check_vmap

L = tnp.linalg
RNG = np.random.default_rng(2024)


def rand(*shape, cplx=False):
    r = RNG.standard_normal(shape)
    return r + 1j * RNG.standard_normal(shape) if cplx else r


def hermitian(n, cplx=False, batch=()):
    q, _ = np.linalg.qr(rand(*batch, n, n, cplx=cplx))
    d = np.arange(n) + 0.5
    return (q * d) @ np.conj(np.swapaxes(q, -1, -2))


def sq(v):
    return tnp.real(v * tnp.conj(v)) if v.dtype.kind == "c" else v * v


def sym(x):
    return (x + tnp.conj(tnp.swapaxes(x, -1, -2))) / 2


# -- names and docstrings -----------------------------------------------------------------------
def test_every_numpy_linalg_name_is_there_and_documented():
    names = {n for n in dir(np.linalg) if not n.startswith("_")} - {"test"}
    assert names <= set(L.__all__)
    for name in L.__all__:
        obj = getattr(L, name)
        assert obj.__doc__ and len(obj.__doc__) > 60, name
    for name in ("eig", "eigh", "svd", "pinv", "eigvals", "eigvalsh", "svdvals"):
        doc = getattr(L, name).__doc__.lower()
        assert "repeated" in doc or "defective" in doc, name  # the rule at degeneracy


# -- eigh ---------------------------------------------------------------------------------------
def test_eigh_values_and_named_result():
    a = hermitian(3, cplx=True)
    res = L.eigh(a)
    assert type(res).__name__ == "EighResult"
    w, v = res
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvalsh(a))
    np.testing.assert_allclose((v.numpy() * w.numpy()) @ np.conj(v.numpy().T), a, atol=1e-12)
    assert w.dtype == np.float64 and v.dtype == np.complex128


def test_eigh_gradient_is_hermitian_and_forward_uses_the_hermitian_part():
    a = hermitian(3, cplx=True)
    g = tg.grad(lambda x: tnp.sum(L.eigh(x)[0] ** 2) + tnp.sum(sq(L.eigh(x)[1])[0]))(tg.Tensor(a))
    np.testing.assert_allclose(g.numpy(), np.conj(g.numpy().T), atol=1e-12)
    # A non-Hermitian input is decomposed through its Hermitian part (JAX's convention), the
    # function the Hermitian gradient differentiates, whichever triangle UPLO names.
    upper = a + np.triu(np.full((3, 3), 5.0), 1)
    herm = (upper + np.conj(upper.T)) / 2
    for uplo in ("L", "U"):
        np.testing.assert_allclose(L.eigvalsh(upper, UPLO=uplo).numpy(),
                                   np.linalg.eigvalsh(herm), atol=1e-12)


@pytest.mark.parametrize("cplx", [False, True])
def test_eigh_and_cholesky_derivatives_are_those_of_the_function_on_any_input(cplx):
    """Forward mode, reverse mode and finite differences agree on a non-symmetric input:
    the forward computes on the Hermitian part, the rules differentiate exactly that."""
    a = tg.Tensor(rand(4, 4, cplx=cplx))
    for uplo in ("L", "U"):
        check_grads(lambda x, u=uplo: L.eigvalsh(x, UPLO=u), (a,), order=2, modes=("rev", "fwd"))
    check_grads(lambda x: sq(L.eigh(x)[1][:, :1] @ tnp.conj(L.eigh(x)[1][:, :1].T)), (a,),
                order=1, modes=("rev", "fwd"))
    spd_like = tg.Tensor(rand(4, 4, cplx=cplx) + 5 * np.eye(4))  # not symmetric
    for upper in (False, True):
        check_grads(lambda x, up=upper: L.cholesky(x, upper=up), (spd_like,), order=2,
                    modes=("rev", "fwd"))


def test_eigh_at_repeated_eigenvalues():
    """Eigenvalue-only losses are finite (V diag(g) V^H); eigenvector-dependent ones are
    inf/NaN (the eigenvectors of a repeated eigenvalue are not unique)."""
    a = tg.Tensor(np.diag([1.0, 1.0, 2.0]))
    g = tg.grad(lambda x: tnp.sum(L.eigvalsh(x) * tnp.asarray([1.0, 1.0, 3.0])))(a)
    np.testing.assert_allclose(g.numpy(), np.diag([1.0, 1.0, 3.0]), atol=1e-12)
    dense = tg.Tensor(np.ones((3, 3)))  # a cotangent coupling the two eigenvectors
    g = tg.grad(lambda x: tnp.sum(L.eigh(x).eigenvectors * dense))(a)
    assert not np.all(np.isfinite(g.numpy()))
    # a coupling that is exactly 0 gives 0 (the NaN-safe division's convention)
    g = tg.grad(lambda x: tnp.sum(L.eigh(x).eigenvectors[0] ** 2 * tnp.arange(3.0)))(a)
    np.testing.assert_array_equal(g.numpy(), 0.0)


def test_eigh_errors():
    with pytest.raises(ValueError, match=r"eigh: a must be a \(batch of\) square matrices"):
        L.eigh(np.ones((2, 3)))
    with pytest.raises(ValueError, match="eigh: UPLO must be 'L' or 'U'"):
        L.eigh(np.eye(2), UPLO="X")
    with pytest.raises(TypeError, match="eigh needs float32 or float64"):
        L.eigh(np.eye(2, dtype=np.float16))


# -- eig ----------------------------------------------------------------------------------------
def test_eig_of_real_matrix_is_complex_and_its_gradient_real():
    a = np.array([[0.0, -2.0, 0.3], [1.0, 0.1, 0.0], [0.2, 0.0, 3.0]])
    w, v = L.eig(a)
    assert w.dtype == v.dtype == np.complex128
    np.testing.assert_allclose(w.numpy(), np.linalg.eigvals(a))
    np.testing.assert_allclose(a @ v.numpy(), v.numpy() * w.numpy(), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(v.numpy(), axis=0), 1.0)  # NumPy's normalization

    def loss(x):
        w, v = L.eig(x)
        return tnp.sum(tnp.real(w) ** 2 + 2 * tnp.imag(w)) + tnp.sum(sq(v) * tnp.abs(w))

    g = tg.grad(loss)(tg.Tensor(a))
    assert g.dtype == np.float64
    check_grads(loss, (tg.Tensor(a),), order=2, modes=("rev", "fwd"))
    assert L.eigvals(np.eye(2, dtype=np.float32)).dtype == np.complex64


def test_eig_eigenvector_gauge_is_unit_norm_and_no_phase_change():
    """The jvp of V keeps every column at unit norm and puts no rotation on its phase
    (v_i^H dv_i = 0), as JAX's eigh."""
    a = rand(3, 3, cplx=True)
    t = rand(3, 3, cplx=True)
    (w, v), (dw, dv) = tg.jvp(lambda x: tuple(L.eig(x)), (tg.Tensor(a),), (tg.Tensor(t),))
    proj = np.einsum("ij,ij->j", np.conj(v.numpy()), dv.numpy())
    np.testing.assert_allclose(proj, 0.0, atol=1e-12)
    vinv = np.linalg.inv(v.numpy())
    np.testing.assert_allclose(dw.numpy(), np.diag(vinv @ t @ v.numpy()), atol=1e-12)


class _FakeCtx:
    """A backward context holding exactly dependent eigenvectors (what LAPACK may return for
    a Jordan block)."""

    saved_tensors = (tg.Tensor(np.ones(2, complex)), tg.Tensor(np.ones((2, 2), complex)))
    real_input = False


def test_eig_at_repeated_eigenvalues():
    """At the identity (repeated but not defective) the eigenvalues' gradient is finite, the
    eigenvectors' inf/NaN; at a defective matrix (not differentiable) it blows up or raises."""
    g = tg.grad(lambda x: tnp.sum(tnp.real(L.eigvals(x)) * tnp.asarray([1.0, 2.0])))(
        tg.Tensor(np.eye(2)))
    assert np.all(np.isfinite(g.numpy()))
    g = tg.grad(lambda x: tnp.sum(tnp.real(L.eig(x)[1]) * tnp.ones((2, 2))))(
        tg.Tensor(np.eye(2)))
    assert not np.all(np.isfinite(g.numpy()))
    jordan = tg.Tensor(np.array([[1.0, 1.0], [0.0, 1.0]]))
    g = tg.grad(lambda x: tnp.sum(tnp.real(L.eigvals(x)) * tnp.asarray([1.0, 2.0])))(jordan)
    assert np.max(np.abs(g.numpy())) > 1e8
    g = tg.grad(lambda x: tnp.sum(tnp.real(L.eigvals(x))))(jordan)  # the trace: exact
    np.testing.assert_allclose(g.numpy(), np.eye(2))
    with pytest.raises(np.linalg.LinAlgError, match="eig: the gradient at a defective matrix"):
        ops.Eig.backward(_FakeCtx(), tg.Tensor(np.ones(2, complex)), tg.Tensor(np.zeros((2, 2),
                                                                                          complex)))


# -- svd (complex) ------------------------------------------------------------------------------
def test_complex_svd_reconstructs_and_matches_numpy():
    a = rand(2, 4, 3, cplx=True).astype(np.complex64)
    u, s, vh = L.svd(a, full_matrices=False)
    assert (u.dtype, s.dtype, vh.dtype) == (np.complex64, np.float32, np.complex64)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(a, compute_uv=False), rtol=1e-5)
    np.testing.assert_allclose((u.numpy() * s.numpy()[..., None, :]) @ vh.numpy(), a, atol=1e-5)
    u, s, vh = L.svd(a)  # full_matrices=True
    assert u.shape == (2, 4, 4) and vh.shape == (2, 3, 3)
    assert L.svdvals(a).dtype == np.float32


def test_svd_at_repeated_singular_values():
    """S-only losses are finite (U^* diag(g) V^T); U-dependent ones are inf/NaN."""
    a = tg.Tensor(np.diag([2.0, 2.0, 1.0]) + 0j)
    g = tg.grad(lambda x: tnp.sum(L.svdvals(x) ** 2))(a)
    np.testing.assert_allclose(g.numpy(), 2 * a.numpy(), atol=1e-12)
    coupling = tg.Tensor(rand(3, 3))  # generic: couples the two vectors of s = 2
    g = tg.grad(lambda x: tnp.sum(tnp.real(L.svd(x).U) * coupling))(a)
    assert not np.all(np.isfinite(g.numpy()))


def test_svd_phase_term_of_complex_input():
    """A loss of |U|^2 is phase invariant: its gradient is the same for a and for a
    column-rephased a (only the vectors' phases differ there)."""
    a = rand(3, 2, cplx=True)

    def loss(x):
        return tnp.sum(sq(L.svd(x, full_matrices=False).U) * tnp.asarray([1.0, 3.0]))

    check_grads(loss, (tg.Tensor(a),), order=2, modes=("rev", "fwd"))
    ph = np.exp(1j * np.array([0.3, -1.2]))
    g1 = tg.grad(loss)(tg.Tensor(a)).numpy()
    g2 = tg.grad(loss)(tg.Tensor(a * ph)).numpy()
    np.testing.assert_allclose(g2, g1 * np.conj(ph), atol=1e-10)


# -- qr -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(4, 2), (3, 3), (2, 4)])
@pytest.mark.parametrize("cplx", [False, True])
def test_qr_modes_and_gradients(shape, cplx):
    a = rand(*shape, cplx=cplx)
    for mode in ("reduced", "complete"):
        q, r = L.qr(a, mode=mode)
        rq, rr = np.linalg.qr(a, mode=mode)
        np.testing.assert_allclose(q.numpy(), rq, atol=1e-12)
        np.testing.assert_allclose(r.numpy(), rr, atol=1e-12)
    assert type(L.qr(a)).__name__ == "QRResult"
    np.testing.assert_allclose(L.qr(a, mode="r").numpy(), np.linalg.qr(a, mode="r"))
    check_grads(lambda x: tuple(L.qr(x)), (tg.Tensor(a),), order=2, modes=("rev", "fwd"))
    if shape[0] <= shape[1]:  # complete == reduced there
        check_grads(lambda x: tuple(L.qr(x, mode="complete")), (tg.Tensor(a),), order=1)


def test_qr_errors():
    with pytest.raises(ValueError, match="mode='complete' is defined only for m <= n"):
        tg.grad(lambda x: tnp.sum(L.qr(x, mode="complete").Q))(tg.Tensor(rand(3, 2)))
    with pytest.raises(ValueError, match="qr: mode='raw'.*not supported"):
        L.qr(np.eye(2), mode="raw")
    with pytest.raises(ValueError, match="qr: unknown mode 'full'"):
        L.qr(np.eye(2), mode="full")
    with pytest.raises(ValueError, match=r"qr: a must be a \(batch of\) matrices"):
        L.qr(np.ones(3))
    with pytest.raises(np.linalg.LinAlgError, match="qr: the gradient needs a matrix of full"):
        tg.grad(lambda x: tnp.sum(L.qr(x).R))(tg.Tensor(np.zeros((3, 2))))


# -- pinv, lstsq --------------------------------------------------------------------------------
def test_pinv_cutoffs_match_numpy():
    a = np.diag([1.0, 1e-9, 0.0])
    np.testing.assert_allclose(L.pinv(a).numpy(), np.linalg.pinv(a))
    np.testing.assert_allclose(L.pinv(a, rcond=1e-6).numpy(), np.linalg.pinv(a, rcond=1e-6))
    np.testing.assert_allclose(L.pinv(a, rtol=None).numpy(), np.linalg.pinv(a, rtol=None))
    np.testing.assert_allclose(L.pinv(a, rtol=1e-12).numpy(), np.linalg.pinv(a, rtol=1e-12))
    with pytest.raises(ValueError, match="pinv: rtol and rcond can't both be set"):
        L.pinv(a, rcond=1e-3, rtol=1e-3)
    with pytest.raises(ValueError, match=r"pinv: rcond of shape \(2,\) does not broadcast to "
                                         r"the stack shape \(\)"):
        L.pinv(a, rcond=np.ones(2))
    with pytest.raises(TypeError, match="pinv: rtol must be real"):
        L.pinv(a, rtol=np.ones((), complex))
    assert L.pinv(np.zeros((0, 3))).shape == (3, 0)


def test_pinv_gradient_at_rank_deficient_matrix():
    """Golub-Pereyra holds along rank-preserving perturbations: through a = b @ c."""
    b, c = rand(4, 2, cplx=True), rand(2, 3, cplx=True)
    check_grads(lambda u, v: L.pinv(u @ v), (tg.Tensor(b), tg.Tensor(c)), order=2,
                modes=("rev", "fwd"))


def test_lstsq_matches_numpy_and_errors():
    a, b = rand(5, 3), rand(5, 2)
    x, res, rank, s = L.lstsq(a, b)
    rx, rres, rrank, rs = np.linalg.lstsq(a, b)
    np.testing.assert_allclose(x.numpy(), rx)
    np.testing.assert_allclose(res.numpy(), rres)
    assert rank == rrank and isinstance(rank, int)
    np.testing.assert_allclose(s.numpy(), rs)
    assert L.lstsq(a, b[:, 0])[1].shape == (1,)
    assert L.lstsq(a[:2], b[:2])[1].shape == (0,)  # underdetermined: no residuals
    check_grads(lambda p, q: L.lstsq(p, q)[:2], (tg.Tensor(a), tg.Tensor(b)), order=2)
    with pytest.raises(np.linalg.LinAlgError, match=r"lstsq: a must be two-dimensional"):
        L.lstsq(np.ones((2, 2, 2)), np.ones(2))
    with pytest.raises(np.linalg.LinAlgError, match=r"lstsq: incompatible dimensions"):
        L.lstsq(np.ones((3, 2)), np.ones(2))


# -- composites ---------------------------------------------------------------------------------
def test_matrix_power_and_errors():
    a = np.eye(3) + 0.2 * rand(3, 3)
    for n in (0, 1, 2, 7, -1, -4):
        np.testing.assert_allclose(L.matrix_power(a, n).numpy(), np.linalg.matrix_power(a, n))
    assert L.matrix_power(np.arange(4).reshape(2, 2), 3).dtype == np.int64
    check_grads(lambda x: L.matrix_power(x, -3), (tg.Tensor(a),), order=2)
    with pytest.raises(TypeError, match="matrix_power: exponent must be an integer"):
        L.matrix_power(a, 1.5)
    with pytest.raises(np.linalg.LinAlgError, match="matrix_power: last 2 dimensions"):
        L.matrix_power(np.ones((2, 3)), 2)


def test_matrix_rank_is_a_passthrough():
    b = rand(4, 2) @ rand(2, 5)
    assert int(L.matrix_rank(b)) == 2 == np.linalg.matrix_rank(b)
    stack = np.stack([b[:, :4], np.eye(4)])
    np.testing.assert_array_equal(L.matrix_rank(stack).numpy(), np.linalg.matrix_rank(stack))
    np.testing.assert_array_equal(L.matrix_rank(stack, tol=np.array([1e-8, 2.0])).numpy(),
                                  np.linalg.matrix_rank(stack, tol=np.array([1e-8, 2.0])))
    assert L.matrix_rank(np.zeros(3)) == 0 and L.matrix_rank(np.ones(3)) == 1
    g = tg.grad(lambda x: tnp.sum(x) * L.matrix_rank(x))(tg.Tensor(b))  # rank: a constant
    np.testing.assert_allclose(g.numpy(), 2.0)
    with pytest.raises(ValueError, match="matrix_rank: `tol` and `rtol` can't be both set"):
        L.matrix_rank(b, tol=1.0, rtol=1.0)


def test_cond_of_singular_matrix_is_inf():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])  # LU finds an exact zero pivot
    for p in (1, -1, np.inf, "fro", "nuc"):
        assert L.cond(s, p).numpy() == np.inf
    assert L.cond(np.zeros((2, 2))).numpy() == np.inf  # s_max / s_min = 0 / 0
    with np.errstate(all="ignore"):
        for p in (None, 2, -2, 1):
            np.testing.assert_allclose(L.cond(s, p).numpy(), np.linalg.cond(s, p))
    batch = np.stack([s, np.eye(2)])
    np.testing.assert_array_equal(L.cond(batch, 1).numpy(), [np.inf, 1.0])
    with pytest.raises(np.linalg.LinAlgError, match="cond: last 2 dimensions"):
        L.cond(np.ones((2, 3)), 1)


def test_tensorinv_tensorsolve_errors():
    with pytest.raises(ValueError, match="tensorinv: ind must be a positive integer"):
        L.tensorinv(np.eye(4).reshape(2, 2, 2, 2), ind=0)
    with pytest.raises(np.linalg.LinAlgError, match="tensorinv: .* is not square"):
        L.tensorinv(np.ones((2, 3, 4)), ind=1)
    with pytest.raises(np.linalg.LinAlgError, match="tensorsolve: .* do not make a square"):
        L.tensorsolve(np.ones((2, 3, 4)), np.ones((2,)))


def test_multi_dot_chooses_the_cheap_order_and_errors():
    a, b, c = rand(10, 100), rand(100, 5), rand(5, 50)
    np.testing.assert_allclose(L.multi_dot([a, b, c]).numpy(), np.linalg.multi_dot([a, b, c]))
    with tg.lazy():  # the tape shows the chosen order: (a @ b) @ c
        out = L.multi_dot([tg.Tensor(a), tg.Tensor(b), tg.Tensor(c)])
    assert out.shape == (10, 50)
    with pytest.raises(ValueError, match="multi_dot: expecting at least two arrays"):
        L.multi_dot([a])
    with pytest.raises(TypeError, match="multi_dot: out= is not supported"):
        L.multi_dot([a, b], out=np.empty((10, 5)))
    with pytest.raises(ValueError, match=r"multi_dot: shapes \(10, 100\) \(array 0\) and"):
        L.multi_dot([a, c, b])
    with pytest.raises(np.linalg.LinAlgError, match="multi_dot: array 1 is 3-dimensional"):
        L.multi_dot([a, np.ones((100, 2, 2)), c])


def test_vector_functions_errors():
    with pytest.raises(ValueError, match="cross: both inputs must be .* 3-dimensional vectors"):
        L.cross(np.ones(2), np.ones(2))
    with pytest.raises(ValueError, match=r"vecdot: the vector axes differ: 3 \(shape \(3,"):
        L.vecdot(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="vecdot: axis 2 is out of range for x1"):
        L.vecdot(np.ones((3, 3)), np.ones((3, 3)), axis=2)
    with pytest.raises(ValueError, match=r"matrix_transpose: .* at least 2-D, got shape \(3,\)"):
        L.matrix_transpose(np.ones(3))
    with pytest.raises(ValueError, match="linalg.trace: input must be at least 2-dim"):
        L.trace(np.ones(3))
    with pytest.raises(ValueError, match="matrix_norm: input must be at least 2-dim"):
        L.matrix_norm(np.ones(3))


def test_trace_diagonal_transpose_match_numpy():
    x = rand(2, 3, 4)
    np.testing.assert_allclose(L.trace(x, offset=1).numpy(), np.linalg.trace(x, offset=1))
    assert L.trace(np.ones((2, 2), np.int32), dtype=np.float32).dtype == np.float32
    np.testing.assert_allclose(L.diagonal(x, offset=-1).numpy(), np.linalg.diagonal(x, offset=-1))
    np.testing.assert_allclose(L.matrix_transpose(x).numpy(), np.linalg.matrix_transpose(x))


def test_complex_vdot_vecdot_conjugate_the_first_operand():
    a, b = rand(3, cplx=True), rand(3, cplx=True)
    np.testing.assert_allclose(tnp.vdot(a, b).numpy(), np.vdot(a, b))
    # JAX's convention: grad of Re(sum conj(a) b) in a is conj(b)
    g = tg.grad(lambda x: tnp.real(tnp.vdot(x, tg.Tensor(b))))(tg.Tensor(a))
    np.testing.assert_allclose(g.numpy(), np.conj(b))
    g = tg.grad(lambda x: tnp.real(L.vecdot(x, tg.Tensor(b))))(tg.Tensor(a))
    np.testing.assert_allclose(g.numpy(), np.conj(b))


def test_complex_norm_gradient_at_zero_is_zero():
    z = tg.Tensor(np.zeros(3, complex))
    np.testing.assert_array_equal(tg.grad(lambda x: L.norm(x))(z).numpy(), 0.0)
    g = tg.grad(lambda x: L.norm(x))(tg.Tensor(np.array([3 + 4j, 0j])))
    np.testing.assert_allclose(g.numpy(), [0.6 - 0.8j, 0.0])  # x / |x|, conjugated (JAX)


# -- lazy mode: output_shape / output_dtype ------------------------------------------------------
_LAZY = {
    "eigh": lambda a: tuple(L.eigh(a)),
    "eig": lambda a: tuple(L.eig(a)),
    "qr": lambda a: tuple(L.qr(a)),
    "qr_complete": lambda a: tuple(L.qr(a[..., :2], mode="complete")),
    "pinv": lambda a: L.pinv(a[..., :2]),
    "svd": lambda a: tuple(L.svd(a[..., :2, :])),
}


@pytest.mark.parametrize("name", sorted(_LAZY))
@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.float64, np.complex64])
def test_lazy_results_have_the_eager_shapes_and_dtypes(name, dtype):
    a = (hermitian(3, batch=(2,)) * 4).astype(dtype)
    eager = _LAZY[name](a)
    with tg.lazy():
        lazy = _LAZY[name](a)
    eager = eager if isinstance(eager, tuple) else (eager,)
    lazy = lazy if isinstance(lazy, tuple) else (lazy,)
    for e, lz in zip(eager, lazy, strict=True):
        assert (lz.shape, lz.dtype) == (e.shape, e.dtype)


def test_vmap_of_primitives_with_unbatched_closure():
    a = tg.Tensor(rand(3, 4, 2, cplx=True))
    c = tg.Tensor(rand(4, 4))
    check_vmap(lambda x: L.pinv(c @ x), (a,))
    check_vmap(tg.grad(lambda x: tnp.sum(sq(L.qr(c @ x).Q))), (a,))


# -- cross-checks against torch.autograd -------------------------------------------------------
def _torch_grad(fn, a):
    torch = pytest.importorskip("torch")
    t = torch.tensor(a, requires_grad=True)
    fn(torch, t).backward()
    # torch's complex gradient is the conjugate of ours
    return np.conj(t.grad.resolve_conj().numpy())


def _tre(x):
    return x.real if x.is_complex() else x


W3 = np.array([1.0, 2.0, 3.0])


def _case_eigh(shape, cplx):
    def ours(x):
        w, v = L.eigh(x)
        return tnp.sum(w * W3) + tnp.sum(sq(v) * W3)

    def theirs(T, x):
        w, v = T.linalg.eigh(x)
        return (w * T.tensor(W3)).sum() + (v.abs() ** 2 * T.tensor(W3)).sum()

    return ours, theirs, hermitian(3, cplx=cplx)


def _case_eig(shape, cplx):
    def ours(x):
        w, v = L.eig(x)
        return tnp.sum(tnp.abs(w) ** 2) + tnp.sum(sq(v) * W3)

    def theirs(T, x):
        w, v = T.linalg.eig(x)
        return (w.abs() ** 2).sum() + (v.abs() ** 2 * T.tensor(W3)).sum()

    return ours, theirs, rand(3, 3, cplx=cplx)


def _case_svd(shape, cplx):
    w = W3[: min(shape)]

    def ours(x):
        return tnp.sum(L.svdvals(x) ** 3) + tnp.sum(sq(L.svd(x, full_matrices=False).U) * w)

    def theirs(T, x):
        return (T.linalg.svdvals(x) ** 3).sum() + (
            T.linalg.svd(x, full_matrices=False)[0].abs() ** 2 * T.tensor(w)).sum()

    return ours, theirs, rand(*shape, cplx=cplx)


def _case_qr(shape, cplx):
    c = rand(shape[0], min(shape))

    def ours(x):
        q, r = L.qr(x)
        return tnp.sum(tnp.real(q) * c) + tnp.sum(tnp.real(r) + tnp.imag(r))

    def theirs(T, x):
        q, r = T.linalg.qr(x)
        return (_tre(q) * T.tensor(c)).sum() + (_tre(r) + (r.imag if cplx else 0 * r)).sum()

    return ours, theirs, rand(*shape, cplx=cplx)


def _case_pinv(shape, cplx):
    c = rand(shape[1], shape[0])

    def ours(x):
        return tnp.sum(tnp.real(L.pinv(x)) * c)

    def theirs(T, x):
        return (_tre(T.linalg.pinv(x)) * T.tensor(c)).sum()

    return ours, theirs, rand(*shape, cplx=cplx)


@pytest.mark.parametrize("case", [_case_eigh, _case_eig, _case_svd, _case_qr, _case_pinv],
                         ids=lambda c: c.__name__[6:])
@pytest.mark.parametrize("shape", [(4, 3), (3, 4)])
@pytest.mark.parametrize("cplx", [False, True])
def test_gradients_match_torch(case, shape, cplx):
    pytest.importorskip("torch")
    ours, theirs, a = case(shape, cplx)
    np.testing.assert_allclose(tg.grad(ours)(tg.Tensor(a)).numpy(), _torch_grad(theirs, a),
                               atol=1e-9)


def test_lstsq_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    a, b = rand(5, 3), rand(5, 2)
    ga, gb = tg.grad(lambda x, y: tnp.sum(L.lstsq(x, y)[0] ** 2), argnums=(0, 1))(
        tg.Tensor(a), tg.Tensor(b))
    ta = torch.tensor(a, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True)
    (torch.linalg.lstsq(ta, tb).solution ** 2).sum().backward()
    np.testing.assert_allclose(ga.numpy(), ta.grad.numpy(), atol=1e-10)
    np.testing.assert_allclose(gb.numpy(), tb.grad.numpy(), atol=1e-10)


def test_ops_are_registered_without_flat_names():
    for cls in (ops.Eig, ops.Eigh, ops.Qr, ops.Pinv):
        assert cls.names == () and cls.batch is not None
        assert cls.api.__module__ == "tapegrad.numpy.linalg"
    assert not hasattr(tnp, "eig") and not hasattr(tnp, "qr")
