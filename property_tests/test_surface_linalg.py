"""Property tests for ``tapegrad.numpy.linalg``'s decompositions and the functions built on
them: eig, eigh, eigvals, eigvalsh, qr, svd (complex), pinv, lstsq, matrix_power, cond,
tensorinv, tensorsolve, multi_dot, cross, vecdot and the norms.

Shapes are drawn with batch dimensions of size 0 and 1; values are drawn into well-conditioned
matrices: ``Q diag(d) Q^H`` with separated ``d`` (eigh), ``P diag(d) P^{-1}`` with
``P = I + 0.3 R`` and separated (possibly complex-pair) ``d`` (eig), ``U diag(s) V^H`` with
separated ``s`` in ``[1, 3]`` (svd, qr, pinv). Forward values and dtypes must equal NumPy's;
gradients must match central differences at orders 1 and 2 in both modes, for real and
complex inputs (JAX's convention), through gauge-invariant functions of the eigen- and
singular vectors; every new primitive's vmap rule must equal the per-example loop, its
gradient too.
"""

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads, check_vmap
from tapegrad.testing.strategies import arrays, floats_in, shapes

L = tnp.linalg
BATCH = shapes(max_dims=2, min_side=0, max_side=2)
SIZES = st.integers(1, 3)
FLOAT_DTYPES = [np.float32, np.float64]
ALL_DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def draw_real(data, shape, low=-1.0, high=1.0):
    return data.draw(arrays(shape, np.float64, elements=floats_in(low, high)))


def draw_mat(data, shape, cplx, low=-1.0, high=1.0):
    r = draw_real(data, shape, low, high)
    return r + 1j * draw_real(data, shape, low, high) if cplx else r


def _H(a):
    return np.conj(np.swapaxes(a, -1, -2))


# A fixed dense matrix added to the drawn ones, so that no drawn matrix is triangular or
# diagonal: there LAPACK's QR (a zero subdiagonal keeps the reflector's sign) and eig (the
# order of the eigenvalues) are discontinuous, which finite differences would see.
_DENSE = 0.2 + 0.1 * np.cos(np.arange(16.0)).reshape(4, 4)


def orthonormal(data, batch, m, k, cplx):
    """An ``(..., m, k)`` matrix with orthonormal columns (``k <= m``)."""
    r = draw_mat(data, batch + (m, k), cplx) + _DENSE[:m, :k]
    q, _ = np.linalg.qr(r + 2.0 * np.eye(m, k))
    return q


def hermitian(data, batch, n, cplx):
    """``Q diag(d) Q^H`` with eigenvalues at least 0.4 apart."""
    q = orthonormal(data, batch, n, n, cplx)
    d = np.arange(n) * 1.0 + draw_real(data, batch + (n,), -0.3, 0.3)
    return (q * d[..., None, :]) @ _H(q)


def diagonalizable(data, batch, n, cplx, pair):
    """``P D P^{-1}`` with ``P = I + 0.3 R`` and separated eigenvalues; for a real matrix with
    ``pair``, ``D`` has a 2x2 block ``[[a, b], [-b, a]]`` (eigenvalues ``a +- ib``,
    ``b >= 0.5``)."""
    p = np.eye(n) + 0.3 * draw_mat(data, batch + (n, n), cplx) + _DENSE[:n, :n]
    d = 1.5 * np.arange(n) + draw_mat(data, batch + (n,), cplx, -0.3, 0.3)
    dmat = d[..., None, :] * np.eye(n)
    if pair and not cplx and n >= 2:
        b = 0.5 + abs(draw_real(data, batch, 0.0, 1.0))
        dmat = dmat.copy()
        dmat[..., 0, 1] = b
        dmat[..., 1, 0] = -b
        dmat[..., 1, 1] = dmat[..., 0, 0]
    return p @ dmat @ np.linalg.inv(p)


def full_rank(data, batch, m, n, cplx, spread=True):
    """``U diag(s) V^H`` with singular values in ``[1, 3]``, at least 0.6 apart."""
    k = min(m, n)
    u = orthonormal(data, batch, m, k, cplx)
    v = orthonormal(data, batch, n, k, cplx)
    s = 3.0 - np.arange(k) * (0.8 if spread else 0.0) + draw_real(data, batch + (k,), -0.1, 0.1)
    return (u * s[..., None, :]) @ _H(v)


