"""vmap: semantics (in_axes/out_axes/axis_size), errors, the per-example fallback, user rules,
and composition with every transform in both nesting orders."""

import re
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.testing import check_vmap

rng = np.random.default_rng(0)
W = tg.Tensor(rng.standard_normal((3, 2)))
X = tg.Tensor(rng.standard_normal((4, 3)))
Y = tg.Tensor(rng.standard_normal((4, 2)))


def loss(w, x, y):
    return tnp.sum((tnp.tanh(x @ w) - y) ** 2)


def stack(fn, n, *args_axes):
    """The loop vmap stands for: ``fn`` on each example, stacked (NumPy)."""
    rows = []
    for i in range(n):
        rows.append(fn(*[a[i] if ax == 0 else a for a, ax in args_axes]))
    return np.stack([np.asarray(r.numpy()) for r in rows])


def test_docstring_example_and_function_metadata():
    def f(x):
        """Doc."""
        return tnp.sum(x * x)

    v = tg.vmap(f)
    assert v.__name__ == "vmap_f" and v.__doc__ == "Doc."
    np.testing.assert_allclose(v(X).numpy(), (X.numpy() ** 2).sum(1))


def test_batched_values_show_one_example_inside():
    seen = {}

    def f(x):
        seen["shape"], seen["ndim"], seen["len"] = x.shape, x.ndim, len(x)
        seen["repr"] = repr(x)
        return x

    tg.vmap(f)(X)
    assert seen["shape"] == (3,) and seen["ndim"] == 1 and seen["len"] == 3
    assert "batched over 4 examples" in seen["repr"]


def test_in_axes_none_negative_and_out_axes():
    got = tg.vmap(lambda w, x: x @ w, in_axes=(None, -2), out_axes=1)(W, X.T.T)
    np.testing.assert_allclose(got.numpy(), (X.numpy() @ W.numpy()).T)
    got = tg.vmap(lambda x: x * 2.0, in_axes=1, out_axes=-1)(X)
    np.testing.assert_allclose(got.numpy(), X.numpy() * 2)


def test_in_axes_pytree_prefix_and_kwargs():
    params = {"w": W, "b": tg.Tensor(np.ones(2))}

    def f(p, x, scale=1.0):
        return (x @ p["w"] + p["b"]) * scale

    got = tg.vmap(f, in_axes=({"w": None, "b": None}, 0))(params, X, scale=tg.Tensor(
        np.arange(4.0)))
    want = (X.numpy() @ W.numpy() + 1) * np.arange(4.0)[:, None]
    np.testing.assert_allclose(got.numpy(), want)
    got = tg.vmap(f, in_axes=(None, 0))(params, X)
    np.testing.assert_allclose(got.numpy(), X.numpy() @ W.numpy() + 1)


def test_out_axes_pytree_and_unbatched_outputs():
    def f(x):
        return {"y": x * 2, "c": tnp.ones(2)}

    out = tg.vmap(f, out_axes={"y": 1, "c": None})(X)
    assert out["y"].shape == (3, 4) and out["c"].shape == (2,)
    out = tg.vmap(f)(X)
    assert out["c"].shape == (4, 2)  # an output that ignores the batch is broadcast


def test_axis_size_when_nothing_is_batched():
    out = tg.vmap(lambda w: w * 2, in_axes=None, axis_size=5)(W)
    assert out.shape == (5, 3, 2)
    np.testing.assert_allclose(out.numpy()[3], W.numpy() * 2)


def test_empty_batch():
    out = tg.vmap(lambda x: tnp.sum(tnp.tanh(x @ W)))(X[:0])
    assert out.shape == (0,)


