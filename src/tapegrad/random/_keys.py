"""Keys (``key``, ``split``, ``fold_in``) and the draws every sampler starts from: the
primitives that turn a key into numbers (no gradient), and ``uniform``, ``normal``,
``bernoulli``, ``randint``, ``permutation``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad.core import dtypes as _tg_dtypes
from tapegrad.core.function import Function
from tapegrad.core.tensor import Tensor, const
from tapegrad.transforms.vmap import loop

__all__ = ["key", "split", "fold_in", "uniform", "normal", "bernoulli", "permutation", "randint"]


def _check_key(k, who: str) -> Tensor:
    """``k`` as a key Tensor (a uint32 Tensor of shape (2,)), or a clear TypeError."""
    if isinstance(k, np.ndarray):
        k = Tensor(k)
    if not isinstance(k, Tensor):
        raise TypeError(
            f"{who}: key must be a key from tapegrad.random.key/split (a uint32 Tensor of shape "
            f"(2,)), got {type(k).__name__}"
        )
    if k.dtype != np.uint32 or tuple(k.shape) != (2,):
        raise TypeError(
            f"{who}: key must be a uint32 Tensor of shape (2,) from tapegrad.random.key/split, "
            f"got dtype {k.dtype} and shape {tuple(k.shape)}"
        )
    return k


def _words(arr) -> list:
    host = arr if isinstance(arr, np.ndarray) else np.asarray(arr.get())  # CuPy -> host
    return [int(host[0]), int(host[1])]


def _generator(arr) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy=_words(arr))))


def _shape(shape, who: str) -> tuple:
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"{who}: shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"{who}: shape must have non-negative sizes, got {shape}")
    return shape


def _check_shape(who: str, shape: tuple, *param_shapes) -> None:
    """JAX's rule for ``shape=``: the parameters' shapes must broadcast to ``shape`` itself."""
    try:
        full = tuple(np.broadcast_shapes(shape, *param_shapes))
    except ValueError:
        full = None
    if full != tuple(shape):
        raise ValueError(
            f"{who}: the parameter shapes {', '.join(map(str, param_shapes))} must broadcast to "
            f"shape={tuple(shape)}" + ("" if full is None else f" (they broadcast it to {full})")
            + "; pass a shape they broadcast to, or shape=None for their broadcast shape"
        )


def _float_dtype(dtype, who: str):
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"{who}: dtype must be a floating dtype, got {dtype}")
    return dtype


class _FromKey:
    """Mixin of the primitives turning a key into numbers (no gradient); under vmap each
    example draws from its own key. ``many_outputs``: its outputs are always a tuple (one per
    output)."""

    differentiable = False
    many_outputs = False

    @classmethod
    def batch(cls, args, batched, size, **params):
        """vmap: each example draws from its own key (a loop over the keys)."""
        out = loop(cls, args, batched, size, params)
        return out if cls.many_outputs or len(out) != 1 else out[0]


class _Split(_FromKey, Function):
    """``num`` child keys of a key (no gradient): ``SeedSequence(entropy=key, spawn_key=(i,))``."""

    oper = "random_split"
    many_outputs = True  # split has num outputs, a tuple even for num=1

    @staticmethod
    def forward(ctx, k, num):
        words = _words(k)
        return tuple(
            np.random.SeedSequence(entropy=words, spawn_key=(i,)).generate_state(2, np.uint32)
            for i in range(num)
        )

    @classmethod
    def output_shape(cls, shape, num):
        return [(2,)] * num

    @classmethod
    def output_dtype(cls, dtype, num):
        return [np.dtype(np.uint32)] * num


class _FoldIn(_FromKey, Function):
    """A key from a key and an integer (no gradient)."""

    oper = "random_fold_in"

    @staticmethod
    def forward(ctx, k, data):
        data = int(np.asarray(data if not hasattr(data, "get") else data.get()).reshape(()))
        if data < 0:
            raise ValueError(f"random.fold_in: data must be non-negative, got {data}")
        ss = np.random.SeedSequence(entropy=_words(k) + [data], spawn_key=(0xF01D,))
        return ss.generate_state(2, np.uint32)

    @classmethod
    def output_shape(cls, shape, data):
        return (2,)

    @classmethod
    def output_dtype(cls, dtype, data):
        return np.dtype(np.uint32)


class _Draw(_FromKey, Function):
    """Numbers drawn from a key (no gradient): ``kind`` ``"uniform"``, ``"open"`` (float64
    uniforms on the open interval ``(0, 1)``: ``uniform``'s numbers with 0 moved to the smallest
    normal float64), ``"normal"``, ``"bernoulli"``, ``"randint"`` or ``"permutation"``, with the
    static ``shape``, ``dtype`` and distribution parameters ``a``, ``b``."""

    oper = "random_draw"

    @staticmethod
    def forward(ctx, k, kind, shape, dtype, a, b):
        g = _generator(k)
        if kind == "uniform":
            return (a + (b - a) * g.random(shape, dtype=np.float64)).astype(dtype)
        if kind == "open":
            u = g.random(shape, dtype=np.float64)
            return np.maximum(u, _tg_dtypes.finfo(np.float64).tiny)
        if kind == "normal":
            return (a + b * g.standard_normal(shape, dtype=np.float64)).astype(dtype)
        if kind == "bernoulli":
            return g.random(shape) < a
        if kind == "randint":
            return g.integers(a, b, size=shape, dtype=np.int64).astype(dtype)
        return g.permutation(a).astype(np.int64)  # "permutation"

    @classmethod
    def output_shape(cls, shape, kind, shape_, dtype, a, b):
        return (a,) if kind == "permutation" else tuple(shape_)

    @classmethod
    def output_dtype(cls, dtype, kind, shape, dtype_, a, b):
        return np.dtype(dtype_)


def _draw(k, kind, shape, dtype, a, b, who) -> Tensor:
    return _Draw.apply(_check_key(k, who), kind, shape, np.dtype(dtype), a, b)


def key(seed: int) -> Tensor:
    """A new key from an integer seed.

    Args:
        seed: Non-negative Python int (any size).

    Returns:
        A read-only ``uint32`` Tensor of shape ``(2,)``.

    Raises:
        TypeError: if ``seed`` is not an int. ValueError: if it is negative.

    Example:
        >>> import tapegrad as tg
        >>> bool((tg.random.key(0).numpy() == tg.random.key(0).numpy()).all())
        True
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"random.key: seed must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"random.key: seed must be non-negative, got {seed}")
    return const(np.random.SeedSequence(int(seed)).generate_state(2, np.uint32))


