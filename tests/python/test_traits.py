"""Facts the instruction table declares (ttlc.ir.traits, ttlc.ir.infer) and the analyses
that read them (ttlc.analysis): checked against the table itself, against every valid
program of the lit tests, the examples and the random generator, and against results
written out by hand.
"""
from __future__ import annotations

import ast
import functools
import pathlib

import pytest

import ttlc
from ttlc.analysis import effects
from ttlc.analysis.effects import ATOMIC_READ, ATOMIC_WRITE, READ, WRITE, conflicts
from ttlc.check.verifier import verify
from ttlc.ir import ops
from ttlc.ir.builder import DYNAMIC, F32, INDEX, ProgramBuilder, coopmatrix, group, memref
from ttlc.ir.core import Value
from ttlc.ir.types import GroupType, MemrefType
from ttlc.testing import generate

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "ttlc"


# ---- the table ---------------------------------------------------------------------------
def test_every_instruction_with_a_memref_operand_declares_its_effects():
    for name, d in ops.OPS.items():
        if d.memory_slots:
            assert d.effects is not None, f"'{name}' takes a memref but declares no effects"
        else:
            assert d.effects is None, f"'{name}' declares effects but takes no memref"
        for e in d.effects or ():
            assert e.slot in d.memory_slots, f"'{name}': effect on '{e.slot}', not a memref"
            assert e.kind in (READ, WRITE)
            if isinstance(e.atomic, str):
                assert any(m.slot == e.atomic and m.flag for m in d.modifiers), name


def test_blas_roles_cover_the_memref_operands():
    blas = {name for name, d in ops.OPS.items() if d.family == "blas"}
    assert blas == {name for name, d in ops.OPS.items() if d.blas is not None}
    for name in blas:
        roles = ops.OPS[name].blas
        assert roles.slots == ops.OPS[name].memory_slots, name
        assert len(roles.names) == len(roles.slots), name


def test_op_sets_name_instructions_of_the_table():
    for group in (ops.SUBGROUP_OPS, ops.SPMD_REGION_OPS, ops.FOREACH_OPS, ops.YIELDING_OPS,
                  ops.VIEW_OPS, ops.REGION_OPS):
        assert set(group) <= set(ops.OPS)
    assert set(ops.FOREACH_OPS) <= set(ops.SPMD_REGION_OPS) <= set(ops.REGION_OPS)
    assert set(ops.YIELDING_OPS) <= set(ops.REGION_OPS)


# ---- every valid program we have -----------------------------------------------------------
@functools.lru_cache(maxsize=None)
def corpus():
    """Checked programs: the valid lit tests, the examples and some generated programs."""
    programs = []
    for path in sorted((ROOT / "tests" / "lit").rglob("*.ir")) + sorted(ROOT.glob("examples/*.ir")):
        try:
            programs.append(ttlc.check(path.read_text(), str(path)))
        except ttlc.CompileError:
            continue
    programs += [ttlc.check(generate(seed).text) for seed in range(40)]
    return programs


def _instructions():
    for program in corpus():
        for func in program.functions:
            yield from func.body.walk()


def test_memref_operands_sit_in_memory_slots():
    """The table marks every operand that can hold a memref or group (and so declares what
    is done with its memory)."""
    seen = set()
    for inst in _instructions():
        for slot in inst.opdef.slots:
            v = inst.slots.get(slot)
            if isinstance(v, Value) and isinstance(v.type, (MemrefType, GroupType)):
                assert slot in inst.opdef.memory_slots, (inst.opcode, slot, inst.loc)
                seen.add(inst.opcode)
    assert {"load", "store", "gemm", "subview", "cooperative_matrix_load"} <= seen


def test_the_result_type_rules_agree_with_every_checked_program():
    checked = set()
    for inst in _instructions():
        d = inst.opdef
        if d.infer_type is None or inst.opcode == "cooperative_matrix_mul_add":
            continue  # mul_add: the rule gives the default, a cast may follow
        got = inst.results[0].type
        rule = d.result_type(inst.slots, inst.attrs, inst.modifiers)
        if inst.opcode in ops.VIEW_OPS:  # a stride may be written as '?'
            assert (rule.shape, rule.element, rule.space) == (got.shape, got.element, got.space)
            assert all(g is DYNAMIC or g == r for g, r in zip(got.stride, rule.stride)), inst.loc
        else:
            assert rule == got, (inst.opcode, inst.loc)
        checked.add(d.family)
    assert {"arith_binary", "load", "subview", "expand", "fuse", "compare", "size"} <= checked


# ---- builder and verifier infer the same types -----------------------------------------------
def _build(body):
    pb = ProgramBuilder()
    A = memref(F32, 8, None, 6, stride=[1, 8, None])
    with pb.function("k", [("A", A), ("n", INDEX)], {"subgroup_size": 16}) as (b, A, n):
        results = body(b, A, n)
    return pb.program, results


