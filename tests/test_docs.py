"""Every ```python block in README.md and docs/*.md runs (each file top to bottom, one namespace),
and every docstring example (>>>) in the package passes."""

import doctest
import importlib
import pathlib
import pkgutil
import re

import pytest

import tapegrad

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_markdown_examples_run(path, tmp_path, monkeypatch):
    blocks = BLOCK.findall(path.read_text())
    monkeypatch.chdir(tmp_path)
    ns: dict = {"__name__": f"doc_{path.stem}"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{path.name}[block {i}]", "exec"), ns)
        except Exception as e:  # pragma: no cover - shown on failure
            raise AssertionError(f"{path.name}, python block {i} failed: {e!r}\n{code}") from e


def _modules():
    names = ["tapegrad"]
    for m in pkgutil.walk_packages(tapegrad.__path__, "tapegrad."):
        if m.name.endswith("strategies"):
            continue
        names.append(m.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(mod, name, module=mod):
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed in {name}"
