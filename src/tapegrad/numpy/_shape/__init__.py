"""Shape changes, joining, reordering and indexing of ``tapegrad.numpy``.

NumPy names and arguments; every function returns a new Tensor (views are read-only) and is
differentiable in its Tensor input(s) to any order. Axis arguments accept negative values;
an out-of-range axis is a ``ValueError`` naming the op, the axis and ``ndim``.

The functions that apply one primitive (``reshape``, ``transpose``, ``broadcast_to``,
``concatenate``, ``split``, ``flip``, ``roll``, ``pad``, ``sliding_window_view``) are defined
with their primitives in :mod:`tapegrad.ops.movement`, together with the Tensor methods
``reshape``, ``transpose``, ``T``, ``__getitem__``, ``broadcast_to``, ``flip``, ``roll``,
``pad`` and ``Tensor.cat``; this package re-exports them and defines the composites, one
module per concept: reshaping, joining (and splitting), repetition, diagonals, reordering,
indexing, windows, editing (padding, resizing, inserting, deleting).

Tensor methods installed here: ``view``, ``ravel``, ``flatten``, ``squeeze``, ``unsqueeze``,
``permute``, ``swapaxes``, ``moveaxis``, ``expand``, ``repeat``, ``tile``, ``tril``, ``triu``,
``diagonal``, ``trace``, ``take``, ``gather``, ``strided_windows`` and the static
``Tensor.stack``. (``Tensor.at`` lives in :mod:`tapegrad.numpy.at`.)
"""

from tapegrad.numpy._shape._methods import METHODS  # noqa: F401
from tapegrad.numpy._shape.diagonals import (
    diag,
    diagflat,
    diagonal,
    trace,
    tril,
    triu,
)
from tapegrad.numpy._shape.editing import (
    delete,
    insert,
    pad,
    resize,
    trim_zeros,
)
from tapegrad.numpy._shape.indexing import (
    _check_bounds,  # noqa: F401
    broadcast_arrays,
    broadcast_shapes,
    ix_,
    meshgrid,
    take,
    take_along_axis,
)
from tapegrad.numpy._shape.joining import (
    append,
    array_split,
    atleast_1d,
    atleast_2d,
    atleast_3d,
    block,
    column_stack,
    concat,
    concatenate,
    dsplit,
    dstack,
    hsplit,
    hstack,
    row_stack,
    split,
    stack,
    unstack,
    vsplit,
    vstack,
)
from tapegrad.numpy._shape.reordering import (
    flip,
    fliplr,
    flipud,
    roll,
    rollaxis,
    rot90,
)
from tapegrad.numpy._shape.repetition import (
    repeat,
    tile,
)
from tapegrad.numpy._shape.reshaping import (
    broadcast_to,
    expand_dims,
    moveaxis,
    permute_dims,
    ravel,
    reshape,
    squeeze,
    swapaxes,
    transpose,
)
from tapegrad.numpy._shape.windows import (
    sliding_window_view,
    strided_windows,
)

__all__ = [
    "reshape",
    "ravel",
    "squeeze",
    "expand_dims",
    "transpose",
    "permute_dims",
    "swapaxes",
    "moveaxis",
    "broadcast_to",
    "concatenate",
    "concat",
    "stack",
    "unstack",
    "split",
    "array_split",
    "tile",
    "repeat",
    "flip",
    "roll",
    "pad",
    "tril",
    "triu",
    "diagonal",
    "trace",
    "take",
    "take_along_axis",
    "sliding_window_view",
    "strided_windows",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "hstack",
    "vstack",
    "row_stack",
    "dstack",
    "column_stack",
    "block",
    "append",
    "hsplit",
    "vsplit",
    "dsplit",
    "diag",
    "diagflat",
    "rot90",
    "fliplr",
    "flipud",
    "rollaxis",
    "resize",
    "trim_zeros",
    "insert",
    "delete",
    "meshgrid",
    "broadcast_arrays",
    "broadcast_shapes",
    "ix_",
]
