"""Example tests for tapegrad's linear algebra: products, einsum, tnp.linalg; errors and
conventions. Randomised checks over shapes live in property_tests/test_linalg.py."""

import pickle

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_grads

RNG = np.random.default_rng(1234)


def rand(*shape):
    return RNG.standard_normal(shape)


def spd(n, batch=()):
    b = rand(*batch, n, n)
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


# -- matmul and products --------------------------------------------------------------------
def test_matmul_operator_and_method_match_numpy():
    a, b = rand(2, 3, 4), rand(4, 5)
    ta, tb = tg.Tensor(a), tg.Tensor(b)
    for out in (ta @ tb, ta.matmul(tb), tnp.matmul(a, b), a @ tb):
        np.testing.assert_allclose(out.numpy(), a @ b)
        assert out.dtype == np.float64


@pytest.mark.parametrize(
    "sa, sb, match",
    [
        ((2, 3), (4, 2), r"matmul: shapes \(2, 3\) and \(4, 2\) are not aligned"),
        ((3,), (2,), r"matmul: shapes \(3,\) and \(2,\)"),
        ((2, 2, 3), (3, 3, 1), r"matmul: batch dimensions of shapes \(2, 2, 3\) and \(3, 3, 1\)"),
        ((), (2,), r"matmul: operands must be at least 1-D"),
    ],
)
def test_matmul_errors_name_op_and_shapes(sa, sb, match):
    with pytest.raises(ValueError, match=match):
        tnp.matmul(np.ones(sa), np.ones(sb))


def test_matmul_operator_with_a_python_number_names_the_op():
    x = tg.Tensor(np.ones(2))
    for f in (lambda: x @ 2.0, lambda: 2 @ x, lambda: x.matmul(3.0), lambda: x @ True):
        with pytest.raises(ValueError, match=r"matmul: operands must be at least 1-D"):
            f()

    def traced(t):
        return (t @ 2.0).sum()

    with pytest.raises(ValueError, match=r"matmul: operands must be at least 1-D"):
        tg.grad(traced)(x)


@pytest.mark.parametrize(
    "sa, sb",
    [
        ((3,), (3, 2)),
        ((3, 4), (4,)),
        ((3,), (2, 3, 4)),
        ((2, 1, 3, 4), (4,)),
        ((0, 3, 4), (4,)),
        ((4,), (0, 4, 2)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((3,), (3,)),
    ],
)
def test_matmul_vector_and_batch_gradients_both_modes(sa, sb):
    check_grads(tnp.matmul, (tg.Tensor(rand(*sa)), tg.Tensor(rand(*sb))), order=2,
                modes=("fwd", "rev"))


def _opers(tape):
    return [line.split("= ")[1].split()[0].split("[")[0] for line in str(tape).splitlines()
            if " = " in line]


def test_matmul_backward_of_matrices_is_two_products_of_views():
    """The MLP's hot path: the cotangents of ``a @ b`` are ``g @ b^T`` and ``a^T @ g``, two
    matmuls with ``matmul``'s transpose flags, with nothing else recorded (no transpose, no
    copy, no reshape, no sum)."""
    a, b, g = tg.Tensor(rand(3, 4)), tg.Tensor(rand(4, 2)), tg.Tensor(rand(3, 2))

    def pullback(a, b, g):
        return tg.vjp(tnp.matmul, a, b)[1](g)

    (ga, gb), tape = tg.trace(pullback)(a, b, g)
    np.testing.assert_allclose(ga.numpy(), g.numpy() @ b.numpy().T, rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), a.numpy().T @ g.numpy(), rtol=1e-12)
    assert sorted(_opers(tape)) == ["matmul"] * 3, str(tape)
    assert "transpose_b=True" in str(tape) and "transpose_a=True" in str(tape)
    only_a = tg.trace(lambda a, g: tg.vjp(lambda x: x @ b, a)[1](g))(a, g)[1]
    assert _opers(only_a) == ["matmul"] * 2, str(only_a)  # b^T of a constant: not recorded