def split(key, num: int = 2) -> tuple:
    """Derive ``num`` new, independent keys from ``key``.

    ``key`` itself should not be used again afterwards (keep one of the children instead),
    since draws from ``key`` are not independent of draws made with it elsewhere.

    Args:
        key: A key.
        num: Number of keys to derive (>= 1).

    Returns:
        Tuple of ``num`` keys; ``split(k, 3)[i]`` is the same for every call with the same
        ``k`` and ``i`` (``split(k, 2)[0] == split(k, 3)[0]``).

    Raises:
        TypeError: for a bad key. ValueError: if ``num < 1``.
    """
    k = _check_key(key, "random.split")
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
        raise ValueError(f"random.split: num must be a positive int, got {num!r}")
    out = _Split.apply(k, int(num))
    return out if isinstance(out, tuple) else (out,)


def fold_in(key, data) -> Tensor:
    """A new key from ``key`` and an integer ``data`` (for example a step number, which may be
    an integer Tensor that ``jit`` traces).

    ``fold_in(k, i)`` differs from ``split(k, n)[i]`` (a separate derivation), so the two can
    be mixed.

    Raises:
        TypeError: for a bad key or non-integer ``data``. ValueError: if ``data`` is negative.
    """
    k = _check_key(key, "random.fold_in")
    if isinstance(data, Tensor):
        if data.dtype.kind not in "iu" or data.size != 1:
            raise TypeError(f"random.fold_in: data must be one integer, got a Tensor of dtype "
                            f"{data.dtype} and shape {data.shape}")
    elif isinstance(data, bool) or not isinstance(data, (int, np.integer)):
        raise TypeError(f"random.fold_in: data must be an int, got {type(data).__name__}")
    elif data < 0:
        raise ValueError(f"random.fold_in: data must be non-negative, got {data}")
    return _FoldIn.apply(k, data if isinstance(data, Tensor) else int(data))


def uniform(key, shape: Any = (), dtype: Any = np.float32, minval: Any = 0.0,
            maxval: Any = 1.0) -> Tensor:
    """Uniform samples on ``[minval, maxval)``.

    Args:
        key: A key.
        shape: Output shape (int or tuple).
        dtype: Floating dtype (float32).
        minval, maxval: Bounds (Python numbers), ``minval <= maxval``.

    Returns:
        Tensor of ``shape`` and ``dtype``.

    Raises:
        TypeError: for a bad key or a non-floating dtype. ValueError: if ``minval > maxval``.
    """
    shape = _shape(shape, "random.uniform")
    dtype = _float_dtype(dtype, "random.uniform")
    if minval > maxval:
        raise ValueError(f"random.uniform: minval {minval} > maxval {maxval}")
    return _draw(key, "uniform", shape, dtype, float(minval), float(maxval), "random.uniform")