@pytest.mark.parametrize("call, match", [
    (lambda: tg.vmap(lambda x, y: x + y)(X, Y[:3]), r"leaf 0: 4, leaf 1: 3"),
    (lambda: tg.vmap(lambda x: x, in_axes=(0, 0))(X), "in_axes has 2 entries for 1"),
    (lambda: tg.vmap(lambda x: x, in_axes=2)(X), "out of range.*shape \\(4, 3\\)"),
    (lambda: tg.vmap(lambda x: x)(tg.Tensor(1.0)), "0-d"),
    (lambda: tg.vmap(lambda w: w, in_axes=None)(W), "axis_size"),
    (lambda: tg.vmap(lambda x: x, out_axes=None)(X), "depends on the batch"),
    (lambda: tg.vmap(lambda p: p, in_axes=({"a": 0},))({"b": X}), "does not match"),
])
def test_clear_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_callable_is_rejected():
    with pytest.raises(TypeError, match="callable"):
        tg.vmap(3)


@pytest.mark.parametrize("decide", [
    lambda x: bool(tnp.sum(x) > 0),
    lambda x: float(tnp.sum(x)),
    lambda x: tnp.sum(x).item(),
    lambda x: x.numpy(),
])
def test_python_decisions_on_batched_values_point_to_where(decide):
    with pytest.raises(TypeError, match="vmap"):
        tg.vmap(decide)(X)
    with pytest.raises(TypeError, match="vmap|differentiating"):  # also under grad in vmap
        tg.vmap(tg.grad(lambda x: tnp.sum(x) + 0 * decide(tg.stop_gradient(x))))(X)


def test_decisions_on_unbatched_values_are_fine():
    def f(x, w):
        return x * 2 if float(tnp.sum(w)) > -100 else x

    tg.vmap(f, in_axes=(0, None))(X, W)


