"""``tapegrad.numpy``: the user-facing op namespace, with NumPy's names and arguments.

Write ordinary NumPy-style code with ``import tapegrad.numpy as tnp`` (as with ``autograd.numpy``
or ``jax.numpy``) and differentiate it with the transforms. Inputs may be Tensors, NumPy/CuPy
arrays or Python numbers; Python numbers keep the Tensor operand's dtype (NumPy's weak scalar
promotion), lists become float32 Tensors. Broadcasting follows NumPy. Every function returns a
new Tensor; nothing is modified in place.

Submodules (one per op group) define the functions and declare the matching Tensor methods
(:mod:`tapegrad.numpy.methods` attaches them).
"""

from tapegrad.numpy import (
    _complex,
    _conversion,
    _core,
    _creation,
    _diagonals,
    _elementwise,
    _functional,
    _histograms,
    _info,
    _inplace,
    _io,
    _linalg,
    _passthrough,
    _polynomial,
    _predicates,
    _reduction,
    _shape,
    _signal,
    _sorting,
    _spacing,
    _statistics,
    _types,
)
from tapegrad.numpy._complex import *  # noqa: F401,F403
from tapegrad.numpy._conversion import *  # noqa: F401,F403
from tapegrad.numpy._core import *  # noqa: F401,F403
from tapegrad.numpy._creation import *  # noqa: F401,F403
from tapegrad.numpy._diagonals import *  # noqa: F401,F403
from tapegrad.numpy._elementwise import *  # noqa: F401,F403
from tapegrad.numpy._functional import *  # noqa: F401,F403
from tapegrad.numpy._histograms import *  # noqa: F401,F403
from tapegrad.numpy._info import *  # noqa: F401,F403
from tapegrad.numpy._inplace import *  # noqa: F401,F403
from tapegrad.numpy._io import *  # noqa: F401,F403
from tapegrad.numpy._linalg import *  # noqa: F401,F403
from tapegrad.numpy._passthrough import *  # noqa: F401,F403
from tapegrad.numpy._polynomial import *  # noqa: F401,F403
from tapegrad.numpy._predicates import *  # noqa: F401,F403
from tapegrad.numpy._reduction import *  # noqa: F401,F403
from tapegrad.numpy._shape import *  # noqa: F401,F403
from tapegrad.numpy._signal import *  # noqa: F401,F403
from tapegrad.numpy._sorting import *  # noqa: F401,F403
from tapegrad.numpy._spacing import *  # noqa: F401,F403
from tapegrad.numpy._statistics import *  # noqa: F401,F403
from tapegrad.numpy._types import *  # noqa: F401,F403

#: Every public name: the union of the submodules' (``astype`` is in two of them).
__all__ = []
__all__ += _core.__all__
__all__ += _creation.__all__
__all__ += _elementwise.__all__
__all__ += _info.__all__
__all__ += _linalg.__all__
__all__ += _polynomial.__all__
__all__ += _predicates.__all__
__all__ += _reduction.__all__
__all__ += _shape.__all__
__all__ += _sorting.__all__
__all__ += _statistics.__all__
__all__ += _complex.__all__
__all__ += _conversion.__all__
__all__ += _diagonals.__all__
__all__ += _functional.__all__
__all__ += _histograms.__all__
__all__ += _inplace.__all__
__all__ += _io.__all__
__all__ += _passthrough.__all__
__all__ += _signal.__all__
__all__ += _spacing.__all__
__all__ += _types.__all__
__all__.remove("astype")

#: The version of NumPy whose API this namespace follows (the installed NumPy's, as
#: ``autograd.numpy.__version__``).
from numpy import __version__  # noqa: E402,F401

from tapegrad.ops._registry import register_nested as _register_nested  # noqa: E402

_register_nested(_core.asarray)  # every op takes a list holding Tensors: np.mean([x, y])

from tapegrad.numpy import fft, linalg, random  # noqa: E402,F401
from tapegrad.numpy._dlpack import from_dlpack  # noqa: E402,F401
