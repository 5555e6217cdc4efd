"""The transforms, one module each: reverse mode (:mod:`~tapegrad.transforms.reverse`), forward
mode, Jacobians and Hessians, ``vmap``, ``jit``, ``checkpoint``, custom rules (``custom_vjp``,
``custom_jvp``), implicit differentiation, linear transposition, debug callbacks and the
filtered transforms.

They are built on the engine (:mod:`tapegrad.core`) and the primitives (:mod:`tapegrad.ops`);
the public names are exported from the package root (``tg.grad``, ``tg.vmap``, ...).
"""

__all__: list[str] = []
