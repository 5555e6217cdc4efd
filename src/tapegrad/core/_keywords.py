"""Strict keyword arguments: an unknown keyword is a ``TypeError`` that names it and the
closest valid name.

Python already refuses a keyword a function does not declare, but its message names neither
the class nor what was probably meant. :func:`strict_keywords` wraps a function (or a class's
``__init__``) so that the refusal reads ``Linear: unexpected keyword argument 'bais'; did you
mean 'bias'? ...``. It is applied to every constructor of :mod:`tapegrad.nn` and
:mod:`tapegrad.optim` (and to every Module and Optimizer subclass, through
``__init_subclass__``), so a misspelt or foreign option is never silently dropped.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

__all__ = ["unexpected_keyword", "strict_keywords", "strict_init"]

_T = TypeVar("_T", bound=type)

_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def unexpected_keyword(
    who: str, name: str, valid: Iterable[str], hints: Mapping[str, str] | None = None
) -> TypeError:
    """The ``TypeError`` for keyword ``name``, which ``who`` does not take.

    Args:
        who: The function or class, as users call it (``"Linear"``, ``"optim.sgd"``).
        name: The keyword given.
        valid: The keywords ``who`` takes.
        hints: Optional ``{keyword: explanation}`` for names a user may bring from another
            library (PyTorch's ``in_features``), added to the message.

    Returns:
        The error (to ``raise``), naming ``name``, the closest valid keyword and the list.
    """
    valid = [v for v in valid if not v.startswith("_")]
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    if not close:  # a different case or separators ("Bias", "lrscheduler_kwargs")
        folded = {v.lower().replace("_", ""): v for v in valid}
        hit = folded.get(name.lower().replace("_", ""))
        close = [hit] if hit else []
    msg = f"{who}: unexpected keyword argument {name!r}"
    hint = (hints or {}).get(name)
    if hint:
        msg += f" ({hint})"
    msg += f"; did you mean {close[0]!r}?" if close else "."
    msg += (f" Valid keywords: {', '.join(valid)}." if valid
            else f" {who} takes no keyword arguments.")
    return TypeError(msg)


def _keyword_names(fn: Callable) -> tuple[list[str], bool]:
    """``(the parameters fn takes by keyword, whether it takes **kwargs)``."""
    params = list(inspect.signature(fn).parameters.values())
    names = [p.name for p in params if p.kind in _KEYWORD_KINDS]
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def strict_keywords(fn: Callable[..., Any] | None = None, *, name: str | None = None,
                    hints: Mapping[str, str] | None = None) -> Any:
    """Decorator: calling ``fn`` with a keyword it does not declare raises
    :func:`unexpected_keyword`'s ``TypeError`` (a function with ``**kwargs`` is left as is).

    Args:
        fn: The function.
        name: How the error names it (default: ``fn.__name__``).
        hints: As in :func:`unexpected_keyword`.
    """
    if fn is None:
        return functools.partial(strict_keywords, name=name, hints=hints)
    names, open_ended = _keyword_names(fn)
    if open_ended:
        return fn
    valid = frozenset(names)
    who = name or fn.__name__

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        for k in kwargs:
            if k not in valid:
                raise unexpected_keyword(who, k, names, hints)
        return fn(*args, **kwargs)

    setattr(checked, "__tg_strict__", True)  # noqa: B010
    return checked


def strict_init(cls: _T) -> _T:
    """Class decorator (and ``__init_subclass__`` helper): ``cls.__init__`` refuses unknown
    keywords with :func:`unexpected_keyword`'s ``TypeError`` naming the class.

    Hints come from the class attribute ``_keyword_hints`` (a ``{keyword: explanation}``
    dict), if any. An ``__init__`` with ``**kwargs`` is left as is.
    """
    init = cls.__dict__.get("__init__")
    if init is None or getattr(init, "__tg_strict__", False):
        return cls
    names, open_ended = _keyword_names(init)
    if open_ended:
        return cls
    names = names[1:]  # self
    valid = frozenset(names)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        for k in kwargs:
            if k not in valid:
                hints = getattr(type(self), "_keyword_hints", None)
                raise unexpected_keyword(type(self).__name__, k, names, hints)
        init(self, *args, **kwargs)

    setattr(__init__, "__tg_strict__", True)  # noqa: B010
    cls.__init__ = __init__  # pyright: ignore[reportAttributeAccessIssue]
    return cls


def strict_all(namespace: dict, names: Iterable[str]) -> None:
    """Make the named classes and functions of a module's ``namespace`` (its ``globals()``)
    refuse unknown keywords: :func:`strict_init` on each class, :func:`strict_keywords` on
    each function (replaced in ``namespace``). Called once at the end of a module."""
    for n in names:
        obj = namespace[n]
        if isinstance(obj, type):
            strict_init(obj)
        elif inspect.isfunction(obj) and not getattr(obj, "__tg_strict__", False):
            namespace[n] = strict_keywords(obj)