def test_linalg_names_are_the_primitives_functions():
    from tapegrad.ops._registry import METHODS, ns

    assert tnp.matmul is tg.ops.MatMul.api is ns.matmul
    assert tnp.einsum is tg.ops.Einsum.api is ns.einsum
    assert {"__matmul__", "__rmatmul__", "matmul"} <= set(METHODS)
    pairs = [("inv", tg.ops.Inv), ("solve", tg.ops.Solve), ("det", tg.ops.Det),
             ("slogdet", tg.ops.SlogDet), ("cholesky", tg.ops.Cholesky), ("svd", tg.ops.Svd)]
    for name, cls in pairs:
        fn = getattr(tnp.linalg, name)
        assert fn is cls.api
        assert (fn.__name__, fn.__module__) == (name, "tapegrad.numpy.linalg")
        assert "Raises:" in fn.__doc__
        assert not hasattr(ns, name) and not hasattr(tnp, name)  # only in the submodule
    res = pickle.loads(pickle.dumps(tnp.linalg.SlogdetResult(1.0, 2.0)))
    assert res == (1.0, 2.0) and type(res) is tnp.linalg.SlogdetResult


_LAZY_CASES = {
    "inv": lambda a: tnp.linalg.inv(a),
    "det": lambda a: tnp.linalg.det(a),
    "slogdet": lambda a: tuple(tnp.linalg.slogdet(a)),
    "cholesky": lambda a: tnp.linalg.cholesky(a, upper=True),
    "solve": lambda a: tnp.linalg.solve(a, np.ones(3, np.int8)),
    "svd": lambda a: tuple(tnp.linalg.svd(a, full_matrices=False)),
    "matmul": lambda a: tnp.matmul(a, np.ones(3, np.float32)),
    "einsum": lambda a: tnp.einsum("ij,j->i", a, np.ones(3, np.float32)),
}


@pytest.mark.parametrize(
    "name, dtype",
    [
        (name, dtype)
        for name in sorted(_LAZY_CASES)
        for dtype in (np.int64, np.float32, np.float64, np.complex64)
    ],
)
def test_linalg_lazy_results_have_the_eager_shapes_and_dtypes(name, dtype):
    """Lazy mode trusts each op's output_shape/output_dtype: LAPACK routines make integer
    inputs float64 (and slogdet's logabsdet real), which the rules must promise."""
    a = (spd(3) * 4).astype(dtype)
    f = _LAZY_CASES[name]
    eager = f(a)
    with tg.lazy():
        lazy = f(a)
    eager = eager if isinstance(eager, tuple) else (eager,)
    lazy = lazy if isinstance(lazy, tuple) else (lazy,)
    for e, lz in zip(eager, lazy, strict=True):
        assert (lz.shape, lz.dtype) == (e.shape, e.dtype)
        np.testing.assert_allclose(lz.numpy(), e.numpy(), rtol=1e-5)
        assert lz.numpy().dtype == e.dtype


def test_dot_cases_match_numpy():
    cases = [((), (3,)), ((3,), (3,)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((3,), (3, 4))]
    cases += [((2, 3, 4), (5, 4, 2)), ((2, 3), (2, 3, 4))]
    for sa, sb in cases:
        a, b = rand(*sa), rand(*sb)
        out = tnp.dot(a, b)
        ref = np.dot(a, b)
        assert out.shape == np.shape(ref)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    check_grads(tnp.dot, (tg.Tensor(rand(2, 3, 4)), tg.Tensor(rand(5, 4, 2))), order=2)
    assert tg.Tensor(rand(2, 3)).dot(tg.Tensor(rand(3))).shape == (2,)


def test_dot_error_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"dot: shapes \(2, 3\) and \(2, 4\) are not aligned"):
        tnp.dot(np.ones((2, 3)), np.ones((2, 4)))


