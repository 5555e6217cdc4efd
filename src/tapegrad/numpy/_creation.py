"""Array creation of ``tapegrad.numpy``: zeros, ones, full, empty, the ``*_like`` forms, arange,
linspace, eye, identity, tri, and the index grids tril_indices, triu_indices (and their
``_from`` forms) and indices.

Every function takes ``dtype`` and ``device`` (``"cpu"`` or ``"cuda:N"``). Dtype rules:

* floating results default to **float32**, tapegrad's rule for Python data (NumPy would give
  float64); pass ``dtype=tnp.float64`` for double precision;
* integer results follow NumPy: ``arange`` of Python ints and ``full`` with an int fill value
  give **int64**, a bool fill value gives bool;
* ``*_like`` functions keep the reference's dtype and device unless told otherwise.

Results are constants (no gradient flows into them), except :func:`full`/:func:`full_like`
with a Tensor ``fill_value``, which is broadcast differentiably.
"""

from __future__ import annotations

import operator

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core import dtypes as _dtypes
from tapegrad.core.backend import get_backend as _get_backend
from tapegrad.core.backend import parse_device as _parse_device
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _python_dtype, _tensor, array, astype, to_device
from tapegrad.numpy._shape import broadcast_to, swapaxes, transpose
from tapegrad.ops._registry import given_tensor as _given_tensor
from tapegrad.ops._registry import ns as _ns

__all__ = [
    "r_",
    "c_",
    "zeros",
    "ones",
    "full",
    "empty",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "arange",
    "linspace",
    "eye",
    "identity",
    "tri",
    "tril_indices",
    "triu_indices",
    "tril_indices_from",
    "triu_indices_from",
    "indices",
]


def _dtype(dtype, op: str, default=_np.float32):
    if dtype is None:
        return _np.dtype(default)
    try:
        dt = _np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype (use e.g. tnp.float32)") from None
    if dt.kind not in "biufc" and dt != _dtypes.bfloat16:
        raise TypeError(f"{op}: dtype must be numeric (bool, int, float, complex), got {dt}")
    return dt


def _default_float(*values) -> _np.dtype:
    """The floating dtype of a result made from ``values`` when no ``dtype`` is given: float32
    (tapegrad's default for Python numbers), complex64 when a value is complex, and wider where
    an array or NumPy scalar among them is (a float64 bound gives float64, as NumPy)."""
    dts: list = [_np.dtype(_np.float32)]
    for v in values:
        if isinstance(v, (_np.ndarray, _np.generic)):
            if v.dtype.kind in "fc":
                dts.append(v.dtype)
            elif v.dtype.kind not in "biu":
                raise TypeError(f"expected numbers, got an array of dtype {v.dtype}")
        elif isinstance(v, complex) or (
            isinstance(v, (list, tuple)) and _np.asarray(v).dtype.kind == "c"
        ):
            dts.append(_np.dtype(_np.complex64))
    return _np.result_type(*dts)


def _shape(shape, op: str) -> tuple:
    if isinstance(shape, (int, _np.integer)) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        shape = tuple(operator.index(s) for s in shape)  # pyright: ignore[reportArgumentType, reportGeneralTypeIssues]
    except TypeError:
        raise TypeError(
            f"{op}: shape must be an int or a sequence of ints, got {shape!r}"
        ) from None
    if any(s < 0 for s in shape):
        raise ValueError(f"{op}: negative dimensions are not allowed, got shape {shape}")
    return shape


def _make(device, op: str, build) -> Tensor:
    """Run ``build(xp)`` on ``device``'s backend and wrap the array as a constant Tensor."""
    try:
        device = _parse_device(device)
    except ValueError as e:
        raise ValueError(f"{op}: {e}") from None
    if device == "cpu":
        return Tensor(build(_np))
    xp = _get_backend(device)
    with xp.cuda.Device(int(device.split(":")[1])):
        return Tensor(build(xp))