class Square(tg.Function):
    """A user's op with no batching rule."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class SquareWithRule(Square):
    calls = 0

    @staticmethod
    def batch(args, batched, size):
        SquareWithRule.calls += 1
        return SquareWithRule.apply(args[0])


class StashesArrays(tg.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.two_x = 2 * x  # an array in ctx: one example's under vmap
        return x * x

    @staticmethod
    def backward(ctx, g):
        return g * tg.Tensor(ctx.two_x)


def test_an_op_without_a_rule_loops_with_one_warning_and_is_right():
    with pytest.warns(UserWarning, match="Square .* no batching rule"):
        out = tg.vmap(lambda x: Square.apply(x))(X)
    np.testing.assert_allclose(out.numpy(), X.numpy() ** 2)
    with pytest.warns(UserWarning, match="Square"):
        g = tg.vmap(tg.grad(lambda x: tnp.sum(Square.apply(x))))(X)
    np.testing.assert_allclose(g.numpy(), 2 * X.numpy())


def test_a_user_rule_is_used():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = tg.vmap(lambda x: SquareWithRule.apply(x))(X)
    assert SquareWithRule.calls == 1
    np.testing.assert_allclose(out.numpy(), X.numpy() ** 2)


def test_arrays_stashed_in_ctx_are_refused_under_vmap_of_grad():
    with pytest.raises(NotImplementedError, match="save_for_backward"), pytest.warns(
            UserWarning, match="no batching rule"):
        tg.vmap(tg.grad(lambda x: tnp.sum(StashesArrays.apply(x))))(X)


# -- composition, both nesting orders --------------------------------------------------------
def test_vmap_of_grad_is_per_example_gradients():
    got = tg.vmap(tg.grad(loss), in_axes=(None, 0, 0))(W, X, Y)
    want = stack(tg.grad(loss), 4, (W, None), (X, 0), (Y, 0))
    np.testing.assert_allclose(got.numpy(), want)


def test_grad_of_vmap_is_the_gradient_of_the_sum():
    got = tg.grad(lambda w: tnp.sum(tg.vmap(loss, in_axes=(None, 0, 0))(w, X, Y)))(W)
    want = tg.grad(lambda w: loss(w, X, Y))(W)
    np.testing.assert_allclose(got.numpy(), want.numpy())


def test_per_example_gradients_wrt_batched_parameters_ensembles():
    ws = tg.Tensor(rng.standard_normal((5, 3, 2)))
    got = tg.vmap(tg.grad(loss), in_axes=(0, None, None))(ws, X, Y)
    want = stack(lambda w: tg.grad(loss)(w, X, Y), 5, (ws, 0))
    np.testing.assert_allclose(got.numpy(), want)


def test_vmap_and_jvp_both_orders():
    t = tg.Tensor(np.ones(3))
    f = lambda x: tnp.sum(tnp.sin(x @ W))  # noqa: E731
    got = tg.vmap(lambda x: tg.jvp(f, (x,), (t,))[1])(X)
    want = stack(lambda x: tg.jvp(f, (x,), (t,))[1], 4, (X, 0))
    np.testing.assert_allclose(got.numpy(), want)
    got = tg.jvp(tg.vmap(f), (X,), (tg.Tensor(np.ones((4, 3))),))[1]
    np.testing.assert_allclose(got.numpy(), want)


def test_vmap_of_vmap_and_vjp():
    got = tg.vmap(tg.vmap(lambda a, b: a * b, in_axes=(0, None)), in_axes=(None, 0))(X[0], X)
    np.testing.assert_allclose(got.numpy(), X.numpy()[:, None, :] * X.numpy()[0][None, :, None])
    out, vjp_fn = tg.vjp(tg.vmap(lambda x: tnp.tanh(x @ W)), X)
    (ct,) = vjp_fn(tg.Tensor(np.ones((4, 2))))
    want = tg.grad(lambda x: tnp.sum(tnp.tanh(x @ W)))(X)
    np.testing.assert_allclose(ct.numpy(), want.numpy())


def test_vmap_and_jit_both_orders():
    want = stack(tg.grad(loss), 4, (W, None), (X, 0), (Y, 0))
    jitted = tg.jit(tg.vmap(tg.grad(loss), in_axes=(None, 0, 0)))
    np.testing.assert_allclose(jitted(W, X, Y).numpy(), want)
    np.testing.assert_allclose(jitted(W, X, Y).numpy(), want)  # the cached program
    got = tg.vmap(tg.jit(tg.grad(loss)), in_axes=(None, 0, 0))(W, X, Y)
    np.testing.assert_allclose(got.numpy(), want)


def test_vmap_and_checkpoint_both_orders():
    f = lambda x: tnp.sum(tnp.tanh(x @ W) ** 2)  # noqa: E731
    want = stack(tg.grad(f), 4, (X, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # checkpoint has a batching rule
        got = tg.vmap(tg.grad(tg.checkpoint(f)))(X)
        np.testing.assert_allclose(got.numpy(), want)
        got = tg.grad(lambda X: tnp.sum(tg.vmap(tg.checkpoint(f))(X)))(X)
    np.testing.assert_allclose(got.numpy(), want)


def test_vmap_of_hessian_and_hessian_of_vmap():
    f = lambda x: tnp.sum(tnp.tanh(x @ W) ** 2)  # noqa: E731
    want = stack(tg.hessian(f), 4, (X, 0))
    np.testing.assert_allclose(tg.vmap(tg.hessian(f))(X).numpy(), want)
    h = tg.hessian(lambda X: tnp.sum(tg.vmap(f)(X)))(X).numpy()  # (4, 3, 4, 3), block-diagonal
    for i in range(4):
        np.testing.assert_allclose(h[i, :, i, :], want[i])


@tg.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (tnp.clip(g, -0.1, 0.1),))


def test_custom_vjp_keeps_its_rule_under_vmap_in_both_orders():
    f = lambda x: tnp.sum(clip_gradient(x) * 3.0)  # noqa: E731
    per = tg.vmap(tg.grad(f))(X)
    np.testing.assert_allclose(per.numpy(), np.full((4, 3), 0.1))
    g = tg.grad(lambda X: tnp.sum(tg.vmap(f)(X)))(X)
    np.testing.assert_allclose(g.numpy(), np.full((4, 3), 0.1))


def test_random_draws_per_example_keys():
    keys = tnp.stack(tg.random.split(tg.random.key(0), 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = tg.vmap(lambda k: tg.random.normal(k, (2,)))(keys)
    want = np.stack([tg.random.normal(k, (2,)).numpy() for k in tg.random.split(
        tg.random.key(0), 4)])
    np.testing.assert_allclose(got.numpy(), want)


def test_jacobians_run_through_vmap_not_a_loop():
    f = lambda x: tnp.tanh(W.T @ x) * tnp.sum(x)  # noqa: E731
    x = X[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jr, jf = tg.jacrev(f)(x), tg.jacfwd(f)(x)
    from tapegrad.testing import numerical_jacobian

    num = numerical_jacobian(f, x)
    np.testing.assert_allclose(jr.numpy(), num, atol=1e-6)
    np.testing.assert_allclose(jf.numpy(), num, atol=1e-6)


def test_check_vmap_catches_a_wrong_rule():
    class WrongRule(Square):
        @staticmethod
        def batch(args, batched, size):
            return Square.apply(args[0][::-1])  # examples in the wrong order

    check_vmap(lambda x: SquareWithRule.apply(x), (X,))
    with pytest.raises(AssertionError, match="differs from the loop"):
        check_vmap(lambda x: WrongRule.apply(x), (X,))
    with pytest.raises(AssertionError, match="no batching rule"):
        check_vmap(lambda x: Square.apply(x), (X,))


def test_check_vmap_on_an_empty_batch_of_matrices_to_solve():
    # the stand-in example for an empty batch was all zeros: a singular matrix, so check_vmap
    # raised LinAlgError for any solve instead of comparing shapes and dtypes
    a, b = tg.Tensor(np.zeros((0, 3, 3))), tg.Tensor(np.zeros((0, 3, 2)))
    check_vmap(tnp.linalg.solve, (a, b))
    check_vmap(tnp.linalg.inv, (a,))
    check_vmap(lambda v: tnp.log(v), (tg.Tensor(np.zeros((0, 4))),))


def test_elementwise_grad_is_the_per_element_derivative():
    x = tg.Tensor(np.linspace(-2, 2, 7))
    for f in (tnp.tanh, lambda x: x ** 3 - tnp.sin(x), lambda x: tnp.exp(-x * x)):
        got = tg.elementwise_grad(f)(x)
        np.testing.assert_allclose(got.numpy(), tg.vmap(tg.grad(f))(x).numpy())
    a, b = tg.elementwise_grad(lambda a, b: a * b, argnums=(0, 1))(x, 2 * x)
    np.testing.assert_allclose(a.numpy(), 2 * x.numpy())
    np.testing.assert_allclose(b.numpy(), x.numpy())
    # autograd's contract beyond elementwise functions: the Jacobian's column sums
    y = tg.Tensor(np.linspace(0.5, 2, 4))
    got = tg.elementwise_grad(lambda y: y * tnp.sum(y))(y)
    np.testing.assert_allclose(got.numpy(), np.full(4, 2 * y.numpy().sum()))
    with pytest.raises(TypeError, match="elementwise_grad"):
        tg.elementwise_grad(lambda x: {"a": x})(x)


# -- argument checks: in_axes, out_axes, axis_size ---------------------------------------------
def test_out_axes_out_of_range_for_the_output_rank_is_an_error():
    xs = tg.Tensor(np.arange(6.0).reshape(2, 3))
    outer = lambda x: x[:, None] * x  # noqa: E731  (rank 2 per example: rank 3 batched)
    # out_axes=3 on a rank-2 result wrapped to axis 1; out_axes=1 on a 0-d result was ignored
    for fn, ax, rank in ((outer, 3, 2), (outer, -4, 2), (lambda x: x.sum(), 1, 0),
                         (lambda x: x.sum(), -2, 0), (lambda x: tg.Tensor(np.ones(3)), 2, 1)):
        with pytest.raises(ValueError, match=rf"out_axes {ax} is out of range for output leaf "
                                             rf"0.* rank {rank}.*\[{-(rank + 1)}, {rank}\]"):
            tg.vmap(fn, out_axes=ax)(xs)
    # every axis in range puts the batch there
    full = np.stack([np.outer(r, r) for r in xs.numpy()])
    for ax in range(-3, 3):
        np.testing.assert_array_equal(tg.vmap(outer, out_axes=ax)(xs).numpy(),
                                      np.moveaxis(full, 0, ax))
    np.testing.assert_array_equal(tg.vmap(lambda x: x.sum(), out_axes=-1)(xs).numpy(),
                                  xs.numpy().sum(1))
    with pytest.raises(ValueError, match=r"out_axes 2 is out of range for output leaf 1"):
        tg.vmap(lambda x: (x, x.sum()), out_axes=(0, 2))(xs)


def test_axis_size_must_match_the_batch():
    # axis_size=5 with a batch of 3 ran with 3
    with pytest.raises(ValueError, match=r"axis_size is 5, but the batched arguments have "
                                         r"batch size 3 \(leaf 0: 3\)"):
        tg.vmap(lambda x: x, axis_size=5)(tg.Tensor(np.ones(3)))
    assert tg.vmap(lambda x: x, axis_size=3)(tg.Tensor(np.ones(3))).shape == (3,)
    assert tg.vmap(lambda: tg.Tensor(1.0), axis_size=np.int64(4))().shape == (4,)
    for bad, err in (("3", TypeError), (2.0, TypeError), (True, TypeError), (-1, ValueError)):
        with pytest.raises(err, match="axis_size"):
            tg.vmap(lambda x: x, in_axes=None, axis_size=bad)(tg.Tensor(1.0))


def test_in_axes_and_out_axes_leaves_must_be_ints_or_none():
    xs = tg.Tensor(np.ones((2, 3)))
    # in_axes="a" failed with a bare "'<=' not supported"
    cases = [  # in_axes, arguments, the bad leaf as shown, where it is
        ("a", (xs,), "'a' (str)", ""),
        (1.0, (xs,), "1.0 (float)", ""),
        (True, (xs,), "True (bool)", ""),
        ((0, "b"), (xs, xs), "'b' (str)", " at in_axes[1]"),
        (({"w": 0.5},), ({"w": xs},), "0.5 (float)", " at in_axes[0]['w']"),
    ]
    for in_axes, args, shown, where in cases:
        with pytest.raises(TypeError, match=re.escape(
                f"in_axes must be an int, None, or a pytree prefix of the positional arguments "
                f"with ints and None as leaves; got {shown}{where}")):
            tg.vmap(lambda *a: a[0], in_axes=in_axes)(*args)
    for bad in ("a", 0.0, False, [0, "x"]):
        with pytest.raises(TypeError, match="out_axes must be an int, None, or a pytree prefix"):
            tg.vmap(lambda x: (x, x), out_axes=bad)(xs)
    # NumPy integers are ints; a list at the top is a tuple
    assert tg.vmap(lambda x: x, in_axes=np.int32(1), out_axes=np.int64(0))(xs).shape == (3, 2)
    assert tg.vmap(lambda x, y: x + y, in_axes=[0, None])(xs, xs[0]).shape == (2, 3)


def test_a_none_argument_is_an_empty_pytree():
    # in_axes (0, None) with None as the second argument raised "in_axes do not match"
    x = tg.Tensor(np.arange(6.0).reshape(3, 2))
    out = tg.vmap(lambda a, b: a * 2.0 if b is None else a, in_axes=(0, None))(x, None)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * 2.0)
    out = tg.vmap(lambda a, b: a["u"] + 1.0, in_axes=({"u": 0, "v": None}, None))(
        {"u": x, "v": None}, None)
    np.testing.assert_array_equal(out.numpy(), x.numpy() + 1.0)
