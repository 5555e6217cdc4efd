"""The documentation runs as written.

- Every ```python block of README.md and docs/**/*.md runs on its own, in a fresh interpreter
  with warnings as errors (``python -W error``), in an empty working directory: a block copied
  alone into a file works. The blocks run in parallel, a few subprocesses at a time.
- A block that is deliberately not runnable is marked by an HTML comment on the line before
  its fence, ``<!-- docs-test: skip (reason) -->``; every fence names its language (``python``,
  or ``text``, ``console``, ...), so no Python block escapes the test by accident.
- Every docstring example (``>>>``) in the package passes.
- Every page under docs/ is in the site's navigation (mkdocs.yml).
- The docs, the README and every docstring in the package (the API reference is generated from
  them) speak to users: no development-process wording (``the seeds'``, ``issue 12``,
  ``this round``, ``an earlier session``).
"""

from __future__ import annotations

import concurrent.futures
import doctest
import importlib
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import pytest

import tapegrad

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PYTHON = {"python", "py", "python3"}
NOT_RUN = {"text", "console", "bash", "sh", "shell", "toml", "yaml", "json", "ini", "c"}
SKIP = re.compile(r"^<!--\s*docs-test:\s*skip\b.*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
TIMEOUT_S = 180


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository root
    line: int  # 1-based line of the first line of code
    lang: str
    code: str
    skipped: bool

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def extract_blocks(text: str, path: str = "<doc>", errors: list | None = None) -> list[Block]:
    """The fenced code blocks of a Markdown text, in order.

    Problems (a fence without a language, an unknown language, an unclosed fence) are
    appended to ``errors`` and the block is kept as ``text``; without ``errors`` the first one
    raises ValueError.
    """

    def problem(msg):
        if errors is None:
            raise ValueError(msg)
        errors.append(msg)

    lines = text.split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        lang = m.group("info").strip().split(" ")[0].lower()
        opened = i
        if not lang:
            problem(
                f"{path}:{opened + 1}: a code fence without a language; write ```python for "
                "code the tests run, or ```text / ```console for anything else"
            )
            lang = "text"
        elif lang not in PYTHON | NOT_RUN:
            problem(f"{path}:{opened + 1}: unknown code block language {lang!r}")
            lang = "text"
        prev = next((lines[j] for j in range(opened - 1, -1, -1) if lines[j].strip()), "")
        body = []
        i += 1
        while i < len(lines):
            close = FENCE.match(lines[i])
            if close and close.group("fence").startswith(fence) and not close.group("info").strip():
                break
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        else:
            problem(f"{path}:{opened + 1}: code fence is never closed")
        i += 1
        blocks.append(
            Block(path, opened + 2, lang, "\n".join(body) + "\n", bool(SKIP.match(prev.strip())))
        )
    return blocks


def _doc_files() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _python_blocks(errors: list) -> list[Block]:
    out = []
    for f in _doc_files():
        rel = f.relative_to(ROOT).as_posix()
        out += [b for b in extract_blocks(f.read_text(), rel, errors) if b.lang in PYTHON]
    return out


FENCE_ERRORS: list = []
BLOCKS = _python_blocks(FENCE_ERRORS)
RUN = [b for b in BLOCKS if not b.skipped]


@dataclass(frozen=True)
class Run:
    proc: subprocess.CompletedProcess
    left_in_tmp: list  # what the block left in its temporary-files directory (TMPDIR)


def _run(block: Block) -> Run:
    with tempfile.TemporaryDirectory(prefix="tapegrad-doc-") as cwd:
        # Padding with blank lines makes traceback line numbers those of the Markdown file.
        script = pathlib.Path(cwd) / (pathlib.Path(block.path).name + ".py")
        script.write_text("\n" * (block.line - 1) + block.code)
        # TMPDIR: the block's temporary files go to a directory of their own, which must be
        # empty again at the end (a user running the block keeps no leftover in /tmp).
        tmp = pathlib.Path(cwd) / "tmp"
        tmp.mkdir()
        env = {**os.environ, "MPLBACKEND": "Agg", "TMPDIR": str(tmp)}
        proc = subprocess.run(
            [sys.executable, "-W", "error", str(script)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        return Run(proc, sorted(p.name for p in tmp.iterdir()))


@pytest.fixture(scope="session")
def snippet_runs(request):
    """Run every selected block at once, a few in parallel; ``{block id: CompletedProcess}``."""
    wanted = [
        item.callspec.params["block"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_python_block_runs_alone"
    ]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    workers = max(1, min(4, cores or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return dict(zip([b.id for b in wanted], pool.map(_run, wanted)))


@pytest.mark.parametrize("block", RUN, ids=lambda b: b.id)
def test_python_block_runs_alone(block, snippet_runs):
    run = snippet_runs[block.id]
    res = run.proc
    assert res.returncode == 0, (
        f"{block.id}: the block failed when run alone (exit {res.returncode})\n"
        f"--- stderr ---\n{res.stderr[-4000:]}\n--- code ---\n{block.code}"
    )
    assert not run.left_in_tmp, (
        f"{block.id}: the block leaves {run.left_in_tmp} in the temporary directory; use "
        "`with tempfile.TemporaryDirectory() as folder:` (removed at the end of the block)"
    )


def test_every_code_fence_names_its_language():
    assert not FENCE_ERRORS, "\n".join(FENCE_ERRORS)


def test_every_page_and_the_readme_have_runnable_blocks():
    files = {b.path for b in RUN}
    assert "README.md" in files
    assert len([b for b in BLOCKS if b.path == "README.md"]) >= 4
    skipped = [b.id for b in BLOCKS if b.skipped]
    assert len(skipped) <= 3, f"too many blocks marked skip: {skipped}"


def test_extract_blocks_languages_markers_and_lines():
    text = (
        "# Title\n\n"
        "```python\nx = 1\n```\n\n"
        "<!-- docs-test: skip (an excerpt) -->\n"
        "```py\nundefined_name\n```\n"
        "- item\n\n  ```python\n  y = 2\n  ```\n"
        "````text\n```python\nnot code\n```\n````\n"
    )
    blocks = extract_blocks(text, "t.md")
    assert [(b.lang, b.line, b.code, b.skipped) for b in blocks] == [
        ("python", 4, "x = 1\n", False),
        ("py", 9, "undefined_name\n", True),
        ("python", 14, "y = 2\n", False),
        ("text", 17, "```python\nnot code\n```\n", False),
    ]
    with pytest.raises(ValueError, match="t.md:1: a code fence without a language"):
        extract_blocks("```\nprint(1)\n```\n", "t.md")
    with pytest.raises(ValueError, match="unknown code block language 'pyton'"):
        extract_blocks("```pyton\nprint(1)\n```\n", "t.md")
    with pytest.raises(ValueError, match="never closed"):
        extract_blocks("```python\nprint(1)\n", "t.md")


def test_a_failing_block_is_reported_with_its_markdown_line(tmp_path):
    block = Block("docs/page.md", 7, "python", "import numpy\nnot_defined\n", False)
    res = _run(block).proc
    assert res.returncode != 0
    assert 'page.md.py", line 8' in res.stderr and "NameError" in res.stderr


def test_a_block_leaving_a_temporary_folder_is_caught():
    code = "import tempfile\nprint(tempfile.mkdtemp())\n"
    run = _run(Block("docs/page.md", 1, "python", code, False))
    assert run.proc.returncode == 0 and len(run.left_in_tmp) == 1
    code = "import tempfile\nwith tempfile.TemporaryDirectory() as d:\n    print(d)\n"
    run = _run(Block("docs/page.md", 1, "python", code, False))
    assert run.proc.returncode == 0 and run.left_in_tmp == []


def test_every_docs_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = [p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")]
    missing = [p for p in pages if f" {p}\n" not in nav]
    assert not missing, f"docs pages missing from mkdocs.yml's nav: {missing}"


def _modules():
    names = ["tapegrad"]
    for m in pkgutil.walk_packages(tapegrad.__path__, "tapegrad."):
        if m.name.endswith("strategies"):
            continue
        names.append(m.name)
    return names


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name, tmp_path, monkeypatch):
    """Every ``>>>`` example passes and leaves nothing in the temporary directory."""
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where tempfile puts its files
    for test in finder.find(mod, name, module=mod):
        runner.run(test)
    assert runner.failures == 0, f"{runner.failures} docstring example(s) failed in {name}"
    left = sorted(p.name for p in tmp_path.iterdir())
    assert not left, (
        f"docstring examples of {name} leave {left} in the temporary directory; use "
        "`with tempfile.TemporaryDirectory() as folder:`"
    )


# Development-process wording that means nothing to a reader of the docs or the API reference.
INTERNAL_WORDING = re.compile(
    r"\bseeds'|\bthe seeds\b|\bissue\s*#?\d+|\bthis round\b|\bround \d+\b"
    r"|\b(?:this|an? earlier|the previous|a previous|later) session\b",
    re.IGNORECASE,
)


def internal_wording(text: str) -> list[str]:
    """The lines of ``text`` that use development-process wording."""
    return [line.strip() for line in text.splitlines() if INTERNAL_WORDING.search(line)]


def test_internal_wording_is_recognised():
    assert internal_wording("as in the seeds' Linear") and internal_wording("See issue 21.")
    assert internal_wording("fixed this round") and internal_wording("from an earlier session")
    assert internal_wording("see issue #3") and internal_wording("The seeds document it")
    assert not internal_wording("key: also seeds the dropout; rounds half to even")
    assert not internal_wording("file an issue on the tracker; round(x, 2)")


def test_docs_and_readme_speak_to_users():
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    found = {p.relative_to(ROOT).as_posix(): internal_wording(p.read_text()) for p in pages}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"development-process wording in the docs: {found}"


@pytest.mark.parametrize("name", _modules())
def test_docstrings_speak_to_users(name):
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=False)
    found = {}
    for test in finder.find(mod, name, module=mod):
        lines = internal_wording(test.docstring or "")
        if lines:
            found[test.name] = lines
    assert not found, f"development-process wording in docstrings of {name}: {found}"


def _extras() -> set:
    import tomllib

    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
               ["optional-dependencies"])  # fmt: skip


def test_install_lines_work_from_a_clone():
    """tapegrad is installed from a clone of the repository (``pip install -e ".[extra]"``):
    no install line asks PyPI for a ``tapegrad`` package, and every extra named exists."""
    extras = _extras()
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    sources = [*pages, *sorted((ROOT / "src").rglob("*.py")), *sorted(ROOT.glob("examples/*.py"))]
    bad = []
    for path in sources:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.relative_to(ROOT)}:{n}"
            code = line.split("#")[0]  # (a comment may name the package)
            if re.search(r"pip install .*(?<![\w/.-])[\"']?tapegrad(\[|[\"']|\s|$)", code) or (
                re.search(r"\btapegrad\[", line)
            ):
                bad.append(f"{where}: installs tapegrad by name: {line.strip()}")
            for group in re.findall(r"pip install -e \\?[\"']?\.\[([^\]]*)\]", line):
                unknown = set(group.split(",")) - extras
                if unknown:
                    bad.append(f"{where}: unknown extras {sorted(unknown)}: {line.strip()}")
    assert not bad, "\n".join(bad)


_SECTION = re.compile(r"^(\s*)(Args|Arguments|Attributes|Parameters|Keyword Args|States):\s*$")
_NEXT_ENTRY = re.compile(r"[.;]\s+(\*{0,2}[A-Za-z_]\w*(?:,\s*[A-Za-z_]\w*)*):\s")


def crowded_entries(doc: str, names: set) -> list[str]:
    """Lines of ``doc``'s Args/Attributes sections that hold a second entry (``x: ... . y:
    ...``, with ``y`` one of ``names``): rendered as one table row with the other's text."""
    out, indent, entry = [], None, None
    for line in doc.splitlines():
        m = _SECTION.match(line)
        if m:
            indent, entry = len(m.group(1)), None
            continue
        if indent is None or not line.strip():
            continue
        cur = len(line) - len(line.lstrip())
        if cur <= indent:
            indent = None
            continue
        if entry is None:
            entry = cur
        if cur == entry or cur > entry:  # an entry or its continuation
            for group in _NEXT_ENTRY.findall(line):
                if {n.strip().lstrip("*") for n in group.split(",")} & names:
                    out.append(line.strip())
    return out


def test_crowded_entries_are_recognised():
    doc = "Summary.\n\n    Args:\n        a: First. b: Second.\n        c: Uses x. Default: 1.\n"
    assert crowded_entries(doc, {"a", "b", "c"}) == ["a: First. b: Second."]
    assert crowded_entries(doc, {"a", "c"}) == []


def _documented_objects():
    import inspect

    seen = set()
    for name in _modules():
        mod = importlib.import_module(name)
        for obj in [mod, *vars(mod).values()]:
            if id(obj) in seen or not (inspect.isclass(obj) or inspect.isroutine(obj)
                                       or inspect.ismodule(obj)):  # fmt: skip
                continue
            if (getattr(obj, "__module__", None) or "").split(".")[0] != "tapegrad" and (
                obj is not mod
            ):
                continue
            seen.add(id(obj))
            yield obj
            if inspect.isclass(obj):
                for member in vars(obj).values():
                    member = getattr(member, "__func__", member)
                    if inspect.isroutine(member) and id(member) not in seen:
                        seen.add(id(member))
                        yield member


def test_docstring_sections_have_one_entry_per_line():
    """The API reference renders Args and Attributes as tables, one row per entry: two
    entries on one line (``shape: ... dtype: ...``) would be one row holding both."""
    import inspect

    found = {}
    for obj in _documented_objects():
        doc = inspect.getdoc(obj) or ""
        names = set()
        target = obj.__init__ if inspect.isclass(obj) else obj
        try:
            names |= set(inspect.signature(target).parameters)
        except (TypeError, ValueError):
            pass
        if inspect.isclass(obj):
            names |= {n for n in dir(obj) if not n.startswith("__")}
            names |= set(getattr(obj, "__annotations__", {}))
            try:  # instance attributes, set in its methods
                names |= set(re.findall(r"self\.(\w+)\s*=", inspect.getsource(obj)))
            except (OSError, TypeError):
                pass
        bad = crowded_entries(doc, names)
        if bad:
            found[getattr(obj, "__qualname__", repr(obj))] = bad
    assert not found, "one entry per line in Args/Attributes sections:\n" + "\n".join(
        f"{k}: {v}" for k, v in sorted(found.items())
    )


def test_shared_docstring_sections_complete_the_functions_own_text():
    """``tapegrad.numpy._docs.sections`` puts the shared sections before the function's own
    ``Example:`` (or the section named by ``before``), else at the end, fields filled."""
    import inspect

    from tapegrad.numpy._docs import sections

    shared = """
    Returns:
        Tensor with {n} axes.
"""

    @sections(shared, n="two")
    def plain():
        """Summary."""

    @sections(shared, n="three")
    def with_example():
        """Summary.

        Example:
            >>> 1
            1
        """

    @sections("\n    Args:\n        x: {not a field}.\n", before="Derivatives:")
    def with_derivatives(x):
        """Summary.

        Derivatives: d.
        """

    assert inspect.getdoc(plain) == "Summary.\n\nReturns:\n    Tensor with two axes."
    assert inspect.getdoc(with_example) == (
        "Summary.\n\nReturns:\n    Tensor with three axes.\n\nExample:\n    >>> 1\n    1")
    assert inspect.getdoc(with_derivatives) == (
        "Summary.\n\nArgs:\n    x: {not a field}.\n\nDerivatives: d.")
