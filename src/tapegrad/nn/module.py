"""``Module``: a thin stateful wrapper over a parameter pytree and a state pytree, and itself a
pytree (every Module class is registered with :mod:`tapegrad.core.tree`).

A Module owns named parameters (Tensors), states (buffers such as running statistics) and
submodules. It has no math of its own: layers compute with :mod:`tapegrad.nn.functional`.
Nothing is mutated in place: an update (an optimizer step, a BatchNorm running-statistics
update in stateful mode) replaces Tensors with new ones.

The bridge to the functional world:

- ``module.params`` / ``module.state``: the nested-dict pytrees (settable).
- :func:`functional_call` runs the module on *given* params (and state and key) without
  touching it, so ``tg.grad(lambda p: loss(tg.nn.functional_call(model, p, x)[0]))(model.params)``
  differentiates with respect to the parameters.
"""

from __future__ import annotations

import copy
import itertools
import threading
from contextlib import contextmanager
from typing import Any

import numpy as np

from tapegrad import random as _random
from tapegrad.core._keywords import strict_all, strict_init
from tapegrad.core.backend import parse_device
from tapegrad.core.tensor import Tensor
from tapegrad.core.tensor import const as _tconst
from tapegrad.core.tree import register, static_key
from tapegrad.transforms.jit import implicit_state as _implicit

__all__ = [
    "Module",
    "ModuleList",
    "Sequential",
    "functional_call",
    "key_stream",
    "ParameterView",
    "ParameterIterator",
]


class _KeyStream(threading.local):
    stack: list

    def __init__(self):
        self.stack = []


_keys = _KeyStream()


@contextmanager
def _key_stream(key):
    box = None if key is None else [key]
    _keys.stack.append(box)
    try:
        yield
    finally:
        _keys.stack.pop()


def _concrete(v):
    """A constant Tensor holding ``v``'s current value (drops any trace)."""
    if isinstance(v, Tensor) and v._level:
        return _tconst(v._array)
    return v


def _to_tensor(v, name: str, who: str):
    if v is None or isinstance(v, Tensor):
        return v
    if isinstance(v, np.ndarray) or hasattr(v, "__cuda_array_interface__"):
        return Tensor(v)
    raise TypeError(f"{who}: {name} must be a Tensor or an array, got {type(v).__name__}")


class ParameterIterator:
    """The iterator :meth:`Module.parameters` returns when called: the parameter Tensors in
    pytree leaf order.

    It also carries its module's parameter pytree (``params``) and write-back hook, so that
    PyTorch's idiom ``optim.SGD(model.parameters(), lr=0.1)`` builds an optimizer that
    updates ``model`` after each step, exactly like ``optim.SGD(model, lr=0.1)``.
    """

    def __init__(self, module: Module, tensors: list):
        self._module = module
        self._it = iter(tensors)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    @property
    def params(self) -> dict:
        """The module's parameter pytree (see :attr:`Module.params`)."""
        return self._module.params

    def _set_params(self, tree) -> None:
        """Write a new parameter pytree back into the module (the optimizers' hook)."""
        self._module._set_params(tree)


class ParameterView(dict):
    """The flat ``{dotted name: Tensor}`` dict of :attr:`Module.parameters`, also callable
    as PyTorch's ``parameters()``.

    Names are the dotted paths of the leaves of ``module.params`` (``"0.weight"``,
    ``"encoder.norm.bias"``), in the order in which :func:`tapegrad.core.tree.tree_leaves`
    visits them (dict keys sorted at each level), so ``list(module.parameters())`` lines up
    with ``tree_leaves(module.params)`` and with the leaves of a gradient pytree. Absent
    optional parameters (a ``None`` bias) are left out, as they are not leaves.

    It is a pytree that flattens like a dict (its leaves in sorted-name order; functions such
    as :func:`tapegrad.core.tree.tree_map` rebuild a plain dict). Like the module itself, and like
    :class:`ParameterIterator`, it can be given to an optimizer, which then updates the
    module after each step (``optim.Adam(model.parameters, lr=1e-3)``).
    """

    def __init__(self, module: Module, flat: dict):
        super().__init__(flat)
        self._module = module

    @property
    def params(self) -> dict:
        """The module's parameter pytree (see :attr:`Module.params`)."""
        return self._module.params

    def _set_params(self, tree) -> None:
        """Write a new parameter pytree back into the module (the optimizers' hook)."""
        self._module._set_params(tree)

    def __call__(self, recurse: bool = True):
        """An iterator over the parameter Tensors (only the module's own, not its
        submodules', with ``recurse=False``).

        With ``recurse=True`` it is a :class:`ParameterIterator`, which an optimizer accepts
        in place of the module (``optim.Adam(model.parameters(), lr=1e-3)``).
        """
        if recurse:
            return ParameterIterator(self._module, list(self.values()))
        return iter([v for k, v in self.items() if "." not in k])


