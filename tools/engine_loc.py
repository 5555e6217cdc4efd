"""Count code lines (no blank lines, comments or docstrings) of the engine modules.

Run: ``python tools/engine_loc.py [--src src/tapegrad] [path ...]``; prints one line per
file and the total. The default is the engine: every module of ``core/`` and the two modes of
differentiation, ``transforms/reverse.py`` and ``transforms/forward.py`` (a path is a file or a
folder under the source folder; a folder counts every module in it).
"""

from __future__ import annotations

import argparse
import ast
import io
import pathlib
import tokenize

ENGINE = ("core", "transforms/reverse.py", "transforms/forward.py")


def code_lines(source: str) -> int:
    """Lines holding code: blank lines, comment lines and docstrings are not counted."""
    doc_lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - doc_lines)


def find(src: pathlib.Path, name: str) -> list[pathlib.Path]:
    """The files of ``name``: one module, or every module of a folder (sorted)."""
    path = src / name
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", default=str(pathlib.Path(__file__).resolve().parents[1]
                                        / "src" / "tapegrad"))
    p.add_argument("paths", nargs="*", default=list(ENGINE))
    args = p.parse_args(argv)
    src = pathlib.Path(args.src)
    total = 0
    for name in args.paths:
        for f in find(src, name):
            n = code_lines(f.read_text())
            total += n
            print(f"{n:6d}  {f.relative_to(src)}")
    print(f"{total:6d}  total")
    return total


if __name__ == "__main__":
    main()
