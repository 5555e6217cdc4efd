"""jit's fusion pass (``tg.jit(f, fuse=True)``): elementwise regions of a compiled program run
as numba kernels; plain ``tg.jit(f)`` runs one NumPy call per op, equal to eager to the last bit.

Kept to a few kernel structures (each costs a numba compile): the same small programs serve
several checks. Tests that need numba skip without it; the option's checks run either way.
"""

import ast
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.core.fusion as fusion
import tapegrad.numpy as tnp

needs_numba = pytest.mark.skipif(not fusion.available(), reason="numba is not installed")
RNG = np.random.default_rng(0)


def fused(f, **options):
    """``f`` jitted with fusion (numba kernels)."""
    return tg.jit(f, fuse=True, **options)


def unfused(f, *args):
    """``jit(f)(*args)``: no fusion (one NumPy call per op)."""
    return tg.jit(f)(*args)


def arith(x, b):
    """Arithmetic only (bit-exact in a kernel): broadcasting, Python scalars, max, where."""
    y = (x * b - 0.5 * x) / (b + 2.0)
    return tnp.where(y > 0.25, tnp.maximum(y, x), tnp.sqrt(tnp.abs(y)) - b)


def loss(x, b):
    return tnp.sum(arith(x, b) * x)


def steps(x, w, c, n):
    """A chain of ``n`` identical blocks (tanh, logaddexp: transcendental functions)."""
    total = 0.0
    y = x
    for _ in range(n):
        y = tnp.logaddexp(tnp.tanh(y * w + c), 0.0)
        total = total + tnp.sum(y)
    return total


def _run(jitted, *args):
    jitted(*args)  # records; the program (and its kernels) runs from the second call
    return jitted(*args)


@needs_numba
def test_lower_shows_the_groups():
    x, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal(4))
    prog = fused(arith).lower(x, b)
    # one group per iteration shape: ``b + 2.0`` (shape (4,)) is a call of its own
    assert [g.ops for g in prog.groups] == [
        ("mul", "mul", "sub"), ("div", "greater", "maximum", "abs", "sqrt", "sub", "where")]
    text = str(prog)
    assert "fused[mul mul sub] a b 0.5" in text and "= add b 2.0" in text
    assert "fused[div greater maximum abs sqrt sub where]" in text
    assert prog.steps == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((3, 4), (4,)), ((2, 0), (0,)), ((1, 5), (5,)),
                                    ((4, 1), (4, 1))], ids=str)
@needs_numba
def test_arithmetic_is_bit_exact_values_and_gradients(dtype, shapes):
    x = tg.Tensor(RNG.standard_normal(shapes[0]).astype(dtype))
    b = tg.Tensor(RNG.standard_normal(shapes[1]).astype(dtype))
    jf = fused(arith)
    got = _run(jf, x, b)
    assert jf.lower(x, b).groups
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), arith(x, b).numpy())
    np.testing.assert_array_equal(got.numpy(), unfused(arith, x, b).numpy())
    grad = tg.grad(loss, argnums=(0, 1))
    jg = fused(grad)
    fused_g = _run(jg, x, b)
    assert jg.lower(x, b).groups
    for a, e, u in zip(fused_g, grad(x, b), unfused(grad, x, b)):
        assert a.dtype == e.dtype == dtype
        np.testing.assert_array_equal(a.numpy(), e.numpy())
        np.testing.assert_array_equal(a.numpy(), u.numpy())


@needs_numba
def test_repeated_blocks_share_kernels_and_match_eager():
    x, w, c = (tg.Tensor(RNG.standard_normal(16) * 0.5) for _ in range(3))
    g = tg.grad(lambda x: steps(x, w, c, 40))
    jg = fused(g)
    got = _run(jg, x)
    prog = jg.lower(x)
    keys = [grp.key for grp in prog.groups]
    assert len(keys) >= 8 and len(set(keys)) <= 6  # 40 blocks: a few kernels, shared
    # transcendental functions: the C math library's, within a few ulp of NumPy's loops
    np.testing.assert_allclose(got.numpy(), g(x).numpy(), rtol=1e-13)
    # another length and size: the same kernels
    n_kernels = len(fusion._KERNELS)
    x2, w2, c2 = (tg.Tensor(RNG.standard_normal(7) * 0.5) for _ in range(3))
    g2 = tg.grad(lambda x: steps(x, w2, c2, 40))
    np.testing.assert_allclose(_run(fused(g2), x2).numpy(), g2(x2).numpy(), rtol=1e-13)
    assert len(fusion._KERNELS) == n_kernels