def _flatten_view(view: ParameterView):
    names = tuple(sorted(view))
    return tuple(view[k] for k in names), names, names


register(ParameterView, _flatten_view, lambda names, leaves: dict(zip(names, leaves)))


def _named_leaves(tree: dict, prefix: str = ""):
    """``(dotted path, leaf)`` of a nested-dict pytree in tree-flatten order, skipping None."""
    for name in sorted(tree):
        v = tree[name]
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(v, dict):
            yield from _named_leaves(v, path)
        elif v is not None:
            yield path, v


def _group_property(group: str, name: str, doc: str) -> property:
    """The property ``name`` of :class:`Module`: the ``group`` of every module as a nested-dict
    pytree (submodules are nested dicts); assigning replaces it wholesale, checked."""

    def get(self) -> dict:
        return self._tree(group)

    def put(self, tree) -> None:
        self._assign(tree, group, name)

    return property(get, put, doc=doc)


class Module:
    """Base class of layers and models (as PyTorch's ``nn.Module``).

    Assigning a Tensor attribute registers a parameter; assigning a Module registers a
    submodule; :meth:`register_state` registers a state (buffer). Subclasses call
    ``super().__init__()`` first and define ``forward``.

    Every Module class is also a pytree node (Equinox style): its leaves are its parameters,
    states and random key (submodules recursively, in the order of ``params``), and every
    other attribute (sizes, flags, activation functions, the training mode) is static
    structure. So transforms take models: ``tg.grad(loss)(model, x)`` returns a Module of the
    same class holding the gradients (``None`` for keys and integer counters), and ``tg.jit``
    and ``tg.vmap`` take and return models. A transform never mutates the Module it is given:
    it rebuilds copies from the leaves (without ``__init__``), as ``tg.tree.tree_unflatten``,
    ``tg.tree.tree_map`` and ``tg.tree.tree_at`` do.

    Attributes:
        params: Nested dict pytree of the parameters (settable, same structure and shapes).
        state: Nested dict pytree of the states (settable).
        parameters: Flat dict ``{"sub.weight": Tensor}`` (dotted names);
            also callable, ``parameters()``, as in PyTorch (see :class:`ParameterView`).
        states: Flat dict of the states.
        training: True in training mode (the default), False after :meth:`eval`.
        grads: The latest gradients a wrapper stored (a pytree like ``params``) or None.

    Example:
        >>> import tapegrad as tg
        >>> class Scale(tg.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.w = tg.Tensor([2.0])
        ...     def forward(self, x):
        ...         return x * self.w
        >>> m = Scale()
        >>> m(tg.Tensor([1.0, 2.0]))
        Tensor([2., 4.], dtype=float32)
        >>> sorted(m.parameters)
        ['w']
    """

    #: ``{keyword: explanation}`` added to the error for an unknown constructor keyword (for
    #: example PyTorch's name of an argument that is spelt differently here).
    _keyword_hints: dict = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        strict_init(cls)  # an unknown constructor keyword is a TypeError naming the closest
        _register_pytree(cls)  # every Module class is a pytree node

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = {}
        d["_states"] = {}
        d["_modules"] = {}
        d["_is_training"] = True
        d["_functional"] = False
        d["_rng"] = None
        d["_version"] = next(_VERSIONS)
        d["grads"] = None

    # -- registration --------------------------------------------------------------------
    def _check_init(self):
        if "_parameters" not in self.__dict__:
            raise RuntimeError(
                f"{type(self).__name__}: call super().__init__() before assigning attributes"
            )

    def __setattr__(self, name, value):
        if name.startswith("_") or name in ("grads",) or isinstance(
            getattr(type(self), name, None), property
        ):  # private, or a property's setter (params, state) that does its own bookkeeping
            object.__setattr__(self, name, value)
            return
        self._check_init()
        d = self.__dict__
        is_state = name in d["_states"]
        group = "_states" if is_state else "_parameters"
        replaces_value = isinstance(value, Tensor) and isinstance(d[group].get(name), Tensor)
        if not replaces_value:  # the structure or configuration changes (jit records anew)
            _changed(self)
        cap = _implicit.capture
        if cap is not None and not d["_functional"]:  # a jit recording: state it replaces
            if isinstance(value, Tensor):
                cap.write(self, (group, name), d[group].get(name), value)
            else:
                cap.touch(self)
        for g in ("_parameters", "_states", "_modules"):
            if name in d[g] and not (g == "_parameters" and value is None):
                del d[g][name]
        if isinstance(value, Module):
            d.pop(name, None)  # a plain attribute of that name would hide the submodule
            d["_modules"][name] = value
        elif isinstance(value, Tensor):
            d.pop(name, None)
            d[group][name] = value  # a state stays a state
        elif value is None and name in d["_parameters"]:
            d["_parameters"][name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for group in ("_parameters", "_states", "_modules"):
            if group in d and name in d[group]:
                v = d[group][name]
                cap = _implicit.capture
                if cap is not None and not d["_functional"]:  # a jit recording reads state
                    if group == "_modules":
                        cap.touch(self)
                    else:
                        v = cap.read(self, (group, name), v)
                return v
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # -- jit: the state is the program's implicit inputs and outputs ------------------------
    def _implicit_get(self, slot: tuple):
        """The value in ``slot`` (``(group, name)`` or ``("_rng",)``), without hooks."""
        if slot[0] == "_rng":
            return self.__dict__["_rng"]
        return self.__dict__[slot[0]].get(slot[1])

    def _implicit_set(self, slot: tuple, value) -> None:
        """Put ``value`` in ``slot``, without hooks (``jit`` writes the state back)."""
        if slot[0] == "_rng":
            self.__dict__["_rng"] = value
        else:
            self.__dict__[slot[0]][slot[1]] = value

    def _implicit_snapshot(self) -> tuple:
        """What a jitted program recorded of this module besides its state values: the version
        of its structure and attributes (a new one never comes back), and its mode."""
        d = self.__dict__
        return (d["_version"], d["_is_training"])

    def register_parameter(self, name: str, value) -> None:
        """Register a parameter (a Tensor, or None for an absent optional one such as a bias)."""
        self._check_init()
        _changed(self)
        value = _to_tensor(value, name, "register_parameter")
        self.__dict__.pop(name, None)
        self.__dict__["_parameters"][name] = value

    def register_state(self, name: str, value) -> None:
        """Register a state (a non-trainable buffer such as a running mean)."""
        self._check_init()
        _changed(self)
        value = _to_tensor(value, name, "register_state")
        self.__dict__.pop(name, None)
        self.__dict__["_parameters"].pop(name, None)
        self.__dict__["_states"][name] = value

    register_buffer = register_state

    def update_state(self, name: str, value) -> None:
        """Replace state ``name`` with a new Tensor (layers call this; no array is mutated).

        In stateful use the stored value is detached from any trace; inside
        :func:`functional_call` it is kept as is and returned as the new state; while
        :func:`tapegrad.jit` records, it is an output of the program, written back at every
        call.
        """
        d = self.__dict__
        states = d["_states"]
        if name not in states:
            raise KeyError(f"{type(self).__name__}: no state named {name!r}")
        cap = _implicit.capture
        if d["_functional"]:
            states[name] = value
        elif cap is not None:
            cap.write(self, ("_states", name), states[name], value)
            states[name] = value
        else:
            states[name] = _concrete(value)

    # -- forward -------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        """Compute the module's output; subclasses override this."""
        raise NotImplementedError(f"{type(self).__name__} must define forward(...)")

    def __call__(self, *args, **kwargs):
        cap = _implicit.capture
        if cap is not None and not self.__dict__["_functional"]:
            cap.touch(self)  # a jit recording: its program depends on this module's structure
        return self.forward(*args, **kwargs)

    def next_key(self):
        """A fresh key for this call's randomness (dropout).

        Inside ``functional_call(..., key=k)`` or ``with key_stream(k):`` keys are split off
        ``k`` in call order (reproducible). In stateful use, the module's own key is split and
        replaced: created from the ``key`` given to the layer's constructor, or else from fresh
        OS entropy (not reproducible; pass a key for reproducibility). A Module a transform
        rebuilt from its leaves (a model passed to ``grad``, ``jit`` or ``vmap``) is a value,
        with no key that could advance between calls: it needs a :func:`key_stream`.

        Raises:
            ValueError: inside ``functional_call`` without a ``key``, or in a Module a
                transform took as an argument, outside a :func:`key_stream`.
        """
        box = _keys.stack[-1] if _keys.stack else None
        if box is not None:
            box[0], sub = _random.split(box[0])
            return sub
        if self._functional:
            name = type(self).__name__
            if _keys.stack:
                raise ValueError(
                    f"functional_call: {name} draws random numbers (dropout in training "
                    "mode); pass key=tg.random.key(...) to functional_call"
                )
            raise ValueError(
                f"{name} draws random numbers (dropout in training mode) in a model that a "
                "transform (grad, jit, vmap) took as an argument: there it is a value, whose "
                "key would give the same numbers at every call. Pass the randomness: call it "
                "inside `with tg.nn.key_stream(key):` (a new key per step), or use "
                "model.eval()."
            )
        if self._rng is None:
            self._rng = _random.key(int(np.random.SeedSequence().entropy))  # pyright: ignore[reportArgumentType, reportOptionalMemberAccess]
        cap = _implicit.capture
        if cap is None:
            self._rng, sub = _random.split(self._rng)
            return sub
        # a jit recording: the key is an input of the program, the next key an output, so
        # every call draws new numbers, as the eager calls do
        old = self._rng
        new, sub = _random.split(cap.read(self, ("_rng",), old))
        cap.write(self, ("_rng",), old, new)
        self._rng = new
        return sub

    def _seed(self, key) -> None:
        """Set this module's own key (used by :meth:`next_key` in stateful mode)."""
        self._rng = key

    # -- views ---------------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        """Yield ``(dotted_name, module)`` for this module and every submodule."""
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def children(self):
        """The direct submodules."""
        return list(self._modules.values())

    def modules(self):
        """An iterator over this module and every submodule (depth first, as
        :meth:`named_modules`)."""
        return (m for _, m in self.named_modules())

    def _flat(self, group: str) -> dict:
        return dict(_named_leaves(self._tree(group)))

    @property
    def parameters(self) -> ParameterView:
        """Flat dict of all parameters with dotted names (``"layer.weight"``), in pytree
        leaf order; call it, ``parameters()``, for an iterator over the Tensors (PyTorch)."""
        return ParameterView(self, self._flat("_parameters"))

    def named_parameters(self, prefix: str = "", recurse: bool = True):
        """An iterator over ``(dotted name, Tensor)`` for every parameter (PyTorch's
        ``named_parameters``).

        Names are the dotted paths of the leaves of :attr:`params` (``"0.weight"``), in the
        order of :func:`tapegrad.core.tree.tree_leaves` on it, so they line up with the leaves
        of a gradient pytree; a ``None`` (absent) parameter is skipped.

        Args:
            prefix: Prepended to every name, with a dot.
            recurse: Include the submodules' parameters (else only this module's own).

        Example:
            >>> import tapegrad as tg
            >>> net = tg.nn.Sequential(tg.nn.Linear(2, 3), tg.nn.ReLU(), tg.nn.Linear(3, 1))
            >>> [(name, p.shape) for name, p in net.named_parameters()]
            [('0.bias', (3,)), ('0.weight', (2, 3)), ('2.bias', (1,)), ('2.weight', (3, 1))]
        """
        for name, v in self.parameters.items():
            if recurse or "." not in name:
                yield (f"{prefix}.{name}" if prefix else name), v

    @property
    def states(self) -> dict:
        """Flat dict of all states with dotted names (``"bn.running_mean"``), in pytree leaf
        order."""
        return self._flat("_states")

    def _tree(self, group: str) -> dict:
        d = self.__dict__
        out = dict(d[group])
        cap = _implicit.capture
        if cap is not None and not d["_functional"]:  # a jit recording reads the state
            for name, v in out.items():
                out[name] = cap.read(self, (group, name), v)
        for name, m in d["_modules"].items():
            out[name] = m._tree(group)
        return out

    params = _group_property(
        "_parameters",
        "params",
        "The parameters as a nested-dict pytree (submodules are nested dicts).",
    )

    def _set_params(self, tree) -> None:
        """Replace the parameter pytree wholesale (the hook :mod:`tapegrad.optim` optimizers
        built from a Module call after each step); same checks as the ``params`` setter."""
        self.params = tree

    state = _group_property("_states", "state", "The states as a nested-dict pytree.")

    def _assign(self, tree, group: str, what: str) -> None:
        new = _check_tree(self, tree, group, what)
        _write_tree(self, new, group)

    @property
    def training(self) -> bool:
        """Whether the module is in training mode."""
        cap = _implicit.capture
        if cap is not None and not self.__dict__["_functional"]:
            cap.touch(self)
        return self._is_training

    # -- counting and inspection ---------------------------------------------------------
    def num_parameters(self) -> int:
        """Total number of parameter elements in the module and its submodules."""
        return int(sum(t.size for t in self.parameters()))

    def train(self, mode: bool = True):
        """Set training mode (``mode=True``) on the module and all submodules; returns self."""
        for _, m in self.named_modules():
            m.__dict__["_is_training"] = bool(mode)
        return self

    def eval(self):
        """Set evaluation mode on the module and all submodules; returns self."""
        return self.train(False)

    def apply(self, fn):
        """Call ``fn(module)`` on every submodule (children first), then on self; returns self."""
        for m in self._modules.values():
            m.apply(fn)
        fn(self)
        return self

    def zero_grad(self) -> None:
        """Forget the stored gradients (``grads = None``) here and in every submodule."""
        for _, m in self.named_modules():
            m.__dict__["grads"] = None

    def state_dict(self) -> dict:
        """``{"parameters": {name: array}, "states": {name: array}}`` with dotted names.

        Arrays are read-only NumPy (host) copies of the current values.
        """
        return {
            "parameters": {k: v.numpy() for k, v in self.parameters.items()},
            "states": {k: v.numpy() for k, v in self.states.items()},
        }

    def load_state_dict(self, state_dict, strict: bool = True) -> None:
        """Load parameters and states from a :meth:`state_dict`-shaped dict.

        Values are converted to the existing Tensors' dtype and device; each entry is
        replaced by a new Tensor.

        Args:
            state_dict: ``{"parameters": {...}, "states": {...}}`` (either group may be absent
                when ``strict=False``).
            strict: Require exactly the module's keys.

        Raises:
            TypeError: if ``state_dict`` does not have that form.
            ValueError: listing every missing key and unexpected key (when ``strict``) and
                every shape mismatch (always), before anything is loaded.
        """
        if not isinstance(state_dict, dict) or not set(state_dict) <= {"parameters", "states"}:
            raise TypeError(
                "load_state_dict: expected a dict {'parameters': {...}, 'states': {...}}, got "
                + (
                    f"keys {sorted(state_dict)}"
                    if isinstance(state_dict, dict)
                    else type(state_dict).__name__
                )
            )
        problems = []
        plan = []
        for group, current in (("parameters", self.parameters), ("states", self.states)):
            given = state_dict.get(group)
            if given is None:
                if strict:
                    problems.append(f"missing group {group!r}")
                continue
            if not isinstance(given, dict):
                raise TypeError(f"load_state_dict: {group!r} must be a dict, got {type(given)}")
            missing = sorted(set(current) - set(given))
            unexpected = sorted(set(given) - set(current))
            if strict and missing:
                problems.append(f"missing {group}: {', '.join(missing)}")
            if strict and unexpected:
                problems.append(f"unexpected {group}: {', '.join(unexpected)}")
            for name in sorted(set(current) & set(given)):
                value = given[name]
                shape = tuple(np.shape(value.numpy() if isinstance(value, Tensor) else value))
                if shape != tuple(current[name].shape):
                    problems.append(
                        f"shape mismatch for {group[:-1] if group == 'states' else 'parameter'} "
                        f"{name}: checkpoint {shape}, module {tuple(current[name].shape)}"
                    )
                else:
                    plan.append((group, name, value, current[name]))
        if problems:
            raise ValueError(
                f"load_state_dict: cannot load into {type(self).__name__}:\n  - "
                + "\n  - ".join(problems)
            )
        for group, name, value, old in plan:
            arr = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
            new = Tensor(arr.astype(old.dtype), device=None if old.device == "cpu" else old.device)
            owner, leaf = self._resolve(name)
            owner.__dict__["_parameters" if group == "parameters" else "_states"][leaf] = new

    def _resolve(self, dotted: str):
        parts = dotted.split(".")
        m = self
        for p in parts[:-1]:
            m = m._modules[p]
        return m, parts[-1]

    def extra_repr(self) -> str:
        """The layer's configuration inside its printed form (PyTorch's hook of this name):
        ``"in_features=3, out_features=16, bias=True"`` for ``Linear(3, 16)``.

        Layers override it to show their constructor arguments; the default is empty (a
        layer with no configuration prints as ``Name()``). Submodules are printed by
        ``repr`` itself, one ``(name): ...`` line each, so do not list them here.
        """
        return ""

    def __repr__(self) -> str:
        """The module as PyTorch prints one: ``Name(extra_repr)`` on one line, or, with
        submodules, ``Name(`` then the configuration and one indented ``(name): repr`` line
        per submodule, then ``)``."""
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        children = [f"({name}): {m!r}".replace("\n", "\n  ") for name, m in self._modules.items()]
        if len(lines) <= 1 and not children:
            return f"{type(self).__name__}({extra})"
        body = "".join(f"\n  {line}" for line in lines + children)
        return f"{type(self).__name__}({body}\n)"


strict_init(Module)


# -- Modules are pytrees ---------------------------------------------------------------------
#: What a Module keeps besides its configuration: its leaves (the three groups and its key)
#: and the stateful shell's bookkeeping, which a rebuilt Module starts afresh.
_NOT_STATIC = frozenset({"_parameters", "_states", "_modules", "_rng", "_version",
                         "_functional", "grads"})


class _ModuleDef:
    """A Module's pytree structure (its ``aux_data``): the class, the names of its parameters,
    states and submodules in registration order, and its static attributes (every other
    attribute: sizes, flags, activation functions, training mode), compared by value."""

    __slots__ = ("cls", "layout", "names", "static", "_key")

    def __init__(self, cls: type, layout: tuple, names: tuple, static: tuple):
        self.cls, self.layout, self.names, self.static = cls, layout, names, static
        self._key = None

    def key(self):
        if self._key is None:
            self._key = (self.cls, self.layout, static_key(self.static))
        return self._key

    def __eq__(self, other):
        return type(other) is _ModuleDef and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return self.cls.__name__


def _flatten_module(m: Module):
    """A Module's children: its parameters, states and submodules in sorted-name order (as
    ``params`` flattens), then its key; everything else is static."""
    d = m.__dict__
    params, states, modules = d["_parameters"], d["_states"], d["_modules"]
    names = tuple(sorted([*params, *states, *modules]))
    cap = None if d["_functional"] else _implicit.capture  # a jit recording reads a model
    if cap is not None:
        cap.touch(m)
    children = []
    for n in names:
        if n in modules:
            children.append(modules[n])
            continue
        group = "_parameters" if n in params else "_states"
        v = d[group][n]
        children.append(cap.read(m, (group, n), v) if cap is not None and v is not None else v)
    rng = d["_rng"]
    children.append(cap.read(m, ("_rng",), rng) if cap is not None and rng is not None else rng)
    static = tuple(sorted(((k, v) for k, v in d.items() if k not in _NOT_STATIC),
                          key=lambda kv: kv[0]))
    aux = _ModuleDef(type(m), (tuple(params), tuple(states), tuple(modules)), names, static)
    return children, aux, (*names, "_rng")


def _is_value(v) -> bool:
    """A leaf that makes a rebuilt Module a value inside a transform: a traced Tensor, or
    anything but a Tensor or None (a marker, an axis spec)."""
    return v is not None and (not isinstance(v, Tensor) or bool(v._level))


def _unflatten_module(aux: _ModuleDef, children) -> Module:
    """A new Module of ``aux``'s class holding ``children``; ``__init__`` is not called and
    nothing is validated (children may be tracers, gradients or ``None``)."""
    obj = object.__new__(aux.cls)
    d = obj.__dict__
    values = dict(zip(aux.names, children))
    p_names, s_names, m_names = aux.layout
    d["_parameters"] = {n: values[n] for n in p_names}
    d["_states"] = {n: values[n] for n in s_names}
    d["_modules"] = {n: values[n] for n in m_names}
    d.update(aux.static)
    d["_rng"] = children[-1]
    d["_version"] = next(_VERSIONS)
    d["grads"] = None
    # built from tracers (a model passed to grad/jit/vmap): a value of that transform, not a
    # stateful object; jit does not capture it, its state updates are kept as they are, and
    # its randomness needs a key_stream. So is every part of such a model, even one without
    # traced leaves of its own (a Dropout), and a model holding such a part.
    subs = d["_modules"]
    value = any(_is_value(v) for v in (*d["_parameters"].values(), *d["_states"].values(),
                                       d["_rng"])) or any(
        isinstance(m, Module) and m.__dict__["_functional"] for m in subs.values())
    d["_functional"] = value
    if value:
        d["_modules"] = {k: _as_value(m) for k, m in subs.items()}
    return obj


def _as_value(m):
    """``m`` if it is a value already, else a copy of it (and of its parts) that is one: a
    Module someone holds is never changed."""
    if not isinstance(m, Module) or m.__dict__["_functional"]:
        return m
    clone = copy.copy(m)
    d = clone.__dict__
    d["_parameters"], d["_states"] = dict(d["_parameters"]), dict(d["_states"])
    d["_modules"] = {k: _as_value(v) for k, v in d["_modules"].items()}
    d["_functional"] = True
    return clone


def _register_pytree(cls: type) -> None:
    register(cls, _flatten_module, _unflatten_module, attribute_names=True,
             static_non_float=True)


_register_pytree(Module)


@contextmanager
def key_stream(key):
    """Within the block, Modules that draw random numbers (dropout) split their keys off
    ``key``, in call order, instead of using their own.

    This is how randomness enters a model that a transform takes as an argument (there the
    model is a value, whose own key cannot advance between calls), and it makes any stateful
    call reproducible too. :func:`functional_call` with ``key=`` does the same.

    Args:
        key: A key from :mod:`tapegrad.random` (a new one per step).

    Raises:
        TypeError: if ``key`` is None.

    Example:
        >>> import tapegrad as tg
        >>> net = tg.nn.Sequential(tg.nn.Linear(4, 4, key=tg.random.key(0)), tg.nn.Dropout(0.5))
        >>> x = tg.random.normal(tg.random.key(1), (2, 4))
        >>> def loss(model, x, key):
        ...     with tg.nn.key_stream(key):
        ...         return (model(x) ** 2).sum()
        >>> grads = tg.grad(loss)(net, x, tg.random.key(2))
        >>> type(grads).__name__, grads[0].weight.shape
        ('Sequential', (4, 4))
    """
    if key is None:
        raise TypeError("key_stream: key must be a key from tapegrad.random, got None")
    with _key_stream(key):
        yield


def _check_tree(module: Module, tree, group: str, what: str, path: str = "") -> dict:
    """Validate ``tree`` against ``module``'s ``group`` structure; returns it as dicts."""
    here = module.__dict__
    if not isinstance(tree, dict):
        raise TypeError(
            f"{what}: expected a dict at {path or 'the root'}, got {type(tree).__name__}"
        )
    expected = set(here[group]) | set(here["_modules"])
    missing = sorted(expected - set(tree))
    unexpected = sorted(set(tree) - expected)
    if missing or unexpected:
        raise ValueError(
            f"{what}: structure does not match {type(module).__name__} at {path or 'the root'}"
            f": missing {missing}, unexpected {unexpected}"
        )
    out = {}
    for name, old in here[group].items():
        new = _to_tensor(tree[name], f"{path}{name}", what)
        if (old is None) != (new is None) or (
            old is not None and tuple(new.shape) != tuple(old.shape)  # pyright: ignore[reportOptionalMemberAccess]
        ):
            raise ValueError(
                f"{what}: {path}{name} has shape {None if new is None else new.shape}, "
                f"expected {None if old is None else old.shape}"
            )
        out[name] = new
    for name, m in here["_modules"].items():
        out[name] = _check_tree(m, tree[name], group, what, f"{path}{name}.")
    return out


def _write_tree(module: Module, tree: dict, group: str) -> None:
    d = module.__dict__
    cap = _implicit.capture
    for name in list(d[group]):
        if cap is not None and not d["_functional"]:  # a jit recording replaces the state
            cap.write(module, (group, name), d[group][name], tree[name])
        d[group][name] = tree[name]
    for name, m in d["_modules"].items():
        _write_tree(m, tree[name], group)


_VERSIONS = itertools.count(1)


def _changed(module: Module) -> None:
    """Note a change of ``module``'s mode, structure or attributes: a jitted program recorded
    before it is not reused (each change gets a new version number)."""
    module.__dict__["_version"] = next(_VERSIONS)


def _bind(module: Module, params: dict, state: dict) -> Module:
    """A shallow copy of ``module``'s tree with the given params and state, in functional mode."""
    clone = copy.copy(module)
    d = clone.__dict__
    d["_parameters"] = {k: params[k] for k in module._parameters}
    d["_states"] = {k: state[k] for k in module._states}
    d["_modules"] = {k: _bind(m, params[k], state[k]) for k, m in module._modules.items()}
    d["_functional"] = True
    return clone


def functional_call(module: Module, params, *args, state=None, key=None, **kwargs) -> Any:
    """Run ``module`` as a pure function of ``params`` (and ``state`` and ``key``).

    The module itself is not changed: a shallow copy holding ``params``/``state`` runs its
    ``forward``. Randomness (dropout) draws keys split off ``key`` in call order. (A Module is
    also a pytree, so a transform can take the model itself: ``tg.grad(loss)(model, x)``; see
    the Models-are-pytrees section of the nn guide.)

    Args:
        module: The Module (its training/eval mode is used).
        params: A pytree with ``module.params``'s structure and shapes (for example traced
            values inside :func:`tapegrad.grad`).
        *args, **kwargs: Passed to ``forward``.
        state: A pytree like ``module.state`` (default: the module's current state).
        key: A key for the module's randomness; required if it draws any.

    Returns:
        Always the pair ``(output, new_state)``: ``forward``'s output, and the state pytree
        after the call (``module.state``'s structure: BatchNorm's running statistics updated
        in training mode; a structure with no leaves, such as ``{}``, for a module without
        states).

    Raises:
        TypeError, ValueError: if ``params`` or ``state`` does not match the module's
            structure and shapes (naming the path), or randomness is needed without a key.

    Example:
        >>> import tapegrad as tg
        >>> model = tg.nn.Linear(3, 1, key=tg.random.key(0))
        >>> x = tg.Tensor([[1.0, 2.0, 3.0]])
        >>> loss = lambda p: tg.nn.functional_call(model, p, x)[0].sum()
        >>> grads = tg.grad(loss)(model.params)
        >>> grads["weight"].shape
        (3, 1)
        >>> tg.nn.functional_call(model, model.params, x)[1]
        {}
    """
    params = _check_tree(module, params, "_parameters", "functional_call: params")
    if state is None:
        state = module.state
    else:
        state = _check_tree(module, state, "_states", "functional_call: state")
    bound = _bind(module, params, state)
    with _key_stream(key):
        out = bound(*args, **kwargs)
    return out, bound.state


class _ModuleSequence(Module):
    """The length and iteration (in registration order) of ModuleList and Sequential."""

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules.values()))


