"""Statistics of ``tapegrad.numpy``: NaN-ignoring reductions, order statistics (``median``,
``quantile``, ``percentile`` and their NaN-ignoring forms), ``average``, ``ptp``, ``cov``,
``corrcoef``, ``count_nonzero``, the array-API scans ``cumulative_sum``/``cumulative_prod``,
and the finite differences and integrals ``diff``, ``ediff1d``, ``gradient``, ``trapezoid``.

Every function here is a composite of differentiable primitives, so each differentiates to
any order, in both modes, and batches under ``vmap``; the conventions follow from the parts:

- **NaN-ignoring reductions** (``nansum``, ``nanmean``, ...) give NaN positions a zero
  cotangent. A slice with no non-NaN entry gives NaN (``nansum``: 0, ``nanprod``: 1), with a
  zero gradient, as NumPy's value (without NumPy's warning).
- **Order statistics** gather the sorted values through the sorting permutation, so the
  cotangent of a quantile goes to the one or two order statistics it interpolates, with the
  interpolation weights (``1 - gamma`` and ``gamma``); tied values are distinguished by the
  stable sort (the first in the sorted order is selected, as NumPy's partition would). The
  gradient with respect to ``q`` is the slope between the two order statistics (continuous
  methods; zero for the discrete ones).
- ``out=`` is accepted for NumPy's signatures but must be None: tapegrad never writes in
  place. ``overwrite_input`` is accepted and ignored.
- Float32 input gives float32 output (integers give float64), also where NumPy computes in
  float64 (``cov``, ``corrcoef``): pass ``dtype=`` to choose.
"""

from __future__ import annotations

import numbers as _numbers

import numpy as _np

from tapegrad import ops as _ops
from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.numpy._core import _tensor, stop_gradient
from tapegrad.numpy._creation import full_like
from tapegrad.numpy._shape import diagonal, moveaxis, take_along_axis
from tapegrad.ops._registry import bool_arg
from tapegrad.ops._registry import given_tensor as _given_tensor
from tapegrad.ops._registry import ns as _ns
from tapegrad.ops.reduction import normalize_axis as _normalize_axis

__all__ = [
    "nansum",
    "nanmean",
    "nanvar",
    "nanstd",
    "nanmax",
    "nanmin",
    "nanprod",
    "nancumsum",
    "nancumprod",
    "nanargmax",
    "nanargmin",
    "median",
    "nanmedian",
    "quantile",
    "nanquantile",
    "percentile",
    "nanpercentile",
    "average",
    "ptp",
    "cov",
    "corrcoef",
    "count_nonzero",
    "cumulative_sum",
    "cumulative_prod",
    "diff",
    "ediff1d",
    "gradient",
    "trapezoid",
]

nanargmax = _ns.nanargmax
nanargmin = _ns.nanargmin

_where = _ns.where
_isnan = _ns.isnan


# -- helpers ---------------------------------------------------------------------------------
def _no_out(op: str, out) -> None:
    if out is not None:
        raise TypeError(
            f"{op}: out= is not supported (tapegrad never writes in place); use the returned "
            "Tensor"
        )


def _np_dtype(dtype, op: str) -> _np.dtype:
    """``dtype`` as a NumPy dtype; ``TypeError`` naming ``op`` if it is not one."""
    try:
        return _np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: {dtype!r} is not a dtype") from None


def _cast(x: Tensor, dtype, op: str) -> Tensor:
    if dtype is None:
        return x
    dtype = _np_dtype(dtype, op)
    return x if x.dtype == dtype else x.astype(dtype)


def _stat_dtype(x: Tensor, dtype, op: str):
    """NumPy's ``dtype=`` of a mean or variance: the dtype the result is returned in (``None``:
    the default). An integer ``dtype`` for floating input is NumPy's ``TypeError``."""
    if dtype is None:
        return None
    dt = _np_dtype(dtype, op)
    if dt.kind == "b" and op != "nanmean":
        raise TypeError(
            f"{op}: dtype=bool cannot hold deviations from the mean (booleans do not "
            "subtract, as in NumPy); pass a floating dtype"
        )
    if x.dtype.kind in "fcV" and dt.kind not in "fc":
        raise TypeError(
            f"{op}: a has the floating dtype {x.dtype}, so dtype must be floating or complex, "
            f"got {dt} (as NumPy); cast the result with .astype({dt.name!r}) instead"
        )
    return dt


def _as_dtype(r: Tensor, dt) -> Tensor:
    return r if dt is None or r.dtype == dt else r.astype(dt)


def _float_dtype(dtype) -> _np.dtype:
    """The floating (or complex) dtype a statistic of ``dtype`` values is computed in: floats
    and complex keep theirs, integers and booleans give float64."""
    dtype = _np.dtype(dtype)
    return dtype if dtype.kind in "fcV" else _np.dtype(_np.float64)


def _real_dtype(dtype) -> _np.dtype:
    return _np.real(_np.zeros((), dtype)).dtype


def _to_float(x: Tensor) -> Tensor:
    d = _float_dtype(x.dtype)
    return x if x.dtype == d else x.astype(d)


def _concrete(cond) -> bool | None:
    """``bool(cond)`` for a data-dependent check, or None where it has no single answer
    (inside ``vmap``, each example may differ: the check is then skipped)."""
    try:
        return bool(cond)
    except TypeError:
        return None


def _valid(x: Tensor, where, op: str):
    """The mask of entries that take part: not NaN (floating ``x``) and ``where``."""
    mask = None
    if x.dtype.kind in "fcV":
        mask = _ns.logical_not(_isnan(x))
    if where is not None and where is not True:
        w = _tensor(where)
        if w.dtype != _np.bool_:
            raise TypeError(f"{op}: where must be boolean, got dtype {w.dtype}")
        mask = w if mask is None else mask & w
        if mask.shape != x.shape:
            mask = _ns.broadcast_to(mask, x.shape)
    return mask


def _fill(x: Tensor, mask, value) -> Tensor:
    return x if mask is None else _where(mask, x, value)


def _count(x: Tensor, mask, axis, keepdims):
    """How many entries take part in each slice (an int Tensor, or a Python int)."""
    if mask is None:
        axes = _normalize_axis(axis, x.ndim, "count")
        n = 1
        for a in axes:
            n *= x.shape[a]
        return n
    return _ns.sum(mask, axis=axis, keepdims=keepdims)


