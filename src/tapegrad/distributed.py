"""Data-parallel training across processes and machines, on MPI (Horovod's model).

Every process (a *rank*) runs the same script on its own part of each global batch; the
gradients are averaged across ranks before the optimizer step, so every rank applies the same
update and the parameters stay identical everywhere::

    from tapegrad import distributed as dist, optim
    dist.init()                                   # rank and world size from MPI
    params = dist.broadcast(params, root=0)       # every rank starts from rank 0's parameters
    tx = optim.chain(dist.allreduce_mean(), optim.adamw(1e-3))
    for step, idx in enumerate(dist.shard(n_examples, key, batch_size=256)):
        loss, grads = tg.value_and_grad(loss_fn)(params, (x[idx], y[idx]))
        updates, opt_state = tx.update(grads, opt_state, params)   # averaged across ranks
        params = optim.apply_updates(params, updates)
    if dist.rank() == 0:
        io.save(path, params)                     # one writer

launched with ``mpirun -n 4 python train.py`` (``mpiexec -f hostfile -n 16 ...`` across hosts).
Without a launcher, :func:`init` makes a single process of world size 1 and every collective
returns its input's values. See ``docs/distributed.md``.

Collectives take pytrees whose leaves are Tensors, NumPy arrays, NumPy scalars, Python numbers
or CuPy arrays, and return the same structure with the same leaf kinds. Leaves are fused: all
leaves of one device and dtype are packed into one contiguous buffer (split into buckets of at
most ``bucket_bytes``), so a step makes one large ``MPI_Allreduce`` per dtype and bucket instead
of one per leaf (Horovod's tensor fusion, PyTorch DDP's gradient buckets). Arrays always travel
through mpi4py's buffer interface (``Allreduce``, ``Bcast``, ``Allgather(v)``), never pickled.
CuPy leaves go through NCCL (``cupy.cuda.nccl``) by default.

The first collective with a given pytree structure, leaf shapes and dtypes checks, with one
16-byte ``Allgather``, that every rank passed the same; a mismatch raises a ``ValueError``
naming the first differing leaf on every rank instead of a hang or a garbage sum. With more
than one rank, :func:`init` also makes an uncaught exception on any rank abort the whole job
(``MPI_Abort``), and a watchdog aborts it when a collective waits longer than ``timeout``.

Collectives run on concrete values: calling one on a traced Tensor (inside ``grad``, ``jit``,
``vmap`` ...) raises a ``TypeError``. Gradient transformations such as :func:`allreduce_mean`
run after ``grad`` has returned concrete gradients, so this only concerns collectives written
inside a differentiated function.

mpi4py is optional: ``import tapegrad.distributed`` always works, and :func:`init` explains how
to install it (``pip install mpi4py mpich``, or the ``distributed`` extra) when it is missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import sys
import threading
import time

import attrs
import numpy as np

from tapegrad import random as _random
from tapegrad.core import backend as _backend
from tapegrad.core.tensor import Tensor, const, make
from tapegrad.core.tree import tree_flatten, tree_paths, tree_unflatten
from tapegrad.optim import GradientTransformation

__all__ = [
    "init",
    "is_initialized",
    "rank",
    "world_size",
    "local_rank",
    "local_size",
    "barrier",
    "broadcast",
    "allreduce",
    "allgather",
    "shard",
    "allreduce_mean",
    "allreduce_sum",
    "AllreduceGradients",
    "comm_stats",
    "DEFAULT_BUCKET_BYTES",
]

#: Default fusion bucket size in bytes (64 MiB, Horovod's default fusion threshold).
DEFAULT_BUCKET_BYTES = 64 * 2**20

_INSTALL_HINT = (
    "Install them with  pip install mpi4py mpich  (mpi4py and the MPICH library from PyPI; no "
    "system packages needed; from a clone of tapegrad,  pip install -e \".[distributed]\"  does "
    "the same), or  pip install mpi4py  alone to use a system MPI."
)
_OPS = ("sum", "mean", "max", "min")
_GPU_BACKENDS = ("auto", "nccl", "mpi", "host")
_KINDS = ("allreduce", "broadcast", "allgather", "barrier", "check")


# -- the process-wide context ----------------------------------------------------------------
class _Context:
    """What :func:`init` sets up: the communicator, ranks, settings, caches and counters."""

    def __init__(self, MPI, comm, local_rank, local_size, bucket_bytes, timeout, gpu_backend):
        self.MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.local_rank = local_rank
        self.local_size = local_size
        self.bucket_bytes = bucket_bytes
        self.timeout = timeout
        self.gpu_backend = gpu_backend
        self.verified: set = set()  # signatures every rank was checked to agree on
        self.nccl: dict = {}  # device id -> cupy.cuda.nccl.NcclCommunicator
        self.inflight = None  # (what, monotonic start) while a collective blocks
        self.stats = _zero_stats()


_ctx: _Context | None = None


def _zero_stats() -> dict:
    out = {}
    for k in _KINDS:
        out[f"{k}_calls"] = 0
        out[f"{k}_bytes"] = 0
        out[f"{k}_seconds"] = 0.0
    return out


def _import_mpi():
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as e:  # no mpi4py, or no MPI library for it
        raise ImportError(
            f"tapegrad.distributed.init: needs mpi4py and an MPI library, which could not be "
            f"imported ({type(e).__name__}: {e}). {_INSTALL_HINT}"
        ) from e
    return MPI


def _context(where: str) -> _Context:
    if _ctx is None:
        raise RuntimeError(
            f"tapegrad.distributed.{where}: call tapegrad.distributed.init() first (once per "
            "process, before any collective)."
        )
    return _ctx


def init(
    comm=None,
    *,
    bucket_bytes: int = DEFAULT_BUCKET_BYTES,
    timeout: float | None = 1800.0,
    abort_on_exception: bool = True,
    gpu_backend: str = "auto",
) -> None:
    """Join the job: read this process's rank and the world size from MPI.

    Started by ``mpirun -n N python script.py`` (or ``mpiexec``, ``srun``), each of the ``N``
    processes gets a rank ``0..N-1``; started without a launcher, the process is a job of one
    (rank 0, world size 1) and every collective just returns its input's values. The
    communicator is duplicated, so tapegrad's messages never mix with the caller's own. Calling
    ``init`` again (with valid arguments) is a no-op.

    With more than one rank, two safeguards are installed (Horovod and PyTorch keep similar
    ones): an uncaught exception on any rank prints its traceback and calls ``MPI_Abort``, so
    the whole job exits non-zero within seconds instead of the other ranks waiting forever in
    their next collective (what ``python -m mpi4py script.py`` does); and a watchdog thread
    aborts the job when one collective has waited more than ``timeout`` seconds (a rank that
    skipped a collective, or died without an exception). ``sys.exit(code)`` is not an
    exception: a rank that ends early with it leaves the others waiting until the watchdog
    fires, unless the script runs under ``python -m mpi4py``.

    Args:
        comm: An mpi4py communicator to run on (default ``MPI.COMM_WORLD``); all its ranks
            must call ``init`` together (it is collective).
        bucket_bytes: Upper bound in bytes of one fused buffer (bucket) of a collective: the
            leaves of one device and dtype are packed into buckets of at most this size, one
            MPI call each (a single leaf larger than this is a bucket of its own). Default
            64 MiB. Larger buckets mean fewer calls; smaller ones, less memory per call.
        timeout: Seconds a single collective may wait for the other ranks before the watchdog
            aborts the job; ``None`` disables the watchdog. Default 30 minutes (PyTorch's
            default process-group timeout).
        abort_on_exception: Install the ``sys.excepthook`` that aborts the job on an uncaught
            exception (only with more than one rank).
        gpu_backend: How CuPy (GPU) leaves are reduced: ``"nccl"`` (``cupy.cuda.nccl``),
            ``"mpi"`` (device buffers handed to a CUDA-aware MPI), ``"host"`` (staged through
            host memory and plain MPI), or ``"auto"`` (NCCL where CuPy has it, else host).

    Raises:
        ImportError: if mpi4py or an MPI library is missing; the message says how to install
            them (``pip install mpi4py mpich``, or the ``distributed`` extra).
        ValueError: on a bad ``bucket_bytes``, ``timeout`` or ``gpu_backend``.
    """
    global _ctx
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"init: bucket_bytes must be a positive int, got {bucket_bytes!r}")
    if timeout is not None and not (
        isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
    ):
        raise ValueError(f"init: timeout must be a number of seconds > 0 or None, got {timeout!r}")
    if gpu_backend not in _GPU_BACKENDS:
        raise ValueError(f"init: gpu_backend must be one of {_GPU_BACKENDS}, got {gpu_backend!r}")
    if _ctx is not None:
        return
    MPI = _import_mpi()
    base = MPI.COMM_WORLD if comm is None else comm
    dup = base.Dup()
    local = dup.Split_type(MPI.COMM_TYPE_SHARED)
    ctx = _Context(
        MPI,
        dup,
        local.Get_rank(),
        local.Get_size(),
        bucket_bytes,
        None if timeout is None else float(timeout),
        gpu_backend,
    )
    local.Free()
    if ctx.size > 1:
        if abort_on_exception:
            _install_abort_hook(ctx)
        if ctx.timeout is not None:
            threading.Thread(
                target=_watchdog, args=(ctx,), name="tapegrad-distributed-watchdog", daemon=True
            ).start()
    _ctx = ctx


#: Seconds between writing an abort's message and MPI_Abort, for the launcher to forward it.
_GRACE = 0.5


def _install_abort_hook(ctx: _Context) -> None:
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        try:
            previous(exc_type, exc, tb)  # the traceback first
            sys.stderr.write(
                f"tapegrad.distributed: rank {ctx.rank} of {ctx.size} raised "
                f"{exc_type.__name__}; aborting the whole job (MPI_Abort).\n"
            )
            sys.stderr.flush()
            time.sleep(_GRACE)  # the launcher forwards what was written before it kills the job
        finally:
            ctx.MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


def _watchdog(ctx: _Context) -> None:
    """Abort the job when one collective has blocked for more than ``ctx.timeout`` seconds."""
    period = min(1.0, ctx.timeout / 4)
    while True:
        time.sleep(period)
        inflight = ctx.inflight
        if inflight is None:
            continue
        what, start = inflight  # pyright: ignore[reportAttributeAccessIssue, reportGeneralTypeIssues]
        waited = time.monotonic() - start
        if waited > ctx.timeout and ctx.inflight is inflight:
            sys.stderr.write(
                f"tapegrad.distributed: rank {ctx.rank} of {ctx.size} waited {waited:.1f} s "
                f"in {what}, longer than the timeout of {ctx.timeout:g} s: another rank "
                "skipped this collective, called a different one, or died. Aborting the "
                "whole job (MPI_Abort). Pass init(timeout=...) to wait longer.\n"
            )
            sys.stderr.flush()
            time.sleep(_GRACE)
            if ctx.MPI.Query_thread() == ctx.MPI.THREAD_MULTIPLE:
                ctx.MPI.COMM_WORLD.Abort(1)
            os._exit(1)  # the launcher then ends the other ranks


def is_initialized() -> bool:
    """Whether :func:`init` has run in this process."""
    return _ctx is not None


def rank() -> int:
    """This process's rank, ``0 .. world_size() - 1`` (0 in a single process).

    Raises:
        RuntimeError: before :func:`init`.
    """
    return _context("rank").rank


def world_size() -> int:
    """The number of ranks in the job (1 in a single process).

    Raises:
        RuntimeError: before :func:`init`.
    """
    return _context("world_size").size


def local_rank() -> int:
    """This process's rank among the ranks on its own machine (to pick its GPU).

    Raises:
        RuntimeError: before :func:`init`.
    """
    return _context("local_rank").local_rank


def local_size() -> int:
    """The number of ranks on this process's machine.

    Raises:
        RuntimeError: before :func:`init`.
    """
    return _context("local_size").local_size


def comm_stats(reset: bool = False) -> dict:
    """Counters of this rank's communication since :func:`init` (or the last reset).

    For each kind in ``allreduce``, ``broadcast``, ``allgather``, ``barrier`` and ``check`` (the
    structure checks), ``f"{kind}_calls"`` counts MPI (or NCCL) calls, ``f"{kind}_bytes"`` the
    bytes of the buffers this rank passed to them, and ``f"{kind}_seconds"`` the wall-clock time
    spent inside them (waiting for other ranks included). A job of one rank makes no calls.

    Args:
        reset: Set the counters back to zero after reading them.

    Returns:
        A new dict of ints (calls, bytes) and floats (seconds).

    Raises:
        RuntimeError: before :func:`init`.
    """
    ctx = _context("comm_stats")
    out = dict(ctx.stats)
    if reset:
        ctx.stats = _zero_stats()
    return out


def _call(ctx: _Context, kind: str, nbytes: int, what: str, fn) -> None:
    """Run one blocking MPI/NCCL call ``fn()``, watched by the watchdog and counted."""
    ctx.inflight = (what, time.monotonic())  # pyright: ignore[reportAttributeAccessIssue]
    t0 = time.perf_counter()
    try:
        fn()
    finally:
        ctx.inflight = None
        s = ctx.stats
        s[f"{kind}_calls"] += 1
        s[f"{kind}_bytes"] += int(nbytes)
        s[f"{kind}_seconds"] += time.perf_counter() - t0


def barrier() -> None:
    """Wait until every rank has called ``barrier``.

    Raises:
        RuntimeError: before :func:`init`.
    """
    ctx = _context("barrier")
    if ctx.size > 1:
        _call(ctx, "barrier", 0, "barrier()", ctx.comm.Barrier)


# -- leaves ----------------------------------------------------------------------------------
@attrs.frozen
class _Leaf:
    kind: str  # "tensor", "numpy", "generic", "python", "cupy"
    array: object  # numpy.ndarray or cupy.ndarray holding the value
    device: str  # "cpu" or "cuda:N"
    label: object = None


def _cupy():
    cp = _backend.get_backend("cuda")  # raises a clear RuntimeError without CuPy or a GPU
    return cp


def _leaf(where: str, x, path) -> _Leaf:
    if isinstance(x, Tensor):
        if x.is_traced:
            raise TypeError(
                f"{where}: leaf {path()} is a traced Tensor (the call is inside grad, jit, vmap "
                "or another transform). Collectives run on concrete values and are not "
                "recorded on the tape: call them outside the transform, on what it returned "
                "(for example on the gradients grad returns, as allreduce_mean() does)."
            )
        dev = x.device
        if dev == "cpu":
            arr = x.numpy()
        else:
            cp = _cupy()
            with cp.cuda.Device(int(dev.split(":")[1])):
                if hasattr(x, "__cuda_array_interface__"):  # zero-copy where Tensor offers it
                    arr = cp.asarray(x)
                else:  # staged through host memory
                    arr = cp.asarray(x.numpy())
        return _Leaf("tensor", arr, dev, x.label)
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "dtype"):  # a CuPy array
        if x.dtype.kind not in "biufc":
            raise TypeError(
                f"{where}: leaf {path()} has dtype {x.dtype}; expected a boolean or numeric dtype."
            )
        return _Leaf("cupy", x, f"cuda:{x.device.id}")
    if isinstance(x, np.ndarray):
        arr, kind = x, "numpy"
    elif isinstance(x, np.generic):
        arr, kind = np.asarray(x), "generic"
    elif isinstance(x, (bool, int, float, complex)):
        arr, kind = np.asarray(x), "python"
    else:
        raise TypeError(
            f"{where}: leaf {path()} is a {type(x).__name__}; expected a Tensor, a NumPy or "
            "CuPy array, a NumPy scalar or a Python number."
        )
    if arr.dtype.kind not in "biufc":
        raise TypeError(
            f"{where}: leaf {path()} has dtype {arr.dtype}; expected a boolean or numeric dtype."
        )
    return _Leaf(kind, arr, "cpu")


def _leaves(where: str, tree, name: str):
    """``(list of _Leaf, treedef, paths())``: each leaf checked and converted."""
    raw, treedef = tree_flatten(tree)
    cache: list = []

    def paths():
        if not cache:
            cache.append(tree_paths(tree, prefix=name))
        return cache[0]

    leaves = [_leaf(where, x, lambda i=i: paths()[i]) for i, x in enumerate(raw)]
    return leaves, treedef, paths


def _rebuild(leaf: _Leaf, arr):
    """A result leaf of the kind ``leaf`` came in as, holding ``arr`` (a new array no caller
    holds: a Tensor takes it as it is, without the copy ``Tensor(arr)`` makes)."""
    if leaf.kind == "tensor":
        return make(arr, 0, None, -1, None, leaf.label) if leaf.label is not None \
            else const(arr)
    if leaf.kind == "generic":
        return arr.reshape(())[()]
    if leaf.kind == "python":
        return arr.reshape(()).item()
    return arr


def _devkind(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda"


# -- the structure check ---------------------------------------------------------------------
def _verify(ctx: _Context, where: str, call: str, treedef, leaves, paths, *, dims=None) -> None:
    """Check that every rank passed the same pytree to this collective; raise if not.

    The signature (the call, leaf paths, shapes or ``dims``, dtypes and device kinds) is hashed
    and allgathered (16 bytes a rank). A signature every rank agreed on is remembered, so
    later calls with it skip the check: all ranks remember the same set, so they agree on
    skipping too. On a mismatch the full descriptions are gathered (pickled; only then) and
    every rank raises the same ValueError naming the first differing leaf.
    """
    if ctx.size == 1:
        return
    shapes = tuple(leaf.array.shape for leaf in leaves) if dims is None else dims
    key = (call, treedef, shapes, tuple(leaf.array.dtype for leaf in leaves))
    key = key + (tuple(_devkind(leaf.device) for leaf in leaves),)
    if dims is None and key in ctx.verified:
        return
    desc = (
        call,
        [
            (p, tuple(s), str(leaf.array.dtype), _devkind(leaf.device))
            for p, s, leaf in zip(paths(), shapes, leaves)
        ],
    )
    digest = hashlib.blake2b(repr(desc).encode(), digest_size=16).digest()
    mine = np.frombuffer(digest, dtype=np.uint64).copy()
    seen = np.empty((ctx.size, 2), dtype=np.uint64)
    _call(ctx, "check", 16, f"{call} (structure check)", lambda: ctx.comm.Allgather(mine, seen))
    if (seen == mine).all():
        if dims is None:
            ctx.verified.add(key)
        return
    descs = ctx.comm.allgather(desc)
    raise ValueError(_mismatch_message(where, descs, dims is not None))


def _mismatch_message(where: str, descs: list, leading_free: bool) -> str:
    rule = (
        "Every rank must pass the same pytree structure, leaf shapes"
        + (" (after the first axis)" if leading_free else "")
        + ", dtypes and devices to each collective, and call the collectives in the same order."
    )
    call0, leaves0 = descs[0]
    for r, (call, leaves) in enumerate(descs[1:], start=1):
        if call != call0:
            return f"{where}: rank 0 called {call0} but rank {r} called {call}. {rule}"
        if len(leaves) != len(leaves0):
            p0, pr = [d[0] for d in leaves0], [d[0] for d in leaves]
            only = [f"{p} only on rank 0" for p in p0 if p not in pr]
            only += [f"{p} only on rank {r}" for p in pr if p not in p0]
            return (
                f"{where}: the pytrees differ across ranks: rank 0 passed {len(leaves0)} leaves, "
                f"rank {r} passed {len(leaves)}"
                + (f" ({', '.join(only)})" if only else "")
                + f". {rule}"
            )
        for i, (a, b) in enumerate(zip(leaves0, leaves)):
            if a == b:
                continue
            if a[0] != b[0]:
                return (
                    f"{where}: the pytrees differ across ranks: leaf {i} is {a[0]} on rank 0 "
                    f"but {b[0]} on rank {r}. {rule}"
                )
            what = "shape after the first axis" if leading_free else "shape"
            return (
                f"{where}: leaf {a[0]} differs across ranks: {what} {a[1]}, {a[2]} on {a[3]} "
                f"on rank 0; {what} {b[1]}, {b[2]} on {b[3]} on rank {r}. {rule}"
            )
    return f"{where}: the ranks passed different pytrees. {rule}"  # pragma: no cover


# -- fusion ----------------------------------------------------------------------------------
def _buckets(leaves, dtypes, bucket_bytes: int) -> list:
    """Leaf indices grouped by (device, buffer dtype) in order of first appearance, each group
    split into buckets of at most ``bucket_bytes`` (a larger leaf is a bucket of its own)."""
    groups: dict = {}
    for i, leaf in enumerate(leaves):
        groups.setdefault((leaf.device, dtypes[i]), []).append(i)
    out = []
    for (device, dtype), idx in groups.items():
        bucket, nbytes = [], 0
        for i in idx:
            size = leaves[i].array.size * dtype.itemsize
            if bucket and nbytes + size > bucket_bytes:
                out.append((device, dtype, bucket))
                bucket, nbytes = [], 0
            bucket.append(i)
            nbytes += size
        out.append((device, dtype, bucket))
    return out


def _xp(device: str):
    return np if device == "cpu" else _cupy()


def _pack(device: str, dtype, arrays, scale=None):
    """``arrays`` raveled one after another into a new 1-d buffer of ``dtype`` (each times
    ``scale`` on the way, when given); returns it."""
    xp = _xp(device)
    where = contextlib.nullcontext() if xp is np else xp.cuda.Device(int(device.split(":")[1]))  # pyright: ignore[reportAttributeAccessIssue]
    with where:
        buf = xp.empty(sum(a.size for a in arrays), dtype=dtype)
        off = 0
        for a in arrays:
            part = buf[off : off + a.size]
            if scale is None:
                part[...] = a.reshape(-1)
            else:
                xp.multiply(a.reshape(-1), scale, out=part, casting="unsafe")
            off += a.size
    return buf


def _unpack(buf, leaves, idx, out: list) -> None:
    """The leaves' results as views of ``buf`` shaped as the leaves (copies cast to the leaf's
    dtype where the buffer's differs: float16 summed in float32, booleans as uint8)."""
    off = 0
    for i in idx:
        a = leaves[i].array
        part = buf[off : off + a.size].reshape(a.shape)
        off += a.size
        out[i] = part.astype(a.dtype, copy=False) if part.dtype != a.dtype else part