@needs_numba
def test_large_arrays_keep_transcendental_functions_as_numpy_calls():
    x = tg.Tensor(RNG.standard_normal((4, fusion.SMALL)))
    g = tg.grad(lambda x: tnp.sum(tnp.tanh(x * 2.0 + 1.0)))
    jg = fused(g)
    prog = jg.lower(x)
    assert [grp.ops for grp in prog.groups] == [("mul", "add"), ("unary_grad", "mul")]
    assert "= tanh " in str(prog)
    np.testing.assert_array_equal(_run(jg, x).numpy(), g(x).numpy())  # exact: arithmetic
    big = tg.Tensor(np.zeros(fusion.MAX_SIZE + 1))
    assert not jg.lower(big).groups  # beyond MAX_SIZE: NumPy calls


@needs_numba
def test_nan_and_inf_as_eager_without_warnings():
    x = tg.Tensor(np.array([[0.0, -0.0, 1.0, np.inf], [-np.inf, np.nan, -2.0, 3.0]]))
    b = tg.Tensor(np.array([0.0, -2.0, np.nan, np.inf]))
    got = _run(fused(arith), x, b)  # warnings are errors here
    np.testing.assert_array_equal(got.numpy(), arith(x, b).numpy())
    fused_g = _run(fused(tg.grad(loss, argnums=(0, 1))), x, b)
    for a, e in zip(fused_g, tg.grad(loss, argnums=(0, 1))(x, b)):
        np.testing.assert_array_equal(a.numpy(), e.numpy())


@needs_numba
def test_debug_nans_names_the_op_and_line_inside_a_fused_program():
    jf = fused(lambda x: tnp.log(x * 2.0) + 1.0)
    x = tg.Tensor(np.array([1.0, -1.0]))
    _run(jf, x)
    assert jf.lower(x).groups
    with tg.debug_nans(), pytest.raises(FloatingPointError, match=r"log .*test_fusion\.py:"):
        jf(x)


@needs_numba
def test_kernel_source_is_made_of_the_fixed_vocabulary_only():
    x = tg.Tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    secret = 1234.5678

    def f(x):
        return tnp.tanh(x * secret + 7.25).astype(np.float64) * 3.0

    prog = fused(f).lower(x)
    (grp,) = prog.groups
    assert "1234" not in grp.source and "7.25" not in grp.source
    names, attrs = set(), set()
    for node in ast.walk(ast.parse(grp.source)):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            attrs.add(node.attr)
        elif isinstance(node, ast.Constant):
            assert type(node.value) in (int, float, bool) or node.value is None
    allowed = {"np", "math", "range", "abs", "complex", "o", "r", "q", "zero", "kk", "inner",
               "outer", "a", "b", "k", "s", "base", "_pairwise"}
    dtype_names = {"float32", "float64", "complex64", "complex128", "bool_"}

    def made_up(n):  # a slot, temporary, output, loop index or length; an argument converted
        head, _, dtype = n.partition("_")
        return n[0] in "aotin" and head[1:].isdigit() and (not dtype or dtype in dtype_names)

    assert all(n in allowed or made_up(n) for n in names), names
    assert attrs <= {"shape", "empty", "tanh", "float32", "float64"}, attrs


def test_fusion_is_off_unless_asked_for_and_plain_jit_is_bit_exact():
    """``tg.jit(f)`` equals ``f`` to the last bit, transcendental functions included (the C
    math library's ``tanh`` in a kernel is a few ulp from NumPy's); ``fuse=True`` opts in."""
    x, w, c = (tg.Tensor(RNG.standard_normal(16) * 0.5) for _ in range(3))
    fns = {"chain": lambda x: steps(x, w, c, 3), "grad": tg.grad(lambda x: steps(x, w, c, 3)),
           "tanh": lambda x: tnp.tanh(x * 1.5)}
    for name, f in fns.items():
        for jf in (tg.jit(f), tg.jit(f, fuse=False), tg.jit()(f),
                   tg.filter_jit(f), tg.filter_jit(f, fuse=False)):
            got = _run(jf, x)
            np.testing.assert_array_equal(got.numpy(), f(x).numpy(), err_msg=name)
        prog = tg.jit(f).lower(x)
        assert prog.groups == [] and "fused[" not in str(prog)
        if fusion.available():
            assert fused(f).lower(x).groups, name
            assert tg.jit(fuse=True)(f).lower(x).groups, name