VIEWS = [
    # static and dynamic strides kept, a mode removed
    (lambda b, A, n: b.subview(A, [(0, 4), 2, (1, n)]),
     MemrefType(F32, (4, DYNAMIC), (1, DYNAMIC))),
    (lambda b, A, n: b.subview(A, [(0, 8), (0, 2), 3]), MemrefType(F32, (8, 2), (1, 8))),
    # expand: packed from the mode's stride on; a dynamic size makes later strides dynamic
    (lambda b, A, n: b.expand(A, 0, [2, 4]),
     MemrefType(F32, (2, 4, DYNAMIC, 6), (1, 2, 8, DYNAMIC))),
    (lambda b, A, n: b.expand(A, 0, [n, 4]),
     MemrefType(F32, (DYNAMIC, 4, DYNAMIC, 6), (1, DYNAMIC, 8, DYNAMIC))),
    (lambda b, A, n: b.expand(A, 2, [3, 2]),
     MemrefType(F32, (8, DYNAMIC, 3, 2), (1, 8, DYNAMIC, DYNAMIC))),
    # fuse: the first mode's stride; a dynamic size makes the product dynamic
    (lambda b, A, n: b.fuse(A, 0, 1), MemrefType(F32, (DYNAMIC, 6), (1, DYNAMIC))),
    (lambda b, A, n: b.fuse(b.subview(A, [(0, 8), (0, 2), 0]), 0, 1),
     MemrefType(F32, (16,), (1,))),
]


@pytest.mark.parametrize("make, expected", VIEWS)
def test_builder_and_verifier_agree_on_view_types(make, expected):
    program, result = _build(make)
    assert result.type == expected
    verify(program)  # the verifier requires exactly these strides (or '?')
    inst = result.owner
    assert inst.opdef.result_type(inst.slots, inst.attrs, inst.modifiers) == expected


def test_builder_and_verifier_agree_on_other_types():
    pb = ProgramBuilder()
    A = memref(F32, 8, None, 6, stride=[1, 8, None])
    with pb.function("k", [("A", A), ("n", INDEX)], {"subgroup_size": 4}) as (b, A, n):
        with b.parallel():
            x = b.load(A, [n, n, n])
            block = b.subview(A, [(0, 8), (0, 2), 0])
            m = b.cooperative_matrix_load(block, n, n, coopmatrix(F32, 8, 2, "matrix_acc"))
            results = [b.add(x, x), b.abs(x), b.less_than(x, x), b.size(A, 1),
                       b.group_id("x"), b.cooperative_matrix_reduce_add(m, mode="row"),
                       b.cooperative_matrix_extract(m, 0), b.cooperative_matrix_scale(x, m),
                       b.cooperative_matrix_atomic_add(m, block, n, n)]
    verify(pb.program)
    assert [str(r.type) for r in results] == [
        "f32", "f32", "bool", "index", "index", "coopmatrix<f32x8x1,matrix_acc>", "f32",
        "coopmatrix<f32x8x2,matrix_acc>", "coopmatrix<f32x8x2,matrix_acc>"]


# ---- effects -----------------------------------------------------------------------------------
def test_accesses_resolve_atomic_modifiers():
    def body(b, A, n):
        one = b.constant(1.0, F32)
        plain = b.gemm(one, b.subview(A, [(0, 8), (0, 8), 0]), b.subview(A, [(0, 8), (0, 8), 1]),
                       one, b.subview(A, [(0, 8), (0, 8), 2]))
        atomic = b.gemm(one, b.subview(A, [(0, 8), (0, 8), 0]), b.subview(A, [(0, 8), (0, 8), 1]),
                        one, b.subview(A, [(0, 8), (0, 8), 2]), atomic=True)
        x = b.load(A, [n, n, n])
        return plain, atomic, x.owner, b.atomic_add(x, A, [n, n, n]).owner

    _, (plain, atomic, load, update) = _build(body)
    assert [k for _, k in effects.accesses(plain)] == [READ, READ, WRITE]
    assert [k for _, k in effects.accesses(atomic)] == [READ, READ, ATOMIC_WRITE]
    assert effects.accesses(atomic)[2][0] is atomic.slots["C"]
    assert effects.accesses(load) == [(load.slots["tensor"], READ)]
    assert effects.access_kind(update, "tensor") == ATOMIC_WRITE


def test_a_group_load_accesses_no_memory():
    pb = ProgramBuilder()
    G = group(memref(F32, 8), 4)
    with pb.function("k", [("G", G)]) as (b, G):
        i = b.group_id("x")
        m = b.load(G, [i])
    assert effects.accesses(m.owner) == []


def test_conflicts():
    kinds = (READ, WRITE, ATOMIC_READ, ATOMIC_WRITE)
    table = {(a, b) for a in kinds for b in kinds if conflicts(a, b)}
    assert table == {(READ, WRITE), (WRITE, READ), (WRITE, WRITE), (WRITE, ATOMIC_READ),
                     (ATOMIC_READ, WRITE), (WRITE, ATOMIC_WRITE), (ATOMIC_WRITE, WRITE),
                     (READ, ATOMIC_WRITE), (ATOMIC_WRITE, READ)}


# ---- import direction ----------------------------------------------------------------------------
def _ttlc_imports(path: pathlib.Path):
    """The names directly below ttlc (subpackages, modules) that a module imports."""
    package = path.relative_to(SRC.parent).with_suffix("").parts[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [tuple(a.name.split(".")) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = tuple(node.module.split(".")) if node.module else ()
            names = [base + (module or (a.name,)) for a in node.names]
        else:
            continue
        out.update(n[1] for n in names if n[0] == "ttlc" and len(n) > 1)
    return out


@pytest.mark.parametrize("package, allowed", [
    ("ir", {"ir", "diagnostics"}),
    ("analysis", {"ir", "target", "analysis"}),
])
def test_import_direction(package, allowed):
    for path in (SRC / package).rglob("*.py"):
        assert _ttlc_imports(path) <= allowed, path
