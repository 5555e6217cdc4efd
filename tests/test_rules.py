"""Regression tests of primitives' batching, forward-mode and backward rules: each case here
was wrong once (found by property_tests/test_rule_conformance.py, which checks every
primitive's rules against loops), and each is checked against a reference that uses no
batching: Python loops, finite differences or closed forms."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import ops
from tapegrad.nn import functional as F
from tapegrad.scipy import linalg as tsl
from tapegrad.testing import numerical_jacobian

RNG = np.random.default_rng(27)


def distinct(*shape):
    """Values with no ties (the derivative of max/min is unique)."""
    return RNG.permutation(np.arange(np.prod(shape, dtype=int)) * 0.37 - 1.1).reshape(shape)


def loop(f, xs):
    return np.stack([np.asarray(f(tg.Tensor(x)).numpy()) for x in xs])


# -- max/min and friends under vmap, jacrev, jacfwd and hessian ---------------------------------
EXTREMA = {
    "max": tnp.max, "min": tnp.min, "amax": tnp.amax, "amin": tnp.amin,
    "nanmax": tnp.nanmax, "nanmin": tnp.nanmin, "ptp": tnp.ptp,
}
AXES = [(0, False), (1, False), (-1, False), (-2, True), ((0, 1), False), (None, True),
        (1, True), (None, False)]


@pytest.mark.parametrize("name", sorted(EXTREMA))
@pytest.mark.parametrize("shape", [(3, 3), (3, 4)])
@pytest.mark.parametrize("axis, keepdims", AXES)
def test_extrema_jacobians_equal_finite_differences(name, shape, axis, keepdims):
    """The reductions are piecewise linear: with distinct values their Jacobian is exact by
    central differences. (jacrev of max over axis 1 of a 3x3 matrix was all zeros: the
    batching rule of its backward read the example's rank from the cotangent.)"""
    fn = EXTREMA[name]
    x = distinct(*shape)

    def f(v):
        return fn(v, axis=axis, keepdims=keepdims)

    want = numerical_jacobian(f, x)
    np.testing.assert_allclose(tg.jacrev(f)(tg.Tensor(x)).numpy(), want, atol=1e-8)
    np.testing.assert_allclose(tg.jacfwd(f)(tg.Tensor(x)).numpy(), want, atol=1e-8)
    h = tg.hessian(lambda v: tnp.sum(f(v) ** 2))(tg.Tensor(x)).numpy()
    np.testing.assert_allclose(h, numerical_jacobian(lambda v: tg.grad(
        lambda u: tnp.sum(f(u) ** 2))(v), x).reshape(h.shape), atol=1e-6)


@pytest.mark.parametrize("name", sorted(EXTREMA))
@pytest.mark.parametrize("axis", [-1, 0, 1, (0, 1), None])
def test_vmap_grad_of_extrema_equals_the_loop(name, axis):
    fn = EXTREMA[name]
    xs = np.stack([distinct(3, 3) for _ in range(4)])
    w = tnp.arange(1.0, 4.0) if axis in (-1, 0, 1) else 1.0
    g = tg.grad(lambda m: tnp.sum(fn(m, axis=axis) * w))
    np.testing.assert_allclose(tg.vmap(g)(tg.Tensor(xs)).numpy(), loop(g, xs), atol=1e-12)


def test_the_reported_extremum_cases():
    m = tg.Tensor(distinct(3, 3))
    jac = tg.jacrev(lambda v: tnp.max(v, axis=1))(m).numpy()
    assert jac.sum() == 3.0 and set(np.unique(jac)) == {0.0, 1.0}
    hess = tg.hessian(lambda v: tnp.sum(tnp.max(v, axis=1) ** 2))(m).numpy()
    assert np.count_nonzero(hess) == 3
    assert tg.hessian(tnp.min)(tg.Tensor(distinct(3, 4))).shape == (3, 4, 3, 4)


def test_reductions_applied_without_axis_batch_over_every_axis():
    """``Min.apply(x)`` leaves ``axis`` at its default (None, every axis): the batching rule
    must use that default, not reduce the batch axis with the rest."""
    xs = distinct(2, 3, 4)
    for cls in (ops.Min, ops.Max, ops.Sum, ops.Mean, ops.Prod, ops.LogSumExp):
        got = tg.vmap(lambda v, c=cls: c.apply(v))(tg.Tensor(xs)).numpy()
        np.testing.assert_allclose(got, loop(lambda v, c=cls: c.apply(v), xs), rtol=1e-12)


# -- vmap(grad) through ops that mark outputs non-differentiable -----------------------------
@pytest.mark.parametrize("f", [
    lambda x, y: tnp.sum(tnp.maximum(x, y) ** 2),
    lambda x, y: tnp.sum(tnp.minimum(x, y) ** 2),
    lambda x, y: tnp.linalg.slogdet(x + 3 * tnp.eye(3)).logabsdet * tnp.sum(y),
], ids=["maximum", "minimum", "slogdet"])
def test_vmap_grad_through_ops_with_non_differentiable_outputs(f):
    xs, ys = RNG.standard_normal((4, 3, 3)), RNG.standard_normal((4, 3, 3))
    g = tg.grad(f, argnums=(0, 1))
    got = tg.vmap(g)(tg.Tensor(xs), tg.Tensor(ys))
    for k in range(2):
        want = np.stack([g(tg.Tensor(x), tg.Tensor(y))[k].numpy() for x, y in zip(xs, ys)])
        np.testing.assert_allclose(got[k].numpy(), want, rtol=1e-12)


# -- no axis wraps around inside vmap --------------------------------------------------------
OUT_OF_RANGE = {
    "sum": lambda v: tnp.sum(v, axis=2),
    "max keepdims": lambda v: tnp.max(v, axis=-3, keepdims=True),
    "argmax": lambda v: ops.ArgMax.apply(v, axis=2),
    "cumsum": lambda v: ops.CumSum.apply(v, axis=2),
    "softmax": lambda v: F.Softmax.apply(v, axis=2),
    "log_softmax": lambda v: F.LogSoftmax.apply(v, axis=-3),
    "transpose": lambda v: ops.Transpose.apply(v, axes=(0, 2)),
    "concatenate": lambda v: ops.Concatenate.apply(v, v, axis=2),
    "rfft": lambda v: ops.Rfft.apply(v, axis=2),
    "flip": lambda v: ops.Flip.apply(v, axis=(2,)),
    "argsort": lambda v: ops.ArgSort.apply(v, axis=-3),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_an_axis_out_of_range_raises_inside_vmap_as_outside(name):
    """Inside vmap an example's axis 2 of a 2-d example used to wrap around (to axis 0),
    computing a different function silently; it raises, as it does on one example."""
    f = OUT_OF_RANGE[name]
    xs = tg.Tensor(RNG.standard_normal((5, 3, 4)))
    with pytest.raises(ValueError, match="out of (range|bounds)|permutation"):
        f(xs[0])
    with pytest.raises(ValueError, match="out of (range|bounds)|permutation"):
        tg.vmap(f)(xs)


def test_shift_axes_names_the_op_axis_and_rank():
    from tapegrad.ops._batching import shift_axes

    assert shift_axes(-1, 2) == 2 and shift_axes((0, -2), 3) == (1, 2)
    assert shift_axes(None, 2) == (1, 2)
    with pytest.raises(ValueError, match=r"sum: axis 2 is out of range .* ndim 2"):
        shift_axes(2, 2, "sum")
    with pytest.raises(IndexError):  # NumPy's AxisError is both
        shift_axes((0, -3), 2, "max")


# -- elementwise backward rules whose output has the cotangent's shape -----------------------
CONSTANT_DERIVATIVES = {
    "positive": lambda x, y: tnp.positive(x) * y,
    "deg2rad": lambda x, y: tnp.deg2rad(x) * y,
    "rad2deg": lambda x, y: tnp.rad2deg(x) * y,
    "remainder": lambda x, y: tnp.remainder(x, y + 2.0),
    "fmod": lambda x, y: tnp.fmod(x, y + 2.0),
    "heaviside": lambda x, y: tnp.heaviside(x, y),
    "nextafter": lambda x, y: tnp.nextafter(x, y) * y,
}


@pytest.mark.parametrize("name", sorted(CONSTANT_DERIVATIVES))
def test_vmap_grad_of_ops_with_a_constant_derivative(name):
    """``g * f'(x)`` with a constant ``f'`` has the cotangent's shape, not the batch's: the
    batch must still reach the output (vmap(grad) raised a shape error or lost the batch)."""
    f = CONSTANT_DERIVATIVES[name]
    xs = RNG.uniform(0.5, 1.5, (4, 3, 2))
    y = tg.Tensor(RNG.uniform(0.5, 1.5, (2,)))
    for argnums in (0, 1):
        g = tg.grad(lambda x, y: tnp.sum(f(x, y) * tnp.arange(1.0, 3.0)), argnums=argnums)
        got = tg.vmap(g, in_axes=(0, None))(tg.Tensor(xs), y).numpy()
        want = np.stack([g(tg.Tensor(x), y).numpy() for x in xs])
        np.testing.assert_allclose(got, want, rtol=1e-12)


# -- indexing ----------------------------------------------------------------------------------
def test_vmap_grad_of_scatter_multiply_with_per_example_repeated_indices():
    """The product of the other writes at an element (the gradient of x.at[idx].multiply(v)
    in v) used an op with a data-dependent size, which had no batching rule."""
    idx = np.array([[0, 2, 0, 1, 0], [3, 3, 1, 1, 2], [2, 2, 2, 2, 0]])
    vs = RNG.uniform(0.5, 1.5, (3, 5))
    x = tg.Tensor(RNG.uniform(0.5, 1.5, 4))

    def f(v, i):
        return tnp.sum(x.at[i].multiply(v) * tnp.arange(1.0, 5.0))

    g = tg.grad(f)
    got = tg.vmap(g)(tg.Tensor(vs), tg.Tensor(idx)).numpy()
    want = np.stack([g(tg.Tensor(v), tg.Tensor(i)).numpy() for v, i in zip(vs, idx)])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    for v, i, row in zip(vs, idx, got):  # closed form: w[p] x[p] prod(other writes at p)
        for j in range(5):
            p = i[j]
            others = np.prod([v[k] for k in range(5) if k != j and i[k] == p])
            np.testing.assert_allclose(row[j], (p + 1.0) * x.numpy()[p] * others, rtol=1e-12)


def test_vmap_of_boolean_masks_that_select_equally_many():
    xs = RNG.standard_normal((3, 5))
    masks = np.array([[1, 0, 1, 0, 0], [0, 0, 1, 1, 0], [1, 1, 0, 0, 0]], bool)
    got = tg.vmap(lambda x, m: x[m] * 2.0)(tg.Tensor(xs), tg.Tensor(masks)).numpy()
    np.testing.assert_array_equal(got, np.stack([x[m] * 2.0 for x, m in zip(xs, masks)]))
    g = tg.vmap(tg.grad(lambda x, m: tnp.sum(x[m] ** 2)))(tg.Tensor(xs), tg.Tensor(masks))
    np.testing.assert_allclose(g.numpy(), 2 * xs * masks)
    masks[0, 3] = True  # now the examples select different numbers
    with pytest.raises(ValueError, match="different number of elements"):
        tg.vmap(lambda x, m: x[m])(tg.Tensor(xs), tg.Tensor(masks))


def test_duplicate_pairs_under_vmap_stacks_or_refuses():
    ids = np.array([[0, 1, 0], [2, 2, 1]])
    j, k = tg.vmap(lambda i: ops.DuplicatePairs.apply(i))(tg.Tensor(ids))
    for row, (jj, kk) in zip(ids, zip(j.numpy(), k.numpy())):
        pairs = {(a, b) for a in range(3) for b in range(3) if a != b and row[a] == row[b]}
        assert set(zip(jj.tolist(), kk.tolist())) == pairs
    with pytest.raises(ValueError, match="different numbers of pairs"):
        tg.vmap(lambda i: ops.DuplicatePairs.apply(i))(tg.Tensor(np.array([[0, 0], [0, 1]])))


# -- primitives whose parameters the public function restricts ---------------------------------
def test_qr_primitive_takes_only_reduced_or_complete():
    """mode='r' belongs to the public qr (it maps it to 'reduced'); the primitive refuses it
    instead of unpacking R's rows as (Q, R) under vmap."""
    a = RNG.standard_normal((2, 4, 3))
    with pytest.raises(ValueError, match="mode 'reduced' or 'complete'"):
        ops.Qr.apply(tg.Tensor(a[0]), mode="r")
    with pytest.raises(ValueError, match="mode 'reduced' or 'complete'"):
        tg.vmap(lambda x: ops.Qr.apply(x, mode="r"))(tg.Tensor(a))


def test_solve_triangular_primitive_takes_trans_0_or_1():
    a = np.triu(RNG.standard_normal((3, 3))) + 3 * np.eye(3)
    with pytest.raises(ValueError, match="trans 0 or 1"):
        tsl.SolveTriangular.apply(tg.Tensor(a), tg.Tensor(np.ones(3)), trans=2)


def test_scipy_cholesky_primitive_rules_agree_for_any_tangent():
    """Forward mode took the tangent as given, reverse mode gave a Hermitian cotangent: for a
    non-symmetric direction the two Jacobians disagreed."""
    m = RNG.standard_normal((3, 3))
    a = tg.Tensor(m @ m.T + 3 * np.eye(3))
    for lower in (False, True):
        def f(x, lo=lower):
            return tsl.CholeskyFactor.apply(x, lower=lo)

        np.testing.assert_allclose(tg.jacfwd(f)(a).numpy(), tg.jacrev(f)(a).numpy(), atol=1e-10)
        np.testing.assert_allclose(tg.jacrev(f)(a).numpy(), numerical_jacobian(f, a), atol=1e-6)


def test_linear_primitive_checks_its_contract_also_per_example():
    w, b = tg.Tensor(np.ones((4, 2))), tg.Tensor(np.ones(2))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        F.Linear.apply(tg.Tensor(np.ones(4)), w, b)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        tg.vmap(lambda x: F.Linear.apply(x, w, b))(tg.Tensor(np.ones((3, 4))))


def test_forward_errors_of_numpy_exception_types_keep_their_kind():
    """NumPy's casting error cannot be built from a message alone: the explained error is a
    TypeError naming the op, not a TypeError about the exception's constructor."""

    class CastInto(tg.Function):
        @staticmethod
        def forward(ctx, x):
            out = np.zeros(x.shape, np.int64)
            np.add(x, 1.5, out=out)  # float into int: UFuncOutputCastingError
            return out

    with pytest.raises(TypeError, match=r"^castinto: Cannot cast ufunc 'add' output"):
        CastInto.apply(tg.Tensor(np.ones(2)))


# -- checkpoint policies under vmap(grad) -----------------------------------------------------
@pytest.mark.parametrize("policy", [{"save_only": {"sin"}}, {"save_only": {"sin", "mul"}},
                                    {"budget_bytes": 64}, {}])
def test_vmap_grad_of_a_checkpoint_whose_kept_residual_is_shared(policy):
    """With ``x`` shared and ``y`` batched, ``sin(x)`` (kept by the policy) is one value for
    every example: it came out of the batched call without a batch axis, and the gradient had
    x's shape instead of y's."""

    def body(x, y):
        return tnp.sin(x) * y + tnp.sum(x * x, axis=-1, keepdims=True)

    f = tg.checkpoint(body, **policy)
    x, ys = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal((2, 4)))
    for argnums in (0, 1):
        g = tg.grad(lambda x, y: tnp.sum(f(x, y) ** 2), argnums=argnums)
        want = np.stack([tg.grad(lambda x, y: tnp.sum(body(x, y) ** 2), argnums=argnums)(
            x, y).numpy() for y in ys])
        np.testing.assert_allclose(tg.vmap(g, in_axes=(None, 0))(x, ys).numpy(), want,
                                   rtol=1e-12)