@pytest.mark.parametrize("bad", [1, 0, None, "yes", np.bool_(True)], ids=repr)
def test_fuse_must_be_a_bool(bad):
    f = lambda x: x * 2.0  # noqa: E731
    for make, who in ((lambda: tg.jit(f, fuse=bad), "jit"), (lambda: tg.jit(fuse=bad), "jit"),
                      (lambda: tg.filter_jit(f, fuse=bad), "filter_jit")):
        with pytest.raises(TypeError, match=rf"^{who}: fuse must be a bool .*got "):
            make()


def test_without_numba_runs_unfused_and_says_so_once(monkeypatch, caplog):
    x, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal(4))
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba fails
    monkeypatch.setitem(fusion._STATE, "warned", False)
    monkeypatch.setitem(fusion._STATE, "no_numba", False)
    with caplog.at_level(logging.INFO, logger="tapegrad"):
        _run(tg.jit(arith), x, b)  # not asked for: numba is not even looked for
        assert not caplog.records
        assert not fusion.available()
        for _ in range(2):
            jf = fused(arith)
            np.testing.assert_array_equal(_run(jf, x, b).numpy(), arith(x, b).numpy())
            assert not jf.lower(x, b).groups
    assert len(caplog.records) == 1
    assert "numba is not installed" in caplog.records[0].message
    assert "fuse=True" in caplog.records[0].message


def _typing_error():
    import numba

    return numba.core.errors.TypingError("Cannot determine Numba type of <class 'object'>")


@needs_numba
@pytest.mark.parametrize("error", [_typing_error, lambda: RuntimeError("LLVM gave up")],
                         ids=["TypingError", "RuntimeError"])
def test_a_kernel_numba_cannot_compile_runs_as_numpy_calls(monkeypatch, caplog, error):
    """Every kernel fails to build: each group runs its steps as NumPy calls, values and
    gradients equal the eager ones, and the logger warns once per kernel, naming the ops."""
    monkeypatch.setattr(fusion, "_BROKEN", set())
    calls = []

    class Broken:  # a numba dispatcher whose every compile fails
        overloads: dict = {}
        signatures: list = []

        def __init__(self, src):
            self.src = src

        def disable_compile(self, val=True):
            pass

        def compile(self, sig):
            calls.append(self.src)
            raise error()

        def __call__(self, *args):
            raise AssertionError("a kernel that failed to compile was called")

    def broken(src):
        return Broken(src)

    monkeypatch.setattr(fusion, "_kernel", broken)
    x, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal(4))
    grad = tg.grad(loss, argnums=(0, 1))
    with caplog.at_level(logging.WARNING, logger="tapegrad"):
        jf, jg = fused(arith), fused(grad)
        for _ in range(3):
            np.testing.assert_array_equal(jf(x, b).numpy(), arith(x, b).numpy())
            for a, e in zip(jg(x, b), grad(x, b)):
                np.testing.assert_array_equal(a.numpy(), e.numpy())
    assert jf.lower(x, b).groups == [] and "fused[" not in str(jg.lower(x, b))
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs and len(msgs) == len(set(calls))  # one warning per kernel, each tried once
    assert len(calls) == len(set(calls))
    assert any("[mul mul sub]" in m for m in msgs), msgs
    assert all("numba could not compile" in m and type(error()).__name__ in m for m in msgs)


@needs_numba
def test_a_real_typing_error_leaves_the_other_groups_fused(monkeypatch, caplog, tmp_path):
    """numba's own typing error (a kernel source it cannot type) on one kernel: that group's
    steps run as NumPy calls, the program's other group stays fused, results equal eager."""
    monkeypatch.setenv("TAPEGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fusion, "_BROKEN", set())
    source = fusion._source

    def untypable(shape, used, outs, *rest):
        src = source(shape, used, outs, *rest)
        if "sqrt(" not in src:
            return src
        return src.replace("    n0 = ", "    bad = 'a' + 1\n    n0 = ", 1)

    monkeypatch.setattr(fusion, "_source", untypable)
    x, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal(4))
    jf = fused(arith)
    assert [g.ops for g in jf.lower(x, b).groups] == [
        ("mul", "mul", "sub"), ("div", "greater", "maximum", "abs", "sqrt", "sub", "where")]
    with caplog.at_level(logging.WARNING, logger="tapegrad"):
        for _ in range(3):
            np.testing.assert_array_equal(jf(x, b).numpy(), arith(x, b).numpy())
    assert [g.ops for g in jf.lower(x, b).groups] == [("mul", "mul", "sub")]
    text = str(jf.lower(x, b))
    assert "= sqrt " in text and "= where " in text
    (msg,) = [r.getMessage() for r in caplog.records]
    assert "TypingError" in msg and "[div greater maximum abs sqrt sub where]" in msg


