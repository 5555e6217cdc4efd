"""The compiled program behind ``jit``: what ``lower`` shows, and that dead-code elimination,
constant folding, common-subexpression elimination and buffer planning change nothing but the
work done."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.jit import Program

RNG = np.random.default_rng(0)


def _ops(program) -> list:
    """The primitive names of the program's listing, one per line."""
    body = str(program).splitlines()[1:-1]
    return [line.split("=", 1)[1].split()[0].split("[")[0] for line in body if " = " in line]


def test_lower_lists_one_line_per_primitive_call_like_a_jaxpr():
    def f(w, x):
        return tnp.sum(tnp.tanh(x @ w))

    w, x = tg.Tensor(RNG.standard_normal((3, 2))), tg.Tensor(RNG.standard_normal((4, 3)))
    prog = tg.jit(f).lower(w, x)
    assert isinstance(prog, Program)
    text = str(prog)
    assert text.startswith("{ program ; ") and text.endswith("}")
    assert _ops(prog) == ["matmul", "tanh", "sum"]
    assert prog.steps == 3 and "def program(" in prog.source
    out = prog([w.numpy(), x.numpy()])
    np.testing.assert_allclose(out[0], f(w, x).numpy())


def test_a_program_with_a_dtype_argument_prints():
    # astype takes its dtype as an argument: str(program) raised AttributeError on it
    prog = tg.jit(lambda x: tnp.sum(x.astype(np.float32) * 2.0)).lower(tg.Tensor(np.ones(3)))
    assert "astype" in _ops(prog) and "float32" in str(prog)


def test_dead_code_is_dropped():
    def f(x, w):
        _ = tnp.exp(x)  # unused
        _ = x @ w  # unused
        return tnp.sum(x * 2.0)

    x, w = tg.Tensor(RNG.standard_normal((3, 3))), tg.Tensor(RNG.standard_normal((3, 3)))
    prog = tg.jit(f).lower(x, w)
    assert "exp" not in _ops(prog) and "matmul" not in _ops(prog)
    assert prog.dropped == 2
    np.testing.assert_allclose(tg.jit(f)(x, w).numpy(), f(x, w).numpy())


def test_values_that_do_not_depend_on_the_inputs_are_computed_once():
    c = tg.Tensor(np.linspace(0.1, 1.0, 4))

    def f(x):
        k = tnp.exp(c) * 3.0 + tnp.sin(c)  # no input in it: one constant of the program
        return tnp.sum(x * k)

    x = tg.Tensor(RNG.standard_normal(4))
    prog = tg.jit(f).lower(x)
    assert _ops(prog) == ["mul", "sum"] and "const:4" in str(prog)
    np.testing.assert_allclose(tg.jit(f)(x).numpy(), f(x).numpy(), rtol=1e-15)


def test_repeated_subexpressions_are_merged():
    def f(x):
        return tnp.sum(tnp.exp(x) * tnp.exp(x)) + tnp.sum(tnp.exp(x))

    x = tg.Tensor(RNG.standard_normal(5))
    prog = tg.jit(f).lower(x)
    assert _ops(prog).count("exp") == 1 and prog.merged == 2
    np.testing.assert_allclose(tg.jit(f)(x).numpy(), f(x).numpy(), rtol=1e-15)


def test_buffers_are_reused_but_inputs_and_outputs_are_never_written():
    def f(x, y):
        a = tnp.tanh(x * y)  # dies at the next op: its buffer takes the next result
        b = a * 2.0 + 1.0
        return b, tnp.exp(b)

    x, y = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    xs, ys = x.copy(), y.copy()
    jf = tg.jit(f)
    prog = jf.lower(tg.Tensor(x), tg.Tensor(y))
    assert "into" in str(prog)  # at least one elementwise result reuses a dying buffer
    for _ in range(3):
        b, e = jf(tg.Tensor(x), tg.Tensor(y))
        want_b, want_e = f(tg.Tensor(x), tg.Tensor(y))
        np.testing.assert_array_equal(b.numpy(), want_b.numpy())
        np.testing.assert_array_equal(e.numpy(), want_e.numpy())
    np.testing.assert_array_equal(x, xs)
    np.testing.assert_array_equal(y, ys)
    b2, _ = jf(tg.Tensor(x), tg.Tensor(y))
    np.testing.assert_array_equal(b.numpy(), b2.numpy())  # an earlier output is not overwritten


_UNARY = [tnp.tanh, tnp.exp, tnp.sin, lambda v: v * v, lambda v: tnp.maximum(v, 0.1),
          lambda v: v / (1.0 + v * v), lambda v: tnp.log1p(v * v)]


@settings(max_examples=30, deadline=None)
@given(program=st.lists(st.tuples(st.integers(0, len(_UNARY) - 1), st.integers(0, 3)),
                        min_size=1, max_size=12),
       n=st.integers(0, 4))
def test_jit_grad_of_random_programs_equals_eager(program, n):
    """Random straight-line programs over a few values (reuse, dead values, repeated calls):
    the compiled gradient equals the eager one exactly, and the inputs are untouched."""

    def f(x, y):
        vals = [x, y, x * y, x + 1.0]
        for op, src in program:
            vals.append(_UNARY[op](vals[src % len(vals)]))
            vals[src % 4] = vals[-1] if src % 2 else vals[src % 4]
        return tnp.sum(vals[-1]) + tnp.sum(vals[2])

    x, y = RNG.standard_normal(n), RNG.standard_normal(n)
    xs, ys = x.copy(), y.copy()
    g = tg.grad(f, argnums=(0, 1))
    want = g(tg.Tensor(x), tg.Tensor(y))
    jg = tg.jit(g)
    for _ in range(2):
        got = jg(tg.Tensor(x), tg.Tensor(y))
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(x, xs)
    np.testing.assert_array_equal(y, ys)


def test_clear_cache_and_cache_size():
    jf = tg.jit(lambda x: x * 2.0)
    jf(tg.Tensor(np.ones(2)))
    jf(tg.Tensor(np.ones(3)))
    assert jf.cache_size() == 2
    jf.clear_cache()
    assert jf.cache_size() == 0
    jf(tg.Tensor(np.ones(2)))
    tg.jit.clear_cache()
    assert jf.cache_size() == 0


def test_a_static_argument_compiles_per_value():
    jf = tg.jit(lambda x, k: tnp.sum(x ** k), static_argnums=1)
    x = tg.Tensor(np.arange(3.0))
    assert float(jf(x, 2)) == 5.0 and float(jf(x, 3)) == 9.0
    assert jf.cache_size() == 2
    with pytest.raises(TypeError, match="static"):
        tg.jit(lambda x, s: x)(x, "name")
