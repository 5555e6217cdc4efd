"""bfloat16 through every primitive: each ``Function`` subclass tapegrad defines (found by
walking the class tree, with the cases of ``test_rule_conformance``'s specs) is run on its
first case with every floating array input cast to bfloat16, and either

- gives bfloat16 floating outputs (integer/boolean outputs keep their dtype), close to the
  same op run in float32 at bfloat16's tolerance, with bfloat16 gradients; or
- raises a ``TypeError`` whose message names the op;

never a silent float32/float64 result or a bare NumPy error.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import zlib

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def _conformance():
    """The conformance specs module (tests import by path: pytest's importlib mode)."""
    name = "_tapegrad_rule_conformance_specs"
    if name not in sys.modules:
        path = pathlib.Path(__file__).with_name("test_rule_conformance.py")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


_rc = _conformance()
PRIMITIVES, SPECS, Abstract, _cases, qualname = (_rc.PRIMITIVES, _rc.SPECS, _rc.Abstract,
                                                 _rc._cases, _rc.qualname)

BF16 = np.dtype(tg.bfloat16)
#: Cases whose op never sees bfloat16 or must not give it: their results keep the float32
#: reference's dtype (checked), for the reason given.
SAME_AS_FLOAT32 = {
    "ops.elementwise.AsType": "casts to the dtype its case asks for (float32)",
    "ops.elementwise.Angle": "its case makes the input complex (bfloat16 * 1j is complex64)",
    "ops.linalg.Eig": "a real matrix's eigenvectors are complex64; the case's gauge-free "
                      "real parts of them are float32",
    "weak._PythonOp": "computes on Python numbers, held exactly in float64",
}
#: bfloat16 has 8 significant bits: relative rounding 2**-8 per op; cases chain a few.
RTOL, ATOL = 4e-2, 4e-2


def _params():
    out = []
    for cls in sorted(PRIMITIVES, key=qualname):
        if isinstance(SPECS.get(cls), Abstract):
            continue
        cases = [c for c in _cases(cls) if c.raises is None]
        if cases:
            out.append(pytest.param(cls, cases[0], id=qualname(cls)))
    return out


def _cast(args, dtype):
    return tuple(tg.Tensor(a.astype(dtype)) if isinstance(a, np.ndarray) and a.dtype.kind == "f"
                 else tg.Tensor(a) if isinstance(a, np.ndarray) else a for a in args)


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize("cls, case", _params())
def test_every_primitive_computes_in_bfloat16_or_says_it_cannot(cls, case):
    rng = np.random.default_rng(zlib.crc32(qualname(cls).encode()))
    args = case.make(rng)
    if not any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in args):
        pytest.skip("no floating input")
    fn = cls.apply if case.fn is None else case.fn
    params = case.params if case.fn is None else {}
    # the float32 reference sees the same (bfloat16-rounded) values
    rounded = tuple(a.astype(BF16).astype(np.float32)
                    if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args)
    try:
        ref = _outs(fn(*_cast(rounded, np.float32), **params))
    except Exception as e:  # noqa: BLE001 - the float32 case must work; a clear error only
        pytest.skip(f"the float32 case raises {type(e).__name__}")
    try:
        got = _outs(fn(*_cast(args, BF16), **params))
    except TypeError as e:
        name = cls._name()
        assert name in str(e) or cls.__name__ in str(e), (
            f"{qualname(cls)}: TypeError without the op's name: {e}")
        assert "bfloat16" in str(e), f"{qualname(cls)}: TypeError without the dtype: {e}"
        return
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        if not isinstance(r, tg.Tensor):
            continue
        if qualname(cls) in SAME_AS_FLOAT32:
            assert g.dtype == r.dtype, f"{qualname(cls)}: {r.dtype} reference, got {g.dtype}"
        elif r.dtype == np.float32:
            assert g.dtype == BF16, f"{qualname(cls)}: float32 reference, got {g.dtype}"
            np.testing.assert_allclose(g.numpy().astype(np.float32), r.numpy(), rtol=RTOL,
                                       atol=ATOL, err_msg=qualname(cls))
        elif r.dtype == np.complex64:
            assert g.dtype == np.complex64, qualname(cls)
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=RTOL, atol=ATOL)
        else:  # integers and booleans
            assert g.dtype == r.dtype, f"{qualname(cls)}: {r.dtype} reference, got {g.dtype}"


