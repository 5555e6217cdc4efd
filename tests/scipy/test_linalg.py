"""Example tests of ``tapegrad.scipy.linalg``: values against SciPy, derivatives against
closed forms, batches, and the errors raised."""

import numpy as np
import pytest
import scipy.linalg as sl

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.scipy import linalg
from tapegrad.testing import check_grads, check_vmap

A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])  # symmetric positive definite
G = np.array([[0.9, -0.4, 0.1], [0.3, 1.1, 0.2], [-0.2, 0.5, 0.7]])


@pytest.mark.parametrize("name", ["expm", "logm", "sqrtm", "inv", "det", "cholesky"])
def test_values_match_scipy(name):
    got = getattr(linalg, name)(A)
    want = getattr(sl, name)(A)
    assert got.dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-14)
    a32 = A.astype(np.float32)
    assert getattr(linalg, name)(a32).dtype == np.float32


def test_batches_and_complex_input():
    batch = np.stack([A, 2.0 * A, A + 0.5 * np.eye(3)])
    np.testing.assert_allclose(linalg.expm(batch).numpy(), np.stack([sl.expm(m) for m in batch]),
                               rtol=1e-12)
    np.testing.assert_allclose(linalg.cholesky(batch, lower=True).numpy(),
                               np.linalg.cholesky(batch), rtol=1e-12)
    z = G + 0.3j * A
    np.testing.assert_allclose(linalg.sqrtm(A + 0.1j * G).numpy(), sl.sqrtm(A + 0.1j * G),
                               rtol=1e-10)
    np.testing.assert_allclose(linalg.expm(z).numpy(), sl.expm(z), rtol=1e-12)
    assert linalg.expm(np.zeros((0, 2, 2))).shape == (0, 2, 2)
    check_vmap(linalg.expm, (tg.Tensor(batch),))


def test_solve_triangular_and_sylvester_match_scipy():
    b = np.arange(6.0).reshape(3, 2)
    for trans in (0, 1, 2, "N", "T", "C"):
        for lower in (False, True):
            got = linalg.solve_triangular(G, b, trans=trans, lower=lower, unit_diagonal=lower)
            want = sl.solve_triangular(G, b, trans=trans, lower=lower, unit_diagonal=lower)
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(linalg.solve_triangular(A, b[:, 0]).numpy(),
                               sl.solve_triangular(A, b[:, 0]), rtol=1e-12)
    q = np.arange(6.0).reshape(3, 2)
    bm = np.array([[2.0, 0.3], [0.1, 1.5]])
    np.testing.assert_allclose(linalg.solve_sylvester(A, bm, q).numpy(),
                               sl.solve_sylvester(A, bm, q), rtol=1e-12)


def test_derivatives_match_closed_forms():
    # d det(A) / dA = det(A) A^{-T}
    g = tg.grad(linalg.det)(tg.Tensor(G))
    np.testing.assert_allclose(g.numpy(), np.linalg.det(G) * np.linalg.inv(G).T, rtol=1e-12)
    # d tr(expm(A)) / dA = expm(A)^T
    g = tg.grad(lambda a: tnp.trace(linalg.expm(a)))(tg.Tensor(G))
    np.testing.assert_allclose(g.numpy(), sl.expm(G).T, rtol=1e-12)
    # d tr(logm(A)) / dA = A^{-T}
    g = tg.grad(lambda a: tnp.trace(linalg.logm(a)))(tg.Tensor(A))
    np.testing.assert_allclose(g.numpy(), np.linalg.inv(A).T, rtol=1e-10)
    # sqrtm(A) @ sqrtm(A) = A to every order
    check_grads(lambda a: linalg.sqrtm(a) @ linalg.sqrtm(a), (tg.Tensor(A),), order=2,
                modes=("rev", "fwd"))
    check_grads(lambda a: linalg.cholesky(a, lower=True), (tg.Tensor(A),), order=2,
                modes=("rev", "fwd"))


