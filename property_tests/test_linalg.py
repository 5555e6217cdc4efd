"""Property tests for linear algebra: matmul, dot, tensordot, einsum, inv, solve, det, slogdet,
cholesky, svd and the norms. Shapes are drawn with broadcasting batch dimensions (size 1 and
size 0 included where NumPy allows them); the forward pass must equal NumPy's (dtype included)
and gradients must match central finite differences at orders 1 and 2 in float64. Matrices are drawn
well-conditioned: ``I + 0.3 R`` with ``|R_ij| <= 1`` (diagonally dominant for n <= 3) and
``B B^T + n I`` for the positive-definite ones."""

import numpy as np
import pytest
from hypothesis import assume as hypothesis_assume
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads
from tapegrad.testing.strategies import arrays, broadcastable_shapes, floats_in, shapes

DTYPES = st.sampled_from([np.float32, np.float64])


def draw_array(data, shape, dtype=np.float64, low=-2.0, high=2.0):
    width = np.dtype(dtype).itemsize * 8
    return data.draw(arrays(shape, dtype, elements=floats_in(low, high, width=width)))


def assert_forward_matches(out, ref, dtype):
    ref = np.asarray(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == ref.dtype, (out.dtype, ref.dtype)
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out.numpy(), ref, rtol=tol, atol=tol)


def grads_ok(f, arrays_):
    check_grads(f, [tg.Tensor(np.asarray(a, dtype=np.float64)) for a in arrays_], order=2)


# -- matmul, dot, tensordot -----------------------------------------------------------------
@given(data=st.data())
def test_matmul_all_cases(data):
    kinds = data.draw(st.sampled_from(["1-1", "1-2", "2-1", "2-2"]))
    n, k, m = (data.draw(st.integers(0, 3)) for _ in range(3))
    ba, bb = data.draw(broadcastable_shapes(2, max_dims=2, max_side=3))
    sa = (k,) if kinds[0] == "1" else ba + (n, k)
    sb = (k,) if kinds[2] == "1" else bb + (k, m)
    dtype = data.draw(DTYPES)
    a, b = draw_array(data, sa, dtype), draw_array(data, sb, dtype)
    assert_forward_matches(tnp.matmul(a, b), np.matmul(a, b), dtype)
    assert_forward_matches(tg.Tensor(a) @ tg.Tensor(b), a @ b, dtype)
    # both modes: the jvp rule and the backward's vector and broadcast-batch branches
    check_grads(tnp.matmul, [tg.Tensor(np.asarray(x, np.float64)) for x in (a, b)], order=2,
                modes=("fwd", "rev"))


@given(data=st.data())
def test_dot(data):
    sa = data.draw(shapes(max_dims=3, min_side=0, max_side=3))
    if len(sa) == 0:
        sb = data.draw(shapes(max_dims=2, max_side=3))
    else:
        nb = data.draw(st.integers(1, 3))
        sb = list(data.draw(shapes(min_dims=nb, max_dims=nb, max_side=3)))
        sb[0 if nb == 1 else nb - 2] = sa[-1]
        sb = tuple(sb)
    if data.draw(st.booleans()):
        sa, sb = sb, sa
        if len(sa) and len(sb) and sa[-1] != sb[0 if len(sb) == 1 else -2]:
            sa, sb = sb, sa
    dtype = data.draw(DTYPES)
    a, b = draw_array(data, sa, dtype), draw_array(data, sb, dtype)
    assert_forward_matches(tnp.dot(a, b), np.dot(a, b), dtype)
    grads_ok(tnp.dot, (a, b))