# -- GPU transport -----------------------------------------------------------------------------
def _gpu_backend(ctx: _Context) -> str:
    if ctx.gpu_backend != "auto":
        return ctx.gpu_backend
    try:
        from cupy.cuda import nccl  # pyright: ignore[reportMissingImports]

        return "nccl" if getattr(nccl, "available", True) else "host"
    except ImportError:
        return "host"


def _nccl_comm(ctx: _Context, device: str):
    """The NCCL communicator of this rank's GPU ``device`` (made at the first use, by all ranks
    together: rank 0 draws the unique id and broadcasts it over MPI)."""
    dev = int(device.split(":")[1])
    comm = ctx.nccl.get(dev)
    if comm is None:
        from cupy.cuda import nccl  # pyright: ignore[reportMissingImports]

        uid = nccl.get_unique_id() if ctx.rank == 0 else None
        uid = ctx.comm.bcast(uid, root=0)
        cp = _cupy()
        with cp.cuda.Device(dev):
            comm = nccl.NcclCommunicator(ctx.size, uid, ctx.rank)
        ctx.nccl[dev] = comm
    return comm


def _nccl_type(dtype):
    from cupy.cuda import nccl  # pyright: ignore[reportMissingImports]

    table = {
        "int8": nccl.NCCL_INT8,
        "uint8": nccl.NCCL_UINT8,
        "int32": nccl.NCCL_INT32,
        "uint32": nccl.NCCL_UINT32,
        "int64": nccl.NCCL_INT64,
        "uint64": nccl.NCCL_UINT64,
        "float16": nccl.NCCL_FLOAT16,
        "float32": nccl.NCCL_FLOAT32,
        "float64": nccl.NCCL_FLOAT64,
    }
    return table[np.dtype(dtype).name]