@pytest.mark.parametrize("cls, case", _params())
def test_gradients_of_bfloat16_inputs_are_bfloat16(cls, case):
    if not cls.differentiable:
        pytest.skip("not differentiable")
    rng = np.random.default_rng(zlib.crc32(qualname(cls).encode()))
    args = case.make(rng)
    argnums = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray)
                    and a.dtype.kind == "f" and i not in getattr(cls, "nondiff_argnums", ()))
    if case.checks is not None and "fd" not in case.checks and "jacrev" not in case.checks:
        pytest.skip("no reverse-mode check in its spec")
    if not argnums:
        pytest.skip("no floating input")
    fn = cls.apply if case.fn is None else case.fn
    params = case.params if case.fn is None else {}
    argnums = tuple(i for i in argnums if i in (getattr(fn, "argnums", None) or argnums))

    def loss(*xs, dtype):
        a = list(_cast(args, dtype))
        for i, x in zip(argnums, xs):
            a[i] = x
        outs = [o for o in _outs(fn(*a, **params))
                if isinstance(o, tg.Tensor) and o.dtype.kind not in "biuc"]
        return sum((tnp.sum(o.astype(np.float32)) for o in outs), tg.Tensor(0.0))

    def grads(dtype):
        xs = [tg.Tensor(args[i].astype(dtype)) for i in argnums]
        return tg.grad(lambda *xs: loss(*xs, dtype=dtype), argnums=tuple(range(len(xs))))(*xs)

    try:
        ref = grads(np.float32)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the float32 gradient raises {type(e).__name__}")
    try:
        got = grads(BF16)
    except TypeError as e:
        assert cls._name() in str(e) or cls.__name__ in str(e), str(e)
        return
    for g, r in zip(got, ref):
        assert g.dtype == BF16, f"{qualname(cls)}: gradient dtype {g.dtype}"
        assert np.all(np.isfinite(g.numpy().astype(np.float32)) == np.isfinite(r.numpy()))


# -- drawn shapes: broadcasting, size-0 and size-1 dimensions ---------------------------------
@pytest.mark.parametrize("cls, case", _params())
def test_every_primitive_compiled_by_jit_equals_its_eager_call_in_bfloat16(cls, case):
    """A compiled program's step on bfloat16 inputs widens as the eager call does: the same
    bits (the program runs from the second call on)."""
    rng = np.random.default_rng(zlib.crc32(qualname(cls).encode()))
    args = case.make(rng)
    if not any(isinstance(a, np.ndarray) and a.dtype.kind == "f" for a in args):
        pytest.skip("no floating input")
    fn = cls.apply if case.fn is None else case.fn
    params = case.params if case.fn is None else {}

    def run(dtype, jitted):
        full = list(_cast(args, dtype))
        pos = [i for i, a in enumerate(full) if isinstance(a, tg.Tensor)]

        def call(*ts):
            for i, t in zip(pos, ts):
                full[i] = t
            return fn(*full, **params)

        f = tg.jit(call) if jitted else call
        ins = [full[i] for i in pos]
        if jitted:
            f(*ins)
        return _outs(f(*ins))

    try:
        run(np.float32, True)
        want = run(BF16, False)
    except Exception as e:  # noqa: BLE001 - only ops that compile and take bfloat16 compare
        pytest.skip(f"not compiled or no bfloat16: {type(e).__name__}")
    got = run(BF16, True)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, tg.Tensor):
            assert g.dtype == w.dtype and g.shape == w.shape, qualname(cls)
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=qualname(cls))


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tapegrad.testing.strategies import arrays, broadcastable_shapes  # noqa: E402

BINARY = {"add": tnp.add, "multiply": tnp.multiply, "maximum": tnp.maximum,
          "arctan2": tnp.arctan2, "logaddexp": tnp.logaddexp}


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_binary_ops_on_drawn_shapes_in_bfloat16(name, data):
    sx, sy = data.draw(broadcastable_shapes(2))
    x = data.draw(arrays(sx, np.float32)).astype(BF16)
    y = data.draw(arrays(sy, np.float32)).astype(BF16)
    fn = BINARY[name]
    got = fn(tg.Tensor(x), tg.Tensor(y))
    want = fn(tg.Tensor(x.astype(np.float32)), tg.Tensor(y.astype(np.float32)))
    assert got.dtype == BF16 and got.shape == want.shape
    np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy(), rtol=2.0 ** -7,
                               atol=1e-6)  # one rounding of the float32 result
    gx, gy = tg.grad(lambda a, b: tnp.sum(fn(a, b).astype(np.float32)), argnums=(0, 1))(
        tg.Tensor(x), tg.Tensor(y))
    assert (gx.dtype, gy.dtype, gx.shape, gy.shape) == (BF16, BF16, sx, sy)


@given(data=st.data())
def test_reductions_on_drawn_shapes_and_axes_in_bfloat16(data):
    from hypothesis.extra import numpy as hnp

    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    axis = data.draw(st.sampled_from([None, *range(-len(shape), len(shape))]))
    x = data.draw(arrays(shape, np.float32)).astype(BF16)
    for fn in (tnp.sum, tnp.mean, tnp.prod):
        if fn is tnp.mean and (x.size == 0 or (axis is not None and shape[axis] == 0)):
            continue  # a mean over nothing warns, as NumPy
        got = fn(tg.Tensor(x), axis=axis)
        want = fn(tg.Tensor(x.astype(np.float32)), axis=axis)
        assert got.dtype == BF16 and got.shape == want.shape
        np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy(),
                                   rtol=2.0 ** -7, atol=1e-5)
