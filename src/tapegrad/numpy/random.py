"""``tapegrad.numpy.random``: NumPy's random module, for data.

Every public name of :mod:`numpy.random` is re-exported here unchanged (``default_rng``,
``Generator``, ``seed``, ``rand``, ``randn``, ``normal``, ``uniform``, ``choice``,
``permutation``, ...), as ``autograd.numpy.random`` re-exports them: code written with
``import tapegrad.numpy as np`` can keep calling ``np.random.randn(3, 4)`` to make inputs,
initial values and test data. They return NumPy arrays (pass them to ``tg.Tensor`` or any
``tapegrad.numpy`` function), are not traced and have no gradient.

When to use which:

- ``tapegrad.numpy.random`` (this module): random *data* made outside the differentiated
  function: datasets, initial parameters, inputs to a test. Seed it as NumPy's
  (``default_rng(seed)`` is the modern way; the global ``seed``/``rand`` functions keep a
  hidden global state).
- :mod:`tapegrad.random`: randomness *inside* a program that is differentiated, ``jit``-ed or
  ``vmap``-ed (dropout, noise, sampling in a loss, ``nn.init``). It takes an explicit ``key``
  (``tapegrad.random.key(0)``, ``split``), so every draw is reproducible, a ``jit`` replay
  draws the same numbers from the same key, and ``vmap`` gives each example its own key. A
  hidden global state, as this module's, would make a replayed or batched program draw
  differently from the eager one.

Example:
    >>> import tapegrad as tg
    >>> import tapegrad.numpy as tnp
    >>> rng = tnp.random.default_rng(0)
    >>> x = tg.Tensor(rng.normal(size=(2, 3)))
    >>> x.shape, x.dtype
    ((2, 3), dtype('float64'))
"""

from __future__ import annotations

import numpy.random as _npr

__all__ = sorted(name for name in _npr.__all__ if not name.startswith("_"))

globals().update({name: getattr(_npr, name) for name in __all__})