def _nccl_view(buf):
    """``(buffer, count, NCCL datatype)``: complex buffers travel as pairs of reals."""
    if buf.dtype.kind == "c":
        buf = buf.view(np.float32 if buf.dtype == np.complex64 else np.float64)
    return buf, buf.size, _nccl_type(buf.dtype)


def _device_call(ctx: _Context, kind: str, buf, what: str, mpi_fn, nccl_fn) -> None:
    """Run a collective on device buffer ``buf`` through the configured GPU transport:
    ``nccl_fn(comm, stream_ptr)``, or ``mpi_fn(array)`` on the device buffer (CUDA-aware MPI)
    or on a host copy written back afterwards."""
    with buf.device:  # the current stream of the buffer's own GPU
        _device_call_on(ctx, kind, buf, what, mpi_fn, nccl_fn)


def _device_call_on(ctx: _Context, kind: str, buf, what: str, mpi_fn, nccl_fn) -> None:
    cp = _cupy()
    backend = _gpu_backend(ctx)
    stream = cp.cuda.get_current_stream()
    if backend == "nccl":
        comm = _nccl_comm(ctx, f"cuda:{buf.device.id}")

        def run():
            nccl_fn(comm, stream.ptr)
            stream.synchronize()  # so the watchdog sees a hang, and timings are real

        _call(ctx, kind, buf.nbytes, what, run)
    elif backend == "mpi":
        stream.synchronize()
        _call(ctx, kind, buf.nbytes, what, lambda: mpi_fn(buf))
    else:
        host = cp.asnumpy(buf)
        _call(ctx, kind, buf.nbytes, what, lambda: mpi_fn(host))
        buf.set(host)


