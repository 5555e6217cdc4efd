"""The compiled Tensor constructors (src/tapegrad/_speedups.c) against the pure-Python ones."""

import gc
import os
import shutil
import subprocess
import sys
import sysconfig
import weakref

import attrs
import numpy as np
import pytest

import tapegrad as tg

_tensor = sys.modules["tapegrad.tensor"]
SLOTS = ("_array", "_primal", "_level", "_trace", "_node", "label")


def _slots(t):
    return tuple(object.__getattribute__(t, s) for s in SLOTS)


def _compiler_available() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


def test_extension_is_built_where_a_compiler_exists():
    # The extension is optional for installs without a C compiler; where one exists (CI, every
    # development machine) a missing module means the build broke, which must not pass silently.
    if os.environ.get("TAPEGRAD_NO_SPEEDUPS"):
        pytest.skip("TAPEGRAD_NO_SPEEDUPS is set: the pure-Python constructors are in use")
    if not _compiler_available():
        pytest.skip("no C compiler: the optional extension cannot have been built")
    assert _tensor._speedups is not None, "tapegrad._speedups failed to build or import"
    assert tg.Tensor._const is _tensor._speedups.const


speedups = pytest.mark.skipif(_tensor._speedups is None, reason="tapegrad._speedups not built")


@speedups
def test_the_built_extension_matches_its_source():
    # An editable install compiles src/tapegrad/_speedups.c once; after editing it, rerun
    # ``pip install -e .``, or the old build keeps running.
    import hashlib
    import pathlib

    src = pathlib.Path(_tensor.__file__).with_name("_speedups.c")
    if not src.exists():
        pytest.skip("installed without sources")
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    assert _tensor._speedups.SOURCE_SHA256 == sha, (
        "tapegrad._speedups is stale: _speedups.c changed since it was built; "
        "rerun `pip install -e .`"
    )


@speedups
@pytest.mark.parametrize(
    "values",
    [
        (np.arange(3.0), None, 0, None, -1, None),
        (np.zeros((2, 0)), "primal", 3, "trace", 17, "label"),
        (np.float32(1.5), None, 1, object(), 0, None),
    ],
)
def test_make_matches_the_python_constructor(values):
    c = _tensor._speedups.make(*values)
    p = _tensor._make_py(*values)
    assert type(c) is type(p) is tg.Tensor
    for a, b, v in zip(_slots(c), _slots(p), values):
        assert a is v and b is v


@speedups
def test_const_matches_the_python_constructor():
    a = np.arange(4.0)
    for args in ((a,), (a, "x")):
        c = _tensor._speedups.const(*args)
        p = _tensor._const_py(*args)
        assert _slots(c) == _slots(p) == (a, None, 0, None, -1, args[1] if len(args) > 1 else None)


@speedups
def test_compiled_tensors_are_ordinary_frozen_records():
    a = np.arange(3.0)
    t = _tensor._speedups.const(a, "w")
    assert attrs.has(type(t)) and t.label == "w" and t.shape == (3,)
    with pytest.raises(AttributeError, match="immutable"):
        t.label = "v"
    r = weakref.ref(t)
    assert r() is t
    np.testing.assert_array_equal((t * 2.0).numpy(), a * 2.0)
    float(tg.grad(lambda x: (x * x).sum())(t).sum())
    del t
    gc.collect()
    assert r() is None


@speedups
def test_constructors_hold_one_reference_per_slot_and_release_it():
    a, trace, label = np.arange(3.0), object(), "label-" + str(id(object()))
    before = [sys.getrefcount(v) for v in (a, trace, label)]
    ts = [_tensor._speedups.make(a, None, 2, trace, 5, label) for _ in range(100)]
    during = [sys.getrefcount(v) for v in (a, trace, label)]
    assert [d - b for d, b in zip(during, before)] == [100, 100, 100]
    del ts
    assert [sys.getrefcount(v) for v in (a, trace, label)] == before
    # GC sees the slots (a cycle through a Tensor is collected)
    holder = []
    t = _tensor._speedups.make(a, None, 1, holder, 0, None)
    holder.append(t)
    r = weakref.ref(t)
    del t, holder
    gc.collect()
    assert r() is None


@speedups
def test_wrong_argument_counts_raise():
    with pytest.raises(TypeError, match="takes 6 arguments"):
        _tensor._speedups.make(np.zeros(1))
    with pytest.raises(TypeError, match="takes 1 or 2 arguments"):
        _tensor._speedups.const()
    with pytest.raises(TypeError, match="not a slot"):
        _tensor._speedups.init(int)
    with pytest.raises(TypeError, match="int.level is not a slot"):
        _tensor._speedups.init_trace(int)  # refused before anything changes
    tg.grad(lambda x: (x * x).sum())(tg.Tensor([1.0]))  # recording still works