def test_vdot_inner_outer_match_numpy():
    a, b = rand(2, 3), rand(3, 2)
    np.testing.assert_allclose(tnp.vdot(a, b).numpy(), np.vdot(a, b))
    assert tnp.vdot(a, b).shape == ()
    c = rand(4, 3)
    np.testing.assert_allclose(tnp.inner(a, c).numpy(), np.inner(a, c))
    np.testing.assert_allclose(tnp.inner(2.0, a).numpy(), np.inner(2.0, a))
    np.testing.assert_allclose(tnp.outer(a, rand(2)).numpy().shape, (6, 2))
    d = rand(2)
    np.testing.assert_allclose(tnp.outer(a, d).numpy(), np.outer(a, d))
    check_grads(tnp.outer, (tg.Tensor(a), tg.Tensor(d)), order=2)
    check_grads(tnp.inner, (tg.Tensor(a), tg.Tensor(c)), order=2)
    check_grads(tnp.vdot, (tg.Tensor(a), tg.Tensor(b)), order=2)


def test_vdot_and_inner_errors():
    with pytest.raises(ValueError, match=r"vdot: .*\(2, 3\) \(6\) and \(5,\) \(5\)"):
        tnp.vdot(np.ones((2, 3)), np.ones(5))
    with pytest.raises(ValueError, match=r"inner: last dimensions of shapes \(2, 3\) and \(4,\)"):
        tnp.inner(np.ones((2, 3)), np.ones(4))


@pytest.mark.parametrize(
    "sa, sb, axes",
    [
        ((2, 3, 4), (3, 4, 5), 2),
        ((2, 3), (3, 2), 0),
        ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])),
        ((3, 4), (4, 3), (1, 0)),
        ((3, 4), (4, 3), ([-1], [0])),
        ((2, 3), (2, 3), ([0, 1], [0, 1])),
    ],
)
def test_tensordot_matches_numpy_and_grads(sa, sb, axes):
    a, b = rand(*sa), rand(*sb)
    out = tnp.tensordot(a, b, axes=axes)
    ref = np.tensordot(a, b, axes=axes)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    check_grads(lambda x, y: tnp.tensordot(x, y, axes=axes), (tg.Tensor(a), tg.Tensor(b)))


def test_tensordot_errors():
    with pytest.raises(ValueError, match=r"tensordot: shape mismatch: a\(2, 3\) axis 1 .* b\(4,"):
        tnp.tensordot(np.ones((2, 3)), np.ones((4, 2)), axes=1)
    with pytest.raises(ValueError, match="tensordot: axes=3"):
        tnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), axes=3)
    with pytest.raises(ValueError, match="tensordot: axis 2 is out of range for a"):
        tnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), axes=([2], [0]))
    with pytest.raises(ValueError, match=r"name 2 axes of a but 1 of b"):
        tnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), axes=([0, 1], [0]))
    with pytest.raises(TypeError, match="tensordot: axes must be an int or a pair"):
        tnp.tensordot(np.ones((2, 3)), np.ones((3, 2)), axes=None)


