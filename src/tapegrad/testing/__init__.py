"""Tools to prove gradients: :func:`check_grads`, :func:`numerical_jacobian`, and hypothesis
strategies in :mod:`tapegrad.testing.strategies` (import it where hypothesis is installed)."""

from tapegrad.testing.gradcheck import check_grads, check_vjp, numerical_jacobian, numerical_jvp

__all__ = ["check_grads", "check_vjp", "numerical_jacobian", "numerical_jvp"]
