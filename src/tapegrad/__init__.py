"""tapegrad: functional, immutable-tape automatic differentiation for NumPy (and CuPy).

The everyday call is ``grads = tg.grad(loss_fn)(params)``, with ``params`` any pytree. See
``docs/`` for the design (tape, levels), writing your own :class:`Function`, and the API.
"""

from tapegrad import (
    at,  # noqa: F401  (the functional index updates, Tensor.at)
    backend,
    distributed,  # data parallelism on MPI; mpi4py is imported only by distributed.init()
    io,
    methods,  # noqa: F401  (attaches Tensor's operators and methods)
    nn,
    numpy,
    optim,
    random,
    tree,
)
from tapegrad.checkpoint import checkpoint, remat
from tapegrad.custom import custom_vjp, once_differentiable
from tapegrad.flatten_util import flatten, ravel_pytree
from tapegrad.forward import hessian, hvp, jacfwd, jacobian, jacrev, jvp, linearize
from tapegrad.function import Context, Function, debug_nans, is_grad_enabled, no_grad
from tapegrad.jit import jit
from tapegrad.lazy import is_lazy, lazy, mode
from tapegrad.numpy import stop_gradient
from tapegrad.tape import Guard, GuardError, Tape, TapeEntry
from tapegrad.tensor import Tensor, tensor
from tapegrad.transforms import grad, trace, value_and_grad, vjp
from tapegrad.vmap import elementwise_grad, vmap

__version__ = "0.1.0"

__all__ = [
    "Tensor",
    "tensor",
    "Function",
    "Context",
    "Tape",
    "TapeEntry",
    "Guard",
    "GuardError",
    "grad",
    "value_and_grad",
    "vjp",
    "trace",
    "jit",
    "vmap",
    "elementwise_grad",
    "jvp",
    "linearize",
    "jacfwd",
    "jacrev",
    "jacobian",
    "hessian",
    "hvp",
    "checkpoint",
    "remat",
    "custom_vjp",
    "once_differentiable",
    "stop_gradient",
    "no_grad",
    "is_grad_enabled",
    "debug_nans",
    "lazy",
    "mode",
    "is_lazy",
    "backend",
    "tree",
    "ravel_pytree",
    "flatten",
    "numpy",
    "random",
    "nn",
    "optim",
    "io",
    "distributed",
]
