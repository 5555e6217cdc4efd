import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def f64(x):
    return tg.Tensor(np.asarray(x, dtype=np.float64))


def test_jit_traces_once_and_replays():
    calls = []

    def loss(w, x):
        calls.append(1)  # a Python side effect: runs only while tracing
        return (tnp.tanh(x @ w) ** 2).sum()

    fast = tg.jit(tg.grad(loss))
    rng = np.random.default_rng(0)
    for _ in range(3):
        w, x = f64(rng.standard_normal((3, 2))), f64(rng.standard_normal((4, 3)))
        np.testing.assert_allclose(fast(w, x).numpy(), tg.grad(loss)(w, x).numpy(), rtol=1e-13)
    assert len(calls) == 1 + 3  # one trace in jit + three plain grad calls
    assert fast.cache_size() == 1


def test_new_shapes_or_dtypes_trace_again():
    fast = tg.jit(lambda x: (x * 2.0).sum())
    fast(f64([1.0, 2.0]))
    fast(f64([1.0, 2.0, 3.0]))
    fast(tg.Tensor([1.0, 2.0]))  # float32
    assert fast.cache_size() == 3
    assert float(fast(f64([5.0, 6.0]))) == 22.0


def test_flipped_guard_traces_again_instead_of_replaying_stale():
    def f(x):
        if x.sum() > 0:
            return x * 2.0
        return x * -1.0

    fast = tg.jit(f)
    np.testing.assert_allclose(fast(f64([1.0, 2.0])).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(fast(f64([-3.0, 1.0])).numpy(), [3.0, -1.0])  # other branch
    np.testing.assert_allclose(fast(f64([1.0, 1.0])).numpy(), [2.0, 2.0])


def test_jit_inside_grad_runs_the_function():
    fast = tg.jit(lambda x: tnp.sin(x).sum())
    g = tg.grad(fast)(f64([0.0, 1.0]))
    np.testing.assert_allclose(g.numpy(), np.cos([0.0, 1.0]))


def test_pytree_outputs_and_closed_over_values_are_constants():
    scale = f64(2.0)
    fast = tg.jit(lambda p: {"y": p["a"] * scale, "n": p["a"].sum()})
    out = fast({"a": f64([1.0, 2.0])})
    assert set(out) == {"y", "n"}
    scale = f64(100.0)  # noqa: F841  rebinding is not seen by the recording (as in JAX)
    np.testing.assert_allclose(fast({"a": f64([1.0, 1.0])})["y"].numpy(), [2.0, 2.0])


def test_bad_arguments_point_to_static_argnums():
    with pytest.raises(TypeError, match=r"is a str .*static_argnums"):
        tg.jit(lambda s: s)("text")
    assert tg.jit(lambda x, s: x * len(s), static_argnums=1)(f64(2.0), "abc").item() == 6.0


def test_an_op_giving_one_output_as_a_1_tuple_replays_and_compiles():
    """``split`` into one piece returns a 1-tuple from its forward: the compiled program and
    Tape.replay unpack it as the eager call does (they once bound the tuple itself)."""

    def f(x):
        (a,) = tnp.split(x, 1)
        return tnp.sum(a * a)

    x = tg.Tensor(np.arange(3.0))
    _, tape = tg.trace(f)(x)
    jf, jg = tg.jit(f), tg.jit(tg.grad(f))
    for v in (np.arange(3.0), np.ones(3), np.array([2.0, -1.0, 0.5])):
        t = tg.Tensor(v)
        assert float(tape.replay(t)) == float(f(t)) == float(jf(t)) == float(np.sum(v * v))
        np.testing.assert_array_equal(jg(t).numpy(), 2 * v)
