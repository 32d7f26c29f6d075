"""The programs and Python of the user documentation work as the text says.

Every fenced ```ttl block of docs/language-guide.md, docs/tutorial.md and docs/api.md is a
complete program that ``ttlc.check`` accepts.  A ```ttl-invalid block is a program the
text calls wrong: its first line is ``; error: MESSAGE`` and ``ttlc.check`` must reject it
with a diagnostic containing MESSAGE.  The ```python blocks of docs/tutorial.md, and those
of docs/api.md, run in order, each page in one namespace (later steps may use earlier
ones), and assert their own results against NumPy; the programs it shows in ```ttl blocks are the ones it runs.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import ttlc

DOCS = Path(__file__).resolve().parents[2] / "docs"
FILES = ("language-guide.md", "tutorial.md", "api.md")
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)


def blocks(name: str, tag: str):
    text = (DOCS / name).read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) == tag:
            line = text.count("\n", 0, m.start()) + 1
            out.append(pytest.param(m.group(2), id=f"{name}:{line}"))
    return out


VALID = [p for f in FILES for p in blocks(f, "ttl")]
INVALID = [p for f in FILES for p in blocks(f, "ttl-invalid")]


def test_docs_have_examples():
    assert len(VALID) >= 25 and len(INVALID) >= 10
    assert blocks("tutorial.md", "python")


def test_tutorial_runs_the_programs_it_shows():
    """Each program of the tutorial is run verbatim by one of its Python blocks."""
    python = "\n".join(p.values[0] for p in blocks("tutorial.md", "python"))
    for param in blocks("tutorial.md", "ttl"):
        assert param.values[0] in python, f"{param.id} is not run by the tutorial's Python"


@pytest.mark.parametrize("program", VALID)
def test_valid_program(program):
    ttlc.check(program)


@pytest.mark.parametrize("program", INVALID)
def test_invalid_program(program):
    first = program.splitlines()[0]
    assert first.startswith("; error: "), "a ttl-invalid block starts with '; error: ...'"
    expected = first[len("; error: "):].strip()
    with pytest.raises(ttlc.CompileError) as info:
        ttlc.check(program)
    assert expected in str(info.value), str(info.value)


@pytest.mark.parametrize("page", ["tutorial.md", "api.md"])
def test_python_runs(page):
    namespace: dict = {"__name__": page}
    for param in blocks(page, "python"):
        code, = param.values
        exec(compile(code, param.id, "exec"), namespace)


def test_guide_shows_every_instruction():
    """Every instruction of the table (but ttlc's own check_shapes) is named in the guide
    and used by one of its valid programs."""
    from ttlc.ir import ops

    text = (DOCS / "language-guide.md").read_text(encoding="utf-8")
    used = set()

    def walk(region):
        for inst in region.instructions:
            used.add(inst.opcode)
            for r in inst.regions:
                walk(r)

    for param in blocks("language-guide.md", "ttl"):
        for f in ttlc.check(param.values[0]).functions:
            walk(f.body)
    language = set(ops.OPS) - set(ops.INTERNAL_OPS)
    assert sorted(language - used) == []
    assert sorted(op for op in language if not re.search(rf"\b{op}\b", text)) == []
