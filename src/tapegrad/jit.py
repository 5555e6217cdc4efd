"""``jit``: record a function once per input signature and replay its tape afterwards."""

from __future__ import annotations

import threading

from tapegrad.tape import GuardError
from tapegrad.tensor import Tensor
from tapegrad.transforms import trace
from tapegrad.tree import tree_flatten

__all__ = ["jit"]


def jit(fun):
    """Trace ``fun`` once per input signature and replay the recorded tape afterwards.

    The first call with a given pytree structure, shapes and dtypes runs ``fun`` under
    :func:`trace`; later calls with the same signature replay the frozen tape: only the forward
    rules run, on arrays, with none of ``fun``'s Python, no pytree handling and no Tensor
    wrapping. This is the fast path for many small ops, and it composes with the transforms
    from the outside: ``tg.jit(tg.grad(loss))`` records forward and backward once.

    Semantics (as JAX's ``jit``):
        - Every positional argument is an input (a pytree of Tensors, arrays or numbers).
        - Values ``fun`` closes over are constants of the recording: rebinding them later is
          not seen. Pass changing values (parameters, batches) as arguments.
        - Python side effects (printing, appending to lists) happen only while tracing.
        - A Python decision on data (``if x.sum() > 0``) is a guard: when new inputs flip it,
          ``fun`` is traced again for them, never replayed stale.
        - Called on values another transform is tracing (inside ``grad``), ``fun`` simply
          runs, so that transform can differentiate it.

    Args:
        fun: Function of positional pytrees of Tensors/arrays/numbers.

    Returns:
        A function with ``fun``'s signature and results (leaves as Tensors).

    Example:
        >>> import tapegrad as tg, tapegrad.numpy as tnp
        >>> fast_grad = tg.jit(tg.grad(lambda w: (tnp.sin(w) * w).sum()))
        >>> g1 = fast_grad(tg.Tensor([0.0, 1.0]))   # traces
        >>> g2 = fast_grad(tg.Tensor([2.0, 3.0]))   # replays
        >>> g2.shape
        (2,)
    """




    cache: dict = {}
    lock = threading.Lock()

    def jitted(*args):
        leaves, treedef = tree_flatten(args)
        sig = []
        for leaf in leaves:
            if isinstance(leaf, Tensor):
                if leaf._level:
                    return fun(*args)  # an outer transform traces this call: run it
                sig.append((leaf.shape, leaf.dtype))
            elif hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
                sig.append((tuple(leaf.shape), leaf.dtype))
            else:
                sig.append(type(leaf))
        key = (treedef, tuple(sig))
        tape = cache.get(key)
        if tape is not None:
            try:
                return tape.replay(*args)
            except GuardError:
                pass  # a Python decision flipped: trace again for these inputs
        out, tape = trace(fun)(*args)
        with lock:
            cache[key] = tape
        return out

    jitted.__name__ = f"jit_{getattr(fun, '__name__', 'fun')}"
    jitted.__doc__ = fun.__doc__
    jitted.cache_size = lambda: len(cache)
    return jitted
