"""tapegrad.distributed: collectives, sharding, the gradient transformation, faults, installs.

Multi-process tests launch this file under ``mpiexec -n N`` (``python tests/test_distributed.py
worker``): every rank runs :func:`_worker`, which checks the collectives against NumPy on all
ranks' values. The in-process tests run as a job of one (world size 1). Tests that need MPI
skip where mpi4py is missing; CI installs it with the ``test`` extra (mpi4py and the MPICH wheel).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tapegrad as tg
from tapegrad import distributed as dist
from tapegrad import optim

HERE = pathlib.Path(__file__).resolve()
ROOT = HERE.parents[1]
LAUNCH_TIMEOUT = 120  # seconds; a hang in a job shows up as this timeout


# -- launching jobs --------------------------------------------------------------------------
def _mpiexec(n: int) -> list:
    """``mpiexec -n n`` of the MPI next to this Python (the MPICH wheel's), else on PATH."""
    pytest.importorskip("mpi4py")
    local = pathlib.Path(sys.executable).with_name("mpiexec")
    exe = str(local) if local.exists() else shutil.which("mpiexec") or shutil.which("mpirun")
    if exe is None:
        pytest.skip("mpi4py is installed but no mpiexec was found")
    cmd = [exe, "-n", str(n)]
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    if re.search(r"Open MPI|OpenRTE|PRRTE|prterun", version.stdout + version.stderr):
        cmd.append("--oversubscribe")  # more ranks than cores (MPICH allows it as is)
    return cmd


def _env() -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # the ranks share this machine's cores
    env["OMPI_ALLOW_RUN_AS_ROOT"] = env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"  # CI runs as root
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _launch(n: int, *args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_mpiexec(n), sys.executable, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT,
        env=_env(),
        cwd=cwd,
    )


def _value(k: int, shape, dtype, rank: int) -> np.ndarray:
    """A deterministic array for ``rank``: every rank can compute every rank's value."""
    g = np.random.default_rng([k, rank])
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return g.random(shape) < 0.5
    if dtype.kind in "iu":
        return g.integers(-50, 50, size=shape).astype(dtype)
    x = g.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * g.standard_normal(shape)
    return np.asarray(x.astype(dtype))


def _np(x) -> np.ndarray:
    return x.numpy() if isinstance(x, tg.Tensor) else np.asarray(x)


# -- what every rank of a job checks ---------------------------------------------------------
def _worker(n_expected: int) -> None:
    dist.init(timeout=120)
    r, n = dist.rank(), dist.world_size()
    assert n == n_expected, (n, n_expected)
    assert 0 <= dist.local_rank() < dist.local_size() == n  # one machine
    _check_allreduce_kinds(r, n)
    _check_random_trees(r, n)
    _check_fusion()
    _check_broadcast(r, n)
    _check_allgather(r, n)
    _check_shard(n)
    _check_mismatches(r, n)
    _check_traced()
    _check_gradient_transformation(r)
    _check_uneven_batches_recipe()
    dist.barrier()
    print(f"rank {r}/{n}: all distributed checks passed", flush=True)


def _kinds_tree(rank: int) -> dict:
    return {
        "t": tg.Tensor(_value(1, (3, 4), np.float32, rank), label="t"),
        "a": _value(2, (5,), np.float64, rank),
        "i": _value(3, (2, 2), np.int64, rank),
        "h": _value(4, (3,), np.float16, rank),
        "c": _value(5, (2,), np.complex64, rank),
        "g": np.float32(_value(6, (), np.float32, rank)),
        "p": float(_value(7, (), np.float64, rank)),
        "q": int(_value(8, (), np.int64, rank)),
        "e": np.zeros((0, 3), np.float32),
    }


def _root(a):
    """The array that owns ``a``'s memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _check_allreduce_kinds(r: int, n: int) -> None:
    mine = _kinds_tree(r)
    before = {k: _np(v).copy() for k, v in mine.items()}
    every = [_kinds_tree(k) for k in range(n)]
    out = dist.allreduce(mine, "sum")
    assert isinstance(out["t"], tg.Tensor) and out["t"].label == "t" and out["t"].dtype == "float32"
    assert type(out["a"]) is np.ndarray and type(out["g"]) is np.float32
    assert type(out["p"]) is float and type(out["q"]) is int and out["h"].dtype == np.float16
    for k in mine:
        wide = np.complex128 if k == "c" else np.float64
        ref = sum(_np(t[k]).astype(wide) for t in every)
        np.testing.assert_allclose(_np(out[k]), ref, rtol=2e-3 if k == "h" else 1e-5, err_msg=k)
        np.testing.assert_array_equal(_np(mine[k]), before[k])  # inputs unchanged
    floats = {k: mine[k] for k in ("t", "a", "h", "c", "g", "p", "e")}
    mean = dist.allreduce(floats, "mean")
    for k in floats:
        wide = np.complex128 if k == "c" else np.float64
        ref = np.mean([_np(t[k]).astype(wide) for t in every], axis=0)
        tol = 2e-3 if k == "h" else 1e-5
        np.testing.assert_allclose(_np(mean[k]), ref, rtol=tol, atol=1e-6, err_msg=k)
    # The mean is the sum divided by n, to the last bit: for a power-of-two n the division
    # is folded into the packing, which must not change a single result.
    for k in ("t", "a", "c"):
        total = _np(dist.allreduce(floats[k], "sum"))
        np.testing.assert_array_equal(_np(mean[k]), total / np.array(n, total.real.dtype),
                                      err_msg=k)
    # Results are views of one new fused buffer: nothing is copied out, no leaf overlaps
    # another, and writing into one changes neither another leaf nor an input.
    arrays = dist.allreduce({"x": np.ones((4, 3)), "y": np.ones(5), "z": np.ones(2)}, "mean")
    assert len({id(_root(v)) for v in arrays.values()}) == 1
    assert not np.shares_memory(arrays["x"], arrays["y"])
    arrays["x"][...] = 7.0
    np.testing.assert_array_equal(arrays["y"], np.ones(5))
    ts = dist.allreduce({"u": mine["t"], "v": mine["t"] * 2.0}, "sum")  # Tensors: no copy
    assert _root(ts["u"].numpy()) is _root(ts["v"].numpy())
    assert _root(ts["u"].numpy()) is not _root(mine["t"].numpy())
    reals = {k: mine[k] for k in ("t", "a", "i", "h", "g", "p", "q")}
    for op, fn in (("max", np.max), ("min", np.min)):
        got = dist.allreduce({**reals, "b": _value(9, (4,), bool, r)}, op)
        for k in reals:
            ref = fn([_np(t[k]) for t in every], axis=0)
            np.testing.assert_array_equal(_np(got[k]), ref, err_msg=f"{op} {k}")
        any_all = np.any if op == "max" else np.all
        assert got["b"].dtype == bool
        np.testing.assert_array_equal(
            got["b"], any_all([_value(9, (4,), bool, k) for k in range(n)], axis=0)
        )


def _check_random_trees(r: int, n: int) -> None:
    """Random pytrees (size-0 and size-1 axes, mixed dtypes, small buckets) against NumPy."""
    g = np.random.default_rng(123)  # the same draws on every rank
    dtypes = [np.float32, np.float64, np.int32, np.int64, np.float16, np.complex128]
    for case in range(25):
        specs = []
        for _ in range(int(g.integers(1, 6))):
            shape = tuple(int(d) for d in g.choice([0, 1, 2, 3, 7], size=g.integers(0, 4)))
            specs.append((shape, dtypes[int(g.integers(len(dtypes)))]))
        op = ["sum", "max", "min", "mean"][case % 4]
        if op == "mean":
            specs = [(s, d) for s, d in specs if np.dtype(d).kind in "fc"] or [((2,), np.float32)]
        if op in ("max", "min"):
            specs = [(s, d) for s, d in specs if np.dtype(d).kind != "c"] or [((2,), np.int32)]
        bucket = int(g.choice([1, 16, 64, 2**20]))
        trees = [
            [_value(1000 * case + j, s, d, k) for j, (s, d) in enumerate(specs)] for k in range(n)
        ]
        out = dist.allreduce(trees[r], op, bucket_bytes=bucket)
        for j, (_, d) in enumerate(specs):
            stack = np.stack(
                [
                    t[j].astype(np.complex128 if np.dtype(d).kind == "c" else np.float64)
                    for t in trees
                ]
            )
            ref = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op](stack, axis=0)
            assert out[j].dtype == d and out[j].shape == specs[j][0]
            tol = 2e-3 if d == np.float16 else 1e-5
            np.testing.assert_allclose(out[j], ref, rtol=tol, atol=tol, err_msg=str((case, j, op)))


def _check_fusion() -> None:
    grads = [
        {
            "w": tg.Tensor(_value(10 + i, (64, 64), np.float32, 0)),
            "b": tg.Tensor(_value(20 + i, (64,), np.float32, 0)),
        }
        for i in range(4)
    ]
    dist.allreduce(grads, "mean")  # the structure check happens here, once
    dist.comm_stats(reset=True)
    dist.allreduce(grads, "mean")
    s = dist.comm_stats(reset=True)
    assert s["allreduce_calls"] == 1 and s["check_calls"] == 0, s  # one fused call
    assert s["allreduce_bytes"] == 4 * (64 * 64 + 64) * 4, s
    dist.allreduce(grads, "mean", bucket_bytes=(64 * 64 + 64) * 4)  # one layer per bucket
    assert dist.comm_stats(reset=True)["allreduce_calls"] == 4
    mixed = {"f": np.ones(10, np.float32), "d": np.ones(10), "f2": np.ones(3, np.float32)}
    dist.allreduce(mixed)
    dist.comm_stats(reset=True)
    dist.allreduce(mixed)
    assert dist.comm_stats(reset=True)["allreduce_calls"] == 2  # float32 (f, f2) and float64


def _check_broadcast(r: int, n: int) -> None:
    for root in range(n):
        tree = {
            "t": tg.Tensor(_value(30, (3,), np.float32, r)),
            "i": _value(31, (2,), np.int64, r),
            "p": float(r),
            "b": _value(32, (3,), bool, r),
        }
        b = dist.broadcast(tree, root=root)
        assert isinstance(b["t"], tg.Tensor) and b["p"] == float(root)
        np.testing.assert_array_equal(b["t"].numpy(), _value(30, (3,), np.float32, root))
        np.testing.assert_array_equal(b["i"], _value(31, (2,), np.int64, root))
        np.testing.assert_array_equal(b["b"], _value(32, (3,), bool, root))


def _check_allgather(r: int, n: int) -> None:
    g = dist.allgather(
        {
            "x": tg.Tensor(np.full((r + 1, 2), r, np.float32)),
            "s": float(r),
            "e": np.zeros((0,), np.int64),
            "y": np.arange(r, dtype=np.int64),
        }
    )
    exp = np.concatenate([np.full((k + 1, 2), k, np.float32) for k in range(n)])
    assert isinstance(g["x"], tg.Tensor)
    np.testing.assert_array_equal(g["x"].numpy(), exp)
    np.testing.assert_array_equal(g["s"], np.arange(n, dtype=np.float64))
    assert g["e"].shape == (0,)
    np.testing.assert_array_equal(g["y"], np.concatenate([np.arange(k) for k in range(n)]))


def _check_shard(n: int) -> None:
    """Together the ranks use every index once, in exactly one process's global batches."""
    key = tg.random.key(7)
    for total, bs, drop in ((103, 8, False), (103, 8, True), (5, 4, False), (0, 4, False)):
        parts = dist.shard(total, key, batch_size=bs, drop_remainder=drop)
        steps = dist.allgather({"steps": len(parts)})["steps"]
        assert (steps == len(parts)).all()  # the same number of steps on every rank
        perm = tg.random.permutation(key, total).numpy()
        for s, p in enumerate(parts):
            np.testing.assert_array_equal(dist.allgather(p), perm[s * bs : (s + 1) * bs])
        used = np.concatenate([dist.allgather(p) for p in parts]) if parts else np.zeros(0)
        expect = perm[: (total // bs) * bs] if drop else perm
        np.testing.assert_array_equal(np.sort(used), np.sort(expect))


def _expect_error(fn, kind, *needles) -> None:
    try:
        fn()
    except kind as e:
        for needle in needles:
            assert needle in str(e), (needle, str(e))
    else:
        raise AssertionError(f"no {kind.__name__}")


def _check_mismatches(r: int, n: int) -> None:
    """A clear error naming the leaf, on every rank, and the job goes on afterwards."""
    last = r == n - 1
    bad = {"w": np.zeros((2, 3 + last), np.float32), "b": np.zeros(2, np.float32)}
    _expect_error(
        lambda: dist.allreduce(bad),
        ValueError,
        "leaf tree['w']",
        "(2, 3)",
        "(2, 4)",
        f"rank {n - 1}",
    )
    extra = {"w": np.zeros(2)} if r == 0 else {"w": np.zeros(2), "v": np.zeros(2)}
    _expect_error(lambda: dist.broadcast(extra), ValueError, "tree['v'] only on rank 1", "1 leaves")
    dtype = np.float32 if r == 0 else np.float64
    _expect_error(
        lambda: dist.allreduce({"w": np.zeros(2, dtype)}, name="grads"),
        ValueError,
        "grads['w']",
        "float32",
        "float64",
    )
    op = "sum" if r == 0 else "max"
    _expect_error(
        lambda: dist.allreduce({"w": np.zeros(2)}, op),
        ValueError,
        "allreduce(op='sum')",
        "allreduce(op='max')",
    )
    _expect_error(
        lambda: dist.allgather({"w": np.zeros((1, 2 + r))}),
        ValueError,
        "tree['w']",
        "after the first axis",
    )
    # after the errors the ranks are still in step
    np.testing.assert_array_equal(dist.allreduce(np.ones(3)), np.full(3, float(n)))


def _check_traced() -> None:
    _expect_error(
        lambda: tg.grad(lambda x: dist.allreduce(x * x).sum())(tg.Tensor(np.ones(2))),
        TypeError,
        "traced Tensor",
    )


def _loss(p, x, y):
    import tapegrad.numpy as tnp

    return tnp.mean((x @ p["w"] + p["b"] - y) ** 2)


def _train(params, tx, x, y, steps: int = 5):
    state = tx.init(params)
    for _ in range(steps):
        grads = tg.grad(_loss)(params, tg.Tensor(x), tg.Tensor(y))
        params, state = optim.apply_gradients(tx, grads, state, params)
    return params


def _check_gradient_transformation(r: int) -> None:
    """N ranks on equal parts of a global batch take one process's steps on the whole batch."""
    x, y = _value(40, (12, 5), np.float32, 0), _value(41, (12,), np.float32, 0)
    own = {"w": tg.Tensor(_value(42, (5,), np.float32, r)), "b": tg.Tensor(np.float32(r))}
    start = dist.broadcast(own, root=0)
    part = dist.shard(12)
    tx = optim.chain(dist.allreduce_mean(), optim.clip_by_global_norm(1.0), optim.adam(0.1))
    got = _train(start, tx, x[part], y[part])
    one = {"w": tg.Tensor(_value(42, (5,), np.float32, 0)), "b": tg.Tensor(np.float32(0))}
    ref = _train(one, optim.chain(optim.clip_by_global_norm(1.0), optim.adam(0.1)), x, y)
    for k in ("w", "b"):
        np.testing.assert_allclose(got[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-6)
    every = dist.allgather({k: v.numpy().reshape(1, -1) for k, v in got.items()})
    for v in every.values():
        assert (v == v[0]).all()  # bit-identical parameters on every rank


def _sum_loss(p, x, y, m):
    import tapegrad.numpy as tnp

    return tnp.sum((x @ p["w"] + p["b"] - y) ** 2) / m


def _check_uneven_batches_recipe() -> None:
    """docs/distributed.md's recipe for parts of unequal size (some empty): each rank's loss is
    its sum over its part divided by the global batch's size, reduced with allreduce_sum()."""
    x, y = _value(60, (10, 5), np.float32, 0), _value(61, (10,), np.float32, 0)
    key, bs = tg.random.key(5), 4  # batches of 4, 4 and 2: uneven parts on 3 ranks, one empty
    start = {"w": tg.Tensor(_value(62, (5,), np.float32, 0)), "b": tg.Tensor(np.float32(0.5))}
    tx = optim.chain(dist.allreduce_sum(), optim.sgd(0.1))
    params, state = start, tx.init(start)
    for part, whole in zip(
        dist.shard(10, key, batch_size=bs), dist.shard(10, key, batch_size=bs, rank=0, world_size=1)
    ):
        g = tg.grad(_sum_loss)(params, tg.Tensor(x[part]), tg.Tensor(y[part]), len(whole))
        params, state = optim.apply_gradients(tx, g, state, params)
    ref, ref_tx = start, optim.sgd(0.1)
    ref_state = ref_tx.init(ref)
    for whole in dist.shard(10, key, batch_size=bs, rank=0, world_size=1):
        g = tg.grad(_loss)(ref, tg.Tensor(x[whole]), tg.Tensor(y[whole]))  # the mean
        ref, ref_state = optim.apply_gradients(ref_tx, g, ref_state, ref)
    for k in ("w", "b"):
        np.testing.assert_allclose(params[k].numpy(), ref[k].numpy(), rtol=1e-5, atol=1e-6)


# -- the GPU code paths without a GPU -----------------------------------------------------
class _FakeDevice:
    """``cupy.cuda.Device``'s part the module uses: an id and a context."""

    def __init__(self, i: int = 0):
        self.id = i

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _FakeDeviceArray(np.ndarray):
    """A NumPy array that says it lives on GPU 0: it drives the module's device code paths
    (packing on the device, host staging, CUDA-aware MPI, allgather's padding) without a GPU."""

    __cuda_array_interface__ = {}  # only its presence is looked at

    @property
    def device(self):
        return _FakeDevice(0)

    def set(self, host):
        self[...] = host


def _dev(a) -> _FakeDeviceArray:
    return np.array(a).view(_FakeDeviceArray)


class _FakeCupy:
    """The few CuPy functions the module calls, on :class:`_FakeDeviceArray`."""

    ndarray = _FakeDeviceArray

    class cuda:  # noqa: N801 (CuPy's name)
        Device = _FakeDevice

        @staticmethod
        def get_current_stream():
            return type("Stream", (), {"ptr": 0, "synchronize": staticmethod(lambda: None)})

    @staticmethod
    def empty(shape, dtype):
        return _dev(np.empty(shape, dtype))

    @staticmethod
    def zeros(shape, dtype):
        return _dev(np.zeros(shape, dtype))

    multiply = staticmethod(np.multiply)  # a ufunc: writes into a stand-in ``out=``

    @staticmethod
    def concatenate(arrays, axis=0):
        return _dev(np.concatenate([np.asarray(a) for a in arrays], axis=axis))

    @staticmethod
    def asnumpy(a):
        return np.array(a).view(np.ndarray)


def _fake_gpu_worker(transport: str) -> None:
    dist._cupy = lambda: _FakeCupy  # the module's one door to CuPy
    dist.init(timeout=120, gpu_backend=transport)
    r, n = dist.rank(), dist.world_size()
    tree = {
        "c": _dev(_value(50, (3, 4), np.float32, r)),
        "h": _dev(_value(51, (5,), np.float16, r)),
        "b": np.full(2, r, np.float64),  # a host leaf beside them
    }
    every = [{k: np.asarray(v) for k, v in _kinds(r2).items()} for r2 in range(n)]
    for op in ("sum", "mean", "max"):
        out = dist.allreduce(tree, op, bucket_bytes=8 if op == "max" else None)
        assert type(out["c"]) is _FakeDeviceArray and type(out["b"]) is np.ndarray
        assert out["h"].dtype == np.float16
        for k in tree:
            fn = {"sum": np.sum, "mean": np.mean, "max": np.max}[op]
            ref = fn([e[k].astype(np.float64) for e in every], axis=0)
            np.testing.assert_allclose(np.asarray(out[k]), ref, rtol=2e-3, err_msg=(op, k))
    b = dist.broadcast(tree, root=n - 1)
    assert type(b["c"]) is _FakeDeviceArray
    np.testing.assert_array_equal(np.asarray(b["c"]), every[n - 1]["c"])
    g = dist.allgather({"x": _dev(np.full((r + 1, 2), r, np.int32)), "s": _dev(np.float32(r))})
    assert type(g["x"]) is _FakeDeviceArray
    expect = np.concatenate([np.full((k + 1, 2), k, np.int32) for k in range(n)])
    np.testing.assert_array_equal(np.asarray(g["x"]), expect)
    np.testing.assert_array_equal(np.asarray(g["s"]), np.arange(n, dtype=np.float32))
    print(f"rank {r}/{n}: device paths ({transport}) passed", flush=True)


def _kinds(rank: int) -> dict:
    return {
        "c": _value(50, (3, 4), np.float32, rank),
        "h": _value(51, (5,), np.float16, rank),
        "b": np.full(2, rank, np.float64),
    }


# -- multi-process tests -----------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3])
def test_collectives_on_every_rank_match_numpy(n):
    res = _launch(n, HERE, "worker", n)
    assert res.returncode == 0, res.stdout + res.stderr
    for r in range(n):
        assert f"rank {r}/{n}: all distributed checks passed" in res.stdout


@pytest.mark.parametrize("transport", ["host", "mpi"])
def test_gpu_code_paths_with_a_stand_in_for_cupy(transport):
    """The device paths (packing on the device, host staging or device buffers handed to MPI,
    allgather's padding) on arrays that only claim to be on a GPU. NCCL itself needs one."""
    res = _launch(2, HERE, "fake-gpu", transport)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count(f"device paths ({transport}) passed") == 2


FAULT = """
import sys, time
import numpy as np
from tapegrad import distributed as dist

mode = sys.argv[1]
dist.init(timeout=float(sys.argv[2]))
if dist.rank() == 1:
    if mode == "raise":
        raise RuntimeError("boom on rank 1")
    time.sleep(600)  # skips the collective below
dist.allreduce(np.ones(3))  # rank 0 waits here for rank 1
print("rank 0 was released", flush=True)
"""


def test_an_exception_on_one_rank_ends_the_whole_job(tmp_path):
    script = tmp_path / "fault.py"
    script.write_text(FAULT)
    res = _launch(2, script, "raise", 1000)  # the watchdog would take 1000 s: not it
    assert res.returncode != 0, res.stdout + res.stderr
    assert "boom on rank 1" in res.stderr
    assert "rank 1 of 2 raised RuntimeError; aborting the whole job" in res.stderr
    assert "released" not in res.stdout


def test_the_watchdog_ends_a_job_whose_collective_waits_too_long(tmp_path):
    script = tmp_path / "fault.py"
    script.write_text(FAULT)
    res = _launch(2, script, "skip", 1.0)
    assert res.returncode != 0, res.stdout + res.stderr
    assert "rank 0 of 2 waited" in res.stderr, res.stderr
    assert "longer than the timeout of 1 s" in res.stderr, res.stderr
    assert "allreduce(op='sum')" in res.stderr, res.stderr  # names the collective
    assert "released" not in res.stdout


def _load_example(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"example_{name}", ROOT / "examples" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_distributed_mlp_example_takes_the_single_process_steps(tmp_path, capsys):
    flags = ["--epochs", "1", "--hidden", "32", "--batch-size", "32"]
    res = _launch(
        2, ROOT / "examples" / "digits_mlp.py", *flags, "--distributed", "--out", tmp_path / "d"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert len(re.findall(r"^test accuracy:", res.stdout, re.M)) == 1  # rank 0 alone reports
    mlp = _load_example("digits_mlp")
    single = mlp.train(mlp.parse_args([*flags, "--out", str(tmp_path / "s")]))
    got = tg.io.load(tmp_path / "d" / "digits_mlp.safetensors", like=single["params"])
    for a, b in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(single["params"])):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    assert f"test accuracy: {100 * single['accuracy']:.1f}%" in res.stdout


def test_distributed_cnn_example_reaches_the_single_process_accuracy(tmp_path, capsys):
    res = _launch(
        2, ROOT / "examples" / "digits_cnn.py", "--quick", "--distributed", "--out", tmp_path
    )
    assert res.returncode == 0, res.stdout + res.stderr
    acc = float(re.search(r"^test accuracy: ([\d.]+)%$", res.stdout, re.M).group(1)) / 100
    cnn = _load_example("digits_cnn")
    single = cnn.train(cnn.parse_args(["--quick", "--out", str(tmp_path / "s")]))
    # BatchNorm normalizes with each rank's own batch statistics (as PyTorch DDP without
    # SyncBatchNorm), so the parameters differ slightly from one process's; the accuracy not.
    assert acc >= 0.95 and abs(acc - single["accuracy"]) <= 0.02
    assert (tmp_path / "digits_cnn.safetensors").is_file()


def _state_leaves(path):
    """``{path: float64 array}`` of every leaf of a saved training state."""
    state = tg.io.load(path)
    return {
        p: np.asarray(leaf.numpy() if isinstance(leaf, tg.Tensor) else leaf, dtype=np.float64)
        for p, leaf in zip(tg.tree.tree_paths(state), tg.tree.tree_leaves(state))
    }


def _stop_resume_and_whole(tmp_path, name, flags, stop_after):
    """A 2-rank run stopped after ``stop_after`` steps, then resumed, in ``a``; the same run
    without stopping in ``b``. Returns the outputs and both saved training states."""
    script = ROOT / "examples" / f"{name}.py"
    a, b = tmp_path / "a", tmp_path / "b"
    stopped = _launch(2, script, *flags, "--distributed", "--out", a, "--stop-after", stop_after)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.count(f"stopped after step {stop_after} of") == 1  # rank 0 alone
    resumed = _launch(2, script, *flags, "--distributed", "--out", a, "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.count(f"resumed from {a}") == 1
    whole = _launch(2, script, *flags, "--distributed", "--out", b)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    state = f"{name}.train-state.safetensors"
    return resumed.stdout, whole.stdout, _state_leaves(a / state), _state_leaves(b / state)


def _accuracy_lines(stdout):
    return re.findall(r"^(?:reloaded )?test accuracy: .*$", stdout, re.M)


def test_distributed_mlp_example_resumes_exactly_and_only_on_as_many_ranks(tmp_path, capsys):
    flags = ["--epochs", "1", "--hidden", "16", "--threads", "1"]
    resumed, whole, a, b = _stop_resume_and_whole(tmp_path, "digits_mlp", flags, "20")
    assert a.keys() == b.keys() and any("losses" in k for k in a)
    for k in a:  # parameters, Adam's moments, step, key and the loss history
        np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert _accuracy_lines(resumed) == _accuracy_lines(whole) != []
    # The number of ranks is one of the run's settings: one process may not resume it.
    mlp = _load_example("digits_mlp")
    assert mlp.main([*flags, "--out", str(tmp_path / "a"), "--resume"]) == 2
    assert "other settings (ranks: saved 2, now 1)" in capsys.readouterr().err


def test_distributed_cnn_example_resumes_where_it_stopped(tmp_path):
    """Stopped in the second epoch, after a save at the first epoch's end: AdamW's state and
    schedule, the per-rank dropout keys, and the BatchNorm statistics averaged at each save."""
    flags = ["--channels", "4", "--batch-size", "64", "--epochs", "2", "--threads", "1"]
    resumed, whole, a, b = _stop_resume_and_whole(tmp_path, "digits_cnn", flags, "30")
    assert a.keys() == b.keys()
    stats = [k for k in a if "running_" in k]
    assert stats
    for k in a:
        if k in stats:  # averaged at other steps: the same up to float rounding
            np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)
        else:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-6, atol=1e-7, err_msg=k)
    assert _accuracy_lines(resumed) == _accuracy_lines(whole) != []


HELPERS = """
import os
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from _common import ResumeError, TrainingState, agree
from tapegrad import distributed as dist

dist.init()
r, base = dist.rank(), sys.argv[2]
os.makedirs(f"{base}/r{r}")
for step in range(10):  # rank 1 alone is asked to stop, at step 3
    loss, stop = agree(dist, float(r + step), r == 1 and step == 3)
    if stop:
        break
print(f"rank {r}: stopped after step {step}, loss {loss}", flush=True)

fresh = {"w": np.zeros(3), "step": 0, "losses": np.zeros(0)}
mine = TrainingState(f"{base}/r{r}", "t", {"n": 1}, dist)  # rank-local directories
alone = TrainingState(f"{base}/r{r}", "t", {"n": 1})  # writes on every rank

def resume(case):
    try:
        got = mine.load(fresh, growing=("losses",))
        print(f"rank {r} {case}: w {got['w'].tolist()} step {got['step']}", flush=True)
    except ResumeError as e:
        print(f"rank {r} {case}: report {e.report}: {e}", flush=True)

resume("none")  # no rank has a state
mine.save({"w": np.ones(3), "step": 5, "losses": np.arange(5.0)})  # rank 0 alone writes
dist.barrier()
resume("one")  # rank 1 has none
if r == 1:
    alone.save({"w": np.full(3, 2.0), "step": 5, "losses": np.arange(5.0)})
dist.barrier()
resume("values")  # the same shapes, other values
if r == 1:
    alone.save({"w": np.full(3, 2.0), "step": 3, "losses": np.arange(3.0)})
dist.barrier()
resume("shapes")  # histories of different lengths
mine.save({"w": np.full(3, 3.0), "step": 7, "losses": np.arange(7.0)})
alone.save({"w": np.full(3, 3.0), "step": 7, "losses": np.arange(7.0)})
dist.barrier()
resume("same")  # the same state everywhere
"""


def test_example_helpers_keep_the_ranks_in_step(tmp_path):
    """_common.agree stops every rank after the step any rank was interrupted at;
    TrainingState.load in a job: every rank raises when any cannot read or the ranks read
    different states, with rank 0 (and a rank that failed alone) saying why."""
    script = tmp_path / "helpers.py"
    script.write_text(HELPERS)
    res = _launch(2, script, ROOT / "examples", tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    for r in range(2):
        assert f"rank {r}: stopped after step 3, loss 3.5" in out, out  # mean of 3.0 and 4.0
    path = lambda r: tmp_path / f"r{r}" / "t.train-state.safetensors"  # noqa: E731
    assert f"rank 0 none: report True: --resume: no training state at {path(0)}" in out, out
    assert f"rank 1 none: report False: --resume: no training state at {path(1)}" in out, out
    assert "share" not in "".join(re.findall(r"^rank \d none: .*$", out, re.M))
    assert (
        f"rank 0 one: report True: --resume: 1 of 2 ranks could not read {path(0)} (--out "
        "must be a directory all ranks share)"
    ) in out, out
    assert f"rank 1 one: report True: --resume: no training state at {path(1)}" in out, out
    for r in range(2):
        for case in ("values", "shapes"):
            assert (
                f"rank {r} {case}: report {r == 0}: --resume: the ranks read different "
                f"training states from {path(r)} (--out must be a directory all ranks share)"
            ) in out, out
        assert f"rank {r} same: w [3.0, 3.0, 3.0] step 7" in out, out


def test_examples_refuse_a_batch_that_does_not_divide_among_the_ranks(tmp_path):
    res = _launch(
        2,
        ROOT / "examples" / "digits_mlp.py",
        "--epochs",
        "1",
        "--batch-size",
        "33",
        "--distributed",
    )
    assert res.returncode != 0 and "--batch-size 33 must be divisible by the 2 ranks" in res.stderr


def _doc_blocks(lang: str) -> list:
    text = (ROOT / "docs" / "distributed.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def test_the_docs_training_script_runs_under_mpiexec(tmp_path):
    """docs/distributed.md's train.py (run in one process by tests/test_docs.py) on 2 ranks."""
    (script,) = [b for b in _doc_blocks("python") if b.startswith("# train.py")]
    (tmp_path / "train.py").write_text(script)
    res = _launch(2, "train.py", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "world size 2" in res.stdout and res.stdout.count("final loss") == 1
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "train.py").write_text(script)
    one = subprocess.run(
        [sys.executable, "train.py"], cwd=alone, capture_output=True, text=True, env=_env()
    )
    assert one.returncode == 0 and "world size 1" in one.stdout, one.stdout + one.stderr
    two, ref = tg.io.load(tmp_path / "params.safetensors"), tg.io.load(alone / "params.safetensors")
    for a, b in zip(tg.tree.tree_leaves(two), tg.tree.tree_leaves(ref)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


# -- installs --------------------------------------------------------------------------------
def test_without_mpi4py_import_works_and_init_says_how_to_install():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["mpi4py"] = None  # as if mpi4py were not installed
        import tapegrad
        from tapegrad import distributed as dist
        assert "distributed" in tapegrad.__all__ and tapegrad.distributed is dist
        assert not dist.is_initialized()
        try:
            dist.rank()
        except RuntimeError as e:
            print("before init:", e)
        print(dist.shard(6, rank=1, world_size=2))  # pure: no MPI needed
        try:
            dist.init()
        except ImportError as e:
            print("init:", e)
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert (
        "before init: tapegrad.distributed.rank: call tapegrad.distributed.init() first"
        in res.stdout
    )
    assert "[3 4 5]" in res.stdout
    assert "pip install mpi4py mpich" in res.stdout
    assert 'pip install -e ".[distributed]"' in res.stdout


# -- a job of one, in this process -----------------------------------------------------------
@pytest.fixture(scope="module")
def one():
    pytest.importorskip("mpi4py")
    dist.init()
    assert dist.world_size() == 1 and dist.rank() == 0
    return dist


def test_a_job_of_one_returns_the_values_and_leaf_kinds(one):
    tree = {
        "t": tg.Tensor(np.arange(3, dtype=np.float32)),
        "a": np.arange(4.0).reshape(2, 2),
        "s": np.float64(2.5),
        "p": 3,
        "b": np.array([True, False]),
    }
    for op in ("sum", "max", "min"):
        out = one.allreduce(tree if op != "sum" else {**tree, "b": np.array([1, 0])}, op)
        assert (
            isinstance(out["t"], tg.Tensor)
            and type(out["s"]) is np.float64
            and type(out["p"]) is int
        )
        for k in tree:
            np.testing.assert_array_equal(_np(out[k]), _np(tree[k]))
    assert out["a"] is not tree["a"]  # a new array
    np.testing.assert_array_equal(one.broadcast(tree)["a"], tree["a"])
    g = one.allgather(tree)
    assert g["s"].shape == (1,) and g["a"].shape == (2, 2)
    one.barrier()
    assert one.comm_stats()["allreduce_calls"] == 0  # a job of one sends nothing


_DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.complex64]


@settings(deadline=None, max_examples=40)
@given(
    specs=st.lists(
        st.tuples(
            st.lists(st.sampled_from([0, 1, 2, 5]), max_size=3).map(tuple),
            st.sampled_from(_DTYPES),
            st.sampled_from(["tensor", "numpy"]),
        ),
        max_size=6,
    ),
    op=st.sampled_from(["sum", "max", "min", "mean"]),
    bucket_bytes=st.sampled_from([1, 8, 100, 2**20]),
    seed=st.integers(0, 2**16),
)
def test_fused_buffers_give_every_leaf_back_in_a_job_of_one(one, specs, op, bucket_bytes, seed):
    """Packing leaves of any shapes (size-0 and size-1 axes) and dtypes into buckets and
    unpacking them returns each leaf's values, shape, dtype and kind."""
    if op == "mean":
        specs = [s for s in specs if np.dtype(s[1]).kind in "fc"]
    if op in ("max", "min"):
        specs = [s for s in specs if np.dtype(s[1]).kind != "c"]
    leaves = [_value(seed + i, shape, dtype, 0) for i, (shape, dtype, _) in enumerate(specs)]
    tree = [tg.Tensor(a) if kind == "tensor" else a for a, (_, _, kind) in zip(leaves, specs)]
    out = one.allreduce(tree, op, bucket_bytes=bucket_bytes)
    assert len(out) == len(tree)
    for got, want, (shape, dtype, kind) in zip(out, leaves, specs):
        assert isinstance(got, tg.Tensor) == (kind == "tensor")
        assert got.shape == shape and got.dtype == dtype
        np.testing.assert_array_equal(_np(got), want)
    for fn in (one.broadcast, one.allgather):
        for got, want in zip(fn(tree, bucket_bytes=bucket_bytes), leaves):
            np.testing.assert_array_equal(_np(got), want if want.ndim else want[None])


def test_allreduce_mean_composes_with_chain_and_apply_gradients(one):
    params = {"w": tg.Tensor(np.array([1.0, -2.0], np.float32))}
    grads = {"w": tg.Tensor(np.array([3.0, 4.0], np.float32))}
    tx = optim.chain(one.allreduce_mean(), optim.sgd(0.1))
    state = tx.init(params)
    new, _ = optim.apply_gradients(tx, grads, state, params)
    np.testing.assert_allclose(new["w"].numpy(), [0.7, -2.4], rtol=1e-6)
    assert one.allreduce_sum().op == "sum" and state[0] == {}


@pytest.mark.parametrize(
    "call, kind, needle",
    [
        (lambda d: d.allreduce({"x": np.ones(2)}, "avg"), ValueError, "op must be one of"),
        (lambda d: d.allreduce({"x": np.arange(2)}, "mean"), TypeError, "integer leaf tree['x']"),
        (lambda d: d.allreduce([np.ones(2, bool)], "sum"), TypeError, "boolean leaf tree[0]"),
        (lambda d: d.allreduce(np.ones(2, complex), "max"), TypeError, "complex"),
        (lambda d: d.allreduce({"s": "text"}), TypeError, "leaf tree['s'] is a str"),
        (lambda d: d.allreduce({"o": np.array([object()])}), TypeError, "dtype object"),
        (lambda d: d.allreduce(np.ones(2), bucket_bytes=0), ValueError, "bucket_bytes"),
        (lambda d: d.broadcast(np.ones(2), root=1), ValueError, "root must be in [0, 1)"),
        (lambda d: d.broadcast(np.ones(2), root=0.0), TypeError, "root must be an int"),
        (lambda d: d.allreduce_mean(bucket_bytes=-1), ValueError, "bucket_bytes"),
    ],
)
def test_bad_calls_are_clear_errors(one, call, kind, needle):
    with pytest.raises(kind, match=re.escape(needle)):
        call(one)


def test_collectives_refuse_traced_tensors(one):
    with pytest.raises(TypeError, match=r"leaf tree\['x'\] is a traced Tensor"):
        tg.grad(lambda x: one.allreduce({"x": x})["x"].sum())(tg.Tensor(np.ones(2)))
    tx = optim.chain(one.allreduce_mean(), optim.sgd(0.1))
    params = {"w": tg.Tensor(np.ones(2))}

    def meta(p):  # a step differentiated through: the gradients are traced
        g = tg.grad(lambda q: (q["w"] ** 2).sum())(p)
        u, _ = tx.update(g, tx.init(p), p)
        return u["w"].sum()

    with pytest.raises(TypeError, match=r"grads\['w'\] is a traced Tensor"):
        tg.grad(meta)(params)


def test_init_checks_its_arguments():
    for kwargs, needle in (
        ({"bucket_bytes": 0}, "bucket_bytes"),
        ({"timeout": -1}, "timeout"),
        ({"gpu_backend": "gloo"}, "gpu_backend"),
    ):
        with pytest.raises(ValueError, match=needle):
            dist.init(**kwargs)


# -- shard (pure) ------------------------------------------------------------------------------
@settings(deadline=None, max_examples=60)
@given(
    n=st.integers(0, 60),
    batch=st.integers(1, 17),
    world=st.integers(1, 6),
    drop=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_shard_splits_the_single_process_batches_exactly_once(n, batch, world, drop, seed):
    key = tg.random.key(seed)
    parts = [
        dist.shard(n, key, batch_size=batch, drop_remainder=drop, rank=r, world_size=world)
        for r in range(world)
    ]
    perm = tg.random.permutation(key, n).numpy()
    steps = n // batch if drop else -(-n // batch)
    assert all(len(p) == steps for p in parts)  # every rank makes the same number of steps
    for s in range(steps):
        pieces = [p[s] for p in parts]
        np.testing.assert_array_equal(np.concatenate(pieces), perm[s * batch : (s + 1) * batch])
        sizes = [len(q) for q in pieces]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
        assert all(q.dtype == np.int64 for q in pieces)
    used = np.concatenate([q for p in parts for q in p]) if steps else np.zeros(0, np.int64)
    assert len(set(used.tolist())) == len(used)  # no index twice
    assert len(used) == (steps * batch if drop else n)


def test_shard_of_one_global_batch_and_of_given_indices():
    idx = np.array([10, 11, 12, 13, 14])
    assert [dist.shard(idx, rank=r, world_size=2).tolist() for r in (0, 1)] == [
        [10, 11, 12],
        [13, 14],
    ]
    key = tg.random.key(3)
    a = dist.shard(tg.Tensor(idx), key, rank=0, world_size=1)
    np.testing.assert_array_equal(a, idx[tg.random.permutation(key, 5).numpy()])
    assert dist.shard(2, rank=2, world_size=3).size == 0  # fewer indices than ranks: empty part


@pytest.mark.parametrize(
    "kwargs, kind, needle",
    [
        ({"indices": -1}, ValueError, ">= 0"),
        ({"indices": np.ones((2, 2), int)}, TypeError, "1-d integer array"),
        ({"indices": np.ones(3)}, TypeError, "1-d integer array"),
        ({"indices": 4, "batch_size": 0}, ValueError, "batch_size"),
        ({"indices": 4, "rank": 2}, ValueError, "rank 2 is not below world_size 2"),
        ({"indices": 4, "world_size": 0, "rank": 0}, ValueError, "world_size must be an int >= 1"),
    ],
)
def test_shard_checks_its_arguments(kwargs, kind, needle):
    kwargs = {"rank": 0, "world_size": 2, **kwargs}
    indices = kwargs.pop("indices")
    with pytest.raises(kind, match=re.escape(needle)):
        dist.shard(indices, **kwargs)


# -- GPU (CuPy): skipped without CuPy and a CUDA device ----------------------------------------
@pytest.mark.gpu
def test_cupy_leaves_in_a_job_of_one(one):
    cp = pytest.importorskip("cupy")
    if not tg.backend.cupy_available():
        pytest.skip("no CUDA device")
    tree = {
        "c": cp.arange(4, dtype=cp.float32),
        "t": tg.Tensor(np.ones(3), device="cuda"),
        "n": np.ones(2),
    }
    for fn in (one.allreduce, one.broadcast, one.allgather):
        out = fn(tree)
        assert isinstance(out["c"], cp.ndarray) and out["t"].device == "cuda:0"
        np.testing.assert_array_equal(cp.asnumpy(out["c"]), np.arange(4))


GPU_JOB = """
import sys
import numpy as np, cupy as cp
import tapegrad as tg
from tapegrad import distributed as dist

dist.init(gpu_backend=sys.argv[1], timeout=120)
r, n = dist.rank(), dist.world_size()
cp.cuda.Device(dist.local_rank() % cp.cuda.runtime.getDeviceCount()).use()
tree = {
    "c": cp.full((5,), r + 1, cp.float32),
    "t": tg.Tensor(np.full(3, r, np.float64), device="cuda"),
    "h": cp.ones(2, cp.float16),
    "i": cp.full(2, r, cp.int64),
}
s = dist.allreduce({k: v for k, v in tree.items() if k != "i"}, "mean")  # no integer mean
assert isinstance(s["c"], cp.ndarray) and s["t"].device.startswith("cuda")
np.testing.assert_allclose(cp.asnumpy(s["c"]), np.full(5, (n + 1) / 2))
np.testing.assert_allclose(s["t"].numpy(), np.full(3, (n - 1) / 2))
m = dist.allreduce({"i": tree["i"]}, "max")
np.testing.assert_array_equal(cp.asnumpy(m["i"]), [n - 1, n - 1])
b = dist.broadcast(tree, root=n - 1)
np.testing.assert_array_equal(cp.asnumpy(b["c"]), np.full(5, n))
g = dist.allgather({"x": cp.full((r + 1,), r, cp.int32)})
expect = np.concatenate([np.full(k + 1, k) for k in range(n)])
np.testing.assert_array_equal(cp.asnumpy(g["x"]), expect)
print(f"rank {r}: gpu ok", flush=True)
"""


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["nccl", "host", "mpi"])
def test_cupy_collectives_across_two_ranks(tmp_path, backend):
    cp = pytest.importorskip("cupy")
    if not tg.backend.cupy_available():
        pytest.skip("no CUDA device")
    if backend == "nccl" and cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("NCCL needs one GPU per rank: two GPUs")
    if backend == "mpi":
        from mpi4py import MPI

        if not getattr(MPI, "Query_cuda_support", lambda: False)():
            pytest.skip("the MPI library is not CUDA-aware")
    (tmp_path / "gpu.py").write_text(GPU_JOB)
    res = _launch(2, tmp_path / "gpu.py", backend)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("gpu ok") == 2


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    _worker(int(sys.argv[2]))
if __name__ == "__main__" and sys.argv[1:2] == ["fake-gpu"]:
    _fake_gpu_worker(sys.argv[2])