# -- einsum ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "subscripts, shapes",
    [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("ba", [(2, 3)]),
        ("Ba", [(2, 3)]),
        ("ii->i", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("iij->ji", [(2, 2, 3)]),
        ("i,i", [(3,), (3,)]),
        ("i,j->ij", [(2,), (3,)]),
        ("...ij,...jk->...ik", [(2, 1, 2, 3), (4, 3, 2)]),
        ("i...j,j...->i...", [(2, 1, 3), (3, 5)]),
        ("...", [(2, 3)]),
        ("ij,jk->ik", [(2, 1), (3, 4)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        (",i->i", [(), (3,)]),
        ("ab,ab->", [(0, 3), (0, 3)]),
    ],
)
def test_einsum_matches_numpy_with_grads(subscripts, shapes):
    xs = [rand(*s) for s in shapes]
    out = tnp.einsum(subscripts, *xs)
    ref = np.einsum(subscripts, *xs)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)
    check_grads(lambda *a: tnp.einsum(subscripts, *a), [tg.Tensor(x) for x in xs], order=2)


def test_einsum_sublist_form_and_optimize():
    a, b = rand(2, 3), rand(3, 4)
    out = tnp.einsum(a, [0, 1], b, [1, 27], [27, 0])
    np.testing.assert_allclose(out.numpy(), np.einsum(a, [0, 1], b, [1, 27], [27, 0]))
    imp = tnp.einsum(a, [Ellipsis, 30])
    np.testing.assert_allclose(imp.numpy(), np.einsum(a, [Ellipsis, 30]))
    for opt in (False, True, "greedy", "optimal"):
        c = rand(4, 2)
        out = tnp.einsum("ij,jk,kl->il", a, b, c, optimize=opt)
        np.testing.assert_allclose(out.numpy(), a @ b @ c, rtol=1e-12)

        def f(x, c=c, opt=opt):
            return tnp.einsum("ij,jk,kl->il", x, b, c, optimize=opt).sum()

        g = tg.grad(f)(tg.Tensor(a))
        np.testing.assert_allclose(g.numpy(), np.ones((2, 2)) @ (b @ c).T, rtol=1e-12)


def test_einsum_explicit_path_and_tape():
    a, b, c = rand(2, 3), rand(3, 4), rand(4, 2)
    path = np.einsum_path("ij,jk,kl->il", a, b, c, optimize="optimal")[0]
    out = tnp.einsum("ij,jk,kl->il", a, b, c, optimize=path)
    np.testing.assert_allclose(out.numpy(), a @ b @ c, rtol=1e-12)
    check_grads(
        lambda x, y, z: tnp.einsum("ij,jk,kl->il", x, y, z, optimize=path),
        (tg.Tensor(a), tg.Tensor(b), tg.Tensor(c)),
    )
    _, tape = tg.trace(lambda x: tnp.einsum("...j,jk", x, b))(tg.Tensor(a))
    assert "einsum[subscripts='aj,jk->ak'" in str(tape)
    np.testing.assert_allclose(tape.replay(tg.Tensor(2 * a)).numpy(), 2 * a @ b, rtol=1e-12)


def test_einsum_trace_gradient_is_identity():
    g = tg.grad(lambda a: tnp.einsum("ii", a))(tg.Tensor(rand(3, 3)))
    np.testing.assert_array_equal(g.numpy(), np.eye(3))


def test_einsum_mixed_dtypes_and_int_operand():
    a = np.arange(6).reshape(2, 3)
    b = rand(3).astype(np.float32)
    out = tnp.einsum("ij,j->i", a, b)
    ref = np.einsum("ij,j->i", a, b)
    assert out.dtype == ref.dtype
    g = tg.grad(lambda y: tnp.einsum("ij,j->i", a, y).sum())(tg.Tensor(b))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g.numpy(), a.sum(0), rtol=1e-6)


@pytest.mark.parametrize(
    "subscripts, shapes, match",
    [
        ("ij,jk->ik", [(2, 3), (4, 2)], r"'ij,jk->ik' with operand shapes \(2, 3\), \(4, 2\).*'j'"),
        ("ij,jk->ik", [(2, 3)], r"name 2 operand\(s\) but 1 were given"),
        ("ijk", [(2, 3)], r"operand 0 has 2 dimension\(s\) but its subscripts 'ijk' name 3"),
        ("ij->q", [(2, 3)], r"output label 'q' does not appear"),
        ("ij->ii", [(2, 2)], r"output label 'i' appears more than once"),
        ("i.j", [(2, 2)], r"'.' that is not part of one '...'"),
        ("i1", [(2, 2)], r"invalid label '1'"),
        ("...i->i", [(2, 3)], r"no '...' to hold them"),
        ("ii->i", [(2, 3)], r"label 'i' is repeated in operand 0 with different sizes 2 and 3"),
        ("ij->i->j", [(2, 3)], r"more than one '->'"),
        ("...ijk", [(2, 3)], r"operand 0 has 2 dimension"),
    ],
)
def test_einsum_errors_name_subscripts_and_shapes(subscripts, shapes, match):
    with pytest.raises(ValueError, match=match) as info:
        tnp.einsum(subscripts, *[np.ones(s) for s in shapes])
    assert str(info.value).startswith("einsum: ")


def test_einsum_bad_subscripts_type():
    with pytest.raises(TypeError):
        tnp.einsum(3.5)
    with pytest.raises(ValueError, match="sublist labels"):
        tnp.einsum(np.ones(2), [60])


