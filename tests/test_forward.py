"""Forward mode and the derived transforms: jvp, linearize, jacfwd, jacrev, hessian, hvp."""

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.transforms.forward as fwd_mod
from tapegrad import ops
from tapegrad.ops.elementwise import BINARY, UNARY
from tapegrad.testing import check_grads, numerical_jacobian

RNG = np.random.default_rng(1234)


def _t(*shape, low=-1.0, high=1.0):
    return tg.Tensor(RNG.uniform(low, high, size=shape))


# -- the function table (flat float64 vector in) ----------------------------------------------
W1 = RNG.standard_normal((4, 5)) * 0.5
W2 = RNG.standard_normal((5, 3)) * 0.5
LABELS = np.eye(3)[[0, 2]]  # one-hot, batch of 2


def poly(x):
    return tnp.sum(3.0 * x**3 - 2.0 * x * x + x) + tnp.sum(x[:2] * x[1:3])


def tanh_exp_log(x):
    return tnp.sum(tnp.tanh(x) * tnp.exp(0.5 * x) + tnp.log(1.5 + tnp.sin(x)))


def mlp_loss(x):
    # x holds a batch of 2 inputs of size 4 (flattened); a 4-5-3 tanh MLP, squared error.
    h = tnp.tanh(tnp.reshape(x, (2, 4)) @ W1)
    y = h @ W2
    return tnp.mean((y - LABELS) ** 2)


def softmax_xent(x):
    # logits for a batch of 2 over 3 classes; log-softmax written with exp/log/sum.
    z = tnp.reshape(x, (2, 3))
    z = z - tg.stop_gradient(tnp.mean(z, axis=1, keepdims=True))
    logp = z - tnp.log(tnp.sum(tnp.exp(z), axis=1, keepdims=True))
    return -tnp.sum(logp * LABELS) / 2.0


def matrix_fn(x):
    # f(A) = sum(A @ A.T @ A) + sum(tanh(A) @ A.T), A of shape (2, 3)
    a = tnp.reshape(x, (2, 3))
    return tnp.sum(a @ tnp.transpose(a) @ a) + tnp.sum(tnp.tanh(a) @ a.T)


def solve_slogdet(x):
    # f(A) = logabsdet(M) + sum(solve(M, b)) with M = A @ A.T + I well conditioned, A (2, 3)
    a = tnp.reshape(x, (2, 3))
    m = a @ a.T + tg.Tensor(np.eye(2))
    return tnp.linalg.slogdet(m).logabsdet + tnp.sum(
        tnp.linalg.solve(m, tg.Tensor(np.array([1.0, -2.0])))
    )


def vector_fn(x):
    # a vector-valued function (3 outputs) for J @ v checks
    a = tnp.reshape(x, (2, 3))
    return tnp.sum(tnp.exp(a) * a, axis=0) + tnp.sin(a[0]) * a[1]


SCALAR_FNS = [
    (poly, 6),
    (tanh_exp_log, 5),
    (mlp_loss, 8),
    (softmax_xent, 6),
    (matrix_fn, 6),
    (solve_slogdet, 6),
]


@pytest.mark.parametrize(
    "fn,n", SCALAR_FNS + [(vector_fn, 6)], ids=lambda v: getattr(v, "__name__", "")
)
def test_jacfwd_equals_jacrev_and_fd(fn, n):
    x = _t(n)
    jf = tg.jacfwd(fn)(x).numpy()
    jr = tg.jacrev(fn)(x).numpy()
    np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jf, numerical_jacobian(fn, x), rtol=1e-6, atol=1e-7)
    assert jf.dtype == np.float64


@pytest.mark.parametrize(
    "fn,n", SCALAR_FNS + [(vector_fn, 6)], ids=lambda v: getattr(v, "__name__", "")
)
def test_jvp_equals_jacobian_times_v_and_linearize(fn, n):
    x, v = _t(n), _t(n)
    y, t = tg.jvp(fn, (x,), (v,))
    np.testing.assert_allclose(y.numpy(), fn(x).numpy(), rtol=1e-12)
    jac = numerical_jacobian(fn, x)
    np.testing.assert_allclose(t.numpy(), jac @ v.numpy(), rtol=1e-6, atol=1e-7)
    y2, f_jvp = tg.linearize(fn, x)
    np.testing.assert_allclose(y2.numpy(), y.numpy(), rtol=1e-12)
    for v2 in (v, _t(n)):
        np.testing.assert_allclose(
            f_jvp(v2).numpy(), tg.jvp(fn, (x,), (v2,))[1].numpy(), rtol=1e-10, atol=1e-12
        )