def zeros(shape, dtype=None, device=None) -> Tensor:
    """A Tensor of zeros.

    Args:
        shape: Int or tuple of ints (``()`` for a scalar; zeros allowed).
        dtype: Any numeric dtype; default float32.
        device: ``"cpu"`` (default) or ``"cuda:N"``.

    Returns:
        Constant Tensor of ``shape`` and ``dtype`` on ``device``.

    Raises:
        TypeError: if ``shape`` is not ints or ``dtype`` is not numeric.
        ValueError: for a negative dimension or an unknown device.
    """
    shape, dt = _shape(shape, "zeros"), _dtype(dtype, "zeros")
    return _make(device, "zeros", lambda xp: xp.zeros(shape, dtype=dt))


def ones(shape, dtype=None, device=None) -> Tensor:
    """A Tensor of ones; arguments, defaults and errors as :func:`zeros`."""
    shape, dt = _shape(shape, "ones"), _dtype(dtype, "ones")
    return _make(device, "ones", lambda xp: xp.ones(shape, dtype=dt))


def empty(shape, dtype=None, device=None) -> Tensor:
    """Same as :func:`zeros`: tapegrad never hands out uninitialised memory, so that every
    result is deterministic (NumPy's ``empty`` leaves the contents arbitrary)."""
    shape, dt = _shape(shape, "empty"), _dtype(dtype, "empty")
    return _make(device, "empty", lambda xp: xp.zeros(shape, dtype=dt))


def _fill_dtype(fill_value, op: str):
    if isinstance(fill_value, (bool, _np.bool_)):
        return _np.dtype(_np.bool_)
    if isinstance(fill_value, (_np.generic, _np.ndarray, Tensor)):
        return _np.dtype(fill_value.dtype)
    if isinstance(fill_value, (int, float, complex)):
        return _python_dtype(fill_value)
    if isinstance(fill_value, (list, tuple)):
        arr = _np.asarray(fill_value)
        if arr.dtype.kind in "biuc":
            return arr.dtype
        if arr.dtype.kind == "f":
            return _np.dtype(_np.float32)
    raise TypeError(
        f"{op}: fill_value must be a number, array or Tensor, got {type(fill_value).__name__}"
    )


def full(shape, fill_value, dtype=None, device=None) -> Tensor:
    """A Tensor of ``shape`` filled with ``fill_value`` (broadcast like NumPy).

    Args:
        shape: Int or tuple of ints.
        fill_value: Number, array or Tensor broadcastable to ``shape``. A Tensor fill value is
            broadcast with :func:`~tapegrad.numpy.broadcast_to`, so gradients flow into it.
        dtype: Default from ``fill_value``: Python float (or list of floats) -> float32, Python
            int -> int64 (as NumPy), bool -> bool, complex -> complex64, arrays/Tensors keep
            their dtype.
        device: ``"cpu"`` (default) or ``"cuda:N"``; a Tensor fill value's device by default.

    Returns:
        Tensor of ``shape`` and ``dtype``.

    Raises:
        TypeError: for a non-numeric ``fill_value`` or ``dtype``.
        ValueError: if ``fill_value`` does not broadcast to ``shape``.
    """

    shape = _shape(shape, "full")
    dt = _dtype(dtype, "full", default=_fill_dtype(fill_value, "full"))  # pyright: ignore[reportArgumentType]
    if isinstance(fill_value, Tensor):
        v = astype(fill_value, dt)
        if device is not None:
            v = to_device(v, device)
        try:
            _np.broadcast_shapes(v.shape, shape)
        except ValueError:
            raise ValueError(
                f"full: fill_value of shape {v.shape} does not broadcast to shape {shape}"
            ) from None
        return broadcast_to(v, shape)
    fv = fill_value
    try:
        _np.broadcast_shapes(_np.shape(fv), shape)
    except ValueError:
        raise ValueError(
            f"full: fill_value of shape {_np.shape(fv)} does not broadcast to shape {shape}"
        ) from None
    return _make(device, "full", lambda xp: xp.full(shape, xp.asarray(fv), dtype=dt))


def _like(x, shape, dtype, device):
    """``(shape, dtype, device)`` of a ``*_like`` result: ``x``'s, each overridden where given."""
    if not isinstance(x, Tensor):
        x = _tensor(x)
    return (x.shape if shape is None else shape, x.dtype if dtype is None else dtype,
            x.device if device is None else device)


