"""Docstring sections that several functions share word for word, written once.

:func:`sections` completes a function's own docstring (its summary, its example and
whatever else it alone says) with shared Google-style sections, so ``help()`` and the API
reference show the whole text while the source holds it once.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

__all__: list[str] = []  # internal: nothing here joins the tapegrad.numpy namespace

F = TypeVar("F", bound=Callable)


def sections(text: str, before: str = "Example:", **fields: str) -> Callable[[F], F]:
    """Decorator: insert the shared docstring sections ``text`` into the function's own
    docstring, before its section ``before`` if it has one, else at its end.

    Args:
        text: The sections (``Args:``, ``Returns:``, ``Raises:`` ...); they take the
            indentation of the function's docstring, and leading and trailing blank lines are
            dropped.
        before: The heading of the function's own section that comes after ``text``.
        **fields: Values for ``{name}`` fields in ``text`` (``str.format``); without fields
            ``text`` is used as it is.

    Returns:
        The decorator, which returns the function itself with its ``__doc__`` completed.
    """
    block = textwrap.dedent(text.format(**fields) if fields else text).strip("\n")
    heading = re.compile(rf"\n\n[ \t]*{re.escape(before)}")

    def complete(f: F) -> F:
        doc = (f.__doc__ or "").rstrip()
        indents = [len(line) - len(line.lstrip()) for line in doc.splitlines()[1:]
                   if line.strip()]
        pad = " " * (min(indents) if indents else 4)  # the docstring's own indentation
        found = heading.search(doc)
        cut = found.start() if found else len(doc)
        f.__doc__ = f"{doc[:cut]}\n\n{textwrap.indent(block, pad)}{doc[cut:]}\n{pad}"
        return f

    return complete