# -- tnp.linalg -----------------------------------------------------------------------------
def test_linalg_forwards_match_numpy_batched():
    a = spd(3, (2, 1))
    b = rand(4, 3, 2)
    np.testing.assert_allclose(tnp.linalg.inv(a).numpy(), np.linalg.inv(a), rtol=1e-10)
    np.testing.assert_allclose(tnp.linalg.det(a).numpy(), np.linalg.det(a), rtol=1e-10)
    np.testing.assert_allclose(tnp.linalg.solve(a, b).numpy(), np.linalg.solve(a, b), rtol=1e-10)
    v = rand(3)
    np.testing.assert_allclose(tnp.linalg.solve(a, v).numpy(), np.linalg.solve(a, v), rtol=1e-10)
    sign, logabs = tnp.linalg.slogdet(a)
    ref = np.linalg.slogdet(a)
    np.testing.assert_array_equal(sign.numpy(), ref.sign)
    np.testing.assert_allclose(logabs.numpy(), ref.logabsdet, rtol=1e-10)
    for upper in (False, True):
        np.testing.assert_allclose(
            tnp.linalg.cholesky(a, upper=upper).numpy(),
            np.linalg.cholesky(a, upper=upper),
            rtol=1e-10,
        )
    a32 = a.astype(np.float32)
    for f in (tnp.linalg.inv, tnp.linalg.det, tnp.linalg.cholesky):
        assert f(a32).dtype == np.float32
    assert tnp.linalg.inv(np.eye(2, dtype=np.int64)).dtype == np.float64


def test_linalg_size_zero_batch_and_matrix():
    assert tnp.linalg.inv(np.ones((0, 3, 3))).shape == (0, 3, 3)
    assert tnp.linalg.det(np.ones((0, 2, 2))).shape == (0,)
    assert float(tnp.linalg.det(np.ones((0, 0)))) == 1.0
    g = tg.grad(lambda a: tnp.linalg.det(a).sum())(tg.Tensor(np.ones((0, 2, 2))))
    assert g.shape == (0, 2, 2)


def test_singular_matrix_errors_name_the_op():
    z = np.zeros((2, 2))
    with pytest.raises(np.linalg.LinAlgError, match="inv: matrix is singular"):
        tnp.linalg.inv(z)
    with pytest.raises(ValueError, match="solve: matrix is singular"):
        tnp.linalg.solve(z, np.ones(2))
    with pytest.raises(tnp.linalg.LinAlgError, match="cholesky: matrix is not positive definite"):
        tnp.linalg.cholesky(-np.eye(2))
    with pytest.raises(np.linalg.LinAlgError, match="det: the gradient at a singular matrix"):
        tg.grad(tnp.linalg.det)(tg.Tensor(z))
    with pytest.raises(np.linalg.LinAlgError, match="slogdet: the gradient at a singular"):
        tg.grad(lambda a: tnp.linalg.slogdet(a).logabsdet)(tg.Tensor(z))
    assert float(tnp.linalg.det(z)) == 0.0
    assert float(tnp.linalg.slogdet(z).sign) == 0.0


def test_linalg_shape_and_dtype_errors():
    for f in (tnp.linalg.inv, tnp.linalg.det, tnp.linalg.slogdet, tnp.linalg.cholesky):
        with pytest.raises(ValueError, match=r"must be a \(batch of\) square matrices.*\(2, 3\)"):
            f(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"solve: a of shape \(3, 3\) needs b of shape"):
        tnp.linalg.solve(np.eye(3), np.ones(2))
    with pytest.raises(ValueError, match=r"solve: .* got \(3,\)|solve: .*\(2, 3\)"):
        tnp.linalg.solve(np.eye(3), np.ones((2, 3)))
    with pytest.raises(ValueError, match="solve: batch dimensions"):
        tnp.linalg.solve(np.ones((2, 3, 3)), np.ones((3, 3, 1)))
    with pytest.raises(TypeError, match=r"inv: unsupported dtype float16.*needs float32"):
        tnp.linalg.inv(np.eye(2, dtype=np.float16))


