"""Explicit pseudo-random keys: every function that draws numbers takes a ``key``.

A key is a read-only ``uint32`` Tensor of shape ``(2,)``. Drawing from a key never changes it:
the same key always gives the same numbers, so **never reuse a key** for two draws that should
be independent. Derive fresh keys with :func:`split` instead::

    key = tg.random.key(0)
    key, sub = tg.random.split(key)          # keep `key` for later splits, consume `sub`
    w = tg.random.normal(sub, (3, 4))

How keys map to numbers (reproducible across runs and platforms, for a given NumPy version,
which is NumPy's own stream-compatibility policy):

- :func:`key` hashes the seed with :class:`numpy.random.SeedSequence` into two ``uint32`` words.
- :func:`split` derives child ``i`` as ``SeedSequence(entropy=key, spawn_key=(i,))``, NumPy's
  own scheme for independent child streams (O'Neill's PCG seeding; the hashing keeps children
  of one key, and children of different keys, statistically independent).
- A draw runs :class:`numpy.random.PCG64` seeded by ``SeedSequence(entropy=key)`` (no spawn
  key, so a draw never coincides with a child key's stream).

Results are CPU Tensors; move them with ``.to_device(...)`` where needed.
"""

from __future__ import annotations

import numpy as np

from tapegrad.tensor import Tensor

__all__ = ["key", "split", "fold_in", "uniform", "normal", "bernoulli", "permutation", "randint"]


def _words(k, who: str) -> list[int]:
    """The two uint32 words of key ``k``, validated."""
    arr = k._array if isinstance(k, Tensor) else k
    if not hasattr(arr, "dtype") or not hasattr(arr, "shape"):
        raise TypeError(
            f"{who}: key must be a key from tapegrad.random.key/split (a uint32 Tensor of shape "
            f"(2,)), got {type(k).__name__}"
        )
    if arr.dtype != np.uint32 or tuple(arr.shape) != (2,):
        raise TypeError(
            f"{who}: key must be a uint32 Tensor of shape (2,) from tapegrad.random.key/split, "
            f"got dtype {arr.dtype} and shape {tuple(arr.shape)}"
        )
    host = arr if isinstance(arr, np.ndarray) else np.asarray(arr.get())  # CuPy -> host
    return [int(host[0]), int(host[1])]


def _key_from_words(words) -> Tensor:
    return Tensor(np.asarray(words, dtype=np.uint32))


def _generator(k, who: str) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy=_words(k, who))))


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


def _float_dtype(dtype, who: str):
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"{who}: dtype must be a floating dtype, got {dtype}")
    return dtype


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
    return _key_from_words(np.random.SeedSequence(int(seed)).generate_state(2, np.uint32))


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
    words = _words(key, "random.split")
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)) or num < 1:
        raise ValueError(f"random.split: num must be a positive int, got {num!r}")
    return tuple(
        _key_from_words(
            np.random.SeedSequence(entropy=words, spawn_key=(i,)).generate_state(2, np.uint32)
        )
        for i in range(int(num))
    )


def fold_in(key, data: int) -> Tensor:
    """A new key from ``key`` and an integer ``data`` (for example a step number).

    ``fold_in(k, i)`` differs from ``split(k, n)[i]`` (a separate derivation), so the two can
    be mixed.

    Raises:
        TypeError: for a bad key or non-int ``data``. ValueError: if ``data`` is negative.
    """
    words = _words(key, "random.fold_in")
    if isinstance(data, bool) or not isinstance(data, (int, np.integer)):
        raise TypeError(f"random.fold_in: data must be an int, got {type(data).__name__}")
    if data < 0:
        raise ValueError(f"random.fold_in: data must be non-negative, got {data}")
    ss = np.random.SeedSequence(entropy=words + [int(data)], spawn_key=(0xF01D,))
    return _key_from_words(ss.generate_state(2, np.uint32))


def uniform(key, shape=(), dtype=np.float32, minval=0.0, maxval=1.0) -> Tensor:
    """Uniform samples on ``[minval, maxval)``.

    Args:
        key: A key. shape: Output shape (int or tuple). dtype: Floating dtype (float32).
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
    u = _generator(key, "random.uniform").random(shape, dtype=np.float64)
    return Tensor((minval + (maxval - minval) * u).astype(dtype))


def normal(key, shape=(), dtype=np.float32, mean=0.0, std=1.0) -> Tensor:
    """Normal samples with ``mean`` and standard deviation ``std`` (default standard normal).

    Raises:
        TypeError: for a bad key or a non-floating dtype. ValueError: if ``std < 0``.
    """
    shape = _shape(shape, "random.normal")
    dtype = _float_dtype(dtype, "random.normal")
    if std < 0:
        raise ValueError(f"random.normal: std must be non-negative, got {std}")
    z = _generator(key, "random.normal").standard_normal(shape, dtype=np.float64)
    return Tensor((mean + std * z).astype(dtype))


def bernoulli(key, p=0.5, shape=None) -> Tensor:
    """Boolean samples that are True with probability ``p``.

    Args:
        key: A key. p: Probability in ``[0, 1]`` (Python number).
        shape: Output shape (default ``()``).

    Returns:
        Boolean Tensor of ``shape``.

    Raises:
        ValueError: if ``p`` is outside ``[0, 1]``.
    """
    shape = _shape(shape, "random.bernoulli")
    p = float(p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"random.bernoulli: p must lie in [0, 1], got {p}")
    u = _generator(key, "random.bernoulli").random(shape)
    return Tensor(u < p)


def randint(key, shape, minval: int, maxval: int, dtype=np.int32) -> Tensor:
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
    g = _generator(key, "random.randint")
    return Tensor(g.integers(minval, maxval, size=shape, dtype=np.int64).astype(dtype))


def permutation(key, x) -> Tensor:
    """A random permutation of ``range(x)`` (int ``x``) or of ``x``'s rows (Tensor ``x``).

    Permuting a Tensor is an indexing op, so it is differentiable in ``x``.

    Raises:
        ValueError: if ``x`` is a negative int or a 0-d Tensor.
    """
    g = _generator(key, "random.permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        if x < 0:
            raise ValueError(f"random.permutation: n must be non-negative, got {x}")
        return Tensor(g.permutation(int(x)).astype(np.int64))
    from tapegrad import numpy as tnp

    x = tnp.asarray(x)
    if x.ndim == 0:
        raise ValueError("random.permutation: cannot permute a 0-d Tensor; pass an int n instead")
    return x[g.permutation(x.shape[0])]