def zeros_like(x, dtype=None, device=None, shape=None) -> Tensor:
    """Zeros with the shape, dtype and device of ``x`` (each overridable).

    ``x`` may be traced: only its metadata is used, and the result is a constant. Python data
    ``x`` counts as float32 (tapegrad's rule).
    """
    shape, dtype, device = _like(x, shape, dtype, device)
    return zeros(shape, dtype=dtype, device=device)


def ones_like(x, dtype=None, device=None, shape=None) -> Tensor:
    """Ones with the shape, dtype and device of ``x``; see :func:`zeros_like`."""
    shape, dtype, device = _like(x, shape, dtype, device)
    return ones(shape, dtype=dtype, device=device)


def empty_like(x, dtype=None, device=None, shape=None) -> Tensor:
    """Same as :func:`zeros_like` (tapegrad's ``empty`` returns zeros, for determinism)."""
    return zeros_like(x, dtype=dtype, device=device, shape=shape)


def full_like(x, fill_value, dtype=None, device=None, shape=None) -> Tensor:
    """``fill_value`` in the shape, dtype and device of ``x`` (dtype default: ``x``'s, as
    NumPy); see :func:`full`."""
    shape, dtype, device = _like(x, shape, dtype, device)
    return full(shape, fill_value, dtype=dtype, device=device)


def _is_int(v) -> bool:
    return isinstance(v, (int, _np.integer))


def arange(start, stop=None, step=None, dtype=None, device=None) -> Tensor:
    """Evenly spaced values in ``[start, stop)`` (NumPy ``arange``; ``arange(n)`` is
    ``arange(0, n)``).

    Args:
        start, stop, step: Numbers; ``step`` defaults to 1 and must be nonzero.
        dtype: Default int64 when all of start, stop, step are ints (as NumPy), else float32,
            or float64 where a bound is a float64 NumPy scalar (the values are computed in
            float64 as NumPy does, then cast).
        device: ``"cpu"`` (default) or ``"cuda:N"``.

    Returns:
        1-D constant Tensor of length ``ceil((stop - start) / step)`` (0 if negative).

    Raises:
        ValueError: if ``step`` is 0.
        TypeError: for non-numeric arguments or dtype.
    """
    if stop is None:
        start, stop = 0, start
    if step is None:
        step = 1
    for name, v in (("start", start), ("stop", stop), ("step", step)):
        if isinstance(v, Tensor) or not isinstance(v, (int, float, _np.generic)):
            raise TypeError(f"arange: {name} must be a Python or NumPy number, got {v!r}")
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    if dtype is None:
        ints = all(_is_int(v) for v in (start, stop, step))
        dt = _np.dtype(_np.int64) if ints else _default_float(start, stop, step)
        values = _np.arange(start, stop, step, dtype=_np.int64 if ints else _np.float64)
        values = values.astype(dt, copy=False)
    else:
        dt = _dtype(dtype, "arange")
        values = _np.arange(start, stop, step, dtype=dt)
    return _make(device, "arange", lambda xp: xp.asarray(values))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, device=None):
    """``num`` evenly spaced samples from ``start`` to ``stop`` (NumPy ``linspace``).

    Args:
        start, stop: Numbers, arrays or Tensors (broadcast; samples go along ``axis``).
        num: Number of samples, ``>= 0``.
        endpoint: Include ``stop``.
        retstep: Also return the spacing (a Python float, or an array for array bounds).
        dtype: Default float32 (complex64 for complex bounds), or the wider dtype of bounds
            that are float64 (complex128) arrays or NumPy scalars, as NumPy keeps theirs,
            or the Tensor endpoints' dtype (NumPy's promotion; integers give float64);
            computed in float64 (complex128) as NumPy, then cast. An integer dtype floors
            like NumPy.
        axis: Where the samples go when ``start``/``stop`` are arrays.
        device: ``"cpu"`` (default) or ``"cuda:N"``.

    Returns:
        Tensor of shape ``(num,)`` (or with ``num`` at ``axis``), and with ``retstep`` the
        tuple ``(samples, step)``. A constant for number/array endpoints; differentiable in
        Tensor endpoints (traced ones too, as HIPS autograd): sample ``i`` is
        ``start + i * (stop - start) / div`` and the last one ``stop`` itself (``step`` is
        then a Tensor).

    Raises:
        ValueError: if ``num`` is negative.

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> tnp.linspace(0.0, 1.0, 5)
        Tensor([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
        >>> tg.grad(lambda b: tnp.linspace(0.0, b, 5).sum())(tg.Tensor(2.0))
        Tensor(2.5, dtype=float32)
    """
    if _given_tensor(start) or _given_tensor(stop):
        from tapegrad.numpy._spacing import linspace_of_tensors  # (it builds on this module)

        return linspace_of_tensors(start, stop, num, endpoint, retstep, dtype, axis, device)
    num = operator.index(num)
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    try:
        dt = _default_float(start, stop) if dtype is None else _dtype(dtype, "linspace")
    except TypeError as e:
        raise TypeError(f"linspace: {e}") from None
    work = _np.complex128 if _default_float(start, stop).kind == "c" else _np.float64
    values, step = _np.linspace(
        start, stop, num, endpoint=endpoint, retstep=True, dtype=work, axis=axis
    )
    if dt.kind in "iub":
        values = _np.linspace(start, stop, num, endpoint=endpoint, dtype=dt, axis=axis)
    else:
        values = values.astype(dt)
    out = _make(device, "linspace", lambda xp: xp.asarray(values))
    return (out, step) if retstep else out


