"""Primitive Functions: each op's forward and backward rules side by side.

Modules: :mod:`~tapegrad.ops.elementwise` (arithmetic, transcendental, comparisons),
:mod:`~tapegrad.ops.reduction` (sum, mean, ...), :mod:`~tapegrad.ops.movement` (reshape,
transpose, broadcast, indexing) and :mod:`~tapegrad.ops.linalg` (matmul, ...). Users normally
call them through :mod:`tapegrad.numpy` or Tensor methods.
"""

from tapegrad.ops import elementwise as _ew  # noqa: E402
from tapegrad.ops import linalg as _la  # noqa: E402
from tapegrad.ops import movement as _mv  # noqa: E402
from tapegrad.ops import reduction as _rd  # noqa: E402
from tapegrad.ops.elementwise import *  # noqa: F401,F403
from tapegrad.ops.fft import *  # noqa: F401,F403
from tapegrad.ops.linalg import *  # noqa: F401,F403
from tapegrad.ops.movement import *  # noqa: F401,F403
from tapegrad.ops.reduction import *  # noqa: F401,F403
from tapegrad.ops.sorting import *  # noqa: F401,F403
from tapegrad.ops.statistics import *  # noqa: F401,F403

__all__ = []
__all__ += _ew.__all__
__all__ += _la.__all__
__all__ += _mv.__all__
__all__ += _rd.__all__
