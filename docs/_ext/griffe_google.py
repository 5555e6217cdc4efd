"""Griffe extensions for the API reference (loaded by mkdocs.yml; not part of the package).

``GoogleConventions`` adapts four habits of the docstrings to griffe's Google-style parser,
rewriting each docstring before it is parsed:

- a singular ``Example:`` heading becomes ``Examples:`` (otherwise it is a plain block whose
  ``>>>`` lines Markdown renders as nested block quotes);
- Sphinx roles (``:func:`grad` ``, ``:class:`~tapegrad.Tensor` ``) become inline code;
- ``a, b: text`` in an ``Args:`` section becomes one entry per name with the same text;
- a ``Raises:`` section written as prose (``See value_and_grad.``) is retitled ``Errors:``;
- a ``Parameters:`` section after an ``Args:`` one (a layer's weights) is retitled
  ``Trainable parameters:``, a plain titled block, instead of being read as more arguments.

Nothing else changes, so a misspelt argument name still warns.

``AttrsInit`` gives ``@attrs.frozen``/``@attrs.define`` classes the ``__init__`` attrs
generates, so they show a constructor signature and their ``Args`` can be checked.
"""

from __future__ import annotations

import importlib
import inspect
import re

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
_EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.M)
_ARGS_HEADER = re.compile(r"^(\s*)(Args|Arguments|Parameters|Params):\s*$")
_GROUPED = re.compile(r"^(\s*)(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)+)\s*:(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def split_grouped_args(text: str) -> str:
    """Rewrite ``a, b: text`` entries of ``Args:`` sections into one entry per name."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        header = _ARGS_HEADER.match(line)
        i += 1
        if not header:
            continue
        base = len(header.group(1))
        while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > base):
            item = lines[i]
            grouped = _GROUPED.match(item)
            i += 1
            if not grouped:
                out.append(item)
                continue
            indent, names, rest = grouped.groups()
            body = []
            while i < len(lines) and lines[i].strip() and _indent(lines[i]) > len(indent):
                body.append(lines[i])
                i += 1
            for name in (n.strip() for n in names.split(",")):
                out.append(f"{indent}{name}:{rest}")
                out.extend(body)
    return "\n".join(out)


def rename_second_args_section(text: str) -> str:
    """A ``Parameters:`` section after an ``Args:`` one lists a layer's weights: retitle it."""
    lines = text.split("\n")
    seen_args = False
    for i, line in enumerate(lines):
        header = _ARGS_HEADER.match(line)
        if header and seen_args and header.group(2) == "Parameters":
            lines[i] = f"{header.group(1)}Trainable parameters:"
        elif header:
            seen_args = True
    return "\n".join(lines)


_RAISES_HEADER = re.compile(r"^(\s*)Raises:\s*$")
_RAISES_ITEM = re.compile(r"^\s*[\w.]+\s*:")


def retitle_prose_raises(text: str) -> str:
    """A ``Raises:`` section written as prose (``See value_and_grad.``): retitle it ``Errors:``."""
    lines = text.split("\n")
    for i, line in enumerate(lines[:-1]):
        header = _RAISES_HEADER.match(line)
        if header and lines[i + 1].strip() and not _RAISES_ITEM.match(lines[i + 1]):
            lines[i] = f"{header.group(1)}Errors:"
    return "\n".join(lines)


def _role(match: re.Match) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def normalize(text: str) -> str:
    """The rewrites of the module docstring (see there)."""
    text = retitle_prose_raises(_ROLE.sub(_role, text))
    text = rename_second_args_section(_EXAMPLE.sub(r"\1Examples:", text))
    return split_grouped_args(text)


def runtime_docstring(obj: griffe.Object) -> str | None:
    """The docstring a function or class has once its module is imported, where that differs
    from its source text: some docstrings share sections written once in their module and
    filled in at import (a ``__SHELL__``-style line replaced), which griffe, reading the
    source, would otherwise show unfilled. None where there is nothing to take."""
    if not (obj.is_function or obj.is_class) or obj.docstring is None:
        return None
    try:
        target = importlib.import_module(obj.module.path)
    except Exception:  # a module that cannot be imported here: its source text stands
        return None
    for part in obj.path[len(obj.module.path) + 1:].split("."):
        target = getattr(target, part, None)
        if target is None:
            return None
    doc = getattr(target, "__doc__", None)
    if not isinstance(doc, str):
        return None
    doc = inspect.cleandoc(doc)
    return doc if doc != obj.docstring.value else None


class GoogleConventions(griffe.Extension):
    """Apply :func:`normalize` to every docstring griffe loads (the imported object's own
    docstring where shared sections complete it at import: :func:`runtime_docstring`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = normalize(runtime_docstring(obj) or obj.docstring.value)


_ATTRS_DECORATORS = {
    "attrs.frozen",
    "attrs.define",
    "attrs.mutable",
    "attr.s",
    "attr.attrs",
    "attr.frozen",
    "attr.define",
    "attr.mutable",
}


def _attrs_decorator(cls: griffe.Class):
    for decorator in cls.decorators:
        value = decorator.value
        path = getattr(value, "canonical_path", str(value))
        if path in _ATTRS_DECORATORS:
            return value
    return None


def _call_args(expr) -> dict:
    if isinstance(expr, griffe.ExprCall):
        return {a.name: a.value for a in expr.arguments if hasattr(a, "name")}
    return {}


def _attrs_parameters(cls: griffe.Class) -> list:
    kw_only = str(_call_args(_attrs_decorator(cls)).get("kw_only")) == "True"
    params = []
    for member in cls.members.values():
        if member.is_alias or not member.is_attribute or member.annotation is None:
            continue
        if "class-attribute" in member.labels and "instance-attribute" not in member.labels:
            continue
        value = member.value
        field = {}
        if isinstance(value, griffe.ExprCall) and str(value.function).split(".")[-1] in (
            "field",
            "ib",
            "attrib",
        ):
            field = _call_args(value)
            if str(field.get("init")) == "False":
                continue
            if "factory" in field:
                value = griffe.ExprCall(function=field["factory"], arguments=[])
            else:
                value = field.get("default")
        kind = (
            griffe.ParameterKind.keyword_only
            if kw_only or str(field.get("kw_only")) == "True"
            else griffe.ParameterKind.positional_or_keyword
        )
        params.append(
            griffe.Parameter(
                member.name.lstrip("_"),
                annotation=member.annotation,
                kind=kind,
                default=value,
                docstring=member.docstring,
            )
        )
    return params


def _set_attrs_init(cls: griffe.Class) -> None:
    if "__init__" in cls.members or _attrs_decorator(cls) is None:
        return
    params = []
    try:
        mro = list(reversed(cls.mro()))
    except ValueError:
        mro = []
    for parent in [*mro, cls]:
        if _attrs_decorator(parent) is not None:
            params.extend(_attrs_parameters(parent))
    by_name = {p.name: p for p in params}  # a subclass's field replaces its parent's
    ordered = sorted(by_name.values(), key=lambda p: p.kind is griffe.ParameterKind.keyword_only)
    cls.set_member(
        "__init__",
        griffe.Function(
            "__init__",
            lineno=0,
            endlineno=0,
            parent=cls,
            parameters=griffe.Parameters(griffe.Parameter("self"), *ordered),
            returns="None",
        ),
    )


def _walk(obj, seen: set) -> None:
    if obj.canonical_path in seen:
        return
    seen.add(obj.canonical_path)
    if obj.is_class:
        _set_attrs_init(obj)
    for member in obj.members.values():
        if not member.is_alias and (member.is_module or member.is_class):
            _walk(member, seen)


class AttrsInit(griffe.Extension):
    """Give ``@attrs.frozen``/``@attrs.define`` classes the ``__init__`` attrs generates.

    Griffe reads source statically and knows dataclasses but not attrs, so without this an
    attrs class shows no constructor signature and its documented ``Args`` look unknown.
    Fields are the annotated instance attributes in definition order (parents first), with a
    leading underscore dropped as attrs does, ``field(init=False)`` left out, and
    ``default=``/``factory=`` as the default.
    """

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        _walk(pkg, set())
