"""Mixed precision: dtype policies and loss scaling (DeepMind's ``jmp``, for tapegrad).

A :class:`Policy` names three dtypes: parameters are *stored* in ``param_dtype`` (float32, so
that small updates are not rounded away), computed with in ``compute_dtype`` (bfloat16 or
float16, for speed and memory) and returned in ``output_dtype``. :func:`get_policy` parses
jmp's strings (``"params=float32,compute=bfloat16,output=float32"``, ``"p=f32,c=bf16"``).

Loss scaling keeps small float16 gradients from flushing to zero: the loss is multiplied by a
large factor before differentiating and the gradients divided by it after.
:class:`DynamicLossScale` halves the factor when the gradients overflow and doubles it after
``period`` finite steps; :func:`tapegrad.optim.apply_if_finite` skips the overflowing steps.

Example:
    >>> import numpy as np
    >>> import tapegrad as tg
    >>> from tapegrad import mixed_precision as mp
    >>> policy = mp.get_policy("params=float32,compute=bfloat16,output=float32")
    >>> str(policy)
    'p=f32,c=bf16,o=f32'
    >>> x = policy.cast_to_compute({"w": tg.Tensor(np.ones(2, np.float32)), "n": 3})
    >>> x["w"].dtype, x["n"]
    (dtype(bfloat16), 3)
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs
import numpy as np

from tapegrad import numpy as tnp
from tapegrad.core import dtypes as _dtypes
from tapegrad.core.tensor import Tensor
from tapegrad.core.tree import register_attrs, tree_leaves, tree_map

__all__ = ["Policy", "get_policy", "parse_dtype", "cast_to_full", "cast_to_half",
           "half_dtype", "NoOpLossScale", "StaticLossScale", "DynamicLossScale", "LossScale",
           "all_finite", "select_tree"]

T = TypeVar("T")

#: jmp's names of each dtype (the first is the short one ``str(policy)`` shows).
_NAMES = {
    _dtypes.bfloat16: ("bf16", "bfloat16"),
    np.dtype(np.float16): ("f16", "float16"),
    np.dtype(np.float32): ("f32", "float32", "full", "single"),
    np.dtype(np.float64): ("f64", "float64", "double"),
}
_BY_NAME = {name: dt for dt, names in _NAMES.items() for name in names}
_KEYS = {"p": "param_dtype", "params": "param_dtype", "param": "param_dtype",
         "c": "compute_dtype", "compute": "compute_dtype",
         "o": "output_dtype", "output": "output_dtype"}


def half_dtype() -> np.dtype:
    """The half-precision dtype ``"half"`` means: float16 (jmp's choice off TPUs)."""
    return np.dtype(np.float16)


def parse_dtype(value) -> np.dtype:
    """A floating dtype from one of jmp's names or a dtype.

    Names: ``"bf16"``/``"bfloat16"``, ``"f16"``/``"float16"``, ``"half"`` (float16),
    ``"f32"``/``"float32"``/``"full"``/``"single"``, ``"f64"``/``"float64"``/``"double"``.
    Strings are looked up in this fixed table (never evaluated).

    Args:
        value: A name above, or a floating dtype (``tg.bfloat16``, ``np.float32``).

    Returns:
        The NumPy dtype.

    Raises:
        ValueError: for an unknown name, listing the known ones.
        TypeError: for a non-floating dtype or something that is no dtype.
    """
    if isinstance(value, str):
        if value == "half":
            return half_dtype()
        dt = _BY_NAME.get(value.strip().lower())
        if dt is None:
            raise ValueError(
                f"mixed_precision: unknown dtype name {value!r}; expected one of "
                f"{', '.join(sorted(_BY_NAME) + ['half'])}"
            )
        return dt
    try:
        dt = _dtypes.canonical(value)
    except TypeError:
        raise TypeError(f"mixed_precision: expected a floating dtype or its name, got "
                        f"{value!r}") from None
    if dt not in _NAMES:
        raise TypeError(f"mixed_precision: expected a floating dtype (bfloat16, float16, "
                        f"float32 or float64), got {dt}")
    return dt


def _is_float_leaf(x) -> bool:
    dt = getattr(x, "dtype", None)
    return (isinstance(x, (Tensor, np.ndarray)) or hasattr(x, "__cuda_array_interface__")) and (
        isinstance(dt, np.dtype) and (dt.kind == "f" or dt == _dtypes.bfloat16))


def _cast_floating_to(tree, dtype: np.dtype) -> Any:
    """Every real floating array leaf of ``tree`` cast to ``dtype`` (differentiably); other
    leaves (integers, booleans, complex numbers, Python numbers) as they are."""

    def cast(x):
        if not _is_float_leaf(x) or x.dtype == dtype:
            return x
        return tnp.astype(x, dtype) if isinstance(x, Tensor) else x.astype(dtype)

    return tree_map(cast, tree)


def cast_to_full(tree: T) -> T:
    """Every real floating array leaf of ``tree`` as float32 (jmp's ``cast_to_full``)."""
    return _cast_floating_to(tree, np.dtype(np.float32))


def cast_to_half(tree: T) -> T:
    """Every real floating array leaf of ``tree`` as :func:`half_dtype` (float16)."""
    return _cast_floating_to(tree, half_dtype())


@attrs.frozen
class Policy:
    """Which dtype parameters, computations and outputs use (jmp's ``Policy``).

    The casts change only the real floating array leaves of a pytree (Tensors and arrays of
    float16, bfloat16, float32, float64); integers, booleans, complex values and Python
    numbers pass unchanged. Casting Tensors is differentiable: the gradient with respect to a
    float32 parameter used in bfloat16 is float32.

    Attributes:
        param_dtype: The dtype parameters are stored (and optimized) in.
        compute_dtype: The dtype the forward pass computes in.
        output_dtype: The dtype of the results.

    Raises:
        TypeError, ValueError: for a dtype that is not floating or an unknown name.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> from tapegrad import mixed_precision as mp, nn
        >>> policy = mp.Policy("float32", "bfloat16", "float32")
        >>> layer = nn.Linear(3, 2, key=tg.random.key(0))
        >>> y = policy.apply(layer, tg.Tensor(np.ones((4, 3), np.float32)))
        >>> y.dtype, y.shape
        (dtype('float32'), (4, 2))
    """

    param_dtype: np.dtype = attrs.field(converter=parse_dtype)
    compute_dtype: np.dtype = attrs.field(converter=parse_dtype)
    output_dtype: np.dtype = attrs.field(converter=parse_dtype)

    def cast_to_param(self, x: T) -> T:
        """The real floating leaves of ``x`` as ``param_dtype``."""
        return _cast_floating_to(x, self.param_dtype)

    def cast_to_compute(self, x: T) -> T:
        """The real floating leaves of ``x`` as ``compute_dtype``."""
        return _cast_floating_to(x, self.compute_dtype)

    def cast_to_output(self, x: T) -> T:
        """The real floating leaves of ``x`` as ``output_dtype``."""
        return _cast_floating_to(x, self.output_dtype)

    def with_param_dtype(self, param_dtype) -> Policy:
        """This policy with another ``param_dtype``."""
        return attrs.evolve(self, param_dtype=param_dtype)

    def with_compute_dtype(self, compute_dtype) -> Policy:
        """This policy with another ``compute_dtype``."""
        return attrs.evolve(self, compute_dtype=compute_dtype)

    def with_output_dtype(self, output_dtype) -> Policy:
        """This policy with another ``output_dtype``."""
        return attrs.evolve(self, output_dtype=output_dtype)

    def apply(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` under the policy: ``fn`` (a Module, whose parameters are
        pytree leaves, or any callable pytree) and the arguments cast to ``compute_dtype``,
        the result cast to ``output_dtype``. Differentiable: gradients with respect to
        parameters held in ``param_dtype`` come back in ``param_dtype``.

        Args:
            fn: A Module or callable; a Module's floating parameters are cast for the call.
            *args: Positional arguments (pytrees), cast to ``compute_dtype``.
            **kwargs: Keyword arguments (pytrees), cast to ``compute_dtype``.

        Returns:
            ``fn``'s result with its floating leaves in ``output_dtype``.
        """
        call = self.cast_to_compute(fn)
        out = call(*self.cast_to_compute(args), **self.cast_to_compute(kwargs))
        return self.cast_to_output(out)

    def __str__(self) -> str:
        return "p={},c={},o={}".format(*(_NAMES[d][0] for d in (
            self.param_dtype, self.compute_dtype, self.output_dtype)))


def get_policy(policy_name: str) -> Policy:
    """A :class:`Policy` parsed from jmp's string form.

    ``"params=float32,compute=bfloat16,output=float32"`` (keys ``params``/``param``/``p``,
    ``compute``/``c``, ``output``/``o``, values as :func:`parse_dtype`); missing entries
    default as jmp's: ``params`` float32, ``compute`` follows ``params``, ``output`` follows
    ``compute``. A single name (``"bf16"``) sets all three. Each part is looked up in fixed
    tables: nothing is evaluated.

    Args:
        policy_name: The policy string.

    Returns:
        The :class:`Policy`.

    Raises:
        TypeError: if ``policy_name`` is not a string.
        ValueError: for an unknown key or dtype name, a repeated key or a part without ``=``.

    Example:
        >>> from tapegrad import mixed_precision as mp
        >>> str(mp.get_policy("c=bf16")), str(mp.get_policy("p=f32,c=f16,o=f32"))
        ('p=f32,c=bf16,o=bf16', 'p=f32,c=f16,o=f32')
    """
    if not isinstance(policy_name, str):
        raise TypeError(f"get_policy: policy_name must be a string such as "
                        f"'params=float32,compute=bfloat16,output=float32', got "
                        f"{type(policy_name).__name__}")
    if "=" not in policy_name:
        dt = parse_dtype(policy_name)
        return Policy(dt, dt, dt)
    given: dict[str, Any] = {}
    for part in policy_name.split(","):
        key, eq, value = part.partition("=")
        key = key.strip().lower()
        if not eq or key not in _KEYS:
            raise ValueError(
                f"get_policy: cannot read {part!r} in {policy_name!r}; expected "
                "key=dtype with key params (p), compute (c) or output (o)"
            )
        field = _KEYS[key]
        if field in given:
            raise ValueError(f"get_policy: {field} given twice in {policy_name!r}")
        given[field] = parse_dtype(value.strip())
    param = given.get("param_dtype", np.dtype(np.float32))
    compute = given.get("compute_dtype", param)
    output = given.get("output_dtype", compute)
    return Policy(param, compute, output)


# -- loss scaling -----------------------------------------------------------------------------
def all_finite(tree) -> Tensor:
    """A bool 0-d Tensor: whether every element of every array leaf of ``tree`` is finite
    (True for a tree without leaves), jmp's ``all_finite``; never differentiated."""
    out = Tensor(np.bool_(True))
    for leaf in tree_leaves(tree):
        if leaf is None:
            continue
        x = tnp.stop_gradient(tnp.asarray(leaf))
        out = tnp.logical_and(out, tnp.all(tnp.isfinite(x)))
    return out


def select_tree(pred, a: T, b: T) -> T:
    """``a`` where the bool 0-d ``pred`` holds, else ``b``, leafwise (jmp's ``select_tree``).

    Raises:
        TypeError: if ``pred`` is not a bool 0-d Tensor or bool.
    """
    p = tnp.asarray(pred)
    if p.dtype != np.bool_ or p.shape != ():
        raise TypeError(f"select_tree: pred must be a boolean scalar, got dtype {p.dtype} and "
                        f"shape {p.shape}")
    out: Any = tree_map(lambda x, y: tnp.where(p, x, y), a, b)
    return out


def _scale_tree(tree, factor) -> Any:
    return tree_map(lambda x: x * factor, tree)


def _check_finite_flag(grads_finite, who: str) -> Tensor:
    f = tnp.asarray(grads_finite)
    if f.dtype != np.bool_ or f.shape != ():
        raise TypeError(f"{who}.adjust: grads_finite must be a boolean scalar (all_finite("
                        f"grads)), got dtype {f.dtype} and shape {f.shape}")
    return f


@attrs.frozen
class NoOpLossScale:
    """No loss scaling (jmp's ``NoOpLossScale``): ``scale`` and ``unscale`` return the tree,
    ``loss_scale`` is 1."""

    @property
    def loss_scale(self) -> int:
        """The factor: 1."""
        return 1

    def scale(self, tree: T) -> T:
        """``tree`` unchanged."""
        return tree

    def unscale(self, tree: T) -> T:
        """``tree`` unchanged."""
        return tree

    def adjust(self, grads_finite) -> NoOpLossScale:
        """This loss scale (nothing to adjust)."""
        _check_finite_flag(grads_finite, "NoOpLossScale")
        return self


def _scale_value(value, who: str) -> Tensor:
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{who}: loss_scale must be a floating number, got a bool")
    t = tnp.asarray(value)
    if t.shape != () or not _dtypes.is_floating(t.dtype) or t.dtype.kind == "c":
        raise TypeError(f"{who}: loss_scale must be a real floating scalar (such as 2.0**15), "
                        f"got dtype {t.dtype} and shape {t.shape}")
    if not bool(tnp.isfinite(t)) or not bool(t > 0):
        raise ValueError(f"{who}: loss_scale must be finite and > 0, got {float(t)}")
    return t


@attrs.frozen
class StaticLossScale:
    """A fixed loss scale (jmp's ``StaticLossScale``).

    Attributes:
        loss_scale: The factor (a positive floating 0-d Tensor; a Python float becomes
            float32).

    Raises:
        TypeError: if ``loss_scale`` is not a real floating scalar.
        ValueError: if it is not finite and positive.
    """

    loss_scale: Tensor = attrs.field(converter=lambda v: _scale_value(v, "StaticLossScale"))

    def scale(self, tree: T) -> T:
        """Every leaf of ``tree`` times ``loss_scale``."""
        return _scale_tree(tree, self.loss_scale)

    def unscale(self, tree: T) -> T:
        """Every leaf of ``tree`` times ``1 / loss_scale``."""
        return _scale_tree(tree, 1 / self.loss_scale)

    def adjust(self, grads_finite) -> StaticLossScale:
        """This loss scale (it never changes)."""
        _check_finite_flag(grads_finite, "StaticLossScale")
        return self


def _positive_int(value, who: str, name: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: {name} must be an int >= 1, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{who}: {name} must be >= 1, got {value}")
    return int(value)


@attrs.frozen
class DynamicLossScale:
    """A loss scale that adapts to overflow (jmp's ``DynamicLossScale``).

    Each :meth:`adjust` with finite gradients counts one step; after ``period`` finite steps
    in a row the scale is multiplied by ``factor`` (kept only if the product is finite) and
    the count restarts. Non-finite gradients divide the scale by ``factor`` (never below
    ``min_loss_scale``) and reset the count::

        finite:      counter == period - 1:  loss_scale *= factor (if finite);  counter = 0
                     otherwise:              counter += 1
        not finite:  loss_scale = max(min_loss_scale, loss_scale / factor);     counter = 0

    A pytree: ``loss_scale`` and ``counter`` are its leaves (``period``, ``factor`` and
    ``min_loss_scale`` static), so it can be carried through ``tg.jit``.

    Attributes:
        loss_scale: The current factor, a positive floating 0-d Tensor (such as ``2.0**15``;
            a Python float becomes float32).
        counter: Finite steps since the last change, an int32 0-d Tensor.
        period: Finite steps between increases, an int ``>= 1`` (jmp's default 2000).
        factor: The multiplier, an int ``>= 1`` (default 2).
        min_loss_scale: The lowest scale, a positive number (default 1.0).

    Raises:
        TypeError: for a non-floating ``loss_scale`` or a non-int ``period``/``factor``.
        ValueError: for a non-positive scale, ``period`` or ``factor`` below 1.

    Example:
        >>> import tapegrad as tg
        >>> from tapegrad import mixed_precision as mp
        >>> ls = mp.DynamicLossScale(2.0 ** 15, period=2)
        >>> for finite in [True, True, False]:
        ...     ls = ls.adjust(tg.Tensor(finite))
        ...     print(float(ls.loss_scale), int(ls.counter))
        32768.0 1
        65536.0 0
        32768.0 0
    """

    loss_scale: Tensor = attrs.field(converter=lambda v: _scale_value(v, "DynamicLossScale"))
    counter: Any = attrs.field(factory=lambda: Tensor(np.int32(0)))
    period: int = attrs.field(default=2000, converter=lambda v: _positive_int(
        v, "DynamicLossScale", "period"))
    factor: int = attrs.field(default=2, converter=lambda v: _positive_int(
        v, "DynamicLossScale", "factor"))
    min_loss_scale: float = attrs.field(default=1.0)

    def __attrs_post_init__(self):
        m = self.min_loss_scale
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, float, np.number)):
            raise TypeError(f"DynamicLossScale: min_loss_scale must be a number, got "
                            f"{type(m).__name__}")
        if not (np.isfinite(m) and m > 0):
            raise ValueError(f"DynamicLossScale: min_loss_scale must be finite and > 0, got {m}")
        c = self.counter
        if not isinstance(c, Tensor):
            object.__setattr__(self, "counter", Tensor(np.int32(c)))

    def scale(self, tree: T) -> T:
        """Every leaf of ``tree`` times ``loss_scale``."""
        return _scale_tree(tree, self.loss_scale)

    def unscale(self, tree: T) -> T:
        """Every leaf of ``tree`` times ``1 / loss_scale``."""
        return _scale_tree(tree, 1 / self.loss_scale)

    def adjust(self, grads_finite) -> DynamicLossScale:
        """The next loss scale, given whether this step's gradients were all finite.

        Args:
            grads_finite: A boolean scalar, such as :func:`all_finite` of the gradients.

        Returns:
            A new :class:`DynamicLossScale` (this one is unchanged).

        Raises:
            TypeError: if ``grads_finite`` is not a boolean scalar.
        """
        finite = _check_finite_flag(grads_finite, "DynamicLossScale")
        ls = self.loss_scale
        grown = ls * self.factor
        grown = tnp.where(tnp.isfinite(grown), grown, ls)
        up = tnp.where(self.counter == self.period - 1, grown, ls)
        down = tnp.maximum(tnp.asarray(self.min_loss_scale, dtype=ls.dtype), ls / self.factor)
        new_ls = tnp.where(finite, up, down).astype(ls.dtype)
        counter = tnp.where(finite, (self.counter + 1) % self.period, 0).astype(np.int32)
        new = object.__new__(DynamicLossScale)  # the values are checked already (and may be
        for name, value in (("loss_scale", new_ls), ("counter", counter),  # traced: no guards)
                            ("period", self.period), ("factor", self.factor),
                            ("min_loss_scale", self.min_loss_scale)):
            object.__setattr__(new, name, value)
        return new


register_attrs(DynamicLossScale, data_fields=["loss_scale", "counter"],
               meta_fields=["period", "factor", "min_loss_scale"])
register_attrs(StaticLossScale, data_fields=["loss_scale"], meta_fields=[])
register_attrs(NoOpLossScale, data_fields=[], meta_fields=[])

#: Any of the three loss scales.
LossScale = NoOpLossScale | StaticLossScale | DynamicLossScale
