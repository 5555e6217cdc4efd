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

#: NumPy's public ``numpy.random`` names, written out (a test keeps them equal to NumPy's).
__all__ = [
    "BitGenerator", "Generator", "MT19937", "PCG64", "PCG64DXSM", "Philox", "RandomState",
    "SFC64", "SeedSequence", "beta", "binomial", "bytes", "chisquare", "choice", "default_rng",
    "dirichlet", "exponential", "f", "gamma", "geometric", "get_state", "gumbel",
    "hypergeometric", "laplace", "logistic", "lognormal", "logseries", "multinomial",
    "multivariate_normal", "negative_binomial", "noncentral_chisquare", "noncentral_f",
    "normal", "pareto", "permutation", "poisson", "power", "rand", "randint", "randn",
    "random", "random_integers", "random_sample", "ranf", "rayleigh", "sample", "seed",
    "set_state", "shuffle", "standard_cauchy", "standard_exponential", "standard_gamma",
    "standard_normal", "standard_t", "triangular", "uniform", "vonmises", "wald", "weibull",
    "zipf",
]  # fmt: skip

BitGenerator = _npr.BitGenerator
Generator = _npr.Generator
MT19937 = _npr.MT19937
PCG64 = _npr.PCG64
PCG64DXSM = _npr.PCG64DXSM
Philox = _npr.Philox
RandomState = _npr.RandomState
SFC64 = _npr.SFC64
SeedSequence = _npr.SeedSequence
beta = _npr.beta
binomial = _npr.binomial
bytes = _npr.bytes
chisquare = _npr.chisquare
choice = _npr.choice
default_rng = _npr.default_rng
dirichlet = _npr.dirichlet
exponential = _npr.exponential
f = _npr.f
gamma = _npr.gamma
geometric = _npr.geometric
get_state = _npr.get_state
gumbel = _npr.gumbel
hypergeometric = _npr.hypergeometric
laplace = _npr.laplace
logistic = _npr.logistic
lognormal = _npr.lognormal
logseries = _npr.logseries
multinomial = _npr.multinomial
multivariate_normal = _npr.multivariate_normal
negative_binomial = _npr.negative_binomial
noncentral_chisquare = _npr.noncentral_chisquare
noncentral_f = _npr.noncentral_f
normal = _npr.normal
pareto = _npr.pareto
permutation = _npr.permutation
poisson = _npr.poisson
power = _npr.power
rand = _npr.rand
randint = _npr.randint
randn = _npr.randn
random = _npr.random
random_integers = _npr.random_integers
random_sample = _npr.random_sample
ranf = _npr.ranf
rayleigh = _npr.rayleigh
sample = _npr.sample
seed = _npr.seed
set_state = _npr.set_state
shuffle = _npr.shuffle
standard_cauchy = _npr.standard_cauchy
standard_exponential = _npr.standard_exponential
standard_gamma = _npr.standard_gamma
standard_normal = _npr.standard_normal
standard_t = _npr.standard_t
triangular = _npr.triangular
uniform = _npr.uniform
vonmises = _npr.vonmises
wald = _npr.wald
weibull = _npr.weibull
zipf = _npr.zipf