@given(data=st.data())
def test_tensordot(data):
    sa = data.draw(shapes(max_dims=3, min_side=0, max_side=3))
    n = data.draw(st.integers(0, len(sa)))
    use_int = data.draw(st.booleans())
    if use_int:
        ax_a = list(range(len(sa) - n, len(sa)))
    else:
        ax_a = data.draw(st.permutations(range(len(sa))))[:n]
    free_b = data.draw(shapes(max_dims=2, max_side=3))
    nb = n + len(free_b)
    order = list(range(nb)) if use_int else data.draw(st.permutations(range(nb)))
    ax_b = order[:n]
    sb = [0] * nb
    for i, j in enumerate(ax_b):
        sb[j] = sa[ax_a[i]]
    for pos, size in zip(order[n:], free_b):
        sb[pos] = size
    axes = n if use_int else (ax_a, ax_b)
    dtype = data.draw(DTYPES)
    a, b = draw_array(data, sa, dtype), draw_array(data, tuple(sb), dtype)
    assert_forward_matches(tnp.tensordot(a, b, axes=axes), np.tensordot(a, b, axes=axes), dtype)
    grads_ok(lambda x, y: tnp.tensordot(x, y, axes=axes), (a, b))


# -- einsum ---------------------------------------------------------------------------------
EINSUM_TABLE = [
    "ij,jk->ik",
    "ij,jk",
    "ij->ji",
    "ij->",
    "i,i->",
    "i,j->ij",
    "ij,ij->ij",
    "ii->i",
    "ii",
    "iij->j",
    "ijk,jil->kl",
    "ij,jk,kl->il",
    "i,i,i->i",
    ",i->i",
    "...ij,...jk->...ik",
    "...i,...i->...",
    "...ii->...i",
    "i...,i...->...",
    "b...ij,bjk->b...ik",
    "...",
]


@pytest.mark.parametrize("subscripts", EINSUM_TABLE)
@given(data=st.data())
def test_einsum_table(subscripts, data):
    lhs = subscripts.split("->")[0]
    terms = lhs.split(",")
    letters = sorted(set(lhs) - {".", ","})
    sizes = {c: data.draw(st.integers(0, 3)) for c in letters}
    n_ell = sum("..." in t for t in terms)
    ell = list(data.draw(broadcastable_shapes(n_ell, max_dims=2, max_side=3))) if n_ell else []
    shapes_ = []
    for t in terms:
        body = t.replace("...", "")
        dims = []
        for c in body:
            # a labelled dimension may broadcast (size 1) unless repeated within the operand
            one = body.count(c) == 1 and data.draw(st.booleans()) and sizes[c] > 0
            dims.append(1 if one and data.draw(st.booleans()) else sizes[c])
        if "..." in t:
            pre = len(t.split("...")[0])
            dims = dims[:pre] + list(ell.pop(0)) + dims[pre:]
        shapes_.append(tuple(dims))
    dtype = data.draw(DTYPES)
    xs = [draw_array(data, s, dtype) for s in shapes_]
    optimize = data.draw(st.sampled_from([False, "greedy"]))
    out = tnp.einsum(subscripts, *xs, optimize=optimize)
    assert_forward_matches(out, np.einsum(subscripts, *xs), dtype)
    grads_ok(lambda *a: tnp.einsum(subscripts, *a, optimize=optimize), xs)


# -- square-matrix functions ----------------------------------------------------------------
def well_conditioned(data, batch, n, dtype=np.float64):
    r = draw_array(data, batch + (n, n), np.float64, -1.0, 1.0)
    return (np.eye(n) + 0.3 * r).astype(dtype)


def positive_definite(data, batch, n, dtype=np.float64):
    b = draw_array(data, batch + (n, n), np.float64, -1.0, 1.0)
    return (b @ np.swapaxes(b, -1, -2) + n * np.eye(n)).astype(dtype)


BATCH = shapes(max_dims=2, min_side=0, max_side=2)
SIZES = st.integers(1, 3)