class ModuleList(_ModuleSequence):
    """A list of submodules, registered under the names ``"0"``, ``"1"``, ...

    Example:
        >>> import tapegrad as tg
        >>> layers = tg.nn.ModuleList([tg.nn.Linear(2, 2), tg.nn.Linear(2, 1)])
        >>> len(layers), sorted(layers.parameters)[:2]
        (2, ['0.bias', '0.weight'])
    """

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        """Append ``module``; returns self.

        Raises:
            TypeError: if ``module`` is not a Module.
        """
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList.append: expected a Module, got {type(module).__name__}")
        _changed(self)
        self._modules[str(len(self._modules))] = module
        return self

    def extend(self, modules) -> ModuleList:
        """Append each of ``modules``; returns self."""
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        items = list(self._modules.values())
        if isinstance(i, slice):
            return ModuleList(items[i])
        return items[i]

    def forward(self, x):
        """Apply the modules in order."""
        for m in self:
            x = m(x)
        return x


class Sequential(_ModuleSequence):
    """A chain of modules applied in order (PyTorch's ``nn.Sequential``).

    ``Sequential(m0, m1, ...)`` registers the modules under the names ``"0"``, ``"1"``, ...;
    ``Sequential({"name": m, ...})`` (a dict or ``OrderedDict``) under the given names, in
    the given order. ``forward(x)`` returns ``m_last(...m1(m0(x)))``. Indexing, slicing,
    ``len`` and iteration follow the application order.

    Raises:
        TypeError: if an entry is not a Module, or a name is not a non-empty string.
        ValueError: if a name contains a dot (names join into dotted parameter paths).

    Example:
        >>> import tapegrad as tg
        >>> net = tg.nn.Sequential(tg.nn.Linear(4, 8, key=tg.random.key(0)), tg.nn.ReLU(),
        ...                        tg.nn.Linear(8, 2, key=tg.random.key(1)))
        >>> net(tg.random.normal(tg.random.key(2), (5, 4))).shape
        (5, 2)
        >>> sorted(net.parameters)
        ['0.bias', '0.weight', '2.bias', '2.weight']
    """

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            items = list(modules[0].items())
        else:
            items = [(str(i), m) for i, m in enumerate(modules)]
        for name, m in items:
            self._add(name, m)

    def _add(self, name, module) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"Sequential: module names must be non-empty strings, got {name!r}")
        if "." in name:
            raise ValueError(f"Sequential: module name {name!r} must not contain '.'")
        if not isinstance(module, Module):
            raise TypeError(
                f"Sequential: entry {name!r} must be a Module, got {type(module).__name__}"
            )
        _changed(self)
        self._modules[name] = module

    def append(self, module: Module) -> Sequential:
        """Append ``module`` under the next free integer name; returns self.

        Raises:
            TypeError: if ``module`` is not a Module.
        """
        i = len(self._modules)
        while str(i) in self._modules:
            i += 1
        self._add(str(i), module)
        return self

    def __getitem__(self, i):
        items = list(self._modules.items())
        if isinstance(i, slice):
            return Sequential(dict(items[i]))
        return items[i][1]

    def forward(self, x):
        """Apply the modules in order to ``x``."""
        for m in self._modules.values():
            x = m(x)
        return x