def cast(a, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.real(a).astype(dtype)
    return a.astype(dtype)


def assert_close(out, ref, dtype=np.float64):
    ref = np.asarray(ref)
    out_np = out.numpy() if isinstance(out, tg.Tensor) else np.asarray(out)
    assert out_np.shape == ref.shape, (out_np.shape, ref.shape)
    assert out_np.dtype == ref.dtype, (out_np.dtype, ref.dtype)
    tol = 2e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-8
    np.testing.assert_allclose(out_np, ref, rtol=tol, atol=tol)


def grads_ok(f, args, order=2):
    # second differences through a decomposition carry ~1e-6 of rounding: a looser atol
    check_grads(f, [tg.Tensor(a) for a in args], order=order, modes=("rev", "fwd"), atol=1e-5,
                rtol=1e-4)


def sq(v):
    """``|v|**2``, smooth and invariant under the eigenvectors' sign or phase."""
    return tnp.real(v * tnp.conj(v)) if v.dtype.kind == "c" else v * v


# -- eigh, eigvalsh -----------------------------------------------------------------------------
@given(data=st.data())
def test_eigh_forward_matches_numpy(data):
    batch, n = data.draw(BATCH), data.draw(st.integers(0, 3))
    dtype = data.draw(st.sampled_from(ALL_DTYPES))
    uplo = data.draw(st.sampled_from(["L", "U"]))
    a = cast(hermitian(data, batch, n, np.dtype(dtype).kind == "c"), dtype)
    if data.draw(st.booleans()):  # only one triangle is read, as NumPy
        full = np.full((n, n), 7.0)
        junk = np.triu(full, 1) if uplo == "L" else np.tril(full, -1)
        a = a + junk.astype(dtype)
    w, v = L.eigh(a, UPLO=uplo)
    rw, rv = np.linalg.eigh(a, UPLO=uplo)
    assert_close(w, rw, dtype)
    # eigenvectors agree up to a sign/phase per column: compare the projectors |v_ij|^2
    assert v.dtype == rv.dtype and v.shape == rv.shape
    np.testing.assert_allclose(np.abs(v.numpy()) ** 2, np.abs(rv) ** 2, atol=2e-3)
    assert_close(L.eigvalsh(a, UPLO=uplo), np.linalg.eigvalsh(a, UPLO=uplo), dtype)


@given(data=st.data())
def test_eigh_gradients(data):
    batch, n, cplx = data.draw(BATCH), data.draw(SIZES), data.draw(st.booleans())
    a = hermitian(data, batch, n, cplx)
    c = np.arange(1.0, n + 1)

    def f(x):
        x = (x + tnp.conj(tnp.swapaxes(x, -1, -2))) / 2  # Hermitian perturbations
        w, v = L.eigh(x)
        return w, sq(v) * c

    grads_ok(f, (a,))
    grads_ok(lambda x: L.eigvalsh((x + tnp.conj(tnp.swapaxes(x, -1, -2))) / 2), (a,))


# -- eig, eigvals -------------------------------------------------------------------------------
@given(data=st.data())
def test_eig_forward_matches_numpy(data):
    batch, n = data.draw(BATCH), data.draw(st.integers(0, 3))
    dtype = data.draw(st.sampled_from(ALL_DTYPES))
    cplx = np.dtype(dtype).kind == "c"
    a = cast(diagonalizable(data, batch, n, cplx, data.draw(st.booleans())), dtype)
    w, v = L.eig(a)
    rw, rv = np.linalg.eig(a)
    cdt = np.complex64 if np.dtype(dtype) in (np.float32, np.complex64) else np.complex128
    assert w.dtype == cdt and v.dtype == cdt  # always complex (NumPy: value-dependent)
    assert_close(w, rw.astype(cdt), dtype)
    np.testing.assert_allclose(np.abs(v.numpy()), np.abs(rv), atol=2e-3)
    assert_close(L.eigvals(a), np.linalg.eigvals(a).astype(cdt), dtype)


@given(data=st.data())
def test_eig_gradients(data):
    batch, n, cplx = data.draw(BATCH), data.draw(SIZES), data.draw(st.booleans())
    a = diagonalizable(data, batch, n, cplx, data.draw(st.booleans()))

    def f(x):  # invariant under LAPACK's order of the eigenvalues (not continuous)
        w, v = L.eig(x)
        powers = tnp.sum(w, -1), tnp.sum(w * w, -1), tnp.sum(L.eigvals(x) ** 3, -1)
        return powers, tnp.sum(sq(v) * w[..., None, :], -1)

    grads_ok(f, (a,))
    if not cplx:  # a real loss of a real matrix's eigen-decomposition has a real gradient
        def loss(x):
            (s1, s2, _), vw = f(x)
            return tnp.sum(tnp.real(s1) + tnp.imag(s2) ** 2) + tnp.sum(tnp.abs(vw))

        g = tg.grad(loss)(tg.Tensor(a))
        assert g.dtype == np.float64


# -- svd (complex), qr, pinv --------------------------------------------------------------------
MN = st.tuples(SIZES, SIZES)


@given(data=st.data())
def test_complex_svd_forward_and_gradients(data):
    batch, (m, n) = data.draw(BATCH), data.draw(MN)
    dtype = data.draw(st.sampled_from([np.complex64, np.complex128]))
    a = full_rank(data, batch, m, n, True)
    u, s, vh = L.svd(a.astype(dtype), full_matrices=False)
    ru, rs, rvh = np.linalg.svd(a.astype(dtype), full_matrices=False)
    assert_close(s, rs, dtype)
    assert u.dtype == ru.dtype and vh.dtype == rvh.dtype and u.shape == ru.shape
    assert_close(u @ (s[..., None].astype(dtype) * vh), a.astype(dtype), dtype)
    assert_close(L.svdvals(a.astype(dtype)), rs, dtype)

    def f(x):
        u, s, vh = L.svd(x, full_matrices=False)
        return L.svdvals(x) ** 2, sq(u) * np.arange(1.0, u.shape[-1] + 1), u @ vh

    grads_ok(f, (a,))


@given(data=st.data())
def test_qr(data):
    batch, (m, n) = data.draw(BATCH), data.draw(MN)
    dtype = data.draw(st.sampled_from(ALL_DTYPES))
    cplx = np.dtype(dtype).kind == "c"
    mode = data.draw(st.sampled_from(["reduced", "complete"]))
    a = full_rank(data, batch, m, n, cplx, spread=False)
    # LAPACK's Householder QR switches sign convention where a column is already reduced (tau = 0
    # when its subdiagonal is exactly zero and, for complex, its diagonal real): Q jumps there, so
    # finite differences straddle two branches. Keep the draws off that measure-zero set.
    if cplx:
        a = a * np.exp(0.3j)
    assume(m == 1 or np.all(np.abs(a[..., 1:, 0]).max(axis=-1, initial=0.0) > 1e-3))
    q, r = L.qr(cast(a, dtype), mode=mode)
    rq, rr = np.linalg.qr(cast(a, dtype), mode=mode)
    assert_close(q, rq, dtype)
    assert_close(r, rr, dtype)
    assert_close(L.qr(cast(a, dtype), mode="r"), np.linalg.qr(cast(a, dtype), mode="r"), dtype)
    if mode == "reduced" or m <= n:
        grads_ok(lambda x: tuple(L.qr(x, mode=mode)), (a,))


@given(data=st.data())
def test_pinv_full_rank(data):
    batch, (m, n) = data.draw(BATCH), data.draw(MN)
    dtype = data.draw(st.sampled_from(ALL_DTYPES))
    cplx = np.dtype(dtype).kind == "c"
    a = full_rank(data, batch, m, n, cplx, spread=False)
    assert_close(L.pinv(cast(a, dtype)), np.linalg.pinv(cast(a, dtype)), dtype)
    grads_ok(L.pinv, (a,))


@given(data=st.data())
def test_pinv_and_lstsq_rank_deficient(data):
    """At a rank-deficient matrix the derivative exists along rank-preserving perturbations:
    differentiate through ``a = B @ C`` with a rank-1 inner dimension."""
    m, n, cplx = data.draw(st.integers(2, 3)), data.draw(st.integers(2, 3)), data.draw(
        st.booleans())
    b = draw_mat(data, (m, 1), cplx, 0.5, 1.5)
    c = draw_mat(data, (1, n), cplx, 0.5, 1.5)
    rhs = draw_mat(data, (m, 2), cplx)
    assert_close(L.pinv(b @ c), np.linalg.pinv(b @ c))
    x, res, rank, s = L.lstsq(b @ c, rhs)
    rx, rres, rrank, rs = np.linalg.lstsq(b @ c, rhs)
    assert_close(x, rx)
    assert rank == rrank == 1 and res.shape == rres.shape == (0,)
    assert_close(s, rs)
    grads_ok(lambda u, v: L.pinv(u @ v), (b, c))
    grads_ok(lambda u, v, y: L.lstsq(u @ v, y)[0], (b, c, rhs))


@given(data=st.data())
def test_lstsq_full_rank(data):
    m, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    cplx, vector = data.draw(st.booleans()), data.draw(st.booleans())
    a = full_rank(data, (), m, n, cplx, spread=False)
    b = draw_mat(data, (m,) if vector else (m, 2), cplx)
    got, ref = L.lstsq(a, b), np.linalg.lstsq(a, b)
    for g, r in zip(got[:2], ref[:2]):
        assert_close(g, r)
    assert got[2] == ref[2]
    assert_close(got[3], ref[3])
    grads_ok(lambda x, y: L.lstsq(x, y)[0], (a, b))
    if m > n:
        grads_ok(lambda x, y: L.lstsq(x, y)[1], (a, b))


# -- composites ---------------------------------------------------------------------------------
@given(data=st.data())
def test_matrix_power(data):
    batch, n = data.draw(BATCH), data.draw(SIZES)
    p = data.draw(st.integers(-3, 5))
    cplx = data.draw(st.booleans())
    a = np.eye(n) + 0.3 * draw_mat(data, batch + (n, n), cplx)
    assert_close(L.matrix_power(a, p), np.linalg.matrix_power(a, p))
    grads_ok(lambda x: L.matrix_power(x, p), (a,))


@given(data=st.data())
def test_cond(data):
    batch, (m, n) = data.draw(BATCH), data.draw(MN)
    cplx = data.draw(st.booleans())
    p = data.draw(st.sampled_from([None, 2, -2, 1, -1, np.inf, -np.inf, "fro", "nuc"]))
    if p not in (None, 2, -2):
        n = m
    a = full_rank(data, batch, m, n, cplx)
    assert_close(L.cond(a, p), np.linalg.cond(a, p))
    if p in (None, 2, -2, "fro"):  # the others are piecewise smooth (max/min of sums)
        grads_ok(lambda x: L.cond(x, p), (a,))


@given(data=st.data())
def test_tensorinv_and_tensorsolve(data):
    shp = data.draw(st.sampled_from([((2, 3), (6,)), ((6,), (3, 2)), ((2, 2), (2, 2))]))
    n = int(np.prod(shp[0]))
    # I + (0.5 / n) D with |D_ij| <= 1 keeps ||m - I||_2 <= 0.5 (condition number <= 3).
    # 0.3 D did not: for n = 6 and D near -0.59 everywhere m had condition number 75, the
    # order-2 derivatives of its inverse reached 1.2e3, and the central difference's
    # truncation error at eps 1e-4 (3e-4 relative) exceeded the tolerance (eps 1e-5 agrees).
    m = np.eye(n) + (0.5 / n) * draw_real(data, (n, n))
    a = m.reshape(shp[0] + shp[1])
    assert_close(L.tensorinv(a, ind=len(shp[0])), np.linalg.tensorinv(a, ind=len(shp[0])))
    grads_ok(lambda x: L.tensorinv(x, ind=len(shp[0])), (a,))
    b = draw_real(data, shp[0])
    assert_close(L.tensorsolve(a, b), np.linalg.tensorsolve(a, b))
    grads_ok(L.tensorsolve, (a, b))


@given(data=st.data())
def test_multi_dot(data):
    k = data.draw(st.integers(2, 5))
    dims = [data.draw(st.integers(1, 4)) for _ in range(k + 1)]
    arrs = [draw_real(data, (dims[i], dims[i + 1])) for i in range(k)]
    if data.draw(st.booleans()):
        arrs[0] = arrs[0][0]
    if data.draw(st.booleans()) and k > 2:
        arrs[-1] = arrs[-1][:, 0]
    assert_close(L.multi_dot(arrs), np.linalg.multi_dot(arrs))
    grads_ok(lambda *xs: L.multi_dot(list(xs)), arrs)


@given(data=st.data())
def test_vecdot_and_cross(data):
    sa, sb = data.draw(st.sampled_from([((3,), (3,)), ((2, 3), (3,)), ((1, 3), (2, 1, 3)),
                                        ((0, 3), (3,))]))
    cplx = data.draw(st.booleans())
    x1, x2 = draw_mat(data, sa, cplx), draw_mat(data, sb, cplx)
    assert_close(L.vecdot(x1, x2), np.linalg.vecdot(x1, x2))
    assert_close(L.cross(x1, x2), np.linalg.cross(x1, x2))
    grads_ok(L.vecdot, (x1, x2))
    grads_ok(L.cross, (x1, x2))


@given(data=st.data())
def test_complex_norms(data):
    batch = data.draw(shapes(max_dims=1, min_side=1, max_side=2))
    m, n = data.draw(MN)
    z = draw_mat(data, batch + (m, n), True, 0.2, 1.0)  # no zero entries (kinks of |z|)
    vord = data.draw(st.sampled_from([2, 1, np.inf, 3, 0.5]))
    assert_close(L.vector_norm(z, ord=vord, axis=-1), np.linalg.vector_norm(z, ord=vord, axis=-1))
    assert_close(L.vector_norm(z, axis=(-2, -1), keepdims=True),
                 np.linalg.vector_norm(z, axis=(-2, -1), keepdims=True))
    mord = data.draw(st.sampled_from(["fro", "nuc", 2, -2, 1, np.inf]))
    zm = full_rank(data, batch, m, n, True)
    assert_close(L.matrix_norm(zm, ord=mord), np.linalg.matrix_norm(zm, ord=mord))
    assert_close(L.norm(z), np.linalg.norm(z))
    if vord != np.inf:  # a max: not differentiable at ties
        grads_ok(lambda x: L.vector_norm(x, ord=vord, axis=-1), (z,))
    if mord in ("fro", "nuc", 2, -2):  # 1/inf: max of sums, piecewise smooth
        grads_ok(lambda x: L.matrix_norm(x, ord=mord), (zm,))
    grads_ok(lambda x: L.norm(x), (z,))
    grads_ok(tnp.vdot, (z, draw_mat(data, z.shape, data.draw(st.booleans()))))


# -- vmap rules of the new primitives -----------------------------------------------------------
def _eigh(x):
    w, v = L.eigh(x)
    return w, sq(v)


def _eig(x):
    w, v = L.eig(x)
    return tnp.sum(w * w, -1), tnp.sum(sq(v) * w[..., None, :], -1)


def _svd(x):
    u, s, vh = L.svd(x, full_matrices=False)
    return s, u @ vh


PRIMITIVES = {
    "eigh": (lambda d, b, n, c: hermitian(d, b, n, c), _eigh),
    "eig": (lambda d, b, n, c: diagonalizable(d, b, n, c, True), _eig),
    "svd": (lambda d, b, n, c: full_rank(d, b, n, n + 1, c), _svd),
    "qr": (lambda d, b, n, c: full_rank(d, b, n + 1, n, c), lambda x: tuple(L.qr(x))),
    "pinv": (lambda d, b, n, c: full_rank(d, b, n, n + 1, c), L.pinv),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@given(data=st.data())
def test_vmap_rules(name, data):
    make, f = PRIMITIVES[name]
    size, n, cplx = data.draw(st.integers(0, 2)), data.draw(SIZES), data.draw(st.booleans())
    extra = data.draw(shapes(max_dims=1, min_side=1, max_side=2))
    a = tg.Tensor(make(data, (size,) + extra, n, cplx))
    check_vmap(f, (a,), atol=1e-8)

    def loss(x):
        out = f(x)
        leaves = out if isinstance(out, tuple) else (out,)
        return sum(tnp.sum(tnp.real(t) if t.dtype.kind == "c" else t) * (i + 1.5)
                   for i, t in enumerate(leaves))

    if size or name != "qr":  # (an empty batch is checked on a zero example, where qr's
        check_vmap(tg.grad(loss), (a,), atol=1e-8)  # gradient raises: R is singular)
