"""The layers of docs/architecture.md, checked by walking every import of src/ttlc.

Every ``import`` and ``from ... import`` (at module level or inside functions) of every
module is read with ``ast``; each module belongs to a layer (its first package below
ttlc), and a layer may only import the layers listed for it.  Cycles are refused between
packages and between the modules of a back end; no source file names a document the
repository lacks; no package registers anything by importing a module for its side
effects.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, Set

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ttlc"

#: layer -> the layers it may import (besides itself); "top" is ttlc/__init__, api, cli,
#: __main__ and types (the user-facing entry points)
ALLOWED: Dict[str, Set[str]] = {
    "version": set(),
    "ir": {"diagnostics"},
    "diagnostics": {"ir"},
    "parse": {"ir", "diagnostics"},
    "check": {"ir", "parse", "diagnostics"},
    # the execution configuration verifies each candidate size with the verifier
    "target": {"ir", "diagnostics", "check"},
    "analysis": {"ir", "target", "diagnostics"},
    "passes": {"ir", "target", "analysis", "check", "diagnostics"},
    "runtime": {"ir", "diagnostics"},
    "backends": {"ir", "target", "analysis", "passes", "runtime", "check", "diagnostics"},
    "interp": {"ir", "target", "analysis", "runtime", "diagnostics", "check"},
    "testing": {"ir", "target", "analysis", "passes", "runtime", "backends", "interp",
                "check", "parse", "diagnostics", "top"},
    "top": {"ir", "target", "analysis", "passes", "runtime", "backends", "interp", "check",
            "parse", "diagnostics", "testing"},
}

#: the exceptions the architecture names: the registry runs the interpreter, constant
#: folding evaluates through its semantics (on the runtime's values), the findings of
#: compiled checked code word races as the interpreter does
EXCEPTIONS = {("backends/__init__.py", "interp"), ("passes/constant_propagation.py", "interp"),
              ("passes/constant_propagation.py", "runtime"), ("runtime/findings.py", "analysis")}

TOP = {"__init__", "api", "cli", "__main__", "types", "recipes", "tuning", "dask"}


def _layer(rel: Path) -> str:
    first = rel.parts[0]
    if len(rel.parts) == 1:
        stem = rel.stem
        return "top" if stem in TOP else stem
    return first


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        yield path, path.relative_to(SRC)


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["ttlc"] + parts)


def _imports(path: Path, rel: Path):
    """(imported ttlc module, line) for every import in the file; ``from P import n``
    with a relative P and no module gives the submodule P.n."""
    tree = ast.parse(path.read_text(), str(path))
    name = _module_name(rel)
    package = name if rel.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "ttlc" or a.name.startswith("ttlc."):
                    yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not (mod == "ttlc" or mod.startswith("ttlc.")):
                continue
            if node.module is None:
                for a in node.names:
                    yield f"{mod}.{a.name}", node.lineno
            else:
                yield mod, node.lineno


def _layer_of_module(name: str) -> str:
    parts = name.split(".")[1:]
    if not parts:
        return "top"
    first = parts[0]
    if (SRC / first).is_dir():
        return first
    if (SRC / f"{first}.py").is_file():
        return "top" if first in TOP else first
    return "top"  # a name defined in ttlc/__init__.py


def test_layers_import_only_what_they_may():
    wrong = []
    for path, rel in _modules():
        mine = _layer(rel)
        for name, line in _imports(path, rel):
            theirs = _layer_of_module(name)
            if theirs in (mine, "version") or theirs in ALLOWED.get(mine, set()):
                continue
            if (rel.as_posix(), theirs) in EXCEPTIONS:
                continue
            wrong.append(f"src/ttlc/{rel.as_posix()}:{line}: {mine} imports {name} ({theirs})")
    assert not wrong, "imports against docs/architecture.md:\n" + "\n".join(wrong)


def _graph(modules) -> Dict[str, Set[str]]:
    graph: Dict[str, Set[str]] = {}
    for path, rel in modules:
        me = _module_name(rel)
        graph.setdefault(me, set())
        for name, _ in _imports(path, rel):
            graph[me].add(name)
    return graph


def _cycle(graph: Dict[str, Set[str]]):
    """A cycle of the graph (a list of nodes), or None."""
    state: Dict[str, int] = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m in graph and not state.get(m):
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if not state.get(n):
            found = visit(n)
            if found:
                return found
    return None


def test_no_cycle_between_packages():
    graph: Dict[str, Set[str]] = {}
    for path, rel in _modules():
        mine = _layer(rel)
        for name, _ in _imports(path, rel):
            theirs = _layer_of_module(name)
            if theirs != mine and (rel.as_posix(), theirs) not in EXCEPTIONS:
                graph.setdefault(mine, set()).add(theirs)
    assert _cycle(graph) is None, f"a cycle between packages: {_cycle(graph)}"


@pytest.mark.parametrize("backend", sorted(p.name for p in (SRC / "backends").iterdir()
                                           if p.is_dir() and not p.name.startswith("_")))
def test_no_cycle_inside_a_backend(backend):
    folder = SRC / "backends" / backend
    modules = [(p, p.relative_to(SRC)) for p in sorted(folder.rglob("*.py"))]
    prefix = f"ttlc.backends.{backend}"
    graph = {k: {m for m in v if m.startswith(prefix + ".")}
             for k, v in _graph(modules).items()}
    assert _cycle(graph) is None, f"an import cycle in backends/{backend}: {_cycle(graph)}"


def _repository_files(pattern: str):
    return [p for p in ROOT.rglob(pattern)
            if not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]


def test_no_reference_to_a_missing_document():
    documents = {p.name for p in _repository_files("*.md")}
    cited = re.compile(r"([A-Za-z0-9_./-]+\.md)\b")
    missing = []
    sources = (_repository_files("*.py") + _repository_files("*.ir") +
               _repository_files("*.md") + [ROOT / "Makefile"])
    for path in sources:
        for line_no, line in enumerate(path.read_text().splitlines(), 1):
            for doc in cited.findall(line):
                if doc.split("/")[-1] not in documents:
                    missing.append(f"{path.relative_to(ROOT)}:{line_no}: {doc}")
    assert not missing, "documents cited but not in the repository:\n" + "\n".join(missing)


def test_source_files_stay_small():
    """No module of backends/ or passes/ over 1,000 lines (split by concern instead)."""
    big = [f"{p.relative_to(SRC)}: {n} lines" for p in list((SRC / "backends").rglob("*.py")) +
           list((SRC / "passes").rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > 1000]
    assert not big, "\n".join(big)


#: imports kept only for an effect of importing, with the reason
SIDE_EFFECT_IMPORTS = {
    # binds the subpackages first, so that the functions ttlc.parse and ttlc.check keep
    # their names (ttlc/__init__.py explains)
    "__init__.py",
}


def test_no_registration_by_import():
    """Tables (emitters, semantics, passes) are composed explicitly: no module is imported
    for what importing it registers (the pattern: an unused import kept with noqa F401)."""
    found = [f"src/ttlc/{rel.as_posix()}:{n}" for path, rel in _modules()
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.match(r"\s*(from|import) .*# noqa:.*F401", line)
             and rel.as_posix() not in SIDE_EFFECT_IMPORTS]
    assert not found, "imports kept for their side effects:\n" + "\n".join(found)