# -- helpers of the layers' constructors ---------------------------------------------------
def _positive(who, **sizes):
    for name, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{who}: {name} must be a positive int, got {v!r}")
        if v < 1:
            raise ValueError(f"{who}: {name} must be a positive int, got {v!r}")


def _param_dtype(who: str, dtype) -> Any:
    """The parameters' dtype: ``None`` means float32 (PyTorch's default dtype)."""
    if dtype is None:
        return np.dtype(np.float32)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"{who}: dtype must be a NumPy floating dtype (np.float32, 'float64', ...), got "
            f"{dtype!r}"
        ) from None
    if dt.kind not in "fV":
        raise TypeError(
            f"{who}: dtype must be a floating dtype for trainable parameters, got {dt}; use "
            "float16, float32 or float64"
        )
    return dt


def _place(module: Module, device) -> None:
    """Move ``module``'s own parameters and states to ``device`` (``None``: leave on the CPU).

    Raises:
        ValueError: for a device string that is not ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        RuntimeError: for a GPU device without CuPy or a GPU.
    """
    if device is None:
        return
    try:
        dev = parse_device(device)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{type(module).__name__}: {e}") from None
    if dev == "cpu":
        return
    d = module.__dict__
    for group in ("_parameters", "_states"):
        for name, t in d[group].items():
            if t is not None:
                d[group][name] = t.to_device(dev)

strict_all(globals(), ["ParameterView", "ParameterIterator", "functional_call"])