def _sizes(n, m, op: str, names: str = "NM") -> tuple[int, int]:
    """The sizes ``n`` and ``m`` of a matrix (``m`` defaults to ``n``) as ints; ``ValueError``
    naming ``op`` and the arguments (``names``) if one is negative."""
    n = operator.index(n)
    m = n if m is None else operator.index(m)
    if n < 0 or m < 0:
        raise ValueError(f"{op}: sizes must be non-negative, got {names[0]}={n}, {names[1]}={m}")
    return n, m


def eye(N, M=None, k=0, dtype=None, device=None) -> Tensor:
    """``N x M`` matrix with ones on the ``k``-th diagonal (NumPy ``eye``).

    Args:
        N: Rows.
        M: Columns (default ``N``).
        k: Diagonal offset (0 main, > 0 above).
        dtype: Default float32.
        device: ``"cpu"`` (default) or ``"cuda:N"``.

    Raises:
        ValueError: for negative sizes.
    """
    N, M = _sizes(N, M, "eye")
    dt = _dtype(dtype, "eye")
    return _make(device, "eye", lambda xp: xp.eye(N, M, k=operator.index(k), dtype=dt))


def identity(n, dtype=None, device=None) -> Tensor:
    """The ``n x n`` identity matrix (``eye(n)``); dtype default float32."""
    return eye(n, dtype=dtype, device=device)


def tri(N, M=None, k=0, dtype=None, device=None) -> Tensor:
    """``N x M`` matrix with ones at and below the ``k``-th diagonal (NumPy ``tri``); dtype
    default float32.

    Raises:
        ValueError: for negative sizes.
    """
    N, M = _sizes(N, M, "tri")
    dt = _dtype(dtype, "tri")
    return _make(device, "tri", lambda xp: xp.tri(N, M, k=operator.index(k), dtype=dt))


def _tri_indices(n, k, m, lower, op, device):
    n, m = _sizes(n, m, op, "nm")
    k = operator.index(k)
    rows, cols = (_np.tril_indices if lower else _np.triu_indices)(n, k, m)
    return (_make(device, op, lambda xp: xp.asarray(rows)),
            _make(device, op, lambda xp: xp.asarray(cols)))


