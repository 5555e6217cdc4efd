"""The compiled program behind ``jit``: what ``lower`` shows, and that dead-code elimination,
constant folding, common-subexpression elimination and buffer planning change nothing but the
work done."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.transforms.jit import Program

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


# -- layout pass: transposes of products and transposes that cancel ---------------------------
def _matmuls(program) -> list:
    """The ``transpose_a``/``transpose_b`` flags of each matmul line of the listing."""
    return [("transpose_a=True" in line, "transpose_b=True" in line)
            for line in str(program).splitlines() if " = matmul" in line]


def test_a_transposed_product_is_one_contiguous_product():
    def f(a, b, c):
        return tnp.sum(tnp.tanh((a @ b).T + c))  # (a @ b).T read by an elementwise op

    a, b, c = (RNG.standard_normal(s) for s in ((3, 4), (4, 5), (5, 3)))
    args = [tg.Tensor(v) for v in (a, b, c)]
    prog = tg.jit(f).lower(*args)
    assert _ops(prog)[:2] == ["matmul", "add"] and "transpose" not in _ops(prog)
    assert _matmuls(prog) == [(True, True)]  # b^T @ a^T
    assert prog.fused == 1
    np.testing.assert_allclose(tg.jit(f)(*args).numpy(), f(*args).numpy(), rtol=1e-13)


def test_a_transposed_flagged_product_swaps_its_flags():
    from tapegrad.ops import MatMul

    def f(a, b):  # (a @ b^T)^T = b @ a^T
        return tnp.sum(tnp.exp(MatMul.apply(a, b, transpose_b=True).T))

    a, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal((5, 4)))
    prog = tg.jit(f).lower(a, b)
    assert "transpose" not in _ops(prog) and _matmuls(prog) == [(False, True)]
    np.testing.assert_allclose(tg.jit(f)(a, b).numpy(), f(a, b).numpy(), rtol=1e-13)


def test_a_product_read_elsewhere_or_a_vector_product_is_left_alone():
    def f(a, b):
        p = a @ b
        return tnp.sum(p.T * 2.0) + tnp.sum(p)  # p itself is read too

    a, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal((4, 5)))
    prog = tg.jit(f).lower(a, b)
    assert "transpose" in _ops(prog) and _matmuls(prog) == [(False, False)]

    def g(v, m):  # (k,) @ (B, k, m) is (B, m): its transpose is no swapped product
        return tnp.sum(tnp.transpose(v @ m) * tnp.arange(6.0).reshape(3, 2))

    v, m = tg.Tensor(np.ones(4)), tg.Tensor(RNG.standard_normal((2, 4, 3)))
    prog = tg.jit(g).lower(v, m)
    assert "transpose" in _ops(prog) and _matmuls(prog) == [(False, False)]
    np.testing.assert_allclose(tg.jit(g)(v, m).numpy(), g(v, m).numpy(), rtol=1e-13)


def test_the_derivative_of_a_product_has_no_transpose():
    """``matmul``'s rules multiply by transposed operands through its flags: no transpose
    entry, so no strided transposed cotangent, at first and second order."""
    def loss(a, b):
        return tnp.sum(tnp.tanh(a @ b))

    a, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal((4, 5)))
    for fun in (tg.grad(loss, argnums=(0, 1)),
                tg.grad(lambda a, b: tnp.sum(tg.grad(loss)(a, b) ** 2), argnums=(0, 1))):
        prog = tg.jit(fun).lower(a, b)
        assert "transpose" not in _ops(prog), str(prog)
        assert prog.fused == 0  # nothing was left for the layout pass to fix


def test_transposes_that_cancel_are_dropped():
    def f(x):
        y = tnp.transpose(tnp.transpose(x, (1, 2, 0)), (2, 0, 1))  # the identity
        return tnp.sum(tnp.exp(y) * x)

    x = tg.Tensor(RNG.standard_normal((2, 3, 4)))
    prog = tg.jit(f).lower(x)
    assert "transpose" not in _ops(prog) and prog.fused == 1
    np.testing.assert_allclose(tg.jit(f)(x).numpy(), f(x).numpy(), rtol=1e-14)


def test_reverse_over_reverse_leaves_no_strided_transposed_cotangent():
    """The Hessian-vector product of an MLP (grad of grad . v): the cotangents of transposed
    weights arrive as contiguous products, not as transposed views of products, eagerly as
    well as compiled."""
    rng = np.random.default_rng(1)
    params = [tg.Tensor(rng.standard_normal((6, 5))), tg.Tensor(rng.standard_normal((5, 3)))]
    vs = [tg.Tensor(rng.standard_normal(p.shape)) for p in params]
    x = tg.Tensor(rng.standard_normal((4, 6)))

    def loss(ps):
        return tnp.sum(tnp.tanh(tnp.maximum(x @ ps[0], 0.0) @ ps[1]) ** 2)

    def hvp(ps):
        return tg.grad(lambda q: sum(tnp.sum(g * v) for g, v in zip(tg.grad(loss)(q), vs)))(ps)

    prog = tg.jit(hvp).lower(params)
    assert "transpose" not in _ops(prog)
    assert any(flags != (False, False) for flags in _matmuls(prog))
    got, want = tg.jit(hvp)(params), hvp(params)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_matmul_with_transposed_operands(data):
    """``MatMul(a, b, transpose_a=, transpose_b=)`` is ``op(a) @ op(b)``: values, shape rule,
    gradients to second order in both modes, and its batching rule."""
    from tapegrad.ops import MatMul
    from tapegrad.testing import check_grads

    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    batch = data.draw(st.sampled_from([(), (2,), (1, 3)]))
    n, k, m = (data.draw(st.integers(0 if i == 1 else 1, 4)) for i in range(3))
    a = RNG.standard_normal(batch + ((k, n) if ta else (n, k)))
    b_batch = () if data.draw(st.booleans()) else batch
    b = RNG.standard_normal(b_batch + ((m, k) if tb else (k, m)))
    want = (np.swapaxes(a, -1, -2) if ta else a) @ (np.swapaxes(b, -1, -2) if tb else b)

    def mm(x, y):
        return MatMul.apply(x, y, transpose_a=ta, transpose_b=tb)

    out = mm(tg.Tensor(a), tg.Tensor(b))
    assert out.shape == want.shape and out.numpy().flags.c_contiguous
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    assert MatMul.output_shape(a.shape, b.shape, transpose_a=ta, transpose_b=tb) == want.shape
    check_grads(mm, (tg.Tensor(a), tg.Tensor(b)), order=2, modes=("rev", "fwd"))
    stacked = np.stack([a, 2.0 * a])  # vmap over a's examples, b shared
    got = tg.vmap(mm, in_axes=(0, None))(tg.Tensor(stacked), tg.Tensor(b))
    np.testing.assert_allclose(got.numpy(), np.stack([want, 2.0 * want]), rtol=1e-12,
                               atol=1e-12)


def test_a_transposed_vector_is_a_clear_error():
    from tapegrad.ops import MatMul

    with pytest.raises(ValueError, match="matmul: transpose_a=True needs an operand with at "
                                         "least 2 axes"):
        MatMul.apply(tg.Tensor(np.ones(3)), tg.Tensor(np.ones((3, 2))), transpose_a=True)
    with pytest.raises(ValueError, match="transpose_b=True"):
        MatMul.output_shape((2, 3), (3,), transpose_b=True)


def test_products_and_ufuncs_are_called_without_a_context():
    """A step whose op is a ufunc, or declares its function of arrays (``Traits.array_fn``:
    ``matmul``), is one call of that function in the generated source: no context object, no
    per-call shape checks (the shapes were checked when the program was recorded)."""
    from tapegrad.ops import MatMul

    def loss(a, b, c):
        return tnp.sum(tnp.tanh(a @ b) @ c)

    a, b, c = (tg.Tensor(RNG.standard_normal(s)) for s in ((3, 4), (4, 5), (5, 2)))
    g = tg.grad(loss, argnums=(0, 1, 2))
    prog = tg.jit(g).lower(a, b, c)
    src, glob = prog._source("cpu")
    direct = {glob[k] for k in glob if k[0] == "D"}
    assert len(_matmuls(prog)) == 5 and set(_matmuls(prog)) == {(False, False), (False, True),
                                                               (True, False)}
    assert {MatMul.traits.array_fn(transpose_a=ta, transpose_b=tb)
            for ta, tb in _matmuls(prog)} <= direct
    assert np.tanh in direct
    assert "C1()" not in src and "C2()" not in src  # no step runs through forward(ctx, ...)
    for got, want in zip(tg.jit(g)(a, b, c), g(a, b, c)):
        assert np.array_equal(got.numpy(), want.numpy())


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_direct_products_equal_eager_to_the_last_bit(data):
    """Products called directly by a compiled program, with either operand transposed, a
    vector, broadcast batch dimensions, size-0 and size-1 axes, ufuncs giving 0-d values, basic
    and integer-array indexing and sums: ``jit`` equals the eager call to the last bit, in
    value, shape and dtype."""
    from tapegrad.ops import MatMul

    ta, tb = data.draw(st.booleans()), data.draw(st.booleans())
    n, k, m = (data.draw(st.integers(0, 3)) for _ in range(3))
    batch_a = data.draw(st.sampled_from([(), (1,), (2,), (0,), (2, 1)]))
    batch_b = data.draw(st.sampled_from([(), (1,), batch_a[-1:]]))  # broadcasts with a's
    dtype = data.draw(st.sampled_from([np.float64, np.float32]))
    vec_a = not ta and not batch_a and data.draw(st.booleans())
    vec_b = not tb and not batch_b and data.draw(st.booleans())
    a = RNG.standard_normal((k,) if vec_a else batch_a + ((k, n) if ta else (n, k)))
    b = RNG.standard_normal((k,) if vec_b else batch_b + ((m, k) if tb else (k, m)))
    a, b = tg.Tensor(a.astype(dtype)), tg.Tensor(b.astype(dtype))

    def f(x, y):
        p = MatMul.apply(x, y, transpose_a=ta, transpose_b=tb)
        return p, tnp.exp(tnp.sum(p * p) * -0.5) + 1.0  # the last two ufuncs make 0-d values

    def loss(x, y):  # a basic index, a sum over one axis, an index by an integer array
        p, s = f(x, y)
        q = tnp.sum(tnp.tanh(p[..., ::2]), axis=0) if p.ndim else p
        r = p[..., tg.Tensor(np.zeros(1, np.int64))] if p.ndim and p.shape[-1] else p
        return tnp.sum(q) + tnp.sum(r * r) + s

    for fun in (f, tg.grad(loss, argnums=(0, 1))):
        for got, want in zip(tg.jit(fun)(a, b), fun(a, b)):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert type(got.numpy()) is np.ndarray
            assert np.array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("vector", ["a", "b"])
@pytest.mark.parametrize("batch", [(), (2,), (0,)])
def test_a_vector_times_a_transposed_matrix_has_gradients(vector, batch):
    """``MatMul`` with one operand a vector and the other a transposed (batch of) matrices: the
    cotangent of the matrix comes back in its stored layout, to second order in both modes."""
    from tapegrad.ops import MatMul
    from tapegrad.testing import check_grads

    v = tg.Tensor(RNG.standard_normal(3))
    m = tg.Tensor(RNG.standard_normal(batch + (2, 3) if vector == "a" else batch + (3, 2)))
    if vector == "a":  # (3,) @ op(m), op(m) of shape (..., 3, 2)
        args, flags = (v, m), {"transpose_b": True}
    else:  # op(m) @ (3,), op(m) of shape (..., 2, 3)
        args, flags = (m, v), {"transpose_a": True}

    def mm(x, y):
        return MatMul.apply(x, y, **flags)

    x, y = (a.numpy() for a in args)
    want = (x @ np.swapaxes(y, -1, -2)) if vector == "a" else (np.swapaxes(x, -1, -2) @ y)
    assert np.array_equal(mm(*args).numpy(), want)
    check_grads(mm, args, order=2, modes=("rev", "fwd"))


def test_an_index_array_out_of_bounds_at_a_later_call_names_getitem():
    """Index arrays are values the recording did not check: a later call whose index is out of
    bounds raises getitem's IndexError (naming it and the shape), as the eager call does, not a
    bare NumPy error; a basic index, checked with the shapes, is read directly."""
    f = tg.jit(lambda x, i: x[i] * 2.0 + x[1:] @ x[1:])
    x = tg.Tensor(np.arange(3.0))
    assert np.array_equal(f(x, tg.Tensor(np.array([0, 2]))).numpy(), np.array([5.0, 9.0]))
    with pytest.raises(IndexError, match=r"getitem: index 5 is out of bounds .*shape \(3,\)"):
        f(x, tg.Tensor(np.array([0, 5])))
    src = f.lower(x, tg.Tensor(np.array([0, 2]))).source
    assert src.count("C2()") == 1  # x[i] runs through forward; x[1:] and the rest do not


def test_a_tape_file_with_a_malformed_index_is_checked_before_its_program_is_made():
    """A tape read from a file runs its entries as written, checked, before the program's
    source is made from their parameters: a malformed index key is the entry's ValueError,
    not an error from the function a step would call."""
    import json

    def f(x):
        return tnp.sum(x[0] * 2.0)

    x = tg.Tensor(np.ones((2, 3)))
    _, tape = tg.trace(f)(x)
    doc = json.loads(tape.to_json())
    entry = next(e for e in doc["entries"] if e.get("op", "").endswith(":GetItem"))
    entry["params"]["key"] = {"__scalar_type__": "<f4"}  # a dtype where an index belongs
    loaded = tg.Tape.from_json(json.dumps(doc))
    with pytest.raises(ValueError, match=r"Tape.replay: entry 0 \(getitem\) of a tape loaded"):
        loaded.replay(x)
