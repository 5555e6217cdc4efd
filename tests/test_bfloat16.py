"""bfloat16 Tensors (``ml_dtypes.bfloat16``): names, creation, casts, JAX's promotion lattice,
values against JAX's bfloat16 arithmetic, gradients, transforms and checkpoints.

The walk over every primitive is ``property_tests/test_bfloat16_ops.py``."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp

BF16 = np.dtype(ml_dtypes.bfloat16)
rng = np.random.default_rng(0)


def bf(values) -> tg.Tensor:
    return tnp.asarray(np.asarray(values, np.float32), dtype="bfloat16")


def f32(t: tg.Tensor) -> np.ndarray:
    return t.numpy().astype(np.float32)


# -- names, creation, casts --------------------------------------------------------------------
def test_names_are_ml_dtypes_bfloat16():
    assert tg.bfloat16 == BF16
    assert tnp.bfloat16 is ml_dtypes.bfloat16
    assert np.dtype(tnp.bfloat16) == tg.bfloat16
    assert tnp.dtype("bfloat16") == BF16


@pytest.mark.parametrize("make", [
    lambda d: tnp.zeros((2, 3), dtype=d), lambda d: tnp.ones((2, 3), dtype=d),
    lambda d: tnp.empty((2, 3), dtype=d), lambda d: tnp.full((2, 3), 1.5, dtype=d),
    lambda d: tnp.arange(6, dtype=d), lambda d: tnp.linspace(0.0, 1.0, 5, dtype=d),
    lambda d: tnp.eye(3, dtype=d), lambda d: tnp.asarray([1.0, 2.0], dtype=d),
    lambda d: tnp.array([[1, 2]], dtype=d), lambda d: tnp.zeros_like(tnp.ones(2), dtype=d),
    lambda d: tnp.ones_like(tnp.ones(2), dtype=d), lambda d: tnp.full_like(tnp.ones(2), 3, dtype=d),
    lambda d: tg.Tensor([1.0, 2.5], dtype=d),
], ids=["zeros", "ones", "empty", "full", "arange", "linspace", "eye", "asarray", "array",
        "zeros_like", "ones_like", "full_like", "Tensor"])
@pytest.mark.parametrize("name", ["bfloat16", "tg.bfloat16", "tnp.bfloat16"])
def test_creation_functions_take_bfloat16(make, name):
    d = {"bfloat16": "bfloat16", "tg.bfloat16": tg.bfloat16, "tnp.bfloat16": tnp.bfloat16}[name]
    x = make(d)
    assert x.dtype == BF16
    ref = make("float32")
    np.testing.assert_array_equal(f32(x), ref.numpy().astype(BF16).astype(np.float32))


def test_astype_round_trips_and_rounds_to_nearest_even():
    x = tg.Tensor(np.array([1.0, 1.00390625, 1.01171875, 3.14159, -2.5e-3], np.float32))
    y = x.astype("bfloat16")
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.numpy(), x.numpy().astype(BF16))  # ml_dtypes' rounding
    assert y.astype(np.float32).dtype == np.float32
    assert tnp.astype(y, tnp.float64).dtype == np.float64
    assert bf([1.5]).astype("int32").numpy().tolist() == [1]


def test_a_bfloat16_array_keeps_its_dtype():
    a = np.array([1.0, 2.0], BF16)
    assert tg.Tensor(a).dtype == BF16
    assert tnp.asarray(a).dtype == BF16
    assert tnp.asarray([tg.Tensor(a), tg.Tensor(a)]).dtype == BF16


def test_finfo_matches_ml_dtypes_and_jax():
    fi = tnp.finfo(tg.bfloat16)
    ref = ml_dtypes.finfo(ml_dtypes.bfloat16)
    assert float(fi.eps) == float(ref.eps) == 2.0 ** -7
    assert float(fi.max) == float(ref.max)
    assert float(fi.tiny) == float(ref.tiny)
    assert fi.bits == 16
    assert float(tnp.finfo(bf([1.0])).eps) == 2.0 ** -7  # a Tensor gives its dtype's limits
    jnp = pytest.importorskip("jax.numpy")
    assert float(jnp.finfo(jnp.bfloat16).eps) == float(fi.eps)
    assert float(jnp.finfo(jnp.bfloat16).max) == float(fi.max)


def test_dtype_predicates_know_bfloat16_is_floating():
    assert tnp.issubdtype(tg.bfloat16, tnp.floating)
    assert tnp.issubdtype(bf([1.0]), tnp.inexact)
    assert not tnp.issubdtype(tg.bfloat16, tnp.integer)
    assert tnp.isdtype(tg.bfloat16, "real floating")
    assert not tnp.isdtype(tg.bfloat16, "complex floating")


# -- promotion: JAX's lattice ------------------------------------------------------------------
OTHERS = ["bool", "int8", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
          "float64", "complex64", "complex128"]


@pytest.mark.parametrize("other", OTHERS)
def test_promotion_with_bfloat16_is_jax_s(other):
    jnp = pytest.importorskip("jax.numpy")
    want = np.dtype(jnp.promote_types(jnp.bfloat16, other))
    assert tnp.result_type(tg.bfloat16, other) == want
    assert tnp.promote_types(other, tg.bfloat16) == want
    x = bf([1.0, 2.0])
    y = tnp.ones(2, dtype=other)
    assert (x + y).dtype == want, other
    assert (y * x).dtype == want, other
    assert tnp.maximum(x, y).dtype == want, other


def test_python_numbers_are_weak_beside_bfloat16():
    x = bf([1.0, 2.0])
    assert (x * 0.1).dtype == BF16
    assert (0.1 + x).dtype == BF16
    assert (x * 3).dtype == BF16
    assert (x ** 2).dtype == BF16
    assert (x * 1j).dtype == np.complex64  # JAX: bfloat16 with a Python complex
    assert tnp.result_type(x, 0.1) == BF16


def test_float16_meets_bfloat16_in_float32():
    """Neither holds the other (NumPy itself refuses to promote them)."""
    with pytest.raises(Exception):  # noqa: B017 - NumPy's own DTypePromotionError
        np.result_type(BF16, np.float16)
    x = bf([1.5])
    h = tnp.asarray([2.0], dtype="float16")
    assert (x * h).dtype == np.float32
    assert float((x * h).item()) == 3.0


# -- values: JAX's bfloat16 arithmetic (XLA rounds each op's float32 result) -------------------
UNARY = ["exp", "log", "sin", "cos", "tanh", "sqrt", "abs", "negative", "square", "log1p",
         "expm1", "arctan", "floor", "sign", "reciprocal"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_match_jax(name):
    jnp = pytest.importorskip("jax.numpy")
    a = rng.uniform(0.1, 4.0, (5, 7)).astype(BF16)
    got = getattr(tnp, name)(tg.Tensor(a))
    want = np.asarray(getattr(jnp, name)(jnp.asarray(a)))
    assert got.dtype == BF16 and want.dtype == BF16
    # one rounding of float32 results: equal, or one bfloat16 step apart where float32
    # libraries differ in the last bit before rounding
    np.testing.assert_allclose(f32(got), want.astype(np.float32), rtol=2.0 ** -7, atol=0)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum", "power",
                                  "arctan2", "hypot"])
def test_binary_values_match_jax(name):
    jnp = pytest.importorskip("jax.numpy")
    a = rng.uniform(0.1, 3.0, (4, 5)).astype(BF16)
    b = rng.uniform(0.1, 3.0, (5,)).astype(BF16)
    got = getattr(tnp, name)(tg.Tensor(a), tg.Tensor(b))
    want = np.asarray(getattr(jnp, name)(jnp.asarray(a), jnp.asarray(b)))
    assert got.dtype == BF16 == want.dtype
    np.testing.assert_allclose(f32(got), want.astype(np.float32), rtol=2.0 ** -7, atol=0)


def test_exact_ops_agree_bit_for_bit_with_jax():
    jnp = pytest.importorskip("jax.numpy")
    a = rng.uniform(-3, 3, (6, 6)).astype(BF16)
    b = rng.uniform(-3, 3, (6, 6)).astype(BF16)
    for name in ["add", "subtract", "multiply", "divide"]:
        got = getattr(tnp, name)(tg.Tensor(a), tg.Tensor(b)).numpy()
        want = np.asarray(getattr(jnp, name)(jnp.asarray(a), jnp.asarray(b)))
        np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16), err_msg=name)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "prod", "var", "std"])
def test_reductions_accumulate_in_float32(name):
    """A sum of 4096 bfloat16 ones is 4096 (a bfloat16 accumulator would stop at 256)."""
    x = tnp.ones((4096,), dtype="bfloat16")
    got = getattr(tnp, name)(x)
    assert got.dtype == BF16
    want = getattr(np, name)(np.ones(4096, np.float32))
    assert float(got.item()) == pytest.approx(float(want), rel=2.0 ** -7)


def test_matmul_and_linalg_compute_in_float32_and_return_bfloat16():
    jnp = pytest.importorskip("jax.numpy")
    a = rng.uniform(-1, 1, (8, 16)).astype(BF16)
    b = rng.uniform(-1, 1, (16, 4)).astype(BF16)
    got = tg.Tensor(a) @ tg.Tensor(b)
    want = np.asarray(jnp.matmul(jnp.asarray(a), jnp.asarray(b)))
    assert got.dtype == BF16 == want.dtype
    np.testing.assert_allclose(f32(got), want.astype(np.float32), rtol=2e-2, atol=2e-2)
    m = tg.Tensor((np.eye(3) * 2 + 0.25).astype(BF16))
    inv = tnp.linalg.inv(m)
    assert inv.dtype == BF16
    np.testing.assert_allclose(f32(inv @ m), np.eye(3), atol=3e-2)
    assert tnp.linalg.norm(m).dtype == BF16
    assert tnp.linalg.det(m).dtype == BF16


@pytest.mark.parametrize("name", ["average", "median", "cov", "corrcoef", "nanmean", "nanstd",
                                  "gradient", "unwrap", "percentile"])
def test_composite_functions_keep_bfloat16(name):
    x = tg.Tensor(rng.uniform(0, 1, (3, 4)).astype(BF16))
    fn = getattr(tnp, name)
    out = fn(x, 50) if name == "percentile" else fn(x)
    outs = out if isinstance(out, (list, tuple)) else [out]
    assert all(o.dtype == BF16 for o in outs), [o.dtype for o in outs]


# -- gradients and transforms -------------------------------------------------------------------
def _loss(x):
    return tnp.sum(tnp.tanh(x) * x + tnp.exp(-x * x))


def test_gradients_of_bfloat16_inputs_are_bfloat16_and_match_jax():
    a = rng.uniform(-1, 1, (3, 4)).astype(BF16)
    g = tg.grad(_loss)(tg.Tensor(a))
    assert g.dtype == BF16
    g32 = tg.grad(_loss)(tg.Tensor(a.astype(np.float32)))
    np.testing.assert_allclose(f32(g), g32.numpy(), rtol=3e-2, atol=3e-2)
    jax = pytest.importorskip("jax")
    jg = jax.grad(lambda x: jax.numpy.sum(jax.numpy.tanh(x) * x + jax.numpy.exp(-x * x)))(
        jax.numpy.asarray(a))
    assert np.asarray(jg).dtype == BF16
    np.testing.assert_allclose(f32(g), np.asarray(jg).astype(np.float32), rtol=3e-2, atol=3e-2)


def test_second_derivatives_and_forward_mode_in_bfloat16():
    x = bf([0.5, 1.5])
    h = tg.hessian(lambda x: tnp.sum(x ** 3))(x)
    assert h.dtype == BF16
    np.testing.assert_allclose(f32(h), np.diag([3.0, 9.0]), rtol=1e-2)
    out, t = tg.jvp(lambda x: tnp.sin(x) * x, (x,), (tnp.ones_like(x),))
    assert out.dtype == t.dtype == BF16
    np.testing.assert_allclose(f32(t), np.sin([0.5, 1.5]) + np.cos([0.5, 1.5]) * [0.5, 1.5],
                               rtol=2e-2)


def test_mixed_inputs_get_each_their_own_dtype_of_gradient():
    w = tg.Tensor(np.array([0.5, -1.0], np.float32))
    x = bf([2.0, 3.0])
    gw, gx = tg.grad(lambda w, x: tnp.sum(w * x), argnums=(0, 1))(w, x)
    assert gw.dtype == np.float32 and gx.dtype == BF16
    np.testing.assert_array_equal(gw.numpy(), [2.0, 3.0])
    np.testing.assert_array_equal(f32(gx), [0.5, -1.0])


def test_jit_and_vmap_keep_bfloat16():
    x = tg.Tensor(rng.uniform(-1, 1, (4, 3)).astype(BF16))
    f = tg.jit(lambda x: tnp.sin(x) * 2.0 + x)
    got = f(x)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.numpy(), (tnp.sin(x) * 2.0 + x).numpy())
    g = tg.jit(tg.grad(_loss))(x)
    assert g.dtype == BF16
    np.testing.assert_array_equal(g.numpy(), tg.grad(_loss)(x).numpy())
    v = tg.vmap(lambda r: tnp.sum(r * r))(x)
    assert v.dtype == BF16 and v.shape == (4,)


def test_jit_programs_widen_bfloat16_steps_as_eager_calls_do():
    # bfloat16 sums accumulate in float32 (one rounding at the end): NumPy's own bfloat16 loop
    # accumulates in bfloat16 and gives another value, so the compiled step must widen too
    x = tg.Tensor(rng.uniform(0.5, 1.5, 4096).astype(BF16))
    want = np.float32(x.numpy().astype(np.float32).sum()).astype(BF16)
    assert np.asarray(x.numpy().sum()).astype(np.float32) != want.astype(np.float32)
    f = tg.jit(lambda x: tnp.sum(tnp.sin(x) * 0.0 + x) + 1.0)
    f(x)  # recorded (and run eagerly) on the first call: the compiled program runs after
    got = f(x)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.numpy(), (tnp.sum(x) + 1.0).numpy())
    np.testing.assert_array_equal(got.numpy(), (np.float32(want) + np.float32(1)).astype(BF16))


def test_float32_programs_call_the_forwards_themselves():
    # the widening is decided when the program is compiled: a float32 program's steps call
    # each op's own forward or its ufunc (array function) directly, a bfloat16 program's steps
    # a widening forward
    def f(x):
        return tnp.sum(tnp.tanh(x * 2.0) + x)

    for dtype, widened in ((np.float32, False), (BF16, True)):
        program = tg.jit(f).lower(tg.Tensor(np.ones(3, dtype)))
        g = program._source("cpu")[1]
        forwards = [v for k, v in g.items() if k[0] == "F"]
        direct = [k for k in g if k[0] == "D"]
        assert (forwards and not direct) if widened else direct, (dtype, sorted(g))
        raw = [s.fn.forward for s in program._steps if hasattr(s, "fn")]
        assert all((v not in raw) == widened for v in forwards), (dtype, forwards)


def _step(c):
    return c * 1.01 + 0.003  # 1.0 * 1.01 rounds to bfloat16 before the sum: a double rounding


@tg.custom_vjp
def _step_vjp(c):
    return _step(c)


_step_vjp.defvjp(lambda c: (_step(c), None), lambda _, g: (g * 1.01,))


@tg.custom_jvp
def _step_jvp(c):
    return _step(c)


_step_jvp.defjvp(lambda primals, tangents: (_step(primals[0]), tangents[0] * 1.01))


def test_composite_primitives_round_every_inner_op_as_the_plain_code_does():
    # scan, while_loop, cond, checkpoint and custom rules run their bodies' ops, each rounding
    # to bfloat16 (JAX's semantics): the same bits as the same Python code run op by op
    x = bf([1.0, 3.0])
    want = x
    for _ in range(30):
        want = _step(want)
    got = {
        "scan": tg.scan(lambda c, _: (_step(c), None), x, None, length=30)[0],
        "fori_loop": tg.fori_loop(0, 30, lambda i, c: _step(c), x),
        "while_loop": tg.while_loop(lambda c: c[0] < f32(want)[0] - 1e-3, _step, x),
    }
    for name, v in got.items():
        assert v.dtype == BF16, name
        np.testing.assert_array_equal(v.numpy(), want.numpy(), err_msg=name)
    one = _step(x)
    assert f32(one)[0] != np.float32(np.float32(1.0) * np.float32(1.01) + np.float32(0.003)
                                      ).astype(BF16).astype(np.float32)
    for name, fn in (("cond", lambda a: tg.cond(True, _step, lambda b: b, a)),
                     ("checkpoint", tg.checkpoint(_step)),
                     ("custom_vjp", _step_vjp), ("custom_jvp", _step_jvp)):
        v = fn(x)
        assert v.dtype == BF16, name
        np.testing.assert_array_equal(v.numpy(), one.numpy(), err_msg=name)
        jitted = tg.jit(fn)
        jitted(x)
        np.testing.assert_array_equal(jitted(x).numpy(), one.numpy(), err_msg=name)


class _Cube(tg.Function):
    """x ** 3 with a backward that reads its saved input and output."""

    seen: list = []

    @staticmethod
    def forward(ctx, x):
        _Cube.seen.append(x.dtype)
        y = x * x * x
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        _Cube.seen.append((x.dtype, y.dtype))
        return 3 * g * y / x


class _NativeNeg(tg.Function):
    bfloat16_native = True

    @staticmethod
    def forward(ctx, x):
        _NativeNeg.seen = x.dtype
        return -x

    @staticmethod
    def backward(ctx, g):
        return -g


def test_user_functions_are_not_rewritten_and_see_float32():
    # the class keeps the forward it was written with: the engine widens around the call
    for cls in (_Cube, _NativeNeg, tg.ops.Tanh, tg.ops.Sum):
        own = cls.__dict__["forward"]
        code = (own.__func__ if isinstance(own, (staticmethod, classmethod)) else own).__code__
        assert code.co_name == "forward" and code.co_filename != tg.core.function.__file__
    assert _Cube.__dict__["forward"].__func__.__code__.co_filename == __file__
    _Cube.seen.clear()
    x = bf([1.5, -2.0])
    y = _Cube.apply(x)
    assert y.dtype == BF16 and _Cube.seen == [np.float32]
    np.testing.assert_array_equal(f32(y), np.float32([1.5, -2.0]) ** 3)
    g = tg.grad(lambda x: tnp.sum(_Cube.apply(x)))(x)
    # backward reads the op's own (bfloat16) input and output, as saved by identity
    assert g.dtype == BF16 and (BF16, BF16) in _Cube.seen
    np.testing.assert_allclose(f32(g), [6.75, 12.0], rtol=1e-2)
    # a bfloat16 NumPy array given as a plain argument is widened too
    _Cube.seen.clear()
    assert _Cube.apply(np.ones(2, BF16)).dtype == BF16 and _Cube.seen == [np.float32]
    # the opt-out: the op sees bfloat16 itself
    assert _NativeNeg.apply(x).dtype == BF16 and _NativeNeg.seen == BF16
    assert tg.jit(lambda x: _NativeNeg.apply(x) * 2.0)(x).dtype == BF16
    assert _NativeNeg.seen == BF16


def test_nn_layers_run_in_bfloat16():
    from tapegrad import nn
    from tapegrad.mixed_precision import cast_to_full, get_policy

    layer = get_policy("bf16").cast_to_param(nn.Linear(3, 2, key=tg.random.key(0)))
    x = tg.Tensor(np.ones((5, 3), BF16))
    y = nn.functional.relu(layer(x))
    assert y.dtype == BF16
    ref = nn.functional.relu(cast_to_full(layer)(x.astype(np.float32)))
    np.testing.assert_allclose(f32(y), ref.numpy(), rtol=2e-2, atol=2e-2)
    loss = nn.functional.cross_entropy(tg.Tensor(np.ones((2, 3), BF16)), tg.Tensor([0, 2]))
    assert loss.dtype == BF16
    assert float(loss.item()) == pytest.approx(np.log(3), rel=1e-2)


def test_checkpoints_round_trip_bfloat16(tmp_path):
    tree = {"w": bf([1.5, -2.25, 3e-3]), "raw": np.array([7.0], BF16), "f": tg.Tensor([1.0])}
    path = os.path.join(tmp_path, "ckpt.safetensors")
    tg.io.save(path, tree)
    back = tg.io.load(path)
    assert back["w"].dtype == BF16 and isinstance(back["w"], tg.Tensor)
    np.testing.assert_array_equal(back["w"].numpy().view(np.uint16),
                                  tree["w"].numpy().view(np.uint16))
    assert back["raw"].dtype == BF16 and isinstance(back["raw"], np.ndarray)
    assert back["f"].dtype == np.float32
    like = tg.io.load(path, like=tree)
    assert like["w"].dtype == BF16
    pytest.importorskip("safetensors.torch")
    import torch
    from safetensors.torch import load_file

    t = load_file(path)  # another reader sees torch.bfloat16
    assert any(v.dtype == torch.bfloat16 for v in t.values())
