"""tapegrad: functional, immutable-tape automatic differentiation for NumPy (and CuPy).

The everyday call is ``grads = tg.grad(loss_fn)(params)``, with ``params`` any pytree. See
``docs/`` for the design (tape, levels), writing your own :class:`Function`, and the API.
"""

import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING

from tapegrad import (
    distributed,  # data parallelism on MPI; mpi4py is imported only by distributed.init()
    io,
    mixed_precision,
    nn,
    numpy,
    optim,
    random,
)
from tapegrad.core import backend, tree
from tapegrad.core.dtypes import bfloat16
from tapegrad.core.function import Context, Function, Traits, debug_nans, is_grad_enabled, no_grad
from tapegrad.core.lazy import is_lazy, lazy, mode
from tapegrad.core.profiler import profile
from tapegrad.core.tape import Guard, GuardError, Tape, TapeEntry
from tapegrad.core.tensor import Tensor, tensor
from tapegrad.flatten_util import flatten, ravel_pytree
from tapegrad.numpy import (
    at,  # noqa: F401  (the functional index updates, Tensor.at)
    methods,  # noqa: F401  (attaches Tensor's operators and methods)
    stop_gradient,
)
from tapegrad.transforms import debug  # tg.debug.print, tg.debug.callback
from tapegrad.transforms.checkpoint import checkpoint, remat
from tapegrad.transforms.control import cond, fori_loop, scan, switch, while_loop
from tapegrad.transforms.custom_jvp import custom_jvp
from tapegrad.transforms.custom_vjp import custom_vjp, once_differentiable
from tapegrad.transforms.filtered import filter_grad, filter_jit, filter_value_and_grad
from tapegrad.transforms.forward import jvp, linearize
from tapegrad.transforms.implicit import custom_linear_solve, custom_root
from tapegrad.transforms.jacobians import elementwise_grad, hessian, hvp, jacfwd, jacobian, jacrev
from tapegrad.transforms.jit import jit
from tapegrad.transforms.reverse import grad, trace, value_and_grad, vjp
from tapegrad.transforms.transpose import linear_transpose
from tapegrad.transforms.vmap import vmap

__version__ = "0.1.0"

_KEYS_HOW = (
    "randomness in tapegrad is explicit: there is no global seed. Make a key from a seed "
    "(tg.random.key(0), JAX's PRNGKey), split it into fresh keys and pass one to each "
    "function that draws numbers:\n"
    "    key = tg.random.key(0)\n"
    "    key, sub = tg.random.split(key)\n"
    "    x = tg.random.normal(sub, (3, 4))\n"
    "The same key always gives the same numbers, so never reuse one for two draws."
)
_TORCH_NAMES = {  # what a PyTorch user may look for at the top level, and what to use
    "manual_seed": "tapegrad has no manual_seed: " + _KEYS_HOW,
    "seed": "tapegrad has no seed: " + _KEYS_HOW,
    "randn": "tapegrad has no randn: tg.random.normal(key, shape). " + _KEYS_HOW,
    "rand": "tapegrad has no rand: tg.random.uniform(key, shape). " + _KEYS_HOW,
    "randint": "tapegrad has no randint: tg.random.randint(key, shape, minval, maxval). "
    + _KEYS_HOW,
    "randperm": "tapegrad has no randperm: tg.random.permutation(key, n). " + _KEYS_HOW,
    "cuda": "tapegrad has no cuda module: devices are strings ('cpu', 'cuda:N'); "
    "tg.backend.cupy_available() says whether a GPU can be used, x.to_device('cuda') moves a "
    "Tensor there.",
    "autograd": "tapegrad has no autograd module: tg.grad, tg.value_and_grad, tg.vjp and tg.jvp "
    "are the derivatives (tg.grad(f)(x) is torch.autograd.grad(f(x), x)).",
    "set_grad_enabled": "tapegrad has no set_grad_enabled: use the context manager "
    "tg.no_grad().",
    "cat": "tapegrad has no cat: tnp.concatenate(tensors, axis=0) (import tapegrad.numpy as "
    "tnp), or Tensor.cat(tensors, axis=0).",
    "from_numpy": "tapegrad has no from_numpy: tg.tensor(array) (the array is copied, as the "
    "Tensor is immutable) or tnp.asarray(array).",
}


if not _TYPE_CHECKING:  # (type checkers keep reporting unknown names)

    def __getattr__(name: str):
        msg = _TORCH_NAMES.get(name)
        if msg is None and not name.startswith("_") and hasattr(numpy, name):
            msg = (f"tapegrad has no {name}: the NumPy-style functions and dtypes live in "
                   f"tapegrad.numpy (import tapegrad.numpy as tnp; tnp.{name}).")
        if msg is not None:  # (name=None: no "Did you mean" beside the message)
            raise AttributeError(msg, name=None, obj=_sys.modules[__name__])
        raise AttributeError(f"module 'tapegrad' has no attribute {name!r}", name=name,
                             obj=_sys.modules[__name__])

__all__ = [
    "Tensor",
    "tensor",
    "Function",
    "Context",
    "Traits",
    "Tape",
    "TapeEntry",
    "Guard",
    "GuardError",
    "grad",
    "value_and_grad",
    "vjp",
    "trace",
    "filter_grad",
    "filter_value_and_grad",
    "filter_jit",
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
    "profile",
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
    "custom_jvp",
    "linear_transpose",
    "custom_root",
    "custom_linear_solve",
    "debug",
    "scan",
    "fori_loop",
    "while_loop",
    "cond",
    "switch",
    "bfloat16",
    "mixed_precision",
]
