"""Explicit pseudo-random keys and samplers: every function that draws numbers takes a
``key``.

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

Every draw and every key derivation is a primitive on the tape: under ``jit`` (or a recorded
``trace``) a key is an input like any other, and replaying with a new key gives exactly what the
eager call gives for that key. Results are CPU Tensors; move them with ``.to_device(...)``.

Samplers follow ``jax.random``'s names, signatures and shape rules (``shape=None`` means the
parameters' broadcast shape; a given ``shape`` must be one the parameters broadcast to):
``uniform``, ``normal``, ``bernoulli``, ``randint``, ``permutation``, ``exponential``,
``laplace``, ``logistic``, ``gumbel``, ``cauchy``, ``truncated_normal``, ``gamma``,
``loggamma``, ``beta``, ``dirichlet``, ``t``, ``multivariate_normal``, ``orthogonal``,
``categorical``, ``choice`` and ``poisson``. The streams differ from JAX's (another generator);
the distributions are the same. Continuous samplers are differentiable in their parameters
(pathwise, given the key; implicit reparameterization for the gamma family) and compute in
float64 before rounding to ``dtype``. See ``docs/random.md``.
"""

from tapegrad.random._keys import (
    bernoulli,
    fold_in,
    key,
    normal,
    permutation,
    randint,
    split,
    uniform,
)
from tapegrad.random._samplers import (
    beta,
    categorical,
    cauchy,
    choice,
    dirichlet,
    exponential,
    gamma,
    gumbel,
    laplace,
    loggamma,
    logistic,
    multivariate_normal,
    orthogonal,
    poisson,
    t,
    truncated_normal,
)

__all__ = [
    "key", "split", "fold_in",
    "uniform", "normal", "bernoulli", "randint", "permutation",
    "exponential", "laplace", "logistic", "gumbel", "cauchy", "truncated_normal",
    "gamma", "loggamma", "beta", "dirichlet", "t", "multivariate_normal", "orthogonal",
    "categorical", "choice", "poisson",
]  # fmt: skip