@pytest.mark.parametrize("fn,n", SCALAR_FNS, ids=lambda v: getattr(v, "__name__", ""))
def test_hessian_symmetric_matches_fd_of_grad_and_hvp(fn, n):
    x, v = _t(n), _t(n)
    h = tg.hessian(fn)(x).numpy()
    assert h.shape == (n, n)
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-11)
    fd = numerical_jacobian(tg.grad(fn), x)
    np.testing.assert_allclose(h, fd, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(tg.hvp(fn, (x,), (v,)).numpy(), h @ v.numpy(), rtol=1e-9, atol=1e-11)


# -- nested mixes --------------------------------------------------------------------------
def test_jacfwd_of_jacrev_of_vector_function():
    x = _t(6)
    d2 = tg.jacfwd(tg.jacrev(vector_fn))(x).numpy()
    assert d2.shape == (3, 6, 6)
    fd = numerical_jacobian(tg.jacrev(vector_fn), x)
    np.testing.assert_allclose(d2, fd, rtol=1e-6, atol=1e-7)


def test_grad_of_function_calling_jvp():
    v = _t(5)

    def g(x):  # directional derivative of tanh_exp_log along v, as a function of x
        return tg.jvp(tanh_exp_log, (x,), (v,))[1]

    x = _t(5)
    got = tg.grad(g)(x).numpy()
    fd = numerical_jacobian(g, x)
    np.testing.assert_allclose(got, fd, rtol=1e-6, atol=1e-7)
    check_grads(g, (x,), order=2, modes=("fwd", "rev"))


def test_jvp_of_grad_against_fd():
    x, v = _t(8), _t(8)
    _, t = tg.jvp(tg.grad(mlp_loss), (x,), (v,))
    fd = numerical_jacobian(tg.grad(mlp_loss), x) @ v.numpy()
    np.testing.assert_allclose(t.numpy(), fd, rtol=1e-6, atol=1e-8)


def test_vjp_inside_checkpoint_inside_grad():
    def inner(x):  # pulls a fixed cotangent back through vector_fn: J(x)^T u
        _, pull = tg.vjp(vector_fn, x)
        return pull(tg.Tensor(np.array([1.0, -2.0, 0.5])))[0]

    def loss(x):
        return tnp.sum(tg.checkpoint(inner)(x) ** 2)

    x = _t(6)
    got = tg.grad(loss)(x).numpy()
    np.testing.assert_allclose(got, numerical_jacobian(loss, x), rtol=1e-6, atol=1e-7)
    check_grads(loss, (x,), order=2, modes=("fwd", "rev"))


def test_no_perturbation_confusion_in_forward_mode():
    # d/dx [x * d/dy (x + y)] = 1 (a confused implementation gives 2): Siskind & Pearlmutter.
    def f(x):
        return x * tg.jvp(lambda y: x + y, (tg.Tensor(1.0),), (tg.Tensor(1.0),))[1]

    _, t = tg.jvp(f, (tg.Tensor(1.0),), (tg.Tensor(1.0),))
    assert float(t) == 1.0
    assert float(tg.grad(f)(tg.Tensor(1.0))) == 1.0


def test_third_order_mixes_agree():
    x = tg.Tensor(np.float64(0.3))
    th = np.tanh(0.3)
    expected = -2 * (1 - th**2) * (1 - 3 * th**2)

    def d(f):  # forward-mode derivative of a scalar function
        return lambda x: tg.jvp(f, (x,), (tg.Tensor(np.float64(1.0)),))[1]

    for fn in (d(d(d(tnp.tanh))), d(tg.grad(d(tnp.tanh))), tg.grad(d(tg.grad(tnp.tanh)))):
        np.testing.assert_allclose(float(fn(x)), expected, rtol=1e-10)


# -- every rule agrees with the transpose of backward ----------------------------------------
def _scatter(g):
    """ScatterAdd of ``g`` (3, 4) into zeros (5, 4) at rows 1, 1, 3: GetItem's transpose."""
    rows = np.array([1, 1, 3])
    return tg.vjp(lambda z: z[rows], tg.Tensor(np.zeros((5, 4))))[1](g)[0]


def _rule_cases():
    a, b = _t(3, 4), _t(4)
    pos = _t(3, 4, low=0.5, high=2.0)
    m, v = _t(2, 3), _t(3)
    return {
        "Add": (lambda x, y: x + y, (a, b)),
        "Sub": (lambda x, y: x - y, (a, b)),
        "Mul": (lambda x, y: x * y, (a, b)),
        "Div": (lambda x, y: x / y, (a, pos)),
        "Pow": (lambda x, y: x**y, (pos, a)),
        "Neg": (lambda x: -x, (a,)),
        "Exp": (tnp.exp, (a,)),
        "Log": (tnp.log, (pos,)),
        "Sin": (tnp.sin, (a,)),
        "Cos": (tnp.cos, (a,)),
        "Tanh": (tnp.tanh, (a,)),
        "Sqrt": (tnp.sqrt, (pos,)),
        "Abs": (tnp.abs, (a,)),
        "Sign": (tnp.sign, (a,)),
        "StopGradient": (tg.stop_gradient, (a,)),
        "Where": (lambda x, y: tnp.where(x > 0, x, y), (a, b)),
        "Maximum": (tnp.maximum, (a, tnp.where(a > 0.3, a, b))),  # includes ties
        "Minimum": (tnp.minimum, (a, tnp.where(a > 0.3, a, b))),
        "MinMaxGrad": (lambda g: tg.vjp(lambda u: tnp.maximum(u, 0.3), a)[1](g)[0], (a,)),
        "Sum": (lambda x: tnp.sum(x, axis=1, keepdims=True), (a,)),
        "Mean": (lambda x: tnp.mean(x, axis=0), (a,)),
        "Reshape": (lambda x: tnp.reshape(x, (2, 6)), (a,)),
        "Transpose": (lambda x: tnp.transpose(x), (a,)),
        "BroadcastTo": (lambda x: tnp.broadcast_to(x, (2, 3, 4)), (a,)),
        "GetItem": (lambda x: x[np.array([0, 2, 0]), 1:3], (a,)),
        "ScatterAdd": (_scatter, (a,)),
        "Relu": (tg.ops.Relu.apply, (a,)),
        "ReluGrad": (tg.ops.ReluGrad.apply, (a, tg.ops.Relu.apply(a - b))),
        "MulNoNan": (tg.ops.MulNoNan.apply, (tnp.where(a > 0.3, 0.0, a), b)),
        "MatMul": (lambda x, y: x @ y, (m, v)),
        "MatMul (transpose_a, transpose_b)": (
            lambda x, y: tg.ops.MatMul.apply(x, y, transpose_a=True, transpose_b=True),
            (_t(3, 2), a.T)),
        "AsType": (lambda x: tnp.astype(x, np.float32), (a,)),
        "Real": (tnp.real, (a,)),
        "Imag": (lambda x: tnp.imag(x * (1 + 2j)), (a,)),
        "Conj": (tnp.conj, (a,)),
        **_table_cases(),
    }


_UNARY_DOMAINS = {"arccosh": (1.2, 2.0)}


def _table_cases():
    """One case per op of the ufunc table, inside its domain."""
    cases = {}
    for row in UNARY:
        lo, hi = _UNARY_DOMAINS.get(row.name, (0.2, 0.8))
        x = _t(3, 4, low=lo, high=hi)
        cases[getattr(ops, _camel(row.name)).__name__] = (getattr(tnp, row.name), (x,))
    for row in BINARY:
        fn = getattr(tnp, row.name)
        if row.name == "ldexp":
            cases["Ldexp"] = (lambda x: tnp.ldexp(x, np.array(2)), (_t(3, 4),))
            continue
        x, y = _t(3, 4, low=0.5, high=2.0), _t(4, low=0.5, high=2.0)
        cases[getattr(ops, _camel(row.name)).__name__] = (fn, (x, y))
    return cases


def _camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


RULES = [cls for cls in vars(ops).values()
         if isinstance(cls, type) and issubclass(cls, tg.Function) and "jvp" in vars(cls)
         and cls.__name__ not in ("SumGrad", "MinMaxGrad")]  # backward helpers (checked below)


def test_every_rule_has_a_case():
    assert {c.__name__ for c in RULES} <= set(_rule_cases())


@pytest.mark.parametrize("name", sorted(_rule_cases()))
def test_jvp_rule_matches_transposed_backward(name, monkeypatch):
    fn, args = _rule_cases()[name]
    tangents = tuple(_t(*a.shape) for a in args)
    y1, t1 = tg.jvp(fn, args, tangents)
    monkeypatch.setattr(fwd_mod, "_FORCE_TRANSPOSE", True)
    y2, t2 = tg.jvp(fn, args, tangents)
    assert t1.dtype == t2.dtype == y1.dtype
    assert t1.shape == t2.shape == y1.shape
    np.testing.assert_allclose(t1.numpy(), t2.numpy(), rtol=1e-6, atol=1e-7)


def test_ops_without_rule_use_transposed_backward():
    class Cube(tg.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    assert Cube.jvp is None
    x, v = _t(3), _t(3)
    _, t = tg.jvp(lambda x: Cube.apply(x), (x,), (v,))
    np.testing.assert_allclose(t.numpy(), 3 * x.numpy() ** 2 * v.numpy(), rtol=1e-12)
    check_grads(lambda x: Cube.apply(x), (x,), order=2, modes=("fwd", "rev"))


# -- pytrees, argnums, has_aux -------------------------------------------------------------
def test_jvp_pytrees_and_aux():
    p = {"w": _t(2), "b": _t()}
    tp = {"w": _t(2), "b": _t()}

    def f(p, x):
        out = {"y": tnp.sum(p["w"] * x) + p["b"], "z": p["w"] * 2.0}
        return out, "note"

    x = _t(2)
    out, t, aux = tg.jvp(f, (p, x), (tp, tg.Tensor(np.zeros(2))), has_aux=True)
    assert aux == "note"
    assert set(t) == {"y", "z"}
    want = np.sum(tp["w"].numpy() * x.numpy()) + tp["b"].numpy()
    np.testing.assert_allclose(t["y"].numpy(), want)
    np.testing.assert_allclose(t["z"].numpy(), 2 * tp["w"].numpy())


def test_jacobian_pytree_nesting_and_argnums():
    def f(a, b):
        return {"s": tnp.sum(a * b), "v": a * 3.0}

    a, b = _t(2), _t(2)
    for jac in (tg.jacfwd, tg.jacrev):
        j = jac(f, argnums=(0, 1))(a, b)
        assert j["s"][0].shape == (2,) and j["v"][1].shape == (2, 2)
        np.testing.assert_allclose(j["s"][0].numpy(), b.numpy())
        np.testing.assert_allclose(j["v"][0].numpy(), 3 * np.eye(2))
        np.testing.assert_allclose(j["v"][1].numpy(), np.zeros((2, 2)))
        j1, aux = jac(lambda a: (a * a, 7), has_aux=True)(a)
        assert aux == 7 and j1.shape == (2, 2)
    assert tg.jacobian is tg.jacrev


def test_hessian_of_pytree_argument():
    def f(p):
        return tnp.sum(p["a"] ** 2 * p["b"])

    p = {"a": _t(2), "b": _t(2)}
    h = tg.hessian(f)(p)
    np.testing.assert_allclose(h["a"]["a"].numpy(), np.diag(2 * p["b"].numpy()))
    np.testing.assert_allclose(h["a"]["b"].numpy(), np.diag(2 * p["a"].numpy()))
    np.testing.assert_allclose(h["b"]["b"].numpy(), np.zeros((2, 2)))


def test_hvp_several_primals():
    def f(x, y):
        return tnp.sum(x * x * y)

    x, y, tx, ty = _t(3), _t(3), _t(3), _t(3)
    hx, hy = tg.hvp(f, (x, y), (tx, ty))
    np.testing.assert_allclose(hx.numpy(), 2 * y.numpy() * tx.numpy() + 2 * x.numpy() * ty.numpy())
    np.testing.assert_allclose(hy.numpy(), 2 * x.numpy() * tx.numpy())


def test_hvp_rejects_non_scalar_output():
    x = _t(3)
    with pytest.raises(ValueError, match=r"hvp: fun must return a real scalar.*shape \(3,\)"):
        tg.hvp(lambda x: x * x, (x,), (x,))


def _hvp_matmuls(monkeypatch, f, seed, x_shape):
    """The matmuls an hvp of ``f(w1, w2)`` (``w1`` 3x5, ``w2`` 5x2, data of ``x_shape``) forms,
    every product counted (first-order backward products too); checks the hvp against
    ``hessian @ v``."""
    from tapegrad.ops.linalg import MatMul

    calls = []
    fwd = MatMul.forward

    def counting(ctx, a, b, **flags):
        calls.append((a.shape, b.shape, flags))
        return fwd(ctx, a, b, **flags)

    monkeypatch.setattr(MatMul, "forward", staticmethod(counting))
    # route first-order backward products through MatMul.forward too, so that all are counted
    rng = np.random.default_rng(seed)
    x = tg.Tensor(rng.standard_normal(x_shape))
    w1, w2 = tg.Tensor(rng.standard_normal((3, 5))), tg.Tensor(rng.standard_normal((5, 2)))
    v1, v2 = tg.Tensor(rng.standard_normal((3, 5))), tg.Tensor(rng.standard_normal((5, 2)))
    h1, h2 = tg.hvp(lambda a, b: f(x, a, b), (w1, w2), (v1, v2))
    n = len(calls)
    monkeypatch.setattr(MatMul, "forward", staticmethod(fwd))
    hess = tg.hessian(lambda w: f(x, w[:15].reshape(3, 5), w[15:].reshape(5, 2)))(
        tnp.concatenate([w1.ravel(), w2.ravel()])
    ).numpy()
    v = np.concatenate([v1.numpy().ravel(), v2.numpy().ravel()])
    np.testing.assert_allclose(
        np.concatenate([h1.numpy().ravel(), h2.numpy().ravel()]), hess @ v, rtol=1e-9
    )
    return n, calls


def test_hvp_does_only_the_products_it_needs(monkeypatch):
    """Reverse-over-forward on ``sum(tanh(tanh(x @ w1) @ w2))`` with the data ``x`` constant
    forms 11 matmuls: forward, ``x @ w1``, ``x @ v1``, ``h @ w2``, ``dh @ w2``, ``h @ v2``;
    backward, two for ``dh @ w2`` (to ``dh`` and ``w2``), one for ``h @ v2`` (to ``h``), two
    for ``h @ w2`` and one for ``x @ w1`` (to ``w1``). Forward-over-reverse in an eager library
    forms 13: the same 11 plus the primal weight gradients ``h.T @ g`` and ``x.T @ g1``, which
    an hvp throws away. The count pins that none are wasted."""

    def f(x, w1, w2):
        return tnp.sum(tnp.tanh(tnp.tanh(x @ w1) @ w2))

    n, calls = _hvp_matmuls(monkeypatch, f, 1, (4, 3))
    assert n == 11, calls


def test_hvp_skips_what_only_a_relu_mask_carries(monkeypatch):
    """On ``sum(tanh(relu(x @ w1) @ w2))`` the tangent ``dh = ReluGrad(x @ v1, h)`` depends on
    the weights only through the mask ``h > 0`` (``ReluGrad.nondiff_argnums``), so the hvp
    computes no cotangent for it: 10 matmuls (forward ``x @ w1``, ``x @ v1``, ``h @ w2``,
    ``dh @ w2``, ``h @ v2``; backward two for ``h @ w2``, one each for ``dh @ w2`` (to ``w2``),
    ``h @ v2`` (to ``h``) and ``x @ w1`` (to ``w1``)), not 11 with the dead ``g @ w2.T``."""
    from tapegrad.nn.functional import relu

    def f(x, w1, w2):
        return tnp.sum(tnp.tanh(relu(x @ w1) @ w2))

    n, calls = _hvp_matmuls(monkeypatch, f, 2, (6, 3))
    assert n == 10, calls


def test_jacobians_of_size_zero_and_scalar_inputs():
    x = tg.Tensor(np.zeros((0,)))
    assert tg.jacfwd(lambda x: x * 2.0)(x).shape == (0, 0)
    assert tg.jacrev(lambda x: tnp.sum(x))(x).shape == (0,)
    s = tg.Tensor(np.float64(2.0))
    assert float(tg.jacfwd(lambda s: s**3)(s)) == 12.0


def test_linearize_jvp_fn_is_differentiable_and_reusable():
    x = _t(5)
    _, f_jvp = tg.linearize(tanh_exp_log, x)
    # jvp_fn is linear: f_jvp(a u + v) = a f_jvp(u) + f_jvp(v)
    u, v = _t(5), _t(5)
    np.testing.assert_allclose(
        f_jvp(2.0 * u + v).numpy(), 2.0 * f_jvp(u).numpy() + f_jvp(v).numpy(), rtol=1e-12
    )
    # its gradient w.r.t. the tangent is the gradient of the function
    g = tg.grad(lambda t: f_jvp(t))(u)
    np.testing.assert_allclose(g.numpy(), tg.grad(tanh_exp_log)(x).numpy(), rtol=1e-12)


def test_outputs_without_dependence_get_zero_tangents():
    x = _t(2)
    (y, c, k), (ty, tc, tk) = tg.jvp(
        lambda x: (x * 2.0, tg.Tensor(np.ones(3)), tg.Tensor(np.arange(2))), (x,), (x,)
    )
    np.testing.assert_array_equal(tc.numpy(), np.zeros(3))
    assert tk.dtype == k.dtype and not tk.numpy().any()


# -- bad input ----------------------------------------------------------------------------
def test_tangent_structure_mismatch_names_both():
    with pytest.raises(TypeError, match=r"jvp: tangents have pytree structure .* primals have"):
        tg.jvp(lambda p: p["a"], ({"a": _t(2)},), ({"b": _t(2)},))
    with pytest.raises(TypeError, match="tuple or list"):
        tg.jvp(tnp.sin, _t(2), (_t(2),))


def test_tangent_shape_and_dtype_mismatch():
    with pytest.raises(
        ValueError, match=r"tangent 0 has shape \(3,\).*\(2,\)"
    ):
        tg.jvp(tnp.sin, (_t(2),), (_t(3),))
    with pytest.raises(TypeError, match=r"dtype float32, but its primal has dtype float64"):
        tg.jvp(tnp.sin, (_t(2),), (tg.Tensor(np.zeros(2, np.float32)),))
    _, f_jvp = tg.linearize(tnp.sin, _t(2))
    with pytest.raises(ValueError, match="linearize: jvp_fn: tangent"):
        f_jvp(_t(4))


def test_integer_primals_are_a_clear_error():
    with pytest.raises(TypeError, match=r"primals\[0\], which has dtype int64.*only floating"):
        tg.jvp(lambda i: i * 2, (tg.Tensor(np.arange(3)),), (tg.Tensor(np.arange(3)),))
    with pytest.raises(TypeError, match="jacfwd: cannot differentiate with respect to primals"):
        tg.jacfwd(lambda i: i * 2)(tg.Tensor(np.arange(3)))


def test_jacobian_of_non_array_output_is_a_clear_error():
    for jac in (tg.jacfwd, tg.jacrev):
        with pytest.raises(TypeError, match="output leaf .* is a str"):
            jac(lambda x: (x, "label"))(_t(2))
    with pytest.raises(TypeError, match="jacfwd: argnums"):
        tg.jacfwd(tnp.sin, argnums="0")
    with pytest.raises(ValueError, match="jacrev: argnums 3 out of range"):
        tg.jacrev(tnp.sin, argnums=3)(_t(2))


def test_check_grads_fwd_mode_detects_a_wrong_jvp_rule():
    class BadSquare(tg.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 3 * x * t  # wrong

    x = _t(3)
    check_grads(lambda x: BadSquare.apply(x), (x,), order=1, modes=("rev",))
    with pytest.raises(AssertionError, match="forward mode"):
        check_grads(lambda x: BadSquare.apply(x), (x,), order=1, modes=("fwd",))


def test_linearize_checks_python_decisions_on_tangents():
    class SignedScale(tg.Function):
        """Scales by 2; its jvp rule branches on the tangent's sign (a Python decision)."""

        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

        @staticmethod
        def jvp(ctx, t):
            return t * 2.0 if bool(tnp.sum(t) >= 0) else -(-t * 2.0)

    x = _t(3)
    _, f_jvp = tg.linearize(lambda x: SignedScale.apply(x), x)
    ones = tg.Tensor(np.ones(3))
    np.testing.assert_allclose(f_jvp(ones).numpy(), 2 * np.ones(3))
    with pytest.raises(tg.GuardError, match="linearize: jvp_fn: the recording took a Python"):
        f_jvp(-ones)