def tril_indices(n, k=0, m=None, *, device=None) -> tuple:
    """Row and column indices of the lower triangle of an ``(n, m)`` matrix: the entries
    with ``col - row <= k`` (NumPy ``tril_indices``), in row-major order.

    Args:
        n: Rows.
        k: Diagonal offset.
        m: Columns (default ``n``).
        device: ``"cpu"`` (default) or ``"cuda:N"``.

    Returns:
        ``(rows, cols)``: two int64 Tensors of equal length (constants). ``x[rows, cols]``
        gathers the triangle (differentiably in ``x``).

    Raises:
        ValueError: for negative sizes.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.tril_indices(3)
        (Tensor([0, 1, 1, 2, 2, 2], dtype=int64), Tensor([0, 0, 1, 0, 1, 2], dtype=int64))
    """
    return _tri_indices(n, k, m, True, "tril_indices", device)


def triu_indices(n, k=0, m=None, *, device=None) -> tuple:
    """Row and column indices of the upper triangle (``col - row >= k``) of an ``(n, m)``
    matrix (NumPy ``triu_indices``); see :func:`tril_indices`.

    Args:
        n: Number of rows (a non-negative int).
        k: Diagonal offset.
        m: Number of columns (default ``n``).
        device: ``"cpu"`` or ``"cuda:N"``.

    Returns:
        ``(rows, cols)``: two 1-D int64 Tensors of equal length; no gradient (integers).

    Raises:
        ValueError: for negative sizes. TypeError: for non-integer sizes.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.triu_indices(3, k=1)
        (Tensor([0, 0, 1], dtype=int64), Tensor([1, 2, 2], dtype=int64))
    """
    return _tri_indices(n, k, m, False, "triu_indices", device)


def _from(arr, op):
    shape = arr.shape if hasattr(arr, "shape") else _np.shape(arr)
    if len(shape) != 2:
        raise ValueError(f"{op}: arr must be 2-D, got shape {tuple(shape)}")
    return shape


def tril_indices_from(arr, k=0) -> tuple:
    """:func:`tril_indices` for the shape of the 2-D ``arr`` (NumPy ``tril_indices_from``).

    Raises:
        ValueError: if ``arr`` is not 2-D.
    """
    n, m = _from(arr, "tril_indices_from")
    return tril_indices(n, k, m, device=getattr(arr, "device", None) if isinstance(
        arr, Tensor) else None)


def triu_indices_from(arr, k=0) -> tuple:
    """:func:`triu_indices` for the shape of the 2-D ``arr`` (NumPy ``triu_indices_from``).

    Raises:
        ValueError: if ``arr`` is not 2-D.
    """
    n, m = _from(arr, "triu_indices_from")
    return triu_indices(n, k, m, device=arr.device if isinstance(arr, Tensor) else None)


def indices(dimensions, dtype=int, sparse=False, *, device=None):
    """The index grid of a shape (NumPy ``indices``): ``out[i][j0, j1, ...] == j_i``.

    Args:
        dimensions: The grid's shape (a sequence of ints).
        dtype: Integer dtype of the result (default int64, NumPy's ``int``).
        sparse: Return a tuple of broadcastable Tensors (``k``-th of shape
            ``(1,) * k + (n_k,) + (1,) * ...``) instead of one stacked Tensor.
        device: ``"cpu"`` (default) or ``"cuda:N"``.

    Returns:
        A constant Tensor of shape ``(len(dimensions),) + dimensions``, or a tuple with
        ``sparse``.

    Raises:
        TypeError: if ``dimensions`` is not ints.
        ValueError: for a negative dimension.

    Example:
        >>> import tapegrad.numpy as tnp
        >>> tnp.indices((2, 3))[1]
        Tensor([[0, 1, 2],
                [0, 1, 2]], dtype=int64)
    """
    dims = _shape(tuple(dimensions) if not isinstance(dimensions, (int, _np.integer))
                  else dimensions, "indices")
    dt = _np.dtype(_np.int64) if dtype is int else _dtype(dtype, "indices")
    if sparse:
        grids = _np.indices(dims, dtype=dt, sparse=True)
        return tuple(_make(device, "indices", lambda xp, g=g: xp.asarray(g)) for g in grids)
    grid = _np.indices(dims, dtype=dt)
    return _make(device, "indices", lambda xp: xp.asarray(grid))