@pytest.mark.parametrize(
    "name, fn, ref",
    [
        ("inv", tnp.linalg.inv, np.linalg.inv),
        ("det", tnp.linalg.det, np.linalg.det),
        ("logabsdet", lambda a: tnp.linalg.slogdet(a)[1], lambda a: np.linalg.slogdet(a)[1]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
@given(data=st.data())
def test_square_matrix_functions(name, fn, ref, data):
    batch, n, dtype = data.draw(BATCH), data.draw(SIZES), data.draw(DTYPES)
    a = well_conditioned(data, batch, n, dtype)
    assert_forward_matches(fn(a), ref(a), dtype)
    grads_ok(fn, (well_conditioned(data, batch, n),))


@given(data=st.data())
def test_slogdet_sign_matches_numpy(data):
    batch, n, dtype = data.draw(BATCH), data.draw(SIZES), data.draw(DTYPES)
    a = well_conditioned(data, batch, n, dtype)
    if data.draw(st.booleans()):
        a = -a
    sign, logabs = tnp.linalg.slogdet(a)
    ref = np.linalg.slogdet(a)
    assert_forward_matches(sign, ref.sign, dtype)
    assert_forward_matches(logabs, ref.logabsdet, dtype)


@given(data=st.data())
def test_solve(data):
    n, dtype = data.draw(SIZES), data.draw(DTYPES)
    vector = data.draw(st.booleans())
    ba, bb = data.draw(broadcastable_shapes(2, max_dims=2, max_side=2))
    a = well_conditioned(data, ba, n, dtype)
    sb = (n,) if vector else bb + (n, data.draw(st.integers(0, 2)))
    b = draw_array(data, sb, dtype)
    assert_forward_matches(tnp.linalg.solve(a, b), np.linalg.solve(a, b), dtype)
    grads_ok(tnp.linalg.solve, (well_conditioned(data, ba, n), b))


@given(data=st.data())
def test_cholesky(data):
    batch, n, dtype = data.draw(BATCH), data.draw(SIZES), data.draw(DTYPES)
    upper = data.draw(st.booleans())
    a = positive_definite(data, batch, n, dtype)
    out = tnp.linalg.cholesky(a, upper=upper)
    assert_forward_matches(out, np.linalg.cholesky(a, upper=upper), dtype)

    def sym_chol(x):  # the gradient is the symmetric one (see tnp.linalg.cholesky)
        return tnp.linalg.cholesky((x + tnp.swapaxes(x, -1, -2)) / 2, upper=upper)

    grads_ok(sym_chol, (positive_definite(data, batch, n),))


# -- norm -----------------------------------------------------------------------------------
NORM_CASES = [
    (None, "vector"),
    (1, "vector"),
    (2, "vector"),
    (np.inf, "vector"),
    (-np.inf, "vector"),
    ("fro", "matrix"),
    (1, "matrix"),
    (-1, "matrix"),
    (np.inf, "matrix"),
    (-np.inf, "matrix"),
    (2, "matrix"),
    (-2, "matrix"),
    ("nuc", "matrix"),
]


@pytest.mark.parametrize("ord, kind", NORM_CASES, ids=lambda v: str(v))
@given(data=st.data())
def test_norm(ord, kind, data):
    shape = data.draw(shapes(min_dims=1 if kind == "vector" else 2, max_dims=3, min_side=1))
    nd = len(shape)
    if kind == "vector":
        axis = data.draw(st.integers(-nd, nd - 1))
    else:
        axis = tuple(data.draw(st.permutations(range(nd)))[:2])
    keepdims = data.draw(st.booleans())
    dtype = data.draw(DTYPES)
    # |x| >= 0.5 keeps away from the kink of |x| at 0; distinct offsets keep max/min ties apart
    base = draw_array(data, shape, np.float64, 0.0, 2.0)
    sign = np.where(draw_array(data, shape, np.float64, -1.0, 1.0) < 0, -1.0, 1.0)
    x = sign * (0.5 + base + 0.013 * np.arange(base.size).reshape(shape))
    if ord in (np.inf, -np.inf, 1, -1) and not (kind == "vector" and ord in (1, -1)):
        reduced = np.abs(x) if kind == "vector" else None
        if kind == "matrix":
            summed = axis[0] if ord in (1, -1) else axis[1]
            reduced = np.abs(x).sum(axis=summed, keepdims=True)
        over = axis if kind == "vector" else (axis[1] if ord in (1, -1) else axis[0])
        srt = np.sort(reduced, axis=over)
        gaps = np.diff(srt, axis=over)
        hypothesis_assume(gaps.size == 0 or gaps.min() > 1e-3)
    if kind == "matrix" and ord in (2, -2, "nuc"):
        # second derivatives need distinct, nonzero singular values (gaps well above the
        # finite-difference step)
        sv = np.linalg.svd(np.moveaxis(x, axis, (-2, -1)), compute_uv=False)
        hypothesis_assume(sv.min() > 0.1)
        hypothesis_assume(sv.shape[-1] < 2 or np.diff(-sv, axis=-1).min() > 0.25)
    x = x.astype(dtype)
    out = tnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    assert_forward_matches(out, np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims), dtype)
    spectral = ord in (2, -2, "nuc") and kind == "matrix"
    check_grads(  # finite differences through an SVD: ~1e-5 relative noise at order 2
        lambda t: tnp.linalg.norm(t, ord=ord, axis=axis, keepdims=keepdims),
        [tg.Tensor(np.asarray(x, dtype=np.float64))],
        order=2,
        modes=("fwd", "rev") if spectral else ("rev",),
        rtol=1e-4 if spectral else None,
        atol=1e-5 if spectral else None,
    )


# -- svd ------------------------------------------------------------------------------------
@given(data=st.data())
def test_svd(data):
    batch = data.draw(shapes(max_dims=2, min_side=0, max_side=2))
    m, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    dtype = data.draw(DTYPES)
    a = draw_array(data, batch + (m, n), np.float64)
    s_ref = np.linalg.svd(a, compute_uv=False)
    k = min(m, n)
    if a.size:  # gradients of the vectors need distinct, nonzero singular values
        hypothesis_assume(s_ref.min() > 0.1)
        hypothesis_assume(k < 2 or np.diff(-s_ref, axis=-1).min() > 0.1)
    full = data.draw(st.booleans())
    u, s, vh = tnp.linalg.svd(a.astype(dtype), full_matrices=full)
    ref = np.linalg.svd(a.astype(dtype), full_matrices=full)
    assert_forward_matches(s, ref.S, dtype)
    assert u.shape == ref.U.shape and vh.shape == ref.Vh.shape and u.dtype == ref.U.dtype
    ur, sr, vhr = (v.numpy() for v in tnp.linalg.svd(a, full_matrices=False))
    np.testing.assert_allclose((ur * sr[..., None, :]) @ vhr, a, atol=1e-10)
    w = draw_array(data, batch + (m, n), np.float64)

    def f(x):  # a function of U, S and Vh that the vectors' signs do not change
        u_, s_, vh_ = tnp.linalg.svd(x, full_matrices=False)
        return (
            tnp.matmul(u_ * tnp.exp(0.3 * s_)[..., None, :], vh_) * w
            + tnp.sum(u_ * u_ * tnp.arange(k), axis=-1, keepdims=True)
        )

    # finite differences through an SVD carry ~1e-6 noise (LAPACK's own rounding): atol 1e-5.
    # Step 1e-5, not the default 1e-4: the vectors' higher derivatives grow like powers of
    # 1 / (s_i^2 - s_j^2), so with a gap near the 0.1 allowed above the O(eps^2) truncation
    # error of the central difference reaches 2e-5 at eps 1e-4 (a = [[-0.796875, 0.0097656],
    # [0, -1]], w = 0: forward mode at order 2 gave -0.0115869, eps 1e-4 -0.0115642, and
    # Richardson extrapolation of eps 3e-4 and 1e-4 -0.0115868, the analytic value).
    check_grads(
        f, [tg.Tensor(a)], order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-4, eps=1e-5
    )
