"""jit's fusion pass: elementwise regions of a compiled program run as numba kernels.

Kept to a few kernel structures (each costs a numba compile): the same small programs serve
several checks.
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

pytestmark = pytest.mark.usefixtures("fused")
RNG = np.random.default_rng(0)


def unfused(f, *args):
    """``jit(f)(*args)`` with fusion off (one NumPy call per op)."""
    before = fusion.set_enabled(False)
    try:
        return tg.jit(f)(*args)
    finally:
        fusion.set_enabled(before)


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


def test_lower_shows_the_groups():
    x, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal(4))
    prog = tg.jit(arith).lower(x, b)
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
def test_arithmetic_is_bit_exact_values_and_gradients(dtype, shapes):
    x = tg.Tensor(RNG.standard_normal(shapes[0]).astype(dtype))
    b = tg.Tensor(RNG.standard_normal(shapes[1]).astype(dtype))
    jf = tg.jit(arith)
    got = _run(jf, x, b)
    assert jf.lower(x, b).groups
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.numpy(), arith(x, b).numpy())
    np.testing.assert_array_equal(got.numpy(), unfused(arith, x, b).numpy())
    grad = tg.grad(loss, argnums=(0, 1))
    jg = tg.jit(grad)
    fused_g = _run(jg, x, b)
    assert jg.lower(x, b).groups
    for a, e, u in zip(fused_g, grad(x, b), unfused(grad, x, b)):
        assert a.dtype == e.dtype == dtype
        np.testing.assert_array_equal(a.numpy(), e.numpy())
        np.testing.assert_array_equal(a.numpy(), u.numpy())


def test_repeated_blocks_share_kernels_and_match_eager():
    x, w, c = (tg.Tensor(RNG.standard_normal(16) * 0.5) for _ in range(3))
    g = tg.grad(lambda x: steps(x, w, c, 40))
    jg = tg.jit(g)
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
    np.testing.assert_allclose(_run(tg.jit(g2), x2).numpy(), g2(x2).numpy(), rtol=1e-13)
    assert len(fusion._KERNELS) == n_kernels


def test_large_arrays_keep_transcendental_functions_as_numpy_calls():
    x = tg.Tensor(RNG.standard_normal((4, fusion.SMALL)))
    g = tg.grad(lambda x: tnp.sum(tnp.tanh(x * 2.0 + 1.0)))
    jg = tg.jit(g)
    prog = jg.lower(x)
    assert [grp.ops for grp in prog.groups] == [("mul", "add"), ("unary_grad", "mul")]
    assert "= tanh " in str(prog)
    np.testing.assert_array_equal(_run(jg, x).numpy(), g(x).numpy())  # exact: arithmetic
    big = tg.Tensor(np.zeros(fusion.MAX_SIZE + 1))
    assert not jg.lower(big).groups  # beyond MAX_SIZE: NumPy calls


def test_nan_and_inf_as_eager_without_warnings():
    x = tg.Tensor(np.array([[0.0, -0.0, 1.0, np.inf], [-np.inf, np.nan, -2.0, 3.0]]))
    b = tg.Tensor(np.array([0.0, -2.0, np.nan, np.inf]))
    got = _run(tg.jit(arith), x, b)  # warnings are errors here
    np.testing.assert_array_equal(got.numpy(), arith(x, b).numpy())
    fused_g = _run(tg.jit(tg.grad(loss, argnums=(0, 1))), x, b)
    for a, e in zip(fused_g, tg.grad(loss, argnums=(0, 1))(x, b)):
        np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_debug_nans_names_the_op_and_line_inside_a_fused_program():
    jf = tg.jit(lambda x: tnp.log(x * 2.0) + 1.0)
    x = tg.Tensor(np.array([1.0, -1.0]))
    _run(jf, x)
    assert jf.lower(x).groups
    with tg.debug_nans(), pytest.raises(FloatingPointError, match=r"log .*test_fusion\.py:"):
        jf(x)


def test_kernel_source_is_made_of_the_fixed_vocabulary_only():
    x = tg.Tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    secret = 1234.5678

    def f(x):
        return tnp.tanh(x * secret + 7.25).astype(np.float64) * 3.0

    prog = tg.jit(f).lower(x)
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
    allowed = {"np", "range", "abs", "complex"}
    assert all(n in allowed or n[0] in "aotin" and n[1:].isdigit() for n in names), names
    assert attrs <= {"shape", "empty", "tanh", "float32", "float64"}, attrs


def test_switched_off_and_without_numba(monkeypatch, caplog):
    x, b = tg.Tensor(RNG.standard_normal((3, 4))), tg.Tensor(RNG.standard_normal(4))
    before = fusion.set_enabled(False)
    try:
        assert not fusion.enabled() and not tg.jit(arith).lower(x, b).groups
    finally:
        fusion.set_enabled(before)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba fails
    monkeypatch.setitem(fusion._STATE, "warned", False)
    monkeypatch.setitem(fusion._STATE, "no_numba", False)
    with caplog.at_level(logging.INFO, logger="tapegrad"):
        for _ in range(2):
            jf = tg.jit(arith)
            np.testing.assert_array_equal(_run(jf, x, b).numpy(), arith(x, b).numpy())
            assert not jf.lower(x, b).groups
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "numba is not installed" in caplog.records[0].message
    with pytest.raises(TypeError, match="set_enabled: on must be a bool"):
        fusion.set_enabled(1)  # pyright: ignore[reportArgumentType]


_CACHED = """
import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
f = tg.jit(lambda x: tnp.exp(x * 0.5) - x)
x = tg.Tensor(np.arange(3.0))
f(x); y = f(x)
assert np.allclose(y.numpy(), np.exp(np.arange(3.0) * 0.5) - np.arange(3.0))
(grp,) = f.lower(x).groups
st = grp._kernel.stats
print(sum(st.cache_hits.values()), sum(st.cache_misses.values()))
"""


def test_kernels_are_cached_on_disk_across_processes(tmp_path):
    env = dict(os.environ, TAPEGRAD_CACHE_DIR=str(tmp_path), TAPEGRAD_FUSION="1")
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p])
    runs = [subprocess.run([sys.executable, "-c", _CACHED], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split() == ["0", "1"]  # compiled
    assert runs[1].stdout.split() == ["1", "0"]  # loaded from the cache
    assert any(p.suffix == ".py" for p in tmp_path.iterdir())
