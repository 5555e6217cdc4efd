"""``tapegrad.mixed_precision``: policies (against DeepMind's jmp where installed), the loss
scales' state machine (property tests, and against jmp), and a small MLP trained with bfloat16
compute, float32 parameters and dynamic loss scaling."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import mixed_precision as mp
from tapegrad import nn, optim

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)

POLICY_STRINGS = [
    "params=float32,compute=bfloat16,output=float32", "p=f32,c=bf16,o=f32", "c=f16",
    "p=f16,c=f16", "p=f16,c=bf16", "float32", "bf16", "f64", "full", "o=bfloat16",
    "p=float64,o=f32", "params=f32,compute=f16",
]


# -- policies ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", POLICY_STRINGS)
def test_get_policy_parses_as_jmp(name):
    jmp = pytest.importorskip("jmp")
    want = jmp.get_policy(name)
    got = mp.get_policy(name)
    assert got.param_dtype == np.dtype(want.param_dtype)
    assert got.compute_dtype == np.dtype(want.compute_dtype)
    assert got.output_dtype == np.dtype(want.output_dtype)
    assert str(got) == str(want).replace("full", "f32")  # jmp names float32 "full"


def test_get_policy_defaults_follow_jmp_s_rule():
    """Missing entries: params float32, compute follows params, output follows compute."""
    p = mp.get_policy("c=bf16")
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == (F32, BF16, BF16)
    p = mp.get_policy("p=f16")
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == (F16, F16, F16)
    p = mp.get_policy("params=float32,compute=bfloat16,output=float32")
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == (F32, BF16, F32)
    assert mp.get_policy(" P = F32 , C = BF16 ").compute_dtype == BF16


@pytest.mark.parametrize("bad, error, match", [
    ("p=f32,x=f16", ValueError, "key params"),
    ("p=f32,p=f16", ValueError, "given twice"),
    ("compute", ValueError, "unknown dtype name 'compute'"),
    ("c=int32", ValueError, "unknown dtype name"),
    ("c=__import__('os').system('true')", ValueError, "unknown dtype name"),
    ("p=f32,,c=f16", ValueError, "cannot read"),
    ("c=np.float32", ValueError, "unknown dtype name"),
    (None, TypeError, "policy_name must be a string"),
    (np.float32, TypeError, "policy_name must be a string"),
])
def test_get_policy_refuses_anything_outside_its_vocabulary(bad, error, match):
    with pytest.raises(error, match=match):
        mp.get_policy(bad)


def test_policy_constructor_takes_dtypes_and_names_and_refuses_others():
    p = mp.Policy(np.float32, tg.bfloat16, "f32")
    assert (p.param_dtype, p.compute_dtype, p.output_dtype) == (F32, BF16, F32)
    with pytest.raises(TypeError, match="expected a floating dtype"):
        mp.Policy("f32", np.int32, "f32")
    with pytest.raises(ValueError, match="unknown dtype name"):
        mp.Policy("f32", "float8", "f32")
    assert mp.get_policy("half").compute_dtype == F16
    q = p.with_output_dtype("bf16").with_param_dtype("f64").with_compute_dtype("f16")
    assert str(q) == "p=f64,c=f16,o=bf16" and str(p) == "p=f32,c=bf16,o=f32"


def test_casts_touch_only_real_floating_array_leaves():
    p = mp.get_policy("p=f32,c=bf16,o=f16")
    tree = {"w": tg.Tensor(np.ones(2, F32)), "raw": np.ones(2, F64), "i": tg.Tensor([1, 2]),
            "b": tg.Tensor([True]), "z": tg.Tensor([1j]), "n": 0.5, "s": "name", "none": None}
    out = p.cast_to_compute(tree)
    assert out["w"].dtype == BF16 and isinstance(out["w"], tg.Tensor)
    assert out["raw"].dtype == BF16 and isinstance(out["raw"], np.ndarray)
    assert out["i"].dtype == np.int64 and out["b"].dtype == np.bool_
    assert out["z"].dtype == np.complex64
    assert out["n"] == 0.5 and out["s"] == "name" and out["none"] is None
    assert p.cast_to_output(out)["w"].dtype == F16
    assert p.cast_to_param(out)["w"].dtype == F32
    assert mp.cast_to_full(out)["w"].dtype == F32
    assert mp.cast_to_half(tree)["w"].dtype == F16


def test_casts_agree_with_jmp():
    jmp = pytest.importorskip("jmp")
    jnp = pytest.importorskip("jax.numpy")
    tree = {"a": np.ones(3, F32), "b": np.arange(3), "c": np.ones(2, F64)}
    for name in ["p=f32,c=bf16,o=f32", "c=f16", "bf16"]:
        want = jmp.get_policy(name).cast_to_compute({k: jnp.asarray(v) for k, v in tree.items()})
        got = mp.get_policy(name).cast_to_compute({k: tg.Tensor(v) for k, v in tree.items()})
        for k in ("a", "c"):  # floating leaves (JAX without x64 holds float64 as float32)
            assert got[k].dtype == np.dtype(want[k].dtype), (name, k)
        assert got["b"].dtype == np.int64  # integers are left alone, as jmp leaves them


def test_apply_runs_a_module_in_compute_dtype_and_gradients_come_back_in_param_dtype():
    policy = mp.get_policy("params=float32,compute=bfloat16,output=float32")
    model = nn.Sequential(nn.Linear(4, 8, key=tg.random.key(0)), nn.ReLU(),
                          nn.Linear(8, 1, key=tg.random.key(1)))
    x = tg.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    seen = []

    class Probe(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            seen.append((x.dtype, self.inner[0].weight.dtype))
            return self.inner(x)

    y = policy.apply(Probe(model), x)
    assert seen == [(BF16, BF16)]
    assert y.dtype == F32
    np.testing.assert_allclose(y.numpy(), model(x).numpy(), rtol=3e-2, atol=3e-2)

    def loss(m):
        return tnp.mean(policy.apply(m, x) ** 2)

    grads = tg.grad(loss)(model)
    assert grads[0].weight.dtype == F32
    g32 = tg.grad(lambda m: tnp.mean(m(x) ** 2))(model)
    np.testing.assert_allclose(grads[0].weight.numpy(), g32[0].weight.numpy(), rtol=0.1,
                               atol=2e-2)


# -- loss scales -------------------------------------------------------------------------------
def test_static_and_noop_loss_scales_as_jmp():
    s = mp.StaticLossScale(128.0)
    tree = {"a": tg.Tensor([1.0, 2.0]), "b": (tg.Tensor([3.0]),)}
    scaled = s.scale(tree)
    np.testing.assert_array_equal(scaled["a"].numpy(), [128.0, 256.0])
    np.testing.assert_array_equal(s.unscale(scaled)["b"][0].numpy(), [3.0])
    assert s.adjust(tg.Tensor(False)) is s
    n = mp.NoOpLossScale()
    assert n.loss_scale == 1 and n.scale(tree) is tree and n.unscale(tree) is tree
    assert n.adjust(tg.Tensor(True)) is n
    assert tg.tree.tree_leaves(s) == [s.loss_scale] and tg.tree.tree_leaves(n) == []


@pytest.mark.parametrize("make, error, match", [
    (lambda: mp.DynamicLossScale(0.0), ValueError, "finite and > 0"),
    (lambda: mp.DynamicLossScale(math.inf), ValueError, "finite and > 0"),
    (lambda: mp.DynamicLossScale(2 ** 15), TypeError, "real floating scalar"),
    (lambda: mp.DynamicLossScale(True), TypeError, "bool"),
    (lambda: mp.DynamicLossScale(tg.Tensor([1.0, 2.0])), TypeError, "scalar"),
    (lambda: mp.DynamicLossScale(2.0, period=0), ValueError, "period must be >= 1"),
    (lambda: mp.DynamicLossScale(2.0, period=2.5), TypeError, "period must be an int"),
    (lambda: mp.DynamicLossScale(2.0, factor=0), ValueError, "factor must be >= 1"),
    (lambda: mp.DynamicLossScale(2.0, min_loss_scale=-1.0), ValueError, "min_loss_scale"),
    (lambda: mp.DynamicLossScale(2.0, min_loss_scale="1"), TypeError, "min_loss_scale"),
    (lambda: mp.StaticLossScale(-2.0), ValueError, "StaticLossScale"),
    (lambda: mp.DynamicLossScale(2.0).adjust(tg.Tensor([True, False])), TypeError,
     "boolean scalar"),
    (lambda: mp.DynamicLossScale(2.0).adjust(tg.Tensor(1.0)), TypeError, "boolean scalar"),
    (lambda: mp.select_tree(tg.Tensor(1.0), 1.0, 2.0), TypeError, "boolean scalar"),
])
def test_loss_scale_arguments_are_checked(make, error, match):
    with pytest.raises(error, match=match):
        make()


def _reference(scale, counter, finite, period, factor, min_scale):
    """The documented state machine on Python floats (float32 rounding of the scale)."""
    if finite:
        if counter == period - 1:
            grown = float(np.float32(scale * factor))
            return (grown if math.isfinite(grown) else scale), 0
        return scale, counter + 1
    return max(min_scale, float(np.float32(scale / factor))), 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(flags=st.lists(st.booleans(), max_size=40), period=st.integers(1, 5),
       factor=st.integers(1, 4), exponent=st.integers(-2, 127),
       min_scale=st.sampled_from([1.0, 0.5, 2.0 ** -10]))
def test_dynamic_loss_scale_follows_its_state_machine(flags, period, factor, exponent,
                                                       min_scale):
    start = float(np.float32(2.0 ** exponent))
    ls = mp.DynamicLossScale(start, period=period, factor=factor, min_loss_scale=min_scale)
    scale, counter = start, 0
    for f in flags:
        ls = ls.adjust(tg.Tensor(f))
        scale, counter = _reference(scale, counter, f, period, factor, min_scale)
        assert float(ls.loss_scale) == scale
        assert int(ls.counter) == counter
        assert ls.loss_scale.dtype == F32 and ls.counter.dtype == np.int32
        assert 0 <= int(ls.counter) < period
        assert math.isfinite(float(ls.loss_scale)) and float(ls.loss_scale) > 0


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(flags=st.lists(st.booleans(), min_size=1, max_size=30), period=st.integers(1, 4),
       exponent=st.integers(0, 126))
def test_dynamic_loss_scale_matches_jmp(flags, period, exponent):
    jmp = pytest.importorskip("jmp")
    jnp = pytest.importorskip("jax.numpy")
    start = 2.0 ** exponent
    ours = mp.DynamicLossScale(start, period=period)
    theirs = jmp.DynamicLossScale(jnp.asarray(start, jnp.float32), period=period)
    tree = {"g": np.array([1.5, -3.0], np.float32)}
    for f in flags:
        ours, theirs = ours.adjust(tg.Tensor(f)), theirs.adjust(jnp.asarray(f))
        assert float(ours.loss_scale) == float(theirs.loss_scale)
        assert int(ours.counter) == int(theirs.counter)
    got = ours.unscale(ours.scale({"g": tg.Tensor(tree["g"])}))["g"].numpy()
    want = np.asarray(theirs.unscale(theirs.scale({"g": jnp.asarray(tree["g"])}))["g"])
    np.testing.assert_array_equal(got, want)


def test_all_finite_and_select_tree_as_jmp():
    good = {"a": tg.Tensor([1.0, 2.0]), "b": [tg.Tensor(np.ones((0, 3)))], "n": None}
    assert bool(mp.all_finite(good)) and mp.all_finite(good).dtype == np.bool_
    assert bool(mp.all_finite({}))
    for bad in (np.nan, np.inf, -np.inf):
        assert not bool(mp.all_finite({"a": tg.Tensor([1.0, bad]), "b": tg.Tensor([1.0])}))
    assert not bool(mp.all_finite([tnp.asarray([np.inf], dtype="bfloat16")]))
    picked = mp.select_tree(tg.Tensor(False), {"x": tg.Tensor([1.0])}, {"x": tg.Tensor([2.0])})
    assert picked["x"].numpy().tolist() == [2.0]
    jmp = pytest.importorskip("jmp")
    jnp = pytest.importorskip("jax.numpy")
    for leaves in ([1.0, 2.0], [1.0, np.nan], [np.inf]):
        assert bool(mp.all_finite([tg.Tensor(leaves)])) == bool(
            jmp.all_finite([jnp.asarray(leaves)]))


def test_loss_scale_state_goes_through_jit():
    ls = mp.DynamicLossScale(4.0, period=2)

    @tg.jit
    def step(ls, g):
        g = ls.unscale(g)
        return ls.adjust(mp.all_finite(g)), g

    for g, want in [([1.0], (4.0, 1)), ([np.inf], (2.0, 0)), ([1.0], (2.0, 1)),
                    ([2.0], (4.0, 0))]:
        ls, _ = step(ls, tg.Tensor(g))
        assert (float(ls.loss_scale), int(ls.counter)) == want


# -- training: bfloat16 compute, float32 parameters, dynamic loss scaling ---------------------
def _mlp(p, x):
    return tnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]


def _train(policy, loss_scale, steps=150):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (128, 2)).astype(np.float32)
    y = (np.sin(2 * x[:, :1]) * np.cos(x[:, 1:])).astype(np.float32)
    x, y = tg.Tensor(x), tg.Tensor(y)
    params = {"w1": tg.Tensor(rng.normal(0, 0.7, (2, 32)).astype(np.float32)),
              "b1": tg.Tensor(np.zeros(32, np.float32)),
              "w2": tg.Tensor(rng.normal(0, 0.2, (32, 1)).astype(np.float32)),
              "b2": tg.Tensor(np.zeros(1, np.float32))}
    params = policy.cast_to_param(params)
    tx = optim.apply_if_finite(optim.adam(1e-2), max_consecutive_errors=5)
    state = tx.init(params)

    def loss_fn(p, ls):
        pred = policy.cast_to_output(_mlp(policy.cast_to_compute(p), policy.cast_to_compute(x)))
        return ls.scale(tnp.mean((pred - y) ** 2))

    for _ in range(steps):
        grads = tg.grad(loss_fn)(params, loss_scale)
        grads = loss_scale.unscale(grads)
        loss_scale = loss_scale.adjust(mp.all_finite(grads))
        params, state = optim.apply_gradients(tx, grads, state, params)
    final = float(tnp.mean((_mlp(params, x) - y) ** 2))
    return final, loss_scale, state, params


def test_bfloat16_training_with_dynamic_loss_scaling_reaches_the_float32_loss():
    full, _, _, _ = _train(mp.get_policy("f32"), mp.NoOpLossScale())
    mixed, ls, state, params = _train(mp.get_policy("params=f32,compute=bf16,output=f32"),
                                      mp.DynamicLossScale(2.0 ** 15, period=20))
    assert params["w1"].dtype == F32  # parameters stay float32
    assert full < 0.01  # it learned
    assert mixed <= full * 1.5 + 2e-3, (mixed, full)
    assert float(ls.loss_scale) >= 1.0
    assert int(state.total_notfinite) >= 0