class _AxisConcatenator:
    """NumPy's ``r_``/``c_`` index expressions for Tensors: ``r_[a, b, 1.0, 0:3]`` joins its
    entries along an axis. Slices become ranges (``start:stop:step`` as :func:`arange`,
    ``start:stop:nj`` as ``linspace`` with ``n`` points; Python data becomes float32/int64 as
    in :func:`~tapegrad.numpy.arange`), numbers become one-element arrays, and a leading
    string directive ``"axis"`` or ``"axis,ndmin[,trans1d]"`` sets the joining axis, the least
    number of axes of each entry and where 1-D entries' axis goes (NumPy's rules). The dtype is
    the promotion of the entries (Python numbers weakly typed). Differentiable in Tensor
    entries (a concatenation). The matrix directives ``"r"``/``"c"`` are not supported
    (tapegrad has no matrix class).
    """

    def __init__(self, name, axis=0, ndmin=1, trans1d=-1):
        self._name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"tapegrad.numpy.{self._name}"

    def __getitem__(self, key):
        _array, _arange, _linspace = array, arange, linspace

        op = self._name
        if isinstance(key, str):
            raise ValueError(f"{op}: the string form builds a numpy.matrix, which tapegrad does "
                             "not have; give the entries")
        if not isinstance(key, tuple):
            key = (key,)
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        objs, kinds = [], []
        for k, item in enumerate(key):
            if isinstance(item, slice):
                start = 0 if item.start is None else item.start
                step = 1 if item.step is None else item.step
                if isinstance(step, (complex, _np.complexfloating)):
                    new = _linspace(start, item.stop, num=int(abs(step)))
                else:
                    new = _arange(start, item.stop, step)
                if ndmin > 1:
                    new = _array(new, ndmin=ndmin)
                    if trans1d != -1:
                        new = swapaxes(new, -1, trans1d)
                objs.append(new)
                kinds.append(new.dtype)  # pyright: ignore[reportAttributeAccessIssue]
            elif isinstance(item, str):
                if k != 0:
                    raise ValueError(f"{op}: a string directive must be the first entry")
                if item in ("r", "c"):
                    raise ValueError(f"{op}: the matrix directives 'r'/'c' build numpy.matrix "
                                     "objects, which tapegrad does not have")
                try:
                    vec = [int(v) for v in item.split(",")]
                except ValueError:
                    raise ValueError(f"{op}: unknown directive {item!r}") from None
                if len(vec) > 3:
                    raise ValueError(f"{op}: unknown directive {item!r}")
                axis = vec[0]
                if len(vec) > 1:
                    ndmin = vec[1]
                if len(vec) > 2:
                    trans1d = vec[2]
            elif type(item) in (int, float, complex, bool) or isinstance(item, _np.generic):
                objs.append(item)
                kinds.append(item if type(item) in (int, float, complex, bool) else item.dtype)
            else:
                item_ndim = item.ndim if isinstance(item, Tensor) else _np.ndim(item)
                new = _array(item, ndmin=ndmin)
                if trans1d != -1 and item_ndim < ndmin:
                    k2 = ndmin - item_ndim
                    k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
                    defaxes = list(range(ndmin))
                    new = transpose(new, defaxes[:k1] + defaxes[k2:] + defaxes[k1:k2])
                objs.append(new)
                kinds.append(new.dtype)
        if not objs:
            raise ValueError(f"{op}: needs at least one entry to join")
        dt = _dtypes.result_type(*kinds)
        objs = [_array(o, dtype=dt, ndmin=ndmin) if not isinstance(o, Tensor)
                else _ns.astype(o, dt) for o in objs]
        return _ops.Concatenate.apply(*objs, axis=axis)


#: Row-wise joining by index expression (NumPy ``r_``): ``r_[x, 0.0, y]``, ``r_[0:5]``,
#: ``r_["0,2", a, b]``; see :class:`_AxisConcatenator`.
r_ = _AxisConcatenator("r_", 0)
#: Column-wise joining by index expression (NumPy ``c_``): 1-D entries become columns of a
#: 2-D result (``r_["-1,2,0", ...]``).
c_ = _AxisConcatenator("c_", -1, ndmin=2, trans1d=0)