def test_torch_cross_check():
    torch = pytest.importorskip("torch")
    t = torch.tensor(G, requires_grad=True)
    torch.linalg.matrix_exp(t).square().sum().backward()
    g = tg.grad(lambda a: tnp.sum(linalg.expm(a) ** 2))(tg.Tensor(G))
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-10)
    t = torch.tensor(A, requires_grad=True)
    torch.linalg.cholesky(t).sin().sum().backward()
    g = tg.grad(lambda a: tnp.sum(tnp.sin(linalg.cholesky(0.5 * (a + a.T), lower=True))))(
        tg.Tensor(A))
    np.testing.assert_allclose(g.numpy(), 0.5 * (t.grad.numpy() + t.grad.numpy().T), rtol=1e-10)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: linalg.expm(np.ones((2, 3))), ValueError,
     r"expm: A must be a square matrix or a batch of them, shape \(\.\.\., n, n\); got shape"
     r" \(2, 3\)"),
    (lambda: linalg.inv(np.ones(3)), ValueError, r"inv: .* got shape \(3,\)"),
    (lambda: linalg.expm(np.array([["a"]])), TypeError, r"expm: A has dtype <U1"),
    (lambda: linalg.cholesky(-np.eye(2)), np.linalg.LinAlgError,
     r"^cholesky: the matrix \(shape \(2, 2\), dtype float64\) is not positive definite"),
    (lambda: linalg.inv(np.zeros((2, 2))), np.linalg.LinAlgError, "inv: matrix is singular"),
    (lambda: linalg.det(np.ones((2, 2, 3))), ValueError, "det: "),
    (lambda: linalg.solve_triangular(np.eye(2), np.ones(3)), ValueError,
     r"solve_triangular: a of shape \(2, 2\) needs b of shape \(2,\) or \(\.\.\., 2, k\), "
     r"got \(3,\)"),
    (lambda: linalg.solve_triangular(np.eye(2), np.ones(2), trans=5), ValueError,
     "solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got 5"),
    (lambda: linalg.solve_sylvester(np.eye(2), np.eye(3), np.ones((3, 2))), ValueError,
     r"solve_sylvester: a of shape \(2, 2\) and b of shape \(3, 3\) need q of shape "
     r"\(\.\.\., 2, 3\), got \(3, 2\)"),
    (lambda: linalg.expm(np.ones((2, 2, 2))[None] @ np.ones((3, 1, 2, 2))), None, None),
])
def test_bad_input_is_explained(call, exc, match):
    if exc is None:  # batch dimensions broadcast: a valid call
        assert call().shape == (3, 2, 2, 2)
        return
    with pytest.raises(exc, match=match):
        call()


def test_batch_mismatch_is_explained():
    with pytest.raises(ValueError, match=r"solve_triangular: batch dimensions \(2,\), \(3,\)"):
        linalg.solve_triangular(np.stack([np.eye(2)] * 2), np.ones((3, 2, 1)))


# -- solve_banded ------------------------------------------------------------------------------
def _dense(ab, lower, upper):
    m = ab.shape[1]
    a = np.zeros((m, m), ab.dtype)
    for i in range(m):
        for j in range(max(0, i - lower), min(m, i + upper + 1)):
            a[i, j] = ab[upper + i - j, j]
    return a


def test_solve_banded_is_the_dense_solve_of_the_band():
    rng = np.random.default_rng(7)
    for lower, upper in [(0, 0), (1, 1), (2, 0), (0, 3), (1, 2)]:
        ab = rng.standard_normal((lower + upper + 1, 6))
        ab[upper] += 5.0
        b = rng.standard_normal((6, 2))
        x = linalg.solve_banded((lower, upper), ab, b)
        np.testing.assert_allclose(x.numpy(), np.linalg.solve(_dense(ab, lower, upper), b),
                                   rtol=1e-12, atol=1e-12)
        # the gradient in ab is that of the dense solve, read back from the band
        lu = (lower, upper)
        g = tg.grad(lambda a, lu=lu, b=b: tnp.sum(linalg.solve_banded(lu, a, b) ** 2))(
            tg.Tensor(ab))
        ga = tg.grad(lambda a, b=b: tnp.sum(tnp.linalg.solve(a, b) ** 2))(
            tg.Tensor(_dense(ab, lower, upper))).numpy()
        want = np.zeros_like(ab)
        for i in range(6):
            for j in range(max(0, i - lower), min(6, i + upper + 1)):
                want[upper + i - j, j] = ga[i, j]
        np.testing.assert_allclose(g.numpy(), want, rtol=1e-10, atol=1e-12)
    assert linalg.solve_banded((1, 1), ab[:3].astype(np.float32),
                               b[:, 0].astype(np.float32)).dtype == np.float32


def test_solve_banded_errors():
    ab, b = np.ones((3, 4)), np.ones(4)
    with pytest.raises(ValueError, match=r"solve_banded: ab must have shape \(2, M\) for "
                                         r"\(l, u\) = \(1, 0\), got \(3, 4\)"):
        linalg.solve_banded((1, 0), ab, b)
    with pytest.raises(ValueError, match=r"solve_banded: b must have shape \(4,\) or \(4, K\)"):
        linalg.solve_banded((1, 1), ab, np.ones(3))
    with pytest.raises(TypeError, match="solve_banded: l_and_u must be a pair of ints"):
        linalg.solve_banded(1, ab, b)
    with pytest.raises(ValueError, match="solve_banded: l and u must be non-negative"):
        linalg.solve_banded((-1, 3), ab, b)
    with pytest.raises(np.linalg.LinAlgError):
        linalg.solve_banded((1, 1), np.zeros((3, 4)), b)
