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

import tapegrad.numpy._shape.diagonals as diagonals
import tapegrad.numpy._shape.editing as editing
import tapegrad.numpy._shape.indexing as indexing
import tapegrad.numpy._shape.joining as joining
import tapegrad.numpy._shape.reordering as reordering
import tapegrad.numpy._shape.repetition as repetition
import tapegrad.numpy._shape.reshaping as reshaping
import tapegrad.numpy._shape.windows as windows
from tapegrad.numpy._shape._methods import METHODS  # noqa: F401
from tapegrad.numpy._shape.diagonals import *  # noqa: F401,F403
from tapegrad.numpy._shape.editing import *  # noqa: F401,F403
from tapegrad.numpy._shape.indexing import *  # noqa: F401,F403
from tapegrad.numpy._shape.indexing import _check_bounds  # noqa: F401
from tapegrad.numpy._shape.joining import *  # noqa: F401,F403
from tapegrad.numpy._shape.reordering import *  # noqa: F401,F403
from tapegrad.numpy._shape.repetition import *  # noqa: F401,F403
from tapegrad.numpy._shape.reshaping import *  # noqa: F401,F403
from tapegrad.numpy._shape.windows import *  # noqa: F401,F403

__all__ = []
__all__ += diagonals.__all__
__all__ += editing.__all__
__all__ += indexing.__all__
__all__ += joining.__all__
__all__ += reordering.__all__
__all__ += repetition.__all__
__all__ += reshaping.__all__
__all__ += windows.__all__
