"""NumPy's file and buffer input/output as ``tapegrad.numpy`` functions.

Writers (:func:`save`, :func:`savez`, :func:`savez_compressed`, :func:`savetxt`) take Tensors
and write their values (inside a transform, the current values: nothing is differentiated
through a file). Readers (:func:`load`, :func:`loadtxt`, :func:`genfromtxt`, :func:`fromfile`,
:func:`fromregex`, :func:`fromstring`, :func:`frombuffer`, :func:`fromiter`) return NumPy's
arrays as Tensors, in NumPy's dtypes (float64 text, the stored dtype of ``.npy`` files);
structured or text arrays stay NumPy's. :class:`memmap` is NumPy's class (a Tensor owns its
data, so ``tnp.asarray`` of a memory map is a copy in memory).

For checkpoints of parameter pytrees, :mod:`tapegrad.io` keeps the tree structure.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, cast

import numpy as _np

from tapegrad.core.tensor import Tensor
from tapegrad.numpy._passthrough import host, on_values, wrap

__all__ = ["save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
           "fromfile", "fromregex", "fromstring", "frombuffer", "fromiter", "memmap"]

_READ = ("A Tensor of NumPy's result (NumPy's dtype); structured or string arrays as NumPy's "
         "arrays.")

save = on_values(
    "save", "Write an array's values to a ``.npy`` file", "None.",
    "        >>> import os, tempfile, tapegrad.numpy as tnp\n"
    "        >>> with tempfile.TemporaryDirectory() as folder:  # removed with its files\n"
    "        ...     path = os.path.join(folder, 'x.npy')\n"
    "        ...     tnp.save(path, tnp.arange(3))\n"
    "        ...     print(tnp.load(path))\n"
    "        Tensor([0, 1, 2], dtype=int64)\n")
savez = on_values("savez", "Write several arrays' values to an uncompressed ``.npz`` file",
                  "None.")
savez_compressed = on_values("savez_compressed",
                             "Write several arrays' values to a compressed ``.npz`` file",
                             "None.")
savetxt = on_values("savetxt", "Write a 1-D or 2-D array's values to a text file", "None.")
loadtxt = on_values("loadtxt", "Read an array from a text file", _READ)
genfromtxt = on_values("genfromtxt", "Read an array from a text file, with missing values "
                       "handled", _READ)
fromfile = on_values("fromfile", "Read an array from a binary or text file", _READ)
fromregex = on_values("fromregex", "Read a structured array from a text file with a regular "
                      "expression", _READ)
fromstring = on_values("fromstring", "Read a 1-D array from text in a string", _READ)
frombuffer = on_values("frombuffer", "Read a 1-D array from a buffer (the data is copied: a "
                       "Tensor owns its data)", _READ)
_fromiter = on_values("fromiter", "Make a 1-D array from an iterable of numbers (a Tensor "
                      "element is read with ``item()``: a traced one that a transform "
                      "differentiates is refused, its gradient would be lost)", _READ)


def _item(v):
    return v.item() if isinstance(v, Tensor) else v


@functools.wraps(_fromiter)
def fromiter(iter, dtype, count=-1, *, like=None):  # noqa: A002 - NumPy's name
    return _fromiter((_item(v) for v in iter), dtype, count, like=like)


memmap = _np.memmap


class NpzTensors(Mapping):
    """The arrays of a ``.npz`` file, read as Tensors on access (what :func:`load` returns for
    a ``.npz`` file, in place of NumPy's ``NpzFile``); a context manager that closes it.

    Attributes:
        files: The names of the arrays.
    """

    def __init__(self, npz):
        self._npz = npz
        self.files = list(npz.files)

    def __getitem__(self, key):
        return wrap(self._npz[key])

    def __iter__(self):
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def close(self) -> None:
        """Close the file."""
        self._npz.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def load(file, mmap_mode=None, allow_pickle=False, fix_imports=True, encoding="ASCII", *,
         max_header_size=10000):
    """Read arrays from a ``.npy`` or ``.npz`` file (NumPy ``load``).

    Args:
        file: Path or file object.
        mmap_mode, allow_pickle, fix_imports, encoding, max_header_size: As NumPy's (the
            memory map is read into the Tensor: a Tensor owns its data).

    Returns:
        For ``.npy``: a Tensor of the stored dtype (a numeric array; other arrays and pickled
        objects as NumPy returns them). For ``.npz``: an :class:`NpzTensors` mapping of the
        arrays' names to Tensors.

    Raises:
        OSError, ValueError: as NumPy's ``load`` (missing file, pickles without
            ``allow_pickle``), naming ``load``.

    Example:
        >>> import io, tapegrad.numpy as tnp
        >>> buf = io.BytesIO()
        >>> tnp.savez(buf, w=tnp.ones(2))
        >>> _ = buf.seek(0)
        >>> tnp.load(buf)["w"]
        Tensor([1., 1.], dtype=float32)
    """
    try:
        source: Any = host(file)
        out = _np.load(source, mmap_mode, allow_pickle, fix_imports, cast(Any, encoding),
                       max_header_size=max_header_size)
    except ValueError as e:
        raise ValueError(f"load: {e}") from None
    if isinstance(out, _np.lib.npyio.NpzFile):
        return NpzTensors(out)
    if isinstance(out, _np.memmap):
        out = _np.array(out)
    return wrap(out)