def test_slogdet_sign_has_no_gradient_and_log_gradient_is_inverse_transpose():
    a = spd(3) - 6 * np.eye(3)  # may have negative determinant; still invertible
    ta = tg.Tensor(a)
    g_sign = tg.grad(lambda x: tnp.linalg.slogdet(x).sign)(ta)
    np.testing.assert_array_equal(g_sign.numpy(), np.zeros((3, 3)))
    g_log = tg.grad(lambda x: tnp.linalg.slogdet(x).logabsdet)(ta)
    np.testing.assert_allclose(g_log.numpy(), np.linalg.inv(a).T, rtol=1e-10)


def test_det_and_inv_gradients_closed_form():
    a = rand(3, 3) + 3 * np.eye(3)
    g = tg.grad(tnp.linalg.det)(tg.Tensor(a))
    np.testing.assert_allclose(g.numpy(), np.linalg.det(a) * np.linalg.inv(a).T, rtol=1e-10)
    check_grads(tnp.linalg.inv, (tg.Tensor(a),), order=2)
    check_grads(tnp.linalg.det, (tg.Tensor(a),), order=2)


def test_cholesky_gradient_is_symmetric_and_matches_symmetrised_input():
    a = spd(4)
    g = tg.grad(lambda x: (tnp.linalg.cholesky(x) * tg.Tensor(rand(4, 4))).sum())(tg.Tensor(a))
    np.testing.assert_allclose(g.numpy(), g.numpy().T, rtol=1e-12)
    for upper in (False, True):
        check_grads(
            lambda x, up=upper: tnp.linalg.cholesky((x + tnp.swapaxes(x, -1, -2)) / 2, upper=up),
            (tg.Tensor(a),),
            order=2,
        )


def test_cholesky_of_complex_hermitian_matrices_differentiates():
    # the rule was the real one (plain transposes) for complex input too: wrong derivatives
    rng = np.random.default_rng(5)
    r = rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))
    a = r @ np.conj(np.swapaxes(r, -1, -2)) + 3 * np.eye(3)

    def herm(x):
        return (x + tnp.conj(tnp.swapaxes(x, -1, -2))) / 2

    for upper in (False, True):
        check_grads(lambda x, up=upper: tnp.linalg.cholesky(herm(x), upper=up),
                    (tg.Tensor(a),), order=2, modes=("rev", "fwd"))
    g = tg.grad(lambda x: tnp.sum(tnp.abs(tnp.linalg.cholesky(x)) ** 2))(tg.Tensor(a))
    np.testing.assert_allclose(g.numpy(), np.conj(np.swapaxes(g.numpy(), -1, -2)), atol=1e-12)


# -- norm -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape, ord, axis",
    [
        ((5,), None, None),
        ((2, 3, 4), None, None),
        ((5,), 1, None),
        ((5,), 2, None),
        ((5,), np.inf, None),
        ((5,), -np.inf, None),
        ((3, 4), None, 1),
        ((3, 4), 1, 0),
        ((3, 4), "fro", None),
        ((3, 4), 1, None),
        ((3, 4), -1, None),
        ((3, 4), np.inf, None),
        ((3, 4), -np.inf, None),
        ((2, 3, 4), 1, (2, 0)),
        ((2, 3, 4), np.inf, (-1, 1)),
        ((2, 3, 4), "fro", (0, 2)),
    ],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_matches_numpy_with_grads(shape, ord, axis, keepdims):
    x = rand(*shape)
    out = tnp.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    ref = np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    assert out.shape == np.shape(ref) and out.dtype == ref.dtype
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12)
    check_grads(
        lambda t: tnp.linalg.norm(t, ord=ord, axis=axis, keepdims=keepdims),
        (tg.Tensor(x),),
        order=2,
    )