def test_pure_python_constructors_run_the_library():
    # The fallback path (no compiler, or TAPEGRAD_NO_SPEEDUPS=1) computes the same gradients.
    code = (
        "import sys, numpy as np, tapegrad as tg, tapegrad.numpy as tnp\n"
        "t = sys.modules['tapegrad.tensor']\n"
        "assert t._speedups is None and t._make is t._make_py\n"
        "x = tg.Tensor(np.linspace(-1, 1, 5))\n"
        "f = lambda x: (tnp.tanh(x * 2.0) * x).sum()\n"
        "print(repr(tg.grad(lambda x: tg.grad(f)(x).sum())(x).numpy().tolist()))\n"
    )
    env = dict(os.environ, TAPEGRAD_NO_SPEEDUPS="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    x = tg.Tensor(np.linspace(-1, 1, 5))

    def f(x):
        return (tg.numpy.tanh(x * 2.0) * x).sum()

    here = tg.grad(lambda x: tg.grad(f)(x).sum())(x).numpy().tolist()
    assert eval(out.stdout) == here


@speedups
def test_compiled_all_concrete_agrees_with_the_python_original():
    from tapegrad import function

    assert function._all_concrete is _tensor._speedups.all_concrete
    seen = []

    def probe(*ts):
        seen.append((function._all_concrete(*ts), function._all_concrete_py(*ts)))

    c = tg.Tensor(np.ones(3))
    probe()
    probe(c, c)
    probe(c, np.ones(3))  # not a Tensor
    probe(c, 1.0)

    def f(x):
        probe(x)  # traced by grad
        probe(c)
        return (x * c).sum()

    tg.grad(f)(c)
    with tg.lazy():  # lazy recording open in this thread: nothing is concrete
        probe(c)
    try:
        tg.mode("lazy")  # or for the whole process
        probe(c, c)
    finally:
        tg.mode("eager")
    assert [a for a, _ in seen] == [b for _, b in seen]
    assert [a for a, _ in seen] == [True, True, False, False, False, True, False, False]


@speedups
def test_transforms_use_the_compiled_collector_pause():
    from tapegrad import tape, transforms

    assert tape.gc_paused is _tensor._speedups.GCPause
    assert transforms.gc_paused is _tensor._speedups.GCPause
    was = gc.isenabled()
    gc.enable()
    try:
        pause = tape.gc_paused()
        with pause as entered:
            assert entered is pause and not gc.isenabled()
        assert gc.isenabled()
    finally:
        if not was:
            gc.disable()


@speedups
def test_trace_inputs_matches_the_python_loop_or_declines():
    from tapegrad import transforms
    from tapegrad.tape import Trace

    def both(leaves):
        tc, tp = Trace(7, False), Trace(7, False)
        got = _tensor._speedups.trace_inputs(leaves, tc)
        return got, tc, transforms._trace_inputs(tp, leaves, (leaves,), "args", "grad", True), tp

    leaves = [tg.Tensor(np.ones(2)), tg.Tensor(np.zeros((2, 3), np.float32), label="w")]
    got, tc, (primals, want), tp = both(leaves)
    assert primals == leaves
    assert [_slots(t)[:3] + _slots(t)[4:] for t in got] == [
        _slots(t)[:3] + _slots(t)[4:] for t in want
    ]
    assert all(t._trace is tc for t in got)
    assert (tc.avals, tc.labels, tc.n_nodes) == (tp.avals, tp.labels, tp.n_nodes)
    assert tc.labels == {1: "w"} and tc.n_nodes == 2
    assert _tensor._speedups.trace_inputs((), Trace(1, False)) == []
    declined = [
        [leaves[0], np.ones(2)],  # an array, not a Tensor
        [leaves[0], tg.Tensor(np.arange(3))],  # integer
        [leaves[0], tg.Tensor(np.ones(2, np.complex128))],  # complex
        [leaves[0], 1.0],
    ]

    def traced_leaf(x):
        declined.append([x])
        return x.sum()

    tg.grad(traced_leaf)(leaves[0])
    for case in declined:
        t = Trace(3, False)
        assert _tensor._speedups.trace_inputs(case, t) is None
        assert (t.avals, t.labels, t.n_nodes) == ([], {}, 0)  # nothing changed
    assert _tensor._speedups.trace_inputs(iter(leaves), Trace(1, False)) is None


@speedups
def test_add_scaled_matches_the_python_loop_or_declines():
    from tapegrad.optim import transforms as otx

    rng = np.random.default_rng(3)
    f32 = [tg.Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((3, 2), (2,))]
    upd = [tg.Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((3, 2), (2,))]
    keep = [u.numpy().copy() for u in upd]
    got = _tensor._speedups.add_scaled(f32, upd, -0.1)
    want = otx._add_scaled_py(f32, upd, -0.1)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.float32 and _slots(g)[1:] == _slots(w)[1:]
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    assert all(np.array_equal(u.numpy(), k) for u, k in zip(upd, keep))  # updates untouched
    f64 = tg.Tensor(np.ones(2))
    cases = [
        ([f32[1]], [f64], -0.1),  # dtypes differ
        ([f32[0]], [upd[1]], -0.1),  # shapes differ
        ([tg.Tensor(np.float32(1))], [tg.Tensor(np.float32(2))], -0.1),  # 0-d
        ([tg.Tensor(np.arange(2))], [tg.Tensor(np.arange(2))], -0.1),  # integer
        ([f32[1]], [upd[1].numpy()], -0.1),  # an array, not a Tensor
        ([f32[1]], [[upd[1]]], -0.1),  # a subtree where params has a leaf
        ([f32[1]], [upd[1]], np.float64(-0.1)),  # not a Python float
    ]
    for lp, lu, factor in cases:
        assert _tensor._speedups.add_scaled(lp, lu, factor) is None
        if type(factor) is float:
            assert otx._add_scaled_py(lp, lu, factor) is None
    assert _tensor._speedups.add_scaled(f32, upd[:1], -0.1) is None  # lengths differ

    def traced(x):
        assert _tensor._speedups.add_scaled([x], [x], 0.5) is None
        assert otx._add_scaled_py([x], [x], 0.5) is None
        return x.sum()

    tg.grad(traced)(f64)