@needs_numba
@pytest.mark.parametrize("kernels", ["compile", "fail"])
def test_callbacks_guards_and_large_values_through_the_first_runs(monkeypatch, caplog, kernels):
    """The first run (unfused, then compiling) and the later ones give the eager results, run
    a callback once per call and follow guards; so with every kernel failing to compile."""
    monkeypatch.setattr(fusion, "_BROKEN", set())
    if kernels == "fail":
        def broken(src):
            def kernel(*args):
                raise RuntimeError("no kernel")

            return kernel

        monkeypatch.setattr(fusion, "_kernel", broken)
    seen = []
    m = tg.Tensor(RNG.standard_normal((fusion.MAX_SIZE // 64, 128)))  # large values

    def f(x, b):
        y = arith(x, b)
        tg.debug.callback(lambda v: seen.append(v.numpy().copy()), y)
        big = tnp.sum(tnp.tanh(m * tnp.sum(b)), axis=0)[:4]  # freed once read, unfused
        if tnp.sum(x) > 0:  # a guard: two programs
            return y * 2.0 + big, big
        return y - 1.0, big

    jf, plain = fused(f), tg.jit(f)
    b = tg.Tensor(RNG.standard_normal(4))
    xs = [tg.Tensor(np.abs(RNG.standard_normal((3, 4))) * s) for s in (1, -1, 1, -1, 1, -1)]
    with caplog.at_level(logging.WARNING, logger="tapegrad"):
        for x in xs:
            seen.clear()
            want = f(x, b)
            plain(x, b)  # the callbacks of the unfused program (a flipped guard retraces)
            n = len(seen)
            assert n >= 2
            got = jf(x, b)
            assert len(seen) == 2 * n - 1
            for v in seen[1:]:
                np.testing.assert_array_equal(v, seen[0])
            for a, e in zip(got, want):
                np.testing.assert_array_equal(a.numpy(), e.numpy())
    assert bool(jf.lower(xs[0], b).groups) == (kernels == "compile")
    assert bool(caplog.records) == (kernels == "fail")


_CACHED = """
import sys
import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
f = tg.jit(lambda x: tnp.exp(x * 0.5) - x, fuse=True)
x = tg.Tensor(np.arange(3.0))
f(x); y = f(x)
assert np.allclose(y.numpy(), np.exp(np.arange(3.0) * 0.5) - np.arange(3.0))
(grp,) = f.lower(x).groups
st = grp._kernel.stats
# numba's compiler, set up by a compile (its typing and lowering rules: numba.np.linalg)
print(sum(st.cache_hits.values()), sum(st.cache_misses.values()), "numba.np.linalg" in sys.modules)
"""


@needs_numba
def test_kernels_are_cached_on_disk_across_processes(tmp_path):
    env = dict(os.environ, TAPEGRAD_CACHE_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p])
    runs = [subprocess.run([sys.executable, "-c", _CACHED], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split() == ["0", "1", "True"]  # compiled
    # loaded from the cache, without setting up numba's compiler
    assert runs[1].stdout.split() == ["1", "0", "False"]
    assert any(p.suffix == ".py" for p in tmp_path.iterdir())


class _Cache:
    def __init__(self, result):
        self.result = result

    def _load_overload(self, sig, ctx):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@needs_numba
@pytest.mark.parametrize("result", [None, OSError("unreadable"), ValueError("stale")])
def test_a_cache_miss_or_unreadable_entry_leaves_the_kernel_to_numbas_compile(result):
    import types

    kernel = types.SimpleNamespace(_cache=_Cache(result), targetctx=None, _cache_hits={})
    assert fusion._load_cached(kernel, ()) is False
    assert kernel._cache_hits == {}


def test_kernel_source_of_a_deep_expression_needs_no_recursion():
    """Code generation walks the nodes in a loop: an expression deeper than Python's recursion
    limit still becomes source, each node once, operands first."""
    f64 = np.dtype(np.float64)
    x = fusion._Node("in", (0,), f64, (4,))
    sym = fusion._Sym(x)
    depth = sys.getrecursionlimit() + 100
    for _ in range(depth):
        sym = -sym
    shared = sym * sym  # one node read twice is computed once
    src = fusion._source((4,), [x], [(0, shared.node)])
    body = [ln.strip() for ln in src.splitlines() if ln.strip().startswith("t")]
    assert len(body) == depth + 2  # the load of a0, each negation, the product
    assert body[0] == "t0 = a0[i0]" and body[1] == "t1 = (-t0)"
    assert body[-1] == f"t{depth + 1} = ({f't{depth}'} * {f't{depth}'})"
    compile(src, "kernel", "exec")


@needs_numba
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_trailing_sum_or_mean_joins_the_kernel_and_sums_in_numpys_order(dtype):
    """sum/mean over all axes or one axis ends the group that computes its operand; the kernel
    sums as NumPy does (pairwise along the last axis, blocks of 8 up to 128 elements, halves
    above; in axis order along an outer one), so results equal eager ones to the bit, at sizes
    on each side of NumPy's block boundaries."""
    cases = [((16,), None), ((129,), None), ((1000,), None), ((3, 300), 1), ((3, 300), None),
             ((300, 3), 0), ((2, 3, 40), 1), ((2, 1, 40), -1)]
    for shape, axis in cases:
        x = tg.Tensor((RNG.standard_normal(shape) * 10.0 ** RNG.uniform(-3, 3, shape))
                      .astype(dtype))
        for kind, keepdims in (("sum", False), ("mean", True)):
            red = getattr(tnp, kind)

            def f(x, red=red, axis=axis, keepdims=keepdims):
                return red(x * 1.5 - x * x, axis=axis, keepdims=keepdims)

            jf = fused(f)
            got = _run(jf, x)
            (group,) = jf.lower(x).groups
            assert group.ops == ("mul", "mul", "sub", kind), (shape, axis)
            want = f(x)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=str((shape, axis)))


@needs_numba
def test_reductions_that_stay_library_calls():
    """Over several (not all) axes, over a complex value, or of a value no group computes: a
    NumPy call (beside a fused one where one fits), and the results are still the eager ones."""
    x = tg.Tensor(RNG.standard_normal((3, 4, 5)))
    z = tg.Tensor(RNG.standard_normal(6) + 1j)
    for f, arg, n_fused, n_library in (
            (lambda x: tnp.sum(x * 2.0 + 1.0, axis=(0, 1)), x, 0, 1),
            (lambda z: tnp.sum(z * 2.0 + 1.0), z, 0, 1),
            (lambda x: tnp.sum(x) * tnp.sum(x * 2.0 + 1.0, axis=0), x, 1, 1)):
        jf = fused(f)
        got = _run(jf, arg)
        program = jf.lower(arg)
        assert sum(g.ops.count("sum") for g in program.groups) == n_fused, str(program)
        assert str(program).count("= sum[") == n_library, str(program)
        np.testing.assert_array_equal(got.numpy(), f(arg).numpy())


def _sub_programs(jitted, *args):
    """The sub-programs (loop bodies, branches) the steps of ``jitted``'s program run."""
    from tapegrad.core.subprogram import SubProgram

    out = []
    for s in jitted.lower(*args)._steps:
        for k, v in getattr(s, "params", {}).items():
            if k == "residuals":  # (the base body a backward would read: no program runs it)
                continue
            for x in (v if type(v) is tuple else (v,)):
                if isinstance(x, SubProgram):
                    out.append(x)
    return out


@needs_numba
def test_loop_bodies_and_branches_of_a_fused_program_run_fused():
    """Under ``fuse=True`` the bodies of ``scan`` (also unrolled), ``while_loop`` and ``cond``
    are fused too (each compiled once, whatever the trip count); with arithmetic only, values
    and gradients equal eager's to the bit."""
    b = tg.Tensor(RNG.uniform(0.5, 1.5, size=3))

    def f(x, unroll=1):
        def step(c, xi):
            c = arith(c * 0.5 + xi, b)
            return c, c * c - xi

        c, ys = tg.scan(step, x, tnp.stack([x, x * 2.0, x - 1.0]), unroll=unroll)
        v, _ = tg.while_loop(lambda v: v[1] < 4, lambda v: (arith(v[0], b) * 1.5 + 1.0, v[1] + 1),
                             (c, tg.Tensor(np.int64(0))))
        w = tg.cond(v.sum() > 0, lambda u: arith(u, b) * 2.0 - u, lambda u: u - b, v)
        return (w * ys[1]).sum()

    x = tg.Tensor(RNG.uniform(0.1, 1.0, size=3))
    for g in (f, tg.grad(f), lambda x: tg.grad(f)(x, unroll=2)):
        jitted = fused(g)
        np.testing.assert_array_equal(_run(jitted, x).numpy(), g(x).numpy())
        np.testing.assert_array_equal(jitted(x * 0.5).numpy(), g(x * 0.5).numpy())
        bodies = _sub_programs(jitted, x)
        assert len(bodies) >= 3 and all(body._fuse for body in bodies)
        assert sum(bool(body._prog.groups) for body in bodies if body._prog is not None) >= 2
    # a plain jit leaves them unfused
    assert not any(body._fuse for body in _sub_programs(tg.jit(f), x))