def test_norm_gradient_at_zero_is_zero_not_nan():
    for ord in (None, 1, np.inf):
        g = tg.grad(lambda x, o=ord: tnp.linalg.norm(x, ord=o))(tnp.zeros(3))
        np.testing.assert_array_equal(g.numpy(), np.zeros(3))
    g = tg.grad(lambda x: tnp.linalg.norm(x, axis=1).sum())(tg.Tensor([[0.0, 0.0], [3.0, 4.0]]))
    np.testing.assert_allclose(g.numpy(), [[0.0, 0.0], [0.6, 0.8]], rtol=1e-6)


def test_norm_ties_split_the_gradient():
    g = tg.grad(lambda x: tnp.linalg.norm(x, ord=np.inf))(tg.Tensor([2.0, -2.0, 1.0]))
    np.testing.assert_allclose(g.numpy(), [0.5, -0.5, 0.0])


def test_norm_dtypes_and_errors():
    assert tnp.linalg.norm(np.arange(3)).dtype == np.float64
    assert tnp.linalg.norm(np.ones(3, np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="norm: unsupported vector norm order ord='fro'"):
        tnp.linalg.norm(np.ones(3), "fro")
    with pytest.raises(ValueError, match="norm: unsupported matrix norm order ord=3"):
        tnp.linalg.norm(np.ones((3, 3)), 3)
    with pytest.raises(ValueError, match="norm: ord=-2 takes the smallest singular value"):
        tnp.linalg.norm(np.ones((0, 3)), -2)
    # no singular values: 0.0, as NumPy 2.3+ gives (NumPy 2.2 and older raise here)
    assert float(tnp.linalg.norm(np.ones((0, 3)), 2)) == 0.0
    # every real vector order, as NumPy (this raised before)
    np.testing.assert_allclose(float(tnp.linalg.norm(np.ones(3), 3)), np.linalg.norm(np.ones(3), 3))
    with pytest.raises(ValueError, match=r"axis=None the Tensor must be 1-D or 2-D"):
        tnp.linalg.norm(np.ones((2, 2, 2)), 1)
    with pytest.raises(ValueError, match="norm: axis must be None, an int or a pair"):
        tnp.linalg.norm(np.ones((2, 2, 2)), axis=(0, 1, 2))
    with pytest.raises(ValueError, match="norm: the two axes of a matrix norm must differ"):
        tnp.linalg.norm(np.ones((2, 2)), axis=(0, -2))
    with pytest.raises(ValueError, match="norm: axis 2 is out of range"):
        tnp.linalg.norm(np.ones((2, 2)), axis=2)


def test_second_derivative_of_log_det_is_minus_kron():
    # d^2/dA^2 log det A applied to direction V: -tr(A^{-1} V A^{-1} W) (Giles 2008).
    a = spd(3)
    v, w = rand(3, 3), rand(3, 3)

    def dlogdet_v(x):
        return (tg.grad(lambda y: tnp.linalg.slogdet(y).logabsdet)(x) * tg.Tensor(v)).sum()

    h = tg.grad(dlogdet_v)(tg.Tensor(a))
    ai = np.linalg.inv(a)
    np.testing.assert_allclose((h.numpy() * w).sum(), -np.trace(ai @ w @ ai @ v), rtol=1e-10)


def test_norm_empty_axes_follow_numpy():
    for shape, ord in (((0,), np.inf), ((2, 0), 1), ((0, 2), np.inf), ((0, 2), 1)):
        out = tnp.linalg.norm(np.ones(shape), ord=ord)
        assert float(out) == 0.0  # as NumPy 2.3+ (NumPy 2.2 and older raise for these)
    with pytest.raises(ValueError, match=r"norm: ord=-inf takes a min over axis 0, which is"):
        tnp.linalg.norm(np.ones((0,)), ord=-np.inf)
    with pytest.raises(ValueError, match=r"norm: ord=-1 takes a min over axis 1"):
        tnp.linalg.norm(np.ones((2, 0)), ord=-1)


def test_norm_ord0_and_f_alias():
    x = np.array([[0.0, 2.0, -1.0], [0.0, 0.0, 3.0]])
    for ord, axis in ((0, 1), (0, 0), ("f", None)):
        out = tnp.linalg.norm(x, ord=ord, axis=axis)
        ref = np.linalg.norm(x, ord=ord, axis=axis)
        assert out.dtype == ref.dtype
        np.testing.assert_allclose(out.numpy(), ref)
    g = tg.grad(lambda t: tnp.linalg.norm(t, ord=0, axis=1).sum())(tg.Tensor(x))
    np.testing.assert_array_equal(g.numpy(), np.zeros_like(x))


# -- svd ------------------------------------------------------------------------------------
def test_svd_matches_numpy_and_reconstructs():
    rng = np.random.default_rng(3)
    for shape in [(4, 3), (3, 5), (2, 4, 4), (1, 1)]:
        a = rng.standard_normal(shape)
        for full in (True, False):
            res = tnp.linalg.svd(a, full_matrices=full)
            ref = np.linalg.svd(a, full_matrices=full)
            assert isinstance(res, tnp.linalg.SVDResult)
            for got, want in zip(res, ref):
                assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(res.S.numpy(), ref.S, rtol=1e-12)
        u, s, vh = tnp.linalg.svd(a, full_matrices=False)
        rebuilt = (u.numpy() * s.numpy()[..., None, :]) @ vh.numpy()
        np.testing.assert_allclose(rebuilt, a, atol=1e-12)
        np.testing.assert_allclose(tnp.linalg.svdvals(a).numpy(), np.linalg.svd(a)[1])
        np.testing.assert_allclose(
            tnp.linalg.svd(a, compute_uv=False).numpy(), np.linalg.svd(a, compute_uv=False)
        )
    assert tnp.linalg.svd(np.ones((2, 3), np.float32)).S.dtype == np.float32
    assert tnp.linalg.svd(np.ones((2, 3), np.int64)).S.dtype == np.float64


def test_svdvals_gradient_is_u_vh():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((5, 3))
    w = rng.standard_normal(3)
    g = tg.grad(lambda x: (tnp.linalg.svdvals(x) * w).sum())(tg.Tensor(a))
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(g.numpy(), (u * w) @ vh, atol=1e-12)


def test_svd_vectors_gradients_orders_1_and_2():
    rng = np.random.default_rng(5)
    for shape in [(4, 3), (3, 5), (3, 3)]:
        a = tg.Tensor(rng.standard_normal(shape))
        w = tg.Tensor(rng.standard_normal(shape))

        def f(x, w=w):  # invariant to the singular vectors' signs
            u, s, vh = tnp.linalg.svd(x, full_matrices=False)
            k = s.shape[-1]
            return (
                (tnp.matmul(u * tnp.sin(s), vh) * w).sum()
                + (u * u * tnp.arange(k)).sum()
                + (vh * vh * tnp.arange(k)[:, None]).sum()
            )

        check_grads(f, (a,), order=2, modes=("fwd", "rev"))


def test_svd_repeated_singular_values_norm_gradients_are_finite():
    eye = tg.Tensor(np.eye(3))
    for ord, scale in ((2, 1 / 3), (-2, 1 / 3), ("nuc", 1.0)):
        g = tg.grad(lambda x, o=ord: tnp.linalg.norm(x, o))(eye)
        np.testing.assert_allclose(g.numpy(), scale * np.eye(3), atol=1e-12)  # ties split
    g = tg.grad(lambda x: tnp.linalg.norm(x, "nuc"))(tg.Tensor(np.zeros((3, 2))))
    assert np.all(np.isfinite(g.numpy()))


def test_svd_errors():
    with pytest.raises(ValueError, match=r"svd: a must be a \(batch of\) matrices"):
        tnp.linalg.svd(np.ones(3))
    with pytest.raises(ValueError, match="full_matrices=True is defined only for square"):
        tg.grad(lambda x: tnp.linalg.svd(x).S.sum())(tg.Tensor(np.ones((3, 2))))
    # square full_matrices=True is the reduced decomposition: differentiable
    g = tg.grad(lambda x: tnp.linalg.svd(x).S.sum())(tg.Tensor(np.diag([2.0, -1.0])))
    np.testing.assert_allclose(g.numpy(), np.diag([1.0, -1.0]))
