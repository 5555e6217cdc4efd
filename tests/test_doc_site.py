"""The griffe extensions behind the API reference (docs/_ext/griffe_google.py).

They need griffe, which comes with the docs extra (``pip install -e ".[docs]"``); CI installs
it and also builds the whole site with ``mkdocs build --strict``.
"""

import importlib.util
import pathlib
import textwrap

import pytest

griffe = pytest.importorskip("griffe", reason="griffe comes with the docs extra")

EXT = pathlib.Path(__file__).resolve().parents[1] / "docs" / "_ext" / "griffe_google.py"
spec = importlib.util.spec_from_file_location("griffe_google", EXT)
ext = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ext)


def dedent(text):
    return textwrap.dedent(text).strip("\n")


def test_grouped_arguments_become_one_entry_each():
    doc = dedent(
        """
        Summary.

        Args:
            x, y: Operands,
                broadcast together.
            axis: Axis.

        Returns:
            a, b: not an argument list, left alone.
        """
    )
    assert ext.normalize(doc) == dedent(
        """
        Summary.

        Args:
            x: Operands,
                broadcast together.
            y: Operands,
                broadcast together.
            axis: Axis.

        Returns:
            a, b: not an argument list, left alone.
        """
    )


def test_example_heading_roles_prose_raises_and_weights_section():
    doc = dedent(
        """
        Uses :func:`grad` and :class:`~tapegrad.nn.Linear`.

        Args:
            n: Size.

        Parameters:
            weight ``(n, n)``.

        Raises:
            See :func:`value_and_grad`.

        Example:
            >>> 1 + 1
            2
        """
    )
    out = ext.normalize(doc)
    assert "Uses `grad` and `Linear`." in out
    assert "Trainable parameters:\n    weight ``(n, n)``." in out
    assert "Errors:\n    See `value_and_grad`." in out
    assert "Examples:\n    >>> 1 + 1" in out and "Example:" not in out


def test_a_real_raises_section_and_a_lone_parameters_section_stay():
    doc = dedent(
        """
        Parameters:
            n: Size.

        Raises:
            ValueError: if n < 0.
        """
    )
    assert ext.normalize(doc) == doc


def test_attrs_classes_get_the_generated_init(tmp_path):
    pkg = tmp_path / "attrs_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        dedent(
            """
            import attrs

            @attrs.frozen
            class Schedule:
                '''A schedule.

                Args:
                    peak: Peak value.
                    steps: Steps.
                '''

                peak: float
                steps: int = 10
                _cache: dict = attrs.field(factory=dict)
                hidden: int = attrs.field(default=0, init=False)
            """
        )
    )
    loaded = griffe.load(
        "attrs_pkg",
        search_paths=[str(tmp_path)],
        extensions=griffe.load_extensions(ext.AttrsInit),
    )
    init = loaded["Schedule"].members["__init__"]
    params = [(p.name, None if p.default is None else str(p.default)) for p in init.parameters]
    assert params == [("self", None), ("peak", None), ("steps", "10"), ("cache", "dict()")]


def test_docstrings_completed_at_import_show_whole(tmp_path, monkeypatch):
    """A docstring whose shared section its module fills in at import (a placeholder line in
    the source) is shown as the imported object has it; source docstrings stay as written."""
    pkg = tmp_path / "shared_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        dedent(
            """
            def f(x):
                '''Twice ``x``.

                __ARGS__
                '''
                return 2 * x


            def g(x):
                '''Thrice ``x``.'''
                return 3 * x


            f.__doc__ = f.__doc__.replace("__ARGS__", "Args:\\n        x: A number.")
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = griffe.load(
        "shared_pkg",
        search_paths=[str(tmp_path)],
        extensions=griffe.load_extensions(ext.GoogleConventions),
    )
    assert loaded["f"].docstring.value == "Twice ``x``.\n\nArgs:\n    x: A number."
    assert loaded["g"].docstring.value == "Thrice ``x``."
    parsed = loaded["f"].docstring.parse("google")
    assert [p.kind.value for p in parsed] == ["text", "parameters"]