def normal(key, shape: Any = (), dtype: Any = np.float32, mean: Any = 0.0,
           std: Any = 1.0) -> Tensor:
    """Normal samples with ``mean`` and standard deviation ``std`` (default standard normal).

    Raises:
        TypeError: for a bad key or a non-floating dtype. ValueError: if ``std < 0``.
    """
    shape = _shape(shape, "random.normal")
    dtype = _float_dtype(dtype, "random.normal")
    if std < 0:
        raise ValueError(f"random.normal: std must be non-negative, got {std}")
    return _draw(key, "normal", shape, dtype, float(mean), float(std), "random.normal")


def bernoulli(key, p=0.5, shape=None) -> Tensor:
    """Boolean samples that are True with probability ``p``, as ``jax.random.bernoulli``.

    The sample is ``uniform(key, shape, float64) < p``.

    Args:
        key: A key.
        p: Probability in ``[0, 1]``: a Python number, or a floating array or Tensor (one
            probability per entry; values inside a Tensor are not checked: below 0 gives
            False, above 1 True, as in JAX).
        shape: Output shape; ``p``'s shape must broadcast to it. Default: ``p``'s shape
            (``()`` for a number).

    Returns:
        Boolean Tensor of ``shape`` (no gradient).

    Raises:
        TypeError: for a bad key, or a ``p`` that is not a number or a floating array.
        ValueError: if a numeric ``p`` is outside ``[0, 1]``, or the shapes do not fit.
    """
    who = "random.bernoulli"
    if isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, bool):
        shape = _shape(shape, who)
        p = float(p)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{who}: p must lie in [0, 1], got {p}")
        return _draw(key, "bernoulli", shape, np.bool_, p, None, who)
    if not isinstance(p, Tensor):
        try:
            arr = np.asarray(p)
        except Exception:  # noqa: BLE001 - anything that is not array-like
            arr = np.asarray(None)
        if arr.dtype.kind != "f":
            raise TypeError(f"{who}: p must be a number or a floating array/Tensor, got "
                            f"{type(p).__name__}" + (f" of dtype {arr.dtype}"
                                                     if arr.dtype != object else ""))
        if arr.size and not ((arr >= 0) & (arr <= 1)).all():
            raise ValueError(f"{who}: p must lie in [0, 1], got values in "
                             f"[{arr.min()}, {arr.max()}]")
        p = Tensor(arr)
    elif p.dtype.kind != "f":
        raise TypeError(f"{who}: p must have a floating dtype, got a Tensor of dtype {p.dtype}")
    shape = p.shape if shape is None else _shape(shape, who)
    _check_shape(who, shape, p.shape)
    u = _draw(key, "uniform", shape, np.float64, 0.0, 1.0, who)
    return (u if p.device == "cpu" else u.to_device(p.device)) < p


def randint(key, shape, minval: int, maxval: int, dtype: Any = np.int32) -> Tensor:
    """Integers drawn uniformly from ``[minval, maxval)``.

    Raises:
        TypeError: if ``dtype`` is not an integer dtype. ValueError: if ``minval >= maxval``.
    """
    shape = _shape(shape, "random.randint")
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise TypeError(f"random.randint: dtype must be an integer dtype, got {dtype}")
    if minval >= maxval:
        raise ValueError(f"random.randint: need minval < maxval, got [{minval}, {maxval})")
    return _draw(key, "randint", shape, dtype, int(minval), int(maxval), "random.randint")


def permutation(key, x) -> Tensor:
    """A random permutation of ``range(x)`` (int ``x``) or of ``x``'s rows (Tensor ``x``).

    Permuting a Tensor is an indexing op, so it is differentiable in ``x``.

    Raises:
        ValueError: if ``x`` is a negative int or a 0-d Tensor.
    """
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if x < 0:
            raise ValueError(f"random.permutation: n must be non-negative, got {x}")
        return _draw(key, "permutation", (), np.int64, int(x), None, "random.permutation")
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if x.ndim == 0:
        raise ValueError("random.permutation: cannot permute a 0-d Tensor; pass an int n instead")
    order = _draw(key, "permutation", (), np.int64, x.shape[0], None, "random.permutation")
    return x[order]
