"""``jit(f)(*args)`` equals ``f(*args)`` in value and dtype for every kind of argument, Python
numbers included (they are weakly typed, as eagerly): random small functions of Python
floats, ints, bools and complex numbers and of Tensors of several dtypes and shapes, on the
first call and on later calls with new values."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp

KINDS = ["float", "int", "bool", "complex", "float32", "float64", "int16", "int64", "bool_t",
         "complex64"]
SHAPES = [(), (2,), (3, 1), (1, 2), (0,)]

OPS = {
    "add": (2, lambda a, b: a + b),
    "sub": (2, lambda a, b: a - b),
    "mul": (2, lambda a, b: a * b),
    "div": (2, lambda a, b: a / (abs(b) + 1)),
    "radd": (1, lambda a: 1.5 + a),
    "rsub_int": (1, lambda a: 3 - a),
    "mul_int": (1, lambda a: a * 2),
    "neg": (1, lambda a: -a),
    "abs": (1, lambda a: abs(a)),
    "lt": (2, lambda a, b: a < b),
    "eq": (2, lambda a, b: a == b),
    "multiply": (2, tnp.multiply),
    "maximum": (2, tnp.maximum),
    "exp": (1, tnp.exp),
    "square": (1, tnp.square),
    "where": (3, lambda c, a, b: tnp.where(tnp.asarray(c) != 0, a, b)),
    "floordiv": (2, lambda a, b: a // (abs(b) + 1)),
    "pow_int": (1, lambda a: a ** 2),
    "pow": (2, lambda a, b: a ** b),
    "mod": (2, lambda a, b: a % (abs(b) + 1)),
    "branch": (1, lambda a: a * 2 if bool(tnp.all(tnp.asarray(a) > 0)) else a - 1),
    "sum_float": (1, lambda a: float(tnp.sum(tnp.asarray(a))) * 0.5),
}


def _value(kind, shape, draw):
    small = st.integers(-3, 3)
    if kind == "float":
        return draw(st.floats(-3, 3, allow_nan=False).map(lambda v: round(v, 3)))
    if kind == "int":
        return draw(small)
    if kind == "bool":
        return draw(st.booleans())
    if kind == "complex":
        return complex(draw(small), draw(small)) / 2
    dtype = {"bool_t": np.bool_}.get(kind, kind)
    n = int(np.prod(shape))
    if dtype is np.bool_:
        data = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    else:
        data = draw(st.lists(small, min_size=n, max_size=n))
    arr = np.asarray(data).reshape(shape)
    if kind.startswith("complex"):
        arr = arr + 0.5j * arr[::-1] if arr.ndim else arr + 0.5j
    return tg.Tensor(arr.astype(dtype))


@st.composite
def programs(draw):
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in kinds]
    n_steps = draw(st.integers(1, 4))
    steps = []
    for k in range(n_steps):
        name = draw(st.sampled_from(sorted(OPS)))
        arity = OPS[name][0]
        refs = [draw(st.integers(0, len(kinds) + k - 1)) for _ in range(arity)]
        steps.append((name, refs))
    return kinds, shapes, steps


def _make(steps, n_in):
    def f(*args):
        vals = list(args)
        for name, refs in steps:
            vals.append(OPS[name][1](*[vals[r] for r in refs]))
        return vals[n_in:][-2:]

    return f


def _outcome(f, args):
    try:
        return "ok", f(*args)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError) as e:
        return "error", type(e)


def _as_array(v):
    return v.numpy() if isinstance(v, tg.Tensor) else np.asarray(v)


def _same(eager, jitted):
    assert eager[0] == jitted[0], (eager, jitted)
    if eager[0] == "error":
        assert eager[1] is jitted[1], (eager, jitted)
        return
    for e, j in zip(eager[1], jitted[1]):
        ea, ja = _as_array(e), _as_array(j)
        assert ea.dtype == ja.dtype, (ea.dtype, ja.dtype, e, j)
        assert ea.shape == ja.shape
        np.testing.assert_array_equal(ea, ja)


@given(prog=programs(), data=st.data())
def test_jit_equals_eager_for_python_numbers_and_tensors(prog, data):
    kinds, shapes, steps = prog
    f = _make(steps, len(kinds))
    fast = tg.jit(f)
    with np.errstate(all="ignore"):
        for _ in range(3):  # the first call records; later ones, with new values, replay
            args = [_value(k, s, data.draw) for k, s in zip(kinds, shapes)]
            _same(_outcome(f, args), _outcome(fast, args))


@given(x=st.floats(-1e6, 1e6, allow_nan=False), s=st.floats(-1e3, 1e3, allow_nan=False),
       n=st.integers(-100, 100))
def test_scalar_arithmetic_before_an_array_is_exact(x, s, n):
    f = lambda v, s, n: v * (s * 3.0 - n / 7) + (n // 3) * s  # noqa: E731
    for dtype in (np.float32, np.float64):
        v = tg.Tensor(np.asarray([x, -x], dtype))
        want, got = f(v, s, n), tg.jit(f)(v, s, n)
        assert got.dtype == want.dtype == dtype
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert math.isfinite(x)