# -- collectives -----------------------------------------------------------------------------
def _buffer_dtype(where: str, op: str, dtype, path):
    """The dtype a leaf of ``dtype`` is reduced in under ``op``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        if op in ("sum", "mean"):
            raise TypeError(
                f"{where}: op={op!r} on boolean leaf {path()}; use op='max' (any) or 'min' (all), "
                "or cast it to an integer dtype to count."
            )
        return np.dtype(np.uint8)
    if op == "mean" and dtype.kind in "iu":
        raise TypeError(
            f"{where}: op='mean' on integer leaf {path()} (dtype {dtype}) would not be an "
            "integer; use op='sum' and divide by world_size(), or cast it to a floating dtype."
        )
    if op in ("max", "min") and dtype.kind == "c":
        raise TypeError(f"{where}: op={op!r} on complex leaf {path()} (complex is not ordered)")
    if dtype == np.float16:
        return np.dtype(np.float32)  # summed in float32, returned as float16
    return dtype


def allreduce(tree, op: str = "sum", *, bucket_bytes: int | None = None, name: str = "tree"):
    """Reduce every leaf of ``tree`` elementwise across ranks: the sum, mean, max or min.

    Every rank passes a pytree of the same structure, leaf shapes and dtypes and gets the
    result back in the same structure, with the same leaf kinds (Tensors stay Tensors on their
    device; NumPy arrays, NumPy scalars, Python numbers and CuPy arrays stay so). Leaves of
    one device and dtype are packed into new contiguous buffers of at most ``bucket_bytes``:
    one in-place ``MPI_Allreduce`` (or NCCL ``allReduce``) per dtype and bucket, and the
    result leaves are views of the reduced buffer (PyTorch DDP's ``gradient_as_bucket_view``:
    no copy out). ``mean`` is the sum divided by ``world_size()`` (for a power-of-two world
    size each leaf is scaled while it is packed, which gives the same result). float16 leaves
    are reduced in float32.

    Args:
        tree: Pytree of Tensors, NumPy/CuPy arrays, NumPy scalars or Python numbers (boolean
            or numeric). Not traced Tensors (see the module notes).
        op: ``"sum"``, ``"mean"`` (floating or complex leaves), ``"max"`` or ``"min"`` (real
            leaves; on booleans they are *any* and *all*).
        bucket_bytes: Bucket size for this call (default: :func:`init`'s).
        name: How the error messages name the tree's root (``"grads"`` gives
            ``grads['w']``).

    Returns:
        The reduced pytree. Array leaves are new arrays (views of the new fused buffer, which
        lives as long as any of them): nothing passed in is modified.

    Raises:
        RuntimeError: before :func:`init`.
        TypeError: for a traced Tensor, a non-numeric leaf, or an ``op`` the leaf's dtype has
            no meaning for (``mean`` of integers, ``sum`` of booleans, ``max`` of complex).
        ValueError: for an unknown ``op``, or when the ranks passed different structures,
            shapes, dtypes or devices (the message names the first differing leaf).

    Example:
        >>> import numpy as np
        >>> from tapegrad import distributed as dist
        >>> dist.init()   # a single process here: world size 1
        >>> dist.allreduce({"loss": 0.25, "n": np.int64(3)})
        {'loss': 0.25, 'n': np.int64(3)}
    """
    where = "allreduce"
    ctx = _context(where)
    if op not in _OPS:
        raise ValueError(f"allreduce: op must be one of {_OPS}, got {op!r}")
    bucket_bytes = _check_bucket_bytes(where, ctx, bucket_bytes)
    leaves, treedef, paths = _leaves(where, tree, name)
    dtypes = [
        _buffer_dtype(where, op, leaf.array.dtype, lambda i=i: paths()[i])  # pyright: ignore[reportAttributeAccessIssue]
        for i, leaf in enumerate(leaves)
    ]
    _verify(ctx, where, f"allreduce(op={op!r})", treedef, leaves, paths)
    out: list = [None] * len(leaves)
    MPI = ctx.MPI
    mpi_op = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
    n = ctx.size
    # The mean's division by a power of two is folded into the packing: scaling by a power of
    # two commutes with rounding (outside the subnormal range), so the result is the same.
    prescale = 1.0 / n if op == "mean" and n > 1 and n & (n - 1) == 0 else None
    for device, dtype, idx in _buckets(leaves, dtypes, bucket_bytes):
        buf = _pack(device, dtype, [leaves[i].array for i in idx], prescale)
        if n > 1 and buf.size:
            what = f"allreduce(op={op!r}) of {buf.nbytes} bytes of {dtype}"

            def mpi_fn(b, mpi_op=mpi_op):
                ctx.comm.Allreduce(MPI.IN_PLACE, b, op=mpi_op)

            if device == "cpu":
                _call(ctx, "allreduce", buf.nbytes, what, lambda b=buf, f=mpi_fn: f(b))
            else:

                def nccl_fn(comm, stream, b=buf):
                    from cupy.cuda import nccl  # pyright: ignore[reportMissingImports]

                    v, n, t = _nccl_view(b)
                    nop = {"max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}.get(op, nccl.NCCL_SUM)
                    comm.allReduce(v.data.ptr, v.data.ptr, n, t, nop, stream)  # pyright: ignore[reportAttributeAccessIssue]

                _device_call(ctx, "allreduce", buf, what, mpi_fn, nccl_fn)
        if op == "mean" and n > 1 and prescale is None:
            buf /= n
        _unpack(buf, leaves, idx, out)
    return tree_unflatten(treedef, [_rebuild(lf, a) for lf, a in zip(leaves, out)])


def broadcast(tree, root: int = 0, *, bucket_bytes: int | None = None, name: str = "tree"):
    """Every rank gets rank ``root``'s values of ``tree``.

    The common first step of data-parallel training (``params = dist.broadcast(params)``), so
    that every rank starts from the same parameters whatever its own initialization drew.
    Every rank passes a pytree of the same structure, shapes and dtypes (the values on ranks
    other than ``root`` are ignored); leaves are fused as in :func:`allreduce` (one
    ``MPI_Bcast`` per dtype and bucket).

    Args:
        tree: Pytree of Tensors, NumPy/CuPy arrays, NumPy scalars or Python numbers.
        root: The rank whose values everyone gets, ``0 .. world_size() - 1``.
        bucket_bytes: Bucket size for this call (default: :func:`init`'s).
        name: How the error messages name the tree's root.

    Returns:
        The pytree with ``root``'s values, in this rank's structure and leaf kinds (new arrays).

    Raises:
        RuntimeError: before :func:`init`.
        TypeError: for a traced Tensor or a non-numeric leaf.
        ValueError: for a bad ``root``, or when the ranks passed different structures, shapes,
            dtypes or devices (the message names the first differing leaf).
    """
    where = "broadcast"
    ctx = _context(where)
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)):
        raise TypeError(f"broadcast: root must be an int rank, got {type(root).__name__}")
    if not 0 <= root < ctx.size:
        raise ValueError(f"broadcast: root must be in [0, {ctx.size}), got {root}")
    root = int(root)
    bucket_bytes = _check_bucket_bytes(where, ctx, bucket_bytes)
    leaves, treedef, paths = _leaves(where, tree, name)
    dtypes = [np.dtype(leaf.array.dtype) for leaf in leaves]  # pyright: ignore[reportAttributeAccessIssue]
    _verify(ctx, where, f"broadcast(root={root})", treedef, leaves, paths)
    out: list = [None] * len(leaves)
    for device, dtype, idx in _buckets(leaves, dtypes, bucket_bytes):
        buf = _pack(device, dtype, [leaves[i].array for i in idx])
        if ctx.size > 1 and buf.size:
            what = f"broadcast(root={root}) of {buf.nbytes} bytes of {dtype}"

            def mpi_fn(b):  # as bytes: no MPI datatype needed (Open MPI has no float16)
                ctx.comm.Bcast(b.view(np.uint8), root=root)

            if device == "cpu":
                _call(ctx, "broadcast", buf.nbytes, what, lambda b=buf: mpi_fn(b))
            else:

                def nccl_fn(comm, stream, b=buf):
                    v, n, t = _nccl_view(b.view(np.uint8) if b.dtype == bool else b)
                    comm.bcast(v.data.ptr, n, t, root, stream)  # pyright: ignore[reportAttributeAccessIssue]

                _device_call(ctx, "broadcast", buf, what, mpi_fn, nccl_fn)
        _unpack(buf, leaves, idx, out)
    return tree_unflatten(treedef, [_rebuild(lf, a) for lf, a in zip(leaves, out)])


def allgather(tree, *, bucket_bytes: int | None = None, name: str = "tree"):
    """Concatenate every leaf of ``tree`` across ranks, in rank order.

    A leaf with at least one axis is concatenated along axis 0: the first axis may differ
    between ranks (the last batch of an epoch, say), the other axes may not. A 0-d leaf
    (a scalar) gives a 1-d leaf of length ``world_size()``, one entry per rank. Leaves are
    fused per device and dtype (one ``MPI_Allgatherv`` per dtype and bucket), after a small
    ``Allgather`` of the first-axis lengths that also checks the structure.

    Args:
        tree: Pytree of Tensors, NumPy/CuPy arrays, NumPy scalars or Python numbers. Python
            numbers and NumPy scalars come back as 1-d NumPy arrays.
        bucket_bytes: Bucket size for this call (default: :func:`init`'s).
        name: How the error messages name the tree's root.

    Returns:
        The gathered pytree; leaf ``x`` of shape ``(n_r, *rest)`` on rank ``r`` becomes shape
        ``(sum_r n_r, *rest)``. Tensors stay Tensors, CuPy arrays CuPy arrays.

    Raises:
        RuntimeError: before :func:`init`.
        TypeError: for a traced Tensor or a non-numeric leaf.
        ValueError: when the ranks passed different structures, dtypes, devices, or shapes
            after the first axis (the message names the first differing leaf).
    """
    where = "allgather"
    ctx = _context(where)
    bucket_bytes = _check_bucket_bytes(where, ctx, bucket_bytes)
    leaves, treedef, paths = _leaves(where, tree, name)
    scalar = [leaf.array.ndim == 0 for leaf in leaves]  # pyright: ignore[reportAttributeAccessIssue]
    dims = tuple(("0-d",) if s else ("n", *leaf.array.shape[1:]) for s, leaf in zip(scalar, leaves))  # pyright: ignore[reportAttributeAccessIssue]
    _verify(ctx, where, "allgather()", treedef, leaves, paths, dims=dims)
    firsts = np.array([1 if s else lf.array.shape[0] for s, lf in zip(scalar, leaves)], np.int64)  # pyright: ignore[reportAttributeAccessIssue]
    if ctx.size > 1 and len(leaves):
        table = np.empty((ctx.size, len(leaves)), dtype=np.int64)
        _call(
            ctx,
            "allgather",
            firsts.nbytes,
            "allgather() of the first-axis lengths",
            lambda: ctx.comm.Allgather(firsts, table),
        )
    else:
        table = firsts[None, :]
    dtypes = [np.dtype(leaf.array.dtype) for leaf in leaves]  # pyright: ignore[reportAttributeAccessIssue]
    inner = [
        1 if s else int(np.prod(lf.array.shape[1:], dtype=np.int64))  # pyright: ignore[reportAttributeAccessIssue]
        for s, lf in zip(scalar, leaves)
    ]
    out: list = [None] * len(leaves)
    for device, dtype, idx in _buckets(leaves, dtypes, bucket_bytes):
        xp = _xp(device)
        mine = _pack(device, dtype, [leaves[i].array for i in idx])
        counts = [int(sum(table[r, i] * inner[i] for i in idx)) for r in range(ctx.size)]
        total = sum(counts)
        if ctx.size > 1 and total:
            got = _gather_bucket(ctx, device, dtype, mine, counts)
        else:
            got = mine
        # Rank r's segment holds its parts of the bucket's leaves one after another.
        sizes = table[:, idx] * np.asarray([inner[i] for i in idx], dtype=np.int64)
        starts = np.cumsum(np.concatenate([[0], counts[:-1]]))[:, None] + np.cumsum(
            np.concatenate([np.zeros((ctx.size, 1), np.int64), sizes[:, :-1]], axis=1), axis=1
        )
        for k, i in enumerate(idx):
            parts = []
            for r in range(ctx.size):
                off, n = int(starts[r, k]), int(sizes[r, k])
                shape = (int(table[r, i]),) + tuple(leaves[i].array.shape[1:])
                parts.append(got[off : off + n].reshape(shape))
            out[i] = xp.concatenate(parts, axis=0) if len(parts) > 1 else parts[0].copy()
    rebuilt = []
    for leaf, arr in zip(leaves, out):
        if leaf.kind in ("generic", "python"):
            rebuilt.append(np.asarray(arr))  # a 1-d array of one value per rank
        else:
            rebuilt.append(_rebuild(leaf, arr))
    return tree_unflatten(treedef, rebuilt)


def _gather_bucket(ctx: _Context, device: str, dtype, mine, counts):
    """Allgatherv of ``mine`` (this rank's ``counts[rank]`` elements) into one buffer."""
    xp = _xp(device)
    total = sum(counts)
    what = f"allgather() of {mine.nbytes} bytes of {dtype}"
    if device == "cpu":
        got = np.empty(total, dtype=dtype)
        size = got.itemsize  # moved as bytes: no MPI datatype needed (Open MPI has no float16)
        nbytes = [int(c) * size for c in counts]
        displs = np.concatenate([[0], np.cumsum(nbytes)[:-1]]).astype(np.int64)
        _call(
            ctx,
            "allgather",
            mine.nbytes,
            what,
            lambda: ctx.comm.Allgatherv(np.ascontiguousarray(mine).view(np.uint8),
                                        [got.view(np.uint8), (nbytes, list(displs))]),
        )
        return got
    # On the GPU every rank contributes max(counts) elements (NCCL's allGather has equal
    # counts); the padding is cut away below. The MPI transports use the same layout.
    width = max(counts)
    with xp.cuda.Device(int(device.split(":")[1])):  # pyright: ignore[reportAttributeAccessIssue]
        send = xp.zeros(width, dtype=dtype)
        send[: mine.size] = mine
        padded = xp.empty(width * ctx.size, dtype=dtype)

    def mpi_fn(b):  # b: ``padded`` (CUDA-aware MPI) or its host copy (staging); as bytes
        mine_ = xp.asnumpy(send) if type(b) is np.ndarray else send  # pyright: ignore[reportAttributeAccessIssue]
        ctx.comm.Allgather(mine_.view(np.uint8), b.view(np.uint8))

    def nccl_fn(comm, stream):
        v, n, t = _nccl_view(send)
        r, _, _ = _nccl_view(padded)
        comm.allGather(v.data.ptr, r.data.ptr, n, t, stream)  # pyright: ignore[reportAttributeAccessIssue]

    _device_call(ctx, "allgather", padded, what, mpi_fn, nccl_fn)
    return xp.concatenate([padded[r * width : r * width + counts[r]] for r in range(ctx.size)])


def _check_bucket_bytes(where: str, ctx: _Context, bucket_bytes) -> int:
    if bucket_bytes is None:
        return ctx.bucket_bytes
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"{where}: bucket_bytes must be a positive int, got {bucket_bytes!r}")
    return bucket_bytes


# -- sharding the data -------------------------------------------------------------------------
def shard(
    indices,
    key=None,
    *,
    batch_size: int | None = None,
    drop_remainder: bool = False,
    rank: int | None = None,
    world_size: int | None = None,
):
    """This rank's part of each global batch of ``indices``.

    ``indices`` are first shuffled with ``key`` (``tapegrad.random.permutation``; every rank
    must pass the same key, so every rank computes the same order), then cut into global
    batches of ``batch_size`` consecutive indices, and each global batch is split into
    ``world_size`` contiguous parts, one per rank in rank order. So the ranks together see
    exactly the global batches one process would see with the same key, and every index is
    used exactly once per epoch across ranks (with ``drop_remainder=False``).

    When it does not divide evenly:

    - a global batch of ``m`` indices is split like ``numpy.array_split``: the first
      ``m % world_size`` ranks get ``m // world_size + 1`` indices, the others
      ``m // world_size`` (an empty part where ``m < world_size``). Only when every part has
      the same size is the mean of the per-rank mean losses the global batch's mean loss;
      otherwise compute each rank's loss as ``sum / m`` and reduce with
      :func:`allreduce_sum` (an empty part then contributes zero);
    - the last ``n % batch_size`` indices form a smaller last global batch, or, with
      ``drop_remainder=True``, are left out of this epoch (a fresh key each epoch leaves out
      different ones), so that every step has the full global batch.

    Every rank gets the same number of batches, so the ranks make the same collectives.

    Args:
        indices: Number of examples ``n`` (meaning ``range(n)``) or a 1-d integer array, list or
            Tensor of dataset indices.
        key: A key from ``tapegrad.random`` to shuffle with (one per epoch, for example
            ``tg.random.fold_in(key, epoch)``); ``None`` keeps the order given.
        batch_size: Global batch size (all ranks together). ``None``: ``indices`` are one global
            batch and this rank's part of it is returned.
        drop_remainder: Leave out a last global batch smaller than ``batch_size``.
        rank, world_size: Override :func:`rank` and :func:`world_size` (for tests, or to plan
            the split without :func:`init`).

    Returns:
        With ``batch_size=None``, this rank's part as a 1-d ``int64`` NumPy array; otherwise a
        list with one such array per global batch (step).

    Raises:
        TypeError: if ``indices`` is not an int or a 1-d integer array.
        ValueError: if ``batch_size``, ``rank`` or ``world_size`` is out of range.
        RuntimeError: if ``rank``/``world_size`` are not given and :func:`init` has not run.

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad import distributed as dist
        >>> [dist.shard(10, batch_size=4, rank=r, world_size=2) for r in (0, 1)]
        [[array([0, 1]), array([4, 5]), array([8])], [array([2, 3]), array([6, 7]), array([9])]]
        >>> key = tg.random.key(0)
        >>> parts = [dist.shard(10, key, batch_size=4, rank=r, world_size=2) for r in (0, 1)]
        >>> sorted(int(i) for p in parts for batch in p for i in batch)
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """
    if rank is None or world_size is None:
        if _ctx is None:
            raise RuntimeError("shard: call init() first, or pass both rank and world_size")
        rank = _ctx.rank if rank is None else rank
        world_size = _ctx.size if world_size is None else world_size
    for nm, v, lo in (("rank", rank, 0), ("world_size", world_size, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"shard: {nm} must be an int >= {lo}, got {v!r}")
    if rank >= world_size:
        raise ValueError(f"shard: rank {rank} is not below world_size {world_size}")
    if isinstance(indices, (int, np.integer)) and not isinstance(indices, bool):
        if indices < 0:
            raise ValueError(f"shard: the number of examples must be >= 0, got {indices}")
        idx = np.arange(int(indices), dtype=np.int64)
    else:
        idx = indices.numpy() if isinstance(indices, Tensor) else np.asarray(indices)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise TypeError(
                f"shard: indices must be an int n or a 1-d integer array, got "
                f"{type(indices).__name__} of shape {idx.shape} and dtype {idx.dtype}"
            )
        idx = idx.astype(np.int64)
    if key is not None:
        idx = idx[_random.permutation(key, len(idx)).numpy()]
    if batch_size is None:
        return _part(idx, rank, world_size)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)):
        raise ValueError(f"shard: batch_size must be a positive int or None, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"shard: batch_size must be a positive int or None, got {batch_size!r}")
    n = len(idx)
    steps = n // batch_size if drop_remainder else math.ceil(n / batch_size)
    return [
        _part(idx[s * batch_size : (s + 1) * batch_size], rank, world_size) for s in range(steps)
    ]


def _part(batch: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    m = len(batch)
    q, r = divmod(m, world_size)
    start = rank * q + min(rank, r)
    return batch[start : start + q + (1 if rank < r else 0)].copy()


# -- gradient transformations ----------------------------------------------------------------
@attrs.frozen
class AllreduceGradients(GradientTransformation):
    """Reduces the gradients across ranks (the mean, or the sum); state ``{}``.

    Put it first in an ``optim.chain`` so that every later transformation (clipping, Adam's
    moments, weight decay) sees the same, averaged gradients on every rank, and every rank
    applies the same update. ``update`` makes collectives: every rank must call it at the same
    step with gradients of the same structure, shapes and dtypes. It runs on the concrete
    gradients ``grad`` returned; inside a transform (traced Tensors) it raises a TypeError.

    Attributes:
        op: ``"mean"`` or ``"sum"``.
        bucket_bytes: Fusion bucket size in bytes, or ``None`` for :func:`init`'s.
    """

    op: str = "mean"
    bucket_bytes: int | None = None

    def init(self, params):
        """The empty state ``{}``."""
        return {}

    def update(self, grads, state, params=None):
        """``(allreduce(grads, op), state)``.

        Raises:
            RuntimeError: before :func:`init`.
            TypeError / ValueError: as :func:`allreduce`.
        """
        return allreduce(grads, self.op, bucket_bytes=self.bucket_bytes, name="grads"), state


def allreduce_mean(bucket_bytes: int | None = None) -> AllreduceGradients:
    """The gradient transformation that averages the gradients across ranks.

    ``optim.chain(dist.allreduce_mean(), optim.adamw(1e-3))``: with each rank's loss the mean
    over its equal part of the global batch, the averaged gradient is the gradient of the mean
    loss over the whole global batch, so the step equals one process's step on that batch (up
    to float rounding). Fused as :func:`allreduce` (one call per dtype and bucket).

    Args:
        bucket_bytes: Fusion bucket size in bytes (default: :func:`init`'s).

    Raises:
        ValueError: for a bad ``bucket_bytes``.
    """
    return AllreduceGradients("mean", _bucket_arg("allreduce_mean", bucket_bytes))


def allreduce_sum(bucket_bytes: int | None = None) -> AllreduceGradients:
    """The gradient transformation that sums the gradients across ranks.

    For losses each rank computes as ``sum over its part / global batch size`` (uneven parts,
    see :func:`shard`): the sum of the gradients is then the global batch's mean gradient.

    Args:
        bucket_bytes: Fusion bucket size in bytes (default: :func:`init`'s).

    Raises:
        ValueError: for a bad ``bucket_bytes``.
    """
    return AllreduceGradients("sum", _bucket_arg("allreduce_sum", bucket_bytes))


def _bucket_arg(where: str, bucket_bytes):
    if bucket_bytes is None:
        return None
    if isinstance(bucket_bytes, bool) or not isinstance(bucket_bytes, int) or bucket_bytes < 1:
        raise ValueError(f"{where}: bucket_bytes must be a positive int, got {bucket_bytes!r}")
    return bucket_bytes
