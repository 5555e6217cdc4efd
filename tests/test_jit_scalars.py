"""jit and Python numbers: a number argument is weakly typed, as in the eager call, so
``jit(f)(*args)`` equals ``f(*args)`` in value and dtype, and a new value runs the same
program. (property_tests/test_jit_weak.py checks random functions.)"""

import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def _same(a, b):
    a = a.numpy() if isinstance(a, tg.Tensor) else np.asarray(a)
    b = b.numpy() if isinstance(b, tg.Tensor) else np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    np.testing.assert_array_equal(a, b)


def test_the_issue_case_float64_times_a_python_float():
    f = lambda v, s: v * s  # noqa: E731
    fast = tg.jit(f)
    x64 = tg.Tensor(np.array([1.0, 3.0]))
    for s in (0.1, 0.7, 1e-3):
        _same(fast(x64, s), f(x64, s))
    x32 = tg.Tensor(np.array([1.0, 3.0], np.float32))
    _same(fast(x32, 0.1), f(x32, 0.1))
    assert fast.cache_size() == 2  # one program per array dtype, not per value


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int8, np.int16,
                                   np.int64, np.uint8, np.bool_, np.complex64])
@pytest.mark.parametrize("s", [3, 0.25, True, 2 + 1j])
def test_promotion_with_every_array_dtype_is_the_eager_one(dtype, s):
    x = tg.Tensor(np.array([1, 0, 1]).astype(dtype))
    for f in (lambda v, s: v * s, lambda v, s: s - v, lambda v, s: tnp.maximum(v, s),
              lambda v, s: tnp.where(v != 0, s, v)):
        try:
            want = f(x, s)
        except TypeError as e:  # e.g. maximum with a complex number: the same error
            with pytest.raises(type(e)):
                tg.jit(f)(x, s)
            continue
        _same(tg.jit(f)(x, s), want)


def test_python_arithmetic_between_numbers_is_python_s():
    f = lambda a, b: (a / b, a // b, a % b, a ** b, -a, abs(a), a * 1.5, a > b)  # noqa: E731
    fast = tg.jit(f)
    for a, b in ((7, 2), (7, -2), (-7, 3), (2, -1), (3, 0.5), (2.5, 2.0), (True, 2)):
        for got, want in zip(fast(a, b), f(a, b)):
            _same(got, want)
    c = tg.jit(lambda a, b: (a * b, a / b, abs(a)))
    for got, want in zip(c(1 + 2j, 3 - 1j), ((1 + 2j) * (3 - 1j), (1 + 2j) / (3 - 1j),
                                             abs(1 + 2j))):
        _same(got, want)
    assert tg.jit(lambda a, b: a ** b)(-8.0, 1 / 3).numpy() == (-8.0) ** (1 / 3)  # complex


def test_python_errors_are_raised_as_eagerly():
    div = tg.jit(lambda a, b: a / b)
    assert float(div(1.0, 4.0)) == 0.25
    with pytest.raises(ZeroDivisionError, match="float division by zero"):
        div(1.0, 0.0)
    with pytest.raises(OverflowError, match="Python integer 300 out of bounds for uint8"):
        tg.jit(lambda v, s: v + s)(tg.Tensor(np.array([1], np.uint8)), 300)
    with pytest.raises(TypeError, match="bad operand type for unary ~: 'float'"):
        tg.jit(lambda s: ~s)(1.5)


def test_functions_of_a_number_make_the_tensor_tensor_would():
    f = lambda v, s: (tnp.exp(s), tnp.multiply(s, 2.0), tg.Tensor(s), v * tnp.sqrt(s))  # noqa
    x = tg.Tensor(np.array([1.0, 2.0]))
    for s in (0.5, 2.0):
        for got, want in zip(tg.jit(f)(x, s), f(x, s)):
            _same(got, want)


def test_decisions_on_a_number_are_guards():
    def f(x, n, s):
        for _ in range(n):  # int(n): the program is for this n
            x = x * 2
        return x + s if s > 0 else x - s

    fast = tg.jit(f)
    x = tg.Tensor(np.array([1.0]))
    for n, s in ((2, 0.5), (2, 0.25), (3, 0.25), (2, -0.5)):
        _same(fast(x, n, s), f(x, n, s))
    assert fast.cache_size() == 3  # n=2 and s > 0, n=3, s <= 0


def test_number_results_hold_the_value_exactly():
    out = tg.jit(lambda a, b, flag, z: (a * b, a + 1, flag, z * 2, 0.1))(3, 0.1, True, 1j)
    want = (3 * 0.1, 4, True, 2j, 0.1)
    for got, w in zip(out, want):
        _same(got, w)


def test_a_gradient_with_respect_to_a_number_inside_jit():
    f = tg.grad(lambda s, x: (tnp.sin(x * s) * s).sum())
    x = tg.Tensor(np.array([0.3, 0.4]))
    for s in (0.5, 1.5):
        _same(tg.jit(f)(s, x), f(s, x))  # float32, as grad of a Python float eagerly


def test_numpy_and_math_see_the_value():
    f = lambda s: (math.sin(s), np.sqrt(s), round(s, 1), int(s))  # noqa: E731
    for s in (2.25, 0.36):
        for got, want in zip(tg.jit(f)(s), f(s)):
            _same(got, want)


def test_an_int_too_large_for_int64_is_static():
    f = lambda v, n: v * n  # noqa: E731
    x = tg.Tensor(np.array([1.0, 2.0], np.float32))
    fast = tg.jit(f)
    for n in (2**70, 3, 2**70, -(2**64)):
        _same(fast(x, n), f(x, n))
    assert fast.cache_size() == 3  # each large value, and one program for the int64 ones


def test_a_number_python_needs_concretely_makes_a_program_for_its_value():
    x = tg.Tensor(np.arange(6.0))
    cases = [
        lambda x, n: tnp.zeros(n) + x[:n],
        lambda x, n: x[n] * n,
        lambda x, n: tnp.full((2,), n),
        lambda x, n: tnp.sum(x.reshape(2, 3), axis=n % 2),
        lambda x, n: tnp.arange(n) * x[:n],
        lambda x, n: x * 2 if isinstance(n, int) else x,
        lambda x, n: x * n if isinstance(n, float) else x - n,
    ]
    for f in cases:
        fast = tg.jit(f)
        for n in (2, 3, 2):
            _same(fast(x, n), f(x, n))
        _same(fast(x, 2.5), f(x, 2.5)) if f is cases[-1] else None
    assert isinstance(tg.jit(lambda n: n)(3), tg.Tensor)