# -- NaN-ignoring reductions -----------------------------------------------------------------
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum over ``axis`` treating NaN as 0 (NumPy's ``nansum``).

    Args:
        a: Tensor of shape ``(d_0, ..., d_{n-1})``, any numeric dtype (complex included).
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        dtype: Dtype to sum in (``a`` is cast first), as NumPy.
        out: Not supported (must be None).
        keepdims: Keep reduced axes with size 1.
        initial: A starting value added to each sum.
        where: Boolean mask (broadcasting to ``a``) of the entries to include.

    Returns:
        Tensor of the reduced shape; dtype as :func:`sum`. A slice of NaN only sums to 0.

    Gradient: ``g`` to each included non-NaN entry, 0 to NaN and excluded entries.

    Raises:
        ValueError: if an axis is out of range or repeated.
        TypeError: if ``out`` is given or ``where`` is not boolean.
    """
    keepdims = bool_arg(keepdims, "nansum", "keepdims")
    _no_out("nansum", out)
    x = _tensor(a)
    x = _cast(_fill(x, _valid(x, where, "nansum"), 0), dtype, "nansum")
    s = _ns.sum(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return s if initial is None else s + initial


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product over ``axis`` treating NaN as 1 (NumPy's ``nanprod``).

    Arguments, result and errors as :func:`nansum` (``initial`` multiplies each product); a
    slice of NaN only gives 1. Gradient: as :func:`prod` over the non-NaN entries (exact with
    zeros), 0 to NaN and excluded entries.

    Returns:
        Tensor with ``axis`` reduced, in ``a``'s dtype (NumPy's ``prod`` rules: small integers
        widen) or ``dtype``.

    Raises:
        ValueError: for an out-of-range or repeated ``axis``.
        TypeError: for ``out=`` or a non-numeric input.
    """
    keepdims = bool_arg(keepdims, "nanprod", "keepdims")
    _no_out("nanprod", out)
    x = _tensor(a)
    x = _cast(_fill(x, _valid(x, where, "nanprod"), 1), dtype, "nanprod")
    p = _ns.prod(x, axis=axis, dtype=dtype, keepdims=keepdims)
    return p if initial is None else p * initial


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Mean over ``axis`` of the non-NaN entries (NumPy's ``nanmean``).

    Args:
        a: Tensor, any numeric dtype (complex included).
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        dtype: Dtype to compute in (``a`` is cast first) and of the result, as NumPy; an
            integer ``dtype`` needs integer input.
        out: Not supported (must be None).
        keepdims: Keep reduced axes with size 1.
        where: Boolean mask (broadcasting to ``a``) of the entries to include.

    Returns:
        Tensor of the reduced shape; floating dtypes are kept, integers give float64 (or
        ``dtype``). NaN for a slice with no included non-NaN entry (an empty axis included),
        as NumPy (no warning).

    Gradient: ``g / count`` to each included non-NaN entry, 0 elsewhere (and 0 for a slice
    with nothing to average).

    Raises:
        ValueError: if an axis is out of range or repeated.
        TypeError: if ``out`` is given, ``where`` is not boolean, or ``dtype`` is an integer
            dtype for floating input (as NumPy).
    """
    keepdims = bool_arg(keepdims, "nanmean", "keepdims")
    _no_out("nanmean", out)
    x = _tensor(a)
    dt = _stat_dtype(x, dtype, "nanmean")
    x = _to_float(_cast(x, dtype, "nanmean"))
    mask = _valid(x, where, "nanmean")
    total = _ns.sum(_fill(x, mask, 0), axis=axis, keepdims=keepdims)
    n = _count(x, mask, axis, keepdims)
    return _as_dtype(_safe_divide(total, n, _real_dtype(x.dtype)), dt)


def _safe_divide(total, n, dtype):
    """``total / n``, NaN where ``n <= 0`` (a Tensor or Python int), never a NaN gradient."""
    if not isinstance(n, Tensor):
        if n > 0:
            return total / n
        return total * _np.nan
    bad = n <= 0
    n = _where(bad, 1, n).astype(dtype)
    return _where(bad, _np.nan, total / n)


def _nanvar(op, a, axis, dtype, out, ddof, keepdims, where, mean, correction):
    _no_out(op, out)
    if correction is not None:
        if ddof != 0:
            raise ValueError(f"{op}: give ddof or correction, not both")
        ddof = correction
    if not isinstance(ddof, _numbers.Real) or isinstance(ddof, bool):
        raise TypeError(f"{op}: ddof must be a number, got {ddof!r}")
    x = _to_float(_cast(_tensor(a), dtype, op))
    mask = _valid(x, where, op)
    if mean is None:
        total = _ns.sum(_fill(x, mask, 0), axis=axis, keepdims=True)
        m = _safe_divide(total, _count(x, mask, axis, True), _real_dtype(x.dtype))
    else:
        m = _tensor(mean)
    c = _fill(x - m, mask, 0)
    sq = _ns.real(c * _ns.conj(c)) if x.dtype.kind == "c" else c * c
    total = _ns.sum(sq, axis=axis, keepdims=keepdims)
    n = _count(x, mask, axis, keepdims)
    return _safe_divide(total, n - ddof, _real_dtype(x.dtype))


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """Variance over ``axis`` of the non-NaN entries, ``sum(|x - mean|**2) / (n - ddof)``
    with ``n`` the number of non-NaN entries per slice (NumPy's ``nanvar``).

    Args:
        a: Tensor, any numeric dtype (complex input gives a real variance).
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        dtype: Dtype to compute in and of the result, as NumPy; an integer ``dtype`` needs
            integer input, and ``bool`` is refused (booleans do not subtract).
        out: Not supported (must be None).
        ddof: Delta degrees of freedom.
        keepdims: Keep reduced axes with size 1.
        where: Boolean mask of the entries to include.
        mean: A precomputed mean (with ``keepdims=True`` shape), as NumPy.
        correction: The array-API name of ``ddof`` (give one of them).

    Returns:
        Tensor of the reduced shape, real dtype of ``a``'s precision (integers: float64). NaN
        where ``n - ddof <= 0`` (a slice of NaN only included), as NumPy (no warning).

    Gradient: ``2 (x - mean) / (n - ddof)`` (``conj`` for complex) to each included non-NaN
    entry, 0 elsewhere.

    Raises:
        ValueError: for an axis out of range, or both ``ddof`` and ``correction``.
        TypeError: if ``out`` is given, ``ddof`` is not a number, or ``dtype`` is boolean or
            (for floating input) an integer dtype.
    """
    keepdims = bool_arg(keepdims, "nanvar", "keepdims")
    a = _tensor(a)
    dt = _stat_dtype(a, dtype, "nanvar")
    v = _nanvar("nanvar", a, axis, dtype, out, ddof, keepdims, where, mean, correction)
    return _as_dtype(v, dt)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):
    """Standard deviation ``sqrt(nanvar(...))`` over ``axis`` of the non-NaN entries (NumPy's
    ``nanstd``); arguments, result and errors as :func:`nanvar`.

    Gradient: ``(x - mean) / ((n - ddof) std)`` to each included non-NaN entry; at zero
    spread (every included entry equal) 0, the minimum-norm subgradient, as :func:`std`.

    Returns:
        Real floating Tensor with ``axis`` reduced (kept as size 1 with ``keepdims``): float32
        stays float32, integers give float64, complex gives its real dtype (or ``dtype``); NaN
        where fewer than ``ddof + 1`` entries are non-NaN.

    Raises:
        ValueError: for an out-of-range or repeated ``axis``.
        TypeError: for ``out=`` or a non-numeric input; for ``dtype`` as :func:`nanvar`.
    """
    keepdims = bool_arg(keepdims, "nanstd", "keepdims")
    a = _tensor(a)
    dt = _stat_dtype(a, dtype, "nanstd")
    v = _nanvar("nanstd", a, axis, dtype, out, ddof, keepdims, where, mean, correction)
    zero = v == 0
    sd = _where(zero, 0.0, _ns.sqrt(_where(zero, 1.0, v)))
    return _as_dtype(sd, dt)


def _nanextremum(op, a, axis, out, keepdims, initial, where, largest):
    _no_out(op, out)
    x = _tensor(a)
    if where is not None and where is not True and initial is None:
        raise ValueError(f"{op}: a where= mask needs initial= (a slice may be all masked)")
    reduce = _ns.max if largest else _ns.min
    axes = _normalize_axis(axis, x.ndim, op)
    empty = any(x.shape[i] == 0 for i in axes)
    if empty and initial is None:
        raise ValueError(
            f"{op}: reduction over axes {axes} of a Tensor of shape {x.shape} covers no "
            "elements; pass initial= or reduce over non-empty axes"
        )
    mask = _valid(x, where, op)
    if empty:
        r = _ns.sum(x * 0, axis=axis, keepdims=keepdims) + initial
        return r.astype(x.dtype) if r.dtype != x.dtype else r
    if mask is None:
        r = reduce(x, axis=axis, keepdims=keepdims)
    else:
        fill = -_np.inf if largest else _np.inf
        if x.dtype.kind == "c":  # below (above) every number in NumPy's lexicographic order
            fill = complex(fill, fill)
        elif x.dtype.kind not in "fV":
            info = _np.iinfo(x.dtype) if x.dtype.kind in "iu" else None
            fill = (info.min if largest else info.max) if info is not None else (not largest)
        r = reduce(_where(mask, x, fill), axis=axis, keepdims=keepdims)
        if x.dtype.kind in "fcV":
            none = _ns.logical_not(_ns.any(mask, axis=axis, keepdims=keepdims))
            r = _where(none, _np.nan, r)
    if initial is not None:
        r = (_ns.fmax if largest else _ns.fmin)(r, initial)
        if r.dtype != x.dtype:
            r = r.astype(x.dtype)
    return r


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Maximum over ``axis`` ignoring NaN (NumPy's ``nanmax``).

    Args:
        a: Tensor of any shape; real or complex (ordered as NumPy orders complex numbers:
            real part, then imaginary part).
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        out: Not supported (must be None).
        keepdims: Keep reduced axes with size 1.
        initial: A value each maximum is at least (NaN-ignoring); needed with ``where`` and
            over empty axes.
        where: Boolean mask of the entries to include.

    Returns:
        Tensor of ``a``'s dtype with the reduced shape; NaN for a slice of NaN only (as NumPy,
        without its warning).

    Gradient: as :func:`max` over the non-NaN entries (ties split equally), 0 to NaN entries
    and to slices of NaN only.

    Raises:
        ValueError: over an empty axis without ``initial`` (as NumPy), with ``where`` but no
            ``initial``, or for an axis out of range.
        TypeError: for complex input or ``out``.
    """
    keepdims = bool_arg(keepdims, "nanmax", "keepdims")
    return _nanextremum("nanmax", a, axis, out, keepdims, initial, where, True)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Minimum over ``axis`` ignoring NaN (NumPy's ``nanmin``); see :func:`nanmax`.

    Args:
        a: Tensor of any shape.
        axis: Int, tuple of ints or ``None`` (all axes).
        out: Must be ``None``.
        keepdims: Keep the reduced axes with size 1.
        initial: A value included in every slice (needed for empty slices).
        where: Optional boolean mask of the entries to include.

    Returns:
        Tensor of ``a``'s dtype with ``axis`` reduced; NaN for a slice of NaN only. Gradient: to
        the minimal non-NaN entries (ties split equally, as :func:`min`), 0 to NaN entries.

    Raises:
        ValueError: for a reduction over no elements without ``initial``, or a bad ``axis``
            (naming ``nanmin``).
        TypeError: for ``out=``.
    """
    keepdims = bool_arg(keepdims, "nanmin", "keepdims")
    return _nanextremum("nanmin", a, axis, out, keepdims, initial, where, False)


def nancumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along ``axis`` (an int; ``None``: of the flattened Tensor) treating NaN
    as 0 (NumPy's ``nancumsum``). Gradient: as :func:`cumsum`, 0 to NaN entries.

    Raises:
        ValueError: if ``axis`` is out of range.
        TypeError: if ``out`` is given.
    """
    return _nancumulative("nancumsum", _ns.cumsum, 0, a, axis, dtype, out)


def nancumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along ``axis`` treating NaN as 1 (NumPy's ``nancumprod``).
    Gradient: as :func:`cumprod` (exact with zeros), 0 to NaN entries.

    Raises:
        ValueError: if ``axis`` is out of range.
        TypeError: if ``out`` is given.
    """
    return _nancumulative("nancumprod", _ns.cumprod, 1, a, axis, dtype, out)


def _nancumulative(op, cumulative, neutral, a, axis, dtype, out):
    """``cumulative`` (``cumsum`` or ``cumprod``) of ``a`` with NaN replaced by ``neutral``."""
    _no_out(op, out)
    x = _tensor(a)
    x = _cast(_fill(x, _valid(x, None, op), neutral), dtype, op)
    return cumulative(x, axis=axis, dtype=dtype)


# -- order statistics ------------------------------------------------------------------------
# Hyndman and Fan's continuous methods: the virtual index is n q + alpha + q (1 - alpha - beta)
# - 1 (0-based), as NumPy's table.
_CONTINUOUS = {
    "interpolated_inverted_cdf": (0.0, 1.0),
    "hazen": (0.5, 0.5),
    "weibull": (0.0, 0.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}
_DISCRETE = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")
_METHODS = ("inverted_cdf", "averaged_inverted_cdf", "closest_observation",
            "interpolated_inverted_cdf", "hazen", "weibull", "linear", "median_unbiased",
            "normal_unbiased", "lower", "higher", "midpoint", "nearest")  # fmt: skip


def _as_q(q, dtype, op: str, scale: float) -> Tensor:
    """The probabilities as a Tensor (divided by ``scale``): Python numbers take ``dtype``
    (weak, as NumPy 2), arrays and lists keep their own (integers become float64)."""
    if isinstance(q, Tensor):
        qt = q
    elif isinstance(q, (_numbers.Real, _np.floating, _np.integer)) and not isinstance(q, bool):
        qt = Tensor(_np.asarray(q, dtype=dtype))
    else:
        arr = _np.asarray(q)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"{op}: q must be real numbers, got dtype {arr.dtype}")
        qt = Tensor(arr if arr.dtype.kind in "fV" else arr.astype(_np.float64))
    if qt.dtype.kind not in "fiuV":
        raise TypeError(f"{op}: q must be real numbers, got dtype {qt.dtype}")
    if qt.dtype.kind not in "fV":
        qt = qt.astype(_np.float64)
    if qt.size:
        bad = _concrete(_ns.any(_ns.logical_not((qt >= 0) & (qt <= scale))))
        if bad:
            what = "Percentiles must be in the range [0, 100]" if scale == 100 else \
                "Quantiles must be in the range [0, 1]"
            raise ValueError(f"{op}: {what}, got {qt.numpy() if qt.size < 20 else '...'}")
    return qt / scale if scale != 1 else qt


def _lerp(a, b, t):
    """NumPy's ``_lerp``: ``a + (b - a) t``, written from ``b`` where ``t >= 0.5``."""
    d = b - a
    if isinstance(t, Tensor) and t.device != d.device:  # positions from q, computed on the CPU
        t = t.to_device(d.device)
    return _where(t >= 0.5, b - d * (1 - t), a + d * t)


def _positions(method, n, q):
    """``(prev, next, gamma)`` for probabilities ``q`` and slice sizes ``n`` (Tensors that
    broadcast): the two order statistics (int Tensors in ``[0, n - 1]``) and the weight of the
    second (``None`` for the discrete methods, which select ``prev``)."""
    floor = _ns.floor
    nf = n.astype(q.dtype) if isinstance(n, Tensor) else n
    last = (n - 1) if not isinstance(n, Tensor) else _ns.maximum(n - 1, 0)

    def clip(i):
        return _ns.clip(i, 0, last).astype(_np.intp)

    if method in _DISCRETE:
        if method == "lower":
            idx = floor((nf - 1) * q)
        elif method == "higher":
            idx = _ns.ceil((nf - 1) * q)
        elif method == "nearest":
            idx = _ns.rint((nf - 1) * q)
        else:
            v = nf * q - 1 if method == "inverted_cdf" else nf * q - 1.5
            prev = floor(v)
            at = (v - prev) == 0
            if method == "closest_observation":
                at = at & (_ns.remainder(prev, 2) == 1)
            idx = _where(at, prev, prev + 1)
        i = clip(idx)
        return i, i, None
    if method == "linear":
        v = (nf - 1) * q
    elif method in ("averaged_inverted_cdf",):
        v = nf * q - 1
    elif method == "midpoint":
        v = 0.5 * (floor((nf - 1) * q) + _ns.ceil((nf - 1) * q))
    else:
        alpha, beta = _CONTINUOUS[method]
        v = nf * q + (alpha + q * (1 - alpha - beta)) - 1
    prev = floor(v)
    gamma = v - prev
    if method == "averaged_inverted_cdf":
        gamma = _where(gamma == 0, 0.5, 1.0).astype(q.dtype)
    elif method == "midpoint":
        gamma = _where(_ns.remainder(v, 1) == 0, 0.0, 0.5).astype(q.dtype)
    above = v >= nf - 1
    below = v < 0
    p = _where(above, last, _where(below, 0, prev))
    nx = _where(above, last, _where(below, 0, prev + 1))
    return clip(p), clip(nx), gamma


def _to_last(x: Tensor, axis, op):
    """``x`` with the reduced axes moved to the end and flattened: ``(rest..., n)``, the rest
    shape and the kept (keepdims) shape."""
    axes = _normalize_axis(axis, x.ndim, op)
    rest = tuple(i for i in range(x.ndim) if i not in axes)
    kept = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    rest_shape = tuple(x.shape[i] for i in rest)
    n = 1
    for i in axes:
        n *= x.shape[i]
    if rest + axes != tuple(range(x.ndim)):
        x = _ns.transpose(x, rest + axes)
    return _ns.reshape(x, rest_shape + (n,)), rest_shape, kept, n


def _order_statistics(op, a, q, axis, method, keepdims, weights, nan, scale, out, real=True):
    """The shared quantile machinery (see the module docstring)."""
    _no_out(op, out)
    if method not in _METHODS:
        raise ValueError(f"{op}: {method!r} is not a valid method. Use one of: {_METHODS}")
    x = _tensor(a)
    if x.dtype.kind == "c" and real:
        raise TypeError(f"{op}: a must be an array of real numbers, got dtype {x.dtype}")
    if x.dtype.kind == "b":
        raise TypeError(f"{op}: boolean input is not supported (NumPy cannot subtract "
                        "booleans to interpolate); cast it with astype(int)")
    work = _float_dtype(x.dtype)
    qt = _as_q(q, _real_dtype(work), op, scale)
    out_dtype = x.dtype if method in _DISCRETE else _tg_dtypes.result_type(work, qt.dtype)
    if weights is not None and method != "inverted_cdf":
        raise ValueError(f"{op}: only method 'inverted_cdf' supports weights, got {method!r}")
    x2, rest_shape, kept, n = _to_last(x, axis, op)
    if n == 0:
        raise ValueError(
            f"{op}: the reduced axes of a Tensor of shape {x.shape} hold no elements; a "
            "quantile of an empty set is undefined"
        )
    order = _ops.ArgSort.apply(x2, axis=-1, kind="stable")
    s = take_along_axis(x2, order, axis=-1)
    flat_q = _ns.reshape(qt, (qt.size,))
    has_nan = None
    if x.dtype.kind in "fcV":
        nan_mask = _isnan(s)
        if nan:
            count = _ns.sum(_ns.logical_not(nan_mask), axis=-1, keepdims=True)
        else:
            has_nan = _ns.reshape(nan_mask[..., -1], nan_mask.shape[:-1] + (1,))
            count = n
    else:
        count = n
    if weights is not None:
        idx = _weighted_index(op, x, weights, axis, order, count, flat_q, x2.shape, nan)
        gamma = None
        prev = nxt = idx
    else:
        prev, nxt, gamma = _positions(method, count, flat_q)
    lead = (1,) * len(rest_shape)
    if not isinstance(count, Tensor) and weights is None:  # the same positions in every slice
        prev = _ns.reshape(prev, lead + prev.shape)
        nxt = _ns.reshape(nxt, lead + nxt.shape)
        gamma = None if gamma is None else _ns.reshape(gamma, lead + gamma.shape)
    lo = take_along_axis(s, prev, axis=-1)
    if gamma is None:
        res = lo
    else:
        hi = take_along_axis(s, nxt, axis=-1)
        if lo.dtype != out_dtype:
            lo, hi = lo.astype(out_dtype), hi.astype(out_dtype)
        res = _lerp(lo, hi, gamma.astype(_real_dtype(out_dtype)))
    if res.dtype != out_dtype:
        res = res.astype(out_dtype)
    if x.dtype.kind in "fcV":
        empty = has_nan if not nan else (count == 0)
        res = _where(empty, _np.nan, res)
    # res: rest + (Q,) -> q.shape + rest (or q.shape + kept)
    res = moveaxis(res, -1, 0)
    shape = qt.shape + (kept if keepdims else rest_shape)
    return _ns.reshape(res, shape)


def _weighted_index(op, x, weights, axis, order, count, flat_q, shape2, nan):
    """The inverted-CDF position of each probability with ``weights`` (NumPy's weighted
    quantile): the first sorted entry whose cumulative weight reaches ``q`` of the total."""
    w = _tensor(weights)
    if w.dtype.kind not in "fiub":
        raise TypeError(f"{op}: weights must be real numbers, got dtype {w.dtype}")
    w = stop_gradient(w)
    if w.shape != x.shape:
        if w.ndim != 1 or not isinstance(axis, (int, _np.integer)) or \
                w.shape[0] != x.shape[int(axis)]:
            raise ValueError(
                f"{op}: weights (shape {w.shape}) must have the shape of a ({x.shape}), or be "
                "1-D with the length of the (single) reduced axis"
            )
        ax = int(axis) % x.ndim
        shp = [1] * x.ndim
        shp[ax] = w.shape[0]
        w = _ns.broadcast_to(_ns.reshape(w, tuple(shp)), x.shape)
    neg = _concrete(_ns.any(w < 0))  # pyright: ignore[reportCallIssue, reportOperatorIssue]
    if neg:
        raise ValueError(f"{op}: weights must be non-negative")
    w2, _, _, _ = _to_last(w.astype(_np.float64), axis, op)  # pyright: ignore[reportCallIssue]
    ws = take_along_axis(w2, order, axis=-1)
    if nan:
        sx = take_along_axis(_to_last(x, axis, op)[0], order, axis=-1)
        ws = _where(_isnan(sx), 0.0, ws)
    cdf = _ns.cumsum(ws, axis=-1)
    total = cdf[..., -1:]
    bad = _concrete(_ns.any(_ns.logical_not(total > 0) | _isnan(total)))
    if bad and not nan:
        raise ValueError(f"{op}: weights included NaN, inf or were all zero")
    cdf = cdf / _where(total > 0, total, 1.0)
    q = flat_q.astype(_np.float64)
    # index of q: the number of cumulative weights below it (searchsorted, side="left")
    below = _ns.reshape(cdf, cdf.shape[:-1] + (1, cdf.shape[-1])) < _ns.reshape(q, (q.size, 1))
    idx = _ns.sum(below, axis=-1)
    last = (count - 1) if not isinstance(count, Tensor) else _ns.maximum(count - 1, 0)
    return _ns.clip(idx, 0, last).astype(_np.intp)


_QUANTILE_DOC = """

    Args:
        a: Real Tensor (integers and booleans allowed) of shape ``(d_0, ..., d_{{n-1}})``.
        q: Probabilit{ies}: a number, sequence, array or Tensor (any shape){range}.
        axis: Axis or tuple of axes to reduce; ``None`` reduces all axes.
        out: Not supported (must be None).
        overwrite_input: Accepted and ignored (tapegrad never writes in place).
        method: NumPy's (Hyndman and Fan 1996): ``'linear'`` (default), ``'lower'``,
            ``'higher'``, ``'midpoint'``, ``'nearest'``, ``'inverted_cdf'``,
            ``'averaged_inverted_cdf'``, ``'closest_observation'``,
            ``'interpolated_inverted_cdf'``, ``'hazen'``, ``'weibull'``, ``'median_unbiased'``,
            ``'normal_unbiased'``.
        keepdims: Keep reduced axes with size 1.
        weights: Non-negative weights (``a``'s shape, or 1-D along a single ``axis``), for
            ``method='inverted_cdf'`` only; they get no gradient.

    Returns:
        Tensor of shape ``q.shape + reduced shape``. Dtype: ``a``'s for the discrete methods
        (``lower``, ``higher``, ``nearest``, ``inverted_cdf``, ``closest_observation``);
        otherwise ``a``'s floating dtype (integers: float64) promoted with ``q``'s (a Python
        number ``q`` is weak: float32 ``a`` gives float32). {nanres}

    Gradient: through the selected order statistics with the interpolation weights
    (``1 - gamma`` and ``gamma``), 0 to the other entries{nangrad}; with respect to ``q`` the
    slope ``(x_(j+1) - x_(j)) * d(virtual index)/dq`` for the continuous methods, 0 for the
    discrete ones and for ``'midpoint'``/``'averaged_inverted_cdf'``.

    Raises:
        ValueError: if ``q`` is outside {qrange} (checked when ``q`` is concrete, i.e. not
            inside ``vmap``), for an unknown method, weights with another method, negative or
            all-zero weights, or an empty reduction.
        TypeError: for complex ``a``, non-real ``q``, or ``out``.

    References:
        R. J. Hyndman and Y. Fan, "Sample quantiles in statistical packages", The American
        Statistician 50(4), 1996.
"""


def _quantile_doc(summary, scale, nan):
    return summary + _QUANTILE_DOC.format(
        ies="ies" if scale == 1 else "ies in percent",
        range=" in [0, 1]" if scale == 1 else " in [0, 100]",
        qrange="[0, 1]" if scale == 1 else "[0, 100]",
        nanres=("A slice with no non-NaN entry gives NaN (as NumPy, without its warning)."
                if nan else "A slice holding a NaN gives NaN, as NumPy."),
        nangrad=" (NaN entries get 0)" if nan else "",
    )


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    keepdims = bool_arg(keepdims, "quantile", "keepdims")
    return _order_statistics("quantile", a, q, axis, method, keepdims, weights, False, 1, out)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    keepdims = bool_arg(keepdims, "nanquantile", "keepdims")
    return _order_statistics("nanquantile", a, q, axis, method, keepdims, weights, True, 1, out)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    keepdims = bool_arg(keepdims, "percentile", "keepdims")
    return _order_statistics("percentile", a, q, axis, method, keepdims, weights, False, 100,
                             out)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    keepdims = bool_arg(keepdims, "nanpercentile", "keepdims")
    return _order_statistics("nanpercentile", a, q, axis, method, keepdims, weights, True, 100,
                             out)


quantile.__doc__ = _quantile_doc("The ``q``-th quantiles of ``a`` over ``axis`` (NumPy's "
                                 "``quantile``).", 1, False)
nanquantile.__doc__ = _quantile_doc("The ``q``-th quantiles of the non-NaN entries of ``a`` "
                                    "over ``axis`` (NumPy's ``nanquantile``).", 1, True)
percentile.__doc__ = _quantile_doc("The ``q``-th percentiles of ``a`` over ``axis`` (NumPy's "
                                   "``percentile``: ``quantile(a, q / 100)``).", 100, False)
nanpercentile.__doc__ = _quantile_doc("The ``q``-th percentiles of the non-NaN entries of ``a`` "
                                      "over ``axis`` (NumPy's ``nanpercentile``).", 100, True)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median over ``axis`` (NumPy's ``median``): the middle order statistic, or the mean of
    the two middle ones for an even count.

    Args:
        a: Tensor (complex allowed: sorted lexicographically, as NumPy).
        axis: Axis or tuple of axes; ``None`` reduces all axes.
        out: Not supported (must be None).
        overwrite_input: Accepted and ignored.
        keepdims: Keep reduced axes with size 1.

    Returns:
        Tensor of the reduced shape, ``a``'s floating dtype (integers: float64). NaN for a
        slice holding a NaN.

    Gradient: ``g`` to the middle element, or ``g / 2`` to each of the two middle elements
    (ties among equal values: to the ones the stable sort puts in the middle).

    Raises:
        ValueError: for an axis out of range or an empty reduction.
        TypeError: if ``out`` is given.
    """
    keepdims = bool_arg(keepdims, "median", "keepdims")
    return _order_statistics("median", a, 0.5, axis, "linear", keepdims, None, False, 1, out,
                             real=False)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Median over ``axis`` of the non-NaN entries (NumPy's ``nanmedian``); NaN for a slice of
    NaN only. Arguments, gradient and errors as :func:`median` (NaN entries get 0).

    Returns:
        Floating Tensor with ``axis`` reduced (float32 stays float32, integers give float64).

    Raises:
        ValueError: for reduced axes with no elements, or an out-of-range ``axis`` (naming
            ``nanmedian``).
    """
    keepdims = bool_arg(keepdims, "nanmedian", "keepdims")
    return _order_statistics("nanmedian", a, 0.5, axis, "linear", keepdims, None, True, 1, out,
                             real=False)


# -- averages and spreads --------------------------------------------------------------------
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """Weighted average ``sum(a * w) / sum(w)`` over ``axis`` (NumPy's ``average``).

    Args:
        a: Tensor, any numeric dtype.
        axis: Axis or tuple of axes; ``None`` averages all entries.
        weights: None (the plain mean), a Tensor of ``a``'s shape, or (with ``axis`` given) a
            Tensor of the shape of the reduced axes, e.g. 1-D along a single axis.
        returned: Also return the sum of the weights (broadcast to the result's shape).
        keepdims: Keep reduced axes with size 1.

    Returns:
        The average (``a``'s floating dtype promoted with the weights'; integers give float64),
        or ``(average, sum_of_weights)`` with ``returned``.

    Gradient: ``g w / sum(w)`` to ``a`` and ``g (a - average) / sum(w)`` to the weights.

    Raises:
        ValueError: for weights of another shape (without a matching ``axis``), or an axis out
            of range.
        ZeroDivisionError: if the weights sum to zero (checked when concrete), as NumPy.
    """
    keepdims = bool_arg(keepdims, "average", "keepdims")
    x = _tensor(a)
    if weights is None:
        avg = _ns.mean(_to_float(x), axis=axis, keepdims=keepdims)
        if not returned:
            return avg
        n = _count(x, None, axis, keepdims)
        return avg, full_like(avg, n, dtype=avg.dtype)
    w = _tensor(weights)
    if w.shape != x.shape:
        if axis is None:
            raise ValueError(
                f"average: weights of shape {w.shape} differ from a's {x.shape}; give axis")
        _normalize_axis(axis, x.ndim, "average")  # (checks the range)
        # the axes in the order given: the weights' axes follow it, as NumPy's
        axes = tuple(int(ax) % x.ndim for ax in (axis if isinstance(axis, tuple) else (axis,)))
        want = tuple(x.shape[i] for i in axes)
        if w.shape != want:
            raise ValueError(
                f"average: weights of shape {w.shape} must have a's shape {x.shape} or the "
                f"shape {want} of the reduced axes {axes}")
        w = _ns.transpose(w, tuple(int(i) for i in _np.argsort(axes)))
        w = _ns.reshape(w, tuple(x.shape[i] if i in axes else 1 for i in range(x.ndim)))
    dtype = _tg_dtypes.result_type(_float_dtype(x.dtype), w.dtype)
    xf = x.astype(dtype) if x.dtype != dtype else x
    wf = w.astype(dtype) if w.dtype != dtype else w
    scl = _ns.sum(_ns.broadcast_to(wf, x.shape) if wf.shape != x.shape else wf, axis=axis,
                  keepdims=keepdims)
    if _concrete(_ns.any(scl == 0)):
        raise ZeroDivisionError("average: weights sum to zero, can't be normalized")
    avg = _ns.sum(xf * wf, axis=axis, keepdims=keepdims) / scl
    if returned:
        return avg, _ns.broadcast_to(scl, avg.shape) if scl.shape != avg.shape else scl
    return avg


def ptp(a, axis=None, out=None, keepdims=False):
    """Range ``max - min`` over ``axis`` (NumPy's ``ptp``, "peak to peak").

    Returns:
        Tensor of ``a``'s dtype with the reduced shape.

    Gradient: ``g`` to the maximum and ``-g`` to the minimum, split equally among ties (as
    :func:`max`/:func:`min`).

    Raises:
        ValueError: over an empty axis or an axis out of range.
        TypeError: for ``out``.
    """
    keepdims = bool_arg(keepdims, "ptp", "keepdims")
    _no_out("ptp", out)
    x = _tensor(a)
    return _ns.max(x, axis=axis, keepdims=keepdims) - _ns.min(x, axis=axis, keepdims=keepdims)


def count_nonzero(a, axis=None, *, keepdims=False):
    """The number of nonzero entries over ``axis`` (NumPy's ``count_nonzero``): an ``intp``
    Tensor with no gradient (0-d for ``axis=None``, where NumPy gives a scalar).

    Raises:
        ValueError: if an axis is out of range or repeated.
    """
    keepdims = bool_arg(keepdims, "count_nonzero", "keepdims")
    x = _tensor(a)
    return _ns.sum(_ns.not_equal(x, 0), axis=axis, keepdims=keepdims).astype(_np.intp)


def _observations(v, rowvar, dtype, op):
    x = _tensor(v)
    if x.ndim > 2:
        raise ValueError(f"{op}: m has more than 2 dimensions (shape {x.shape})")
    x = x.astype(dtype) if x.dtype != dtype else x
    if x.ndim < 2:
        x = _ns.reshape(x, (1, x.size))
    if not rowvar and x.shape[0] != 1:
        x = _ns.transpose(x)
    return x


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):
    """Covariance matrix of the variables in the rows of ``m`` (columns with
    ``rowvar=False``), NumPy's ``cov``.

    Args:
        m: 1-D or 2-D Tensor: each row a variable, each column an observation.
        y: Further variables, stacked below ``m``'s.
        rowvar: False: variables are columns.
        bias: Normalize by ``N`` instead of ``N - 1`` (with no weights).
        ddof: Overrides ``bias``: normalize by ``N - ddof``.
        fweights: 1-D non-negative integer frequency weights, one per observation.
        aweights: 1-D non-negative observation weights.
        dtype: Dtype of the result (default: ``m``'s floating dtype, integers give float64;
            NumPy promotes float32 to float64, tapegrad keeps float32 unless asked).

    Returns:
        ``(k, k)`` Tensor for ``k`` variables, 0-d for one variable (squeezed, as NumPy).

    Gradient: through the centered products ``X W X^H / fact`` (``fact``: the normalization,
    a constant of the weights' values); the weights get gradients too (``aweights`` and
    ``fweights`` as the formula gives them).

    Where NumPy warns that the degrees of freedom are <= 0, the normalization is 0 and the
    result inf/NaN, NumPy's value (without the warning).

    Raises:
        ValueError: for more than 2 dimensions or negative weights (checked when concrete).
        RuntimeError: for 2-D weights or a number of weights other than the number of
            observations (NumPy's errors).
        TypeError: for non-integer ``fweights`` (checked when concrete).
    """
    op = "cov"
    mt = _tensor(m)
    if dtype is None:
        dtype = _float_dtype(mt.dtype if y is None else
                             _tg_dtypes.result_type(mt.dtype, _tensor(y).dtype))
    dtype = _np.dtype(dtype)
    x = _observations(mt, rowvar, dtype, op)
    if x.shape[0] == 0:
        return _ns.reshape(x[:0, :0] if x.ndim == 2 else x, (0, 0))
    if y is not None:
        x = _ns.concatenate([x, _observations(y, rowvar, dtype, op)], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n_obs = x.shape[1]
    w = None
    if fweights is not None:
        fw = _tensor(fweights)
        _check_weights(op, "fweights", fw, n_obs)
        if fw.dtype.kind in "fV" and _concrete(_ns.any(fw != _ns.trunc(fw))):
            raise TypeError(f"{op}: fweights must be integer")
        w = fw.astype(_real_dtype(dtype))
    if aweights is not None:
        aw = _tensor(aweights)
        _check_weights(op, "aweights", aw, n_obs)
        aw = aw.astype(_real_dtype(dtype))
        w = aw if w is None else w * aw
    if w is None:
        avg = _ns.mean(x, axis=1, keepdims=True)
        fact = n_obs - ddof
        xc = x - avg
        c = _ns.matmul(xc, _ns.conj(_ns.transpose(xc)))
        c = c * (1.0 / fact) if fact > 0 else c / 0.0
    else:
        w_sum = _ns.sum(w)
        avg = _ns.sum(x * w, axis=1, keepdims=True) / w_sum
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - ddof
        else:
            fact = w_sum - ddof * _ns.sum(w * aw) / w_sum
        fact = _where(fact <= 0, 0.0, fact)
        xc = x - avg
        c = _ns.matmul(xc * w, _ns.conj(_ns.transpose(xc))) / fact
    return _ns.reshape(c, ()) if c.shape == (1, 1) else c


def _check_weights(op, name, w, n_obs):
    if w.ndim > 1:
        raise RuntimeError(f"{op}: cannot handle multidimensional {name} (shape {w.shape})")
    if w.shape[0] != n_obs:
        raise RuntimeError(
            f"{op}: incompatible numbers of samples and {name}: {n_obs} observations, "
            f"{w.shape[0]} weights")
    if _concrete(_ns.any(w < 0)):
        raise ValueError(f"{op}: {name} cannot be negative")


def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Pearson correlation coefficients ``C_ij / sqrt(C_ii C_jj)`` of the variables in the
    rows of ``x`` (columns with ``rowvar=False``), NumPy's ``corrcoef``; the real (and
    imaginary) parts are clipped to ``[-1, 1]`` as NumPy does.

    Args:
        x: 1-D or 2-D Tensor; ``y``: further variables; ``rowvar``, ``dtype``: as :func:`cov`.

    Returns:
        ``(k, k)`` Tensor (0-d, ``c / c``, for one variable).

    Gradient: through :func:`cov` and the normalization; the clip passes the gradient at
    exactly +-1 (its bounds are inclusive), so the unit diagonal gets its true derivative, 0.

    Raises:
        As :func:`cov`.
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if c.ndim == 0:
        return c / c
    d = _ns.real(diagonal(c)) if c.dtype.kind == "c" else diagonal(c)
    sd = _ns.sqrt(d)
    c = c / _ns.reshape(sd, (sd.size, 1)) / _ns.reshape(sd, (1, sd.size))
    if c.dtype.kind == "c":
        return _ns.clip(_ns.real(c), -1, 1) + 1j * _ns.clip(_ns.imag(c), -1, 1)
    return _ns.clip(c, -1, 1)


# -- scans -----------------------------------------------------------------------------------
def _cumulative(op, x, axis, dtype, out, include_initial, fill):
    _no_out(op, out)
    x = _cast(_tensor(x), dtype, op)
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least one dimension (got a 0-d Tensor)")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(
                f"{op}: axis must be specified for multi-dimensional arrays (shape {x.shape})")
        axis = 0
    ax = _normalize_axis(axis, x.ndim, op)[0] if not isinstance(axis, (tuple, list)) else None
    if ax is None:
        raise TypeError(f"{op}: axis must be an int or None, got {axis!r}")
    scan = _ns.cumsum if fill == 0 else _ns.cumprod
    r = scan(x, axis=ax, dtype=dtype)
    if include_initial:
        first = _ns.sum(x * 0, axis=ax, keepdims=True) + fill
        r = _ns.concatenate([first.astype(r.dtype), r], axis=ax)
    return r


def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """Cumulative sum along ``axis`` (the array API's ``cumulative_sum``, NumPy 2.1).

    Args:
        x: Tensor with at least one axis.
        axis: The axis; may be omitted only for 1-D ``x``.
        dtype: Dtype to sum in (``x`` is cast first).
        out: Not supported (must be None).
        include_initial: Prepend the initial 0, so the result has one more entry along
            ``axis``.

    Returns:
        Tensor of ``x``'s shape (one longer along ``axis`` with ``include_initial``); dtype
        as :func:`cumsum`.

    Gradient: as :func:`cumsum` (the reversed cumulative sum of the cotangent).

    Raises:
        ValueError: for a 0-d ``x``, or ``axis=None`` with more than one axis, or an axis out
            of range.
        TypeError: if ``out`` is given.
    """
    return _cumulative("cumulative_sum", x, axis, dtype, out, include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    """Cumulative product along ``axis`` (the array API's ``cumulative_prod``, NumPy 2.1);
    with ``include_initial`` the initial 1 is prepended. Arguments and errors as
    :func:`cumulative_sum`; gradient as :func:`cumprod` (exact with zeros).

    Returns:
        Tensor of ``x``'s shape (``axis`` one longer with ``include_initial``), dtype as NumPy's
        ``cumprod`` (or ``dtype``).

    Raises:
        ValueError: for ``axis=None`` with more than one axis, or an out-of-range ``axis``
            (naming ``cumulative_prod``).
    """
    return _cumulative("cumulative_prod", x, axis, dtype, out, include_initial, 1)


# -- differences and integrals ---------------------------------------------------------------
def _slice(nd, ax, s):
    return (slice(None),) * ax + (s,) + (slice(None),) * (nd - ax - 1)


def _along(value, x, ax):
    """``prepend``/``append`` as a Tensor of ``x``'s shape with ``ax`` of the value's length
    (a scalar is broadcast to length 1, as NumPy)."""
    v = _tensor(value)
    if v.ndim == 0:
        shp = list(x.shape)
        shp[ax] = 1
        return _ns.broadcast_to(v, tuple(shp))
    return v


def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The ``n``-th discrete difference along ``axis``: ``out[i] = a[i + 1] - a[i]``, applied
    ``n`` times (NumPy's ``diff``; booleans use ``!=``, as NumPy).

    Args:
        a: Tensor with at least one axis.
        n: How many times to difference (0 returns ``a``).
        axis: The axis.
        prepend, append: Values joined to ``a`` along ``axis`` first (scalars are broadcast to
            length 1; arrays must match ``a`` off the axis).

    Returns:
        Tensor with ``axis`` shorter by ``n`` (after joining); ``a``'s dtype.

    Gradient: the transpose of the differences (each ``g`` goes +1 to ``a[i + 1]`` and -1 to
    ``a[i]``), also to ``prepend``/``append``.

    Raises:
        ValueError: for ``n < 0``, a 0-d ``a``, an axis out of range, or joined values of
            another shape.
    """
    if isinstance(n, bool) or not isinstance(n, (int, _np.integer)):
        raise TypeError(f"diff: n must be an int, got {n!r}")
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    x = _tensor(a)
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = _normalize_axis(axis, x.ndim, "diff")[0]
    if n == 0:
        return x
    parts = []
    if prepend is not None:
        parts.append(_along(prepend, x, ax))
    parts.append(x)
    if append is not None:
        parts.append(_along(append, x, ax))
    if len(parts) > 1:
        x = _ns.concatenate(parts, axis=ax)
    nd = x.ndim
    for _ in range(n):
        hi, lo = x[_slice(nd, ax, slice(1, None))], x[_slice(nd, ax, slice(None, -1))]
        x = _ns.not_equal(hi, lo) if x.dtype == _np.bool_ else hi - lo
    return x


def ediff1d(ary, to_end=None, to_begin=None):
    """Differences between consecutive entries of the flattened ``ary`` (NumPy's
    ``ediff1d``), with ``to_begin`` and ``to_end`` (flattened) joined at the ends.

    Returns:
        1-D Tensor of ``ary``'s dtype.

    Gradient: as :func:`diff`; ``to_begin``/``to_end`` get their cotangent slices.

    Raises:
        TypeError: if ``to_begin``/``to_end`` cannot be cast to ``ary``'s dtype (same-kind),
            as NumPy.
    """
    x = _ns.reshape(_tensor(ary), (-1,))
    d = x[1:] - x[:-1]
    parts = []
    for name, v in (("to_begin", to_begin), ("to_end", to_end)):
        if v is None:
            parts.append(None)
            continue
        t = _tensor(v) if _given_tensor(v) else Tensor(_np.asarray(v))
        t = _ns.reshape(t, (-1,))
        if not _np.can_cast(t.dtype, x.dtype, casting="same_kind"):
            raise TypeError(f"ediff1d: dtype of `{name}` ({t.dtype}) must be compatible with "
                            f"input `ary` ({x.dtype}) under the `same_kind` rule.")
        parts.append(t.astype(x.dtype) if t.dtype != x.dtype else t)
    seq = [p for p in (parts[0], d, parts[1]) if p is not None]
    return seq[0] if len(seq) == 1 else _ns.concatenate(seq, axis=0)


def _spacing(v, n, ax, op):
    """One axis's spacing: a number (uniform) or a 1-D coordinate Tensor of length ``n``."""
    if isinstance(v, Tensor) or _np.ndim(v) > 0:
        t = _tensor(v)
        if t.ndim == 0:
            return t
        if t.ndim != 1:
            raise ValueError(f"{op}: distances must be either scalars or 1d (axis {ax})")
        if t.shape[0] != n:
            raise ValueError(
                f"{op}: when 1d, distances must match the length of the corresponding "
                f"dimension (axis {ax}: {n} entries, {t.shape[0]} coordinates)")
        return t
    return v


def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of sampled values ``f``: second-order central differences inside, first-
    or second-order one-sided differences at the boundaries (NumPy's ``gradient``).

    Args:
        f: Tensor with at least one axis per differentiated axis.
        *varargs: Spacing: none (1 everywhere), one number for every axis, or one number or
            1-D coordinate Tensor per differentiated axis (non-uniform grids, as NumPy).
        axis: None (every axis), an int or a tuple of ints.
        edge_order: 1 or 2, the accuracy of the boundary differences.

    Returns:
        One Tensor (a single axis) or a tuple of Tensors, one per axis, each of ``f``'s shape;
        floating dtype of ``f`` (integers: float64).

    Gradient: every output is linear in ``f`` (its transpose is exact); differentiable in the
    coordinates/spacings as well.

    Raises:
        ValueError: for an ``edge_order`` other than 1 and 2, an axis shorter than
            ``edge_order + 1``, or spacings of the wrong number or shape.
    """
    op = "gradient"
    x = _tensor(f)
    if x.dtype.kind == "b":
        raise TypeError("gradient: boolean input is not supported (NumPy cannot subtract "
                        "booleans); cast it with astype(int)")
    x = _to_float(x)
    nd = x.ndim
    axes = _normalize_axis(axis, nd, op) if axis is not None else tuple(range(nd))
    if axis is not None and not isinstance(axis, (tuple, list)):
        axes = (_normalize_axis(axis, nd, op)[0],)
    elif axis is not None:
        axes = tuple(int(a) % nd for a in axis)
    if edge_order not in (1, 2):
        raise ValueError(f"{op}: 'edge_order' greater than 2 not supported (got {edge_order})")
    if len(varargs) == 0:
        dxs = [1.0] * len(axes)
    elif len(varargs) == 1 and _np.ndim(varargs[0]) == 0 and not (
            isinstance(varargs[0], Tensor) and varargs[0].ndim):
        dxs = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        dxs = list(varargs)
    else:
        raise TypeError(f"{op}: invalid number of spacing arguments ({len(varargs)} for "
                        f"{len(axes)} axes)")
    outs = []
    for ax, dx in zip(axes, dxs):
        n = x.shape[ax]
        if n < edge_order + 1:
            raise ValueError(
                f"{op}: shape of array too small to calculate a numerical gradient, at least "
                f"(edge_order + 1) elements are required (axis {ax} has {n})")
        outs.append(_gradient_axis(x, ax, _spacing(dx, n, ax, op), edge_order))
    return outs[0] if len(outs) == 1 else tuple(outs)


def _gradient_axis(x, ax, dx, edge_order):
    nd = x.ndim

    def s(a, b=None):
        return x[_slice(nd, ax, slice(a, b))]

    def bc(v):  # a 1-D coordinate quantity along ax, broadcast against x
        shp = [1] * nd
        shp[ax] = v.shape[0]
        return _ns.reshape(v, tuple(shp))

    uniform = not isinstance(dx, Tensor) or dx.ndim == 0
    if uniform:
        interior = (s(2, None) - s(None, -2)) / (2.0 * dx)
        if edge_order == 1:
            first = (s(1, 2) - s(0, 1)) / dx
            last = (s(-1, None) - s(-2, -1)) / dx
        else:
            first = (-1.5 * s(0, 1) + 2.0 * s(1, 2) - 0.5 * s(2, 3)) / dx
            last = (0.5 * s(-3, -2) - 2.0 * s(-2, -1) + 1.5 * s(-1, None)) / dx
    else:
        h = dx[1:] - dx[:-1]
        h1, h2 = h[:-1], h[1:]
        a = -h2 / (h1 * (h1 + h2))
        b = (h2 - h1) / (h1 * h2)
        c = h1 / (h2 * (h1 + h2))
        interior = bc(a) * s(None, -2) + bc(b) * s(1, -1) + bc(c) * s(2, None)
        if edge_order == 1:
            first = (s(1, 2) - s(0, 1)) / bc(h[0:1])
            last = (s(-1, None) - s(-2, -1)) / bc(h[-1:])
        else:
            d1, d2 = h[0:1], h[1:2]
            a0 = -(2.0 * d1 + d2) / (d1 * (d1 + d2))
            b0 = (d1 + d2) / (d1 * d2)
            c0 = -d1 / (d2 * (d1 + d2))
            first = bc(a0) * s(0, 1) + bc(b0) * s(1, 2) + bc(c0) * s(2, 3)
            e1, e2 = h[-2:-1], h[-1:]
            a1 = e2 / (e1 * (e1 + e2))
            b1 = -(e2 + e1) / (e1 * e2)
            c1 = (2.0 * e2 + e1) / (e2 * (e1 + e2))
            last = bc(a1) * s(-3, -2) + bc(b1) * s(-2, -1) + bc(c1) * s(-1, None)
    out = _ns.concatenate([first, interior, last], axis=ax)
    return out.astype(x.dtype) if out.dtype != x.dtype else out


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Integral of ``y`` along ``axis`` by the trapezoidal rule (NumPy's ``trapezoid``).

    Args:
        y: Tensor to integrate.
        x: Sample points: 1-D (the length of ``axis``) or ``y``'s shape; None: spacing ``dx``.
        dx: Uniform spacing when ``x`` is None.
        axis: The axis to integrate along.

    Returns:
        Tensor with ``axis`` removed; ``y``'s floating dtype (integers: float64), promoted
        with ``x``'s.

    Gradient: linear in ``y`` (weights ``dx/2`` at the ends, ``dx`` inside); through the
    spacing differences to ``x``.

    Raises:
        ValueError: for an axis out of range, or ``x`` whose shape does not match.
    """
    yt = _tensor(y)
    nd = yt.ndim
    if nd == 0:
        raise ValueError("trapezoid: y must have at least one axis")
    ax = _normalize_axis(axis, nd, "trapezoid")[0]
    if x is None:
        d = dx
    else:
        xt = _tensor(x)
        if xt.ndim == 1:
            if xt.shape[0] != yt.shape[ax]:
                raise ValueError(
                    f"trapezoid: x has {xt.shape[0]} points, y has {yt.shape[ax]} along axis "
                    f"{ax}")
            d = xt[1:] - xt[:-1]
            shp = [1] * nd
            shp[ax] = d.shape[0]
            d = _ns.reshape(d, tuple(shp))
        else:
            d = diff(xt, axis=ax)
    hi, lo = yt[_slice(nd, ax, slice(1, None))], yt[_slice(nd, ax, slice(None, -1))]
    avg = (hi + lo) / 2.0
    return _ns.sum(d * avg, axis=ax)
