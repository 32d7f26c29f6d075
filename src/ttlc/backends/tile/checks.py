"""Checked Tile IR (docs/cuda-tile.md, "Checked mode"): the tests checked code makes and
the error record it reports them in.

Checked entries take one more parameter after the kernel's own: the address of an error
record of ``ERR_SLOTS`` i64 (``runtime.findings``: the layout every compiled target
writes), zero before the launch.  A test that fails writes the record with the first
writer winning: an ``atomic_cas_tko`` of the code into its first word from 0, the rest
written only by the tile block whose exchange found 0.  The access tested is masked off,
and once the record holds a finding every later access of the launch is too (each reads
the first word, ``ok``): what follows a finding in a tile block may run on wrong sizes
and addresses but never touches memory.  The host reads the record after the launch and
raises the KernelError the interpreter raises for the same finding (``raise_finding``).

The functions take the ``translate.Translator`` emitting the entry, and its ``Memref`` and
``Size`` values; those names are annotations only, not imported (translate imports this
module).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ...ir.core import Instruction
from ...ir.traits import blas_shape_rules, shapes_of
from ...runtime.findings import (E_EXPAND, E_FUSE, E_GROUP_INDEX, E_INDEX, E_LIFETIME, E_NULL, E_SHAPES,
                                 E_SUBVIEW, ERR_DETAILS, ERR_SLOTS, InstRef, kernel_error)
from .ops import TOKEN as TOKEN_TYPE
from .ops import Ptr, Scalar, Tile
from .tir import Value

I64, I1, I32 = Scalar("i64"), Scalar("i1"), Scalar("i32")


@dataclass
class Checked:
    """What the host needs of a checked entry to word its findings: the table of its
    instructions (``InstRef``, indexed by the record's instruction slot) and its
    work-group size."""

    record: Value
    instructions: List[InstRef] = field(default_factory=list)
    work_group_size: Tuple[int, int] = (1, 1)
    #: the names of the allocas a lifetime_stop may end (``Memref.alloca`` indexes them)
    locals: List[Optional[str]] = field(default_factory=list)
    #: of each of them, the address of an i64 of the tile block: -1 while it lives, then
    #: the lifetime_stop that ended it (its index in ``instructions``)
    ended: Dict[int, Value] = field(default_factory=dict)
    #: the index of the instruction being translated
    current: int = 0
    #: how E_RACE records are worded (``races.RaceTable``; None: no local memory)
    race_table: object = None

    def enter(self, inst: Instruction) -> None:
        self.current = len(self.instructions)
        self.instructions.append(InstRef.of(inst))


def record_parameter() -> Value:
    return Value(Tile(Ptr(I64)))


def _flat(t: "Translator", v: Value) -> Value:
    """A tile as a rank-1 one (rank 0 and rank 1 as they are)."""
    if len(v.type.shape) <= 1:
        return v
    return t.b.one("reshape", Tile(v.type.element, (int(np.prod(v.type.shape)),)), source=v)


def _first(t: "Translator", bad: Value) -> Value:
    """The rank-0 i32 index of the first element of a rank-1 `bad` that is set (the last
    if none is)."""
    n = bad.type.shape[0]
    lanes = t.b.one("iota", Tile(I32, (n,)))
    far = t.const("i32", n - 1, (n,))
    pick = t.b.one("select", lanes.type, cond=bad, val_if_true=lanes, val_if_false=far)
    return t.along("reduce", pick, 0, lambda x, y: t.binary("mini", x, y, signedness="signed"),
                   n - 1)


def _i64(t: "Translator", x: "Size") -> Value:
    """A size, index or number as an i64 tile."""
    return t.i64(x) if isinstance(x, int) else t.convert(x, "i64")


def _at(t: "Translator", v: "Size", at: Optional[Value]) -> Value:
    """A detail as a rank-0 i64: of a tile (shaped as the test), its element `at`."""
    v = _i64(t, v)
    if not v.type.shape:
        return v
    one = t.b.one("extract", Tile(I64, (1,)), source=_flat(t, v), indices=[at])
    return t.b.one("reshape", Tile(I64), source=one)


def fail_if(t: "Translator", bad: Value, code: int, details: Sequence["Size"],
            item: Optional[Callable[[Value], Value]] = None, named: bool = True) -> None:
    """Report `code` with `details` (Python ints or i64 tiles, rank 0 or shaped as `bad`)
    where `bad` (rank 0, one per work-item of the SPMD region or per entry of a matrix
    tile) is set; a work-item that does not run reports nothing.  The work-item reported
    is the failing one of a test per work-item (unless not `named`: the subgroup's
    instructions), ``item(flat index)`` (an i32) of another shape, else none."""
    c: Checked = t.checks
    shaped = [d.type.shape for d in details if isinstance(d, Value) and d.type.shape]
    if shaped and not bad.type.shape:  # a test of one value whose details vary
        bad = t.splat(bad, shaped[0])
    if t.active is not None and bad.type.shape in ((), t.active.type.shape):
        bad = t.binary("andi", *t.matched(bad, t.active))
    at = any_bad = None
    if bad.type.shape:
        flat = _flat(t, bad)
        at = _first(t, flat)
        any_bad = t.along("reduce", flat, 0, lambda x, y: t.binary("ori", x, y), False)
    else:
        any_bad = bad
    zero = t.const("i64", 0)
    old, t.token = t.b.op("atomic_cas_tko", [Tile(I64), TOKEN_TYPE], pointers=c.record, cmp=zero,
                          val=t.const("i64", code), mask=any_bad, token=t.token,
                          memory_ordering_semantics="relaxed", memory_scope="device")
    won = t.binary("andi", any_bad, t.compare("equal", old, zero))
    block = [t.convert(v, "i64") for v in t.b.op("get_tile_block_id", [Tile(I32)] * 3)]
    per_item = named and t.lanes and t.items is None and bad.type.shape == (t.lanes,)
    if per_item:
        who = t.convert(at, "i64")
    elif item is not None and at is not None:
        who = t.convert(item(at), "i64")
    else:
        who = t.const("i64", -1)
    values = block + [t.const("i64", c.current), who] + [_at(t, d, at) for d in details[:ERR_DETAILS]]
    for k, v in enumerate(values, start=1):
        t.token = t.b.one("store_ptr_tko", TOKEN_TYPE, destination=t.offset(c.record, k), value=v,
                          mask=won, token=t.token, memory_ordering_semantics="relaxed",
                          memory_scope="device")


def ok(t: "Translator") -> Value:
    """A rank-0 i1: whether the launch has no finding yet (accesses are made only then)."""
    first, t.token = t.b.op("load_ptr_tko", [Tile(I64), TOKEN_TYPE], source=t.checks.record,
                            token=t.token, memory_ordering_semantics="relaxed",
                            memory_scope="device")
    return t.compare("equal", first, t.const("i64", 0))


def _signed(t: "Translator", predicate: str, a: "Size", b: "Size") -> Value:
    return t.compare(predicate, _i64(t, a), _i64(t, b))


def _or(t: "Translator", a: Optional[Value], b: Value) -> Value:
    return b if a is None else t.binary("ori", *t.matched(a, b))


def check_index(t: "Translator", shape: Sequence["Size"], index: Sequence["Size"]) -> Optional[Value]:
    """E_INDEX where an index of an element access lies outside `shape`; the mask of the
    work-items whose access is inside (None: static and inside)."""
    bad = None
    for mode, (i, n) in enumerate(zip(index, shape)):
        if isinstance(i, int) and isinstance(n, int) and 0 <= i < n:
            continue
        out = _or(t, _signed(t, "less_than", i, 0), _signed(t, "greater_than_or_equal", i, n))
        fail_if(t, out, E_INDEX, [mode, i, n, len(index), *index][:ERR_DETAILS])
        bad = _or(t, bad, out)
    if bad is None:
        return None
    return t.b.one("xori", bad.type, lhs=bad, rhs=t.const("i1", True, bad.type.shape))


def is_null(t: "Translator", address: Value) -> Value:
    """Whether an address (a tile of them: per work-item) is 0."""
    return t.compare("equal", address, t.const("i64", 0))


def check_memref(t: "Translator", m: "Memref", named: bool = True) -> None:
    """E_NULL where an access goes through a null memref, E_LIFETIME through one whose
    alloca a lifetime_stop ended (nothing is accessed after either).  In SPMD code the
    first running work-item reports, unless not `named` (a subgroup's coopmatrix access
    names none, as the interpreter's)."""
    if m.null is not None:
        fail_if(t, m.null, E_NULL, [], named=named)
    if m.alloca is not None:
        ended, t.token = t.b.op("load_ptr_tko", [Tile(I64), TOKEN_TYPE], source=t.checks.ended[m.alloca],
                                token=t.token, memory_ordering_semantics="weak")
        bad = t.compare("greater_than_or_equal", ended, t.const("i64", 0))
        if t.lanes and t.items is None:
            bad = t.splat(bad, (t.lanes,))
        fail_if(t, bad, E_LIFETIME, [ended, m.alloca], named=named)


def new_local(t: "Translator", name: Optional[str]) -> Optional[int]:
    """Of checked code with lifetime_stop instructions, an alloca's index in
    ``Checked.locals`` and its flag of the tile block, alive (-1)."""
    c: Checked = t.checks
    if c is None or not any(i.opcode == "lifetime_stop" for i in t.function.body.walk()):
        return None
    k = len(c.locals)
    c.locals.append(name)
    c.ended[k] = t.b.one("alloca", Tile(Ptr(I64)), num_elem=1, alignment=8)
    end(t, k, -1)
    return k


def end(t: "Translator", k: int, inst: int) -> None:
    """The flag of local `k`: ended by instruction `inst` (-1: alive)."""
    t.token = t.b.one("store_ptr_tko", TOKEN_TYPE, destination=t.checks.ended[k],
                      value=t.const("i64", inst), token=t.token, memory_ordering_semantics="weak")


def check_access(t: "Translator", m: "Memref", index: Sequence["Size"]) -> Optional[Value]:
    """An element access: E_NULL and E_LIFETIME (``check_memref``), then E_INDEX
    (``check_index``)."""
    check_memref(t, m)
    return check_index(t, m.shape, index)


def check_group_index(t: "Translator", index: "Size", size: "Size") -> None:
    if isinstance(index, int) and isinstance(size, int) and 0 <= index < size:
        return
    bad = _or(t, _signed(t, "less_than", index, 0), _signed(t, "greater_than_or_equal", index, size))
    fail_if(t, bad, E_GROUP_INDEX, [index, size])


def check_slice(t: "Translator", mode: int, o: "Size", n: "Size", e: "Size", dynamic: bool) -> None:
    """E_SUBVIEW: offset non-negative, size positive where dynamic, the slice inside the
    mode (as target cpu tests it)."""
    if all(isinstance(x, int) for x in (o, n, e)):
        return
    one, n64 = t.const("i64", 1), _i64(t, n)
    end = t.add_index(o, t.select(_signed(t, "less_than", n64, 1), *t.matched(one, n64)))
    bad = _or(t, _or(t, _signed(t, "less_than", n64, 0), _signed(t, "less_than", o, 0)),
              _signed(t, "greater_than", end, e))
    if dynamic:
        bad = _or(t, bad, _signed(t, "equal", n64, 0))
    fail_if(t, bad, E_SUBVIEW, [mode, o, n, e, int(dynamic)])


def check_expand(t: "Translator", total: "Size", size: "Size") -> None:
    if not (isinstance(total, int) and isinstance(size, int)):
        fail_if(t, _signed(t, "not_equal", total, size), E_EXPAND, [total, size])


def check_fuse(t: "Translator", m: "Memref", lo: int, hi: int) -> None:
    """E_FUSE where the stride of a mode is not its predecessor's stride times size."""
    for k in range(lo, hi):
        want = t.mul_index(m.strides[k], m.shape[k])
        if not (isinstance(want, int) and isinstance(m.strides[k + 1], int)):
            fail_if(t, _signed(t, "not_equal", m.strides[k + 1], want), E_FUSE, [k])


def check_shapes(t: "Translator", inst: Instruction) -> None:
    """E_SHAPES where the sizes break a shape rule of the BLAS instruction that follows."""
    sizes = [_i64(t, t.tile_of(v)) for v in inst.slots["sizes"]]
    shapes = shapes_of(inst.attrs["orders"], range(len(sizes)))
    bad = None
    for left, right, _ in blas_shape_rules(inst.modifier("rule"), shapes, inst.modifier("ta"),
                                           inst.modifier("tb")):
        for i, j in zip(left, right):
            bad = _or(t, bad, t.compare("not_equal", sizes[i], sizes[j]))
    if bad is not None:
        fail_if(t, bad, E_SHAPES, sizes[:ERR_DETAILS])


def raise_finding(entry, filename: str, record: np.ndarray) -> None:
    """The KernelError of a checked entry's error record, if it holds a finding."""
    if entry.checked is not None and int(record[0]):
        c: Checked = entry.checked
        table = c.race_table  # races.RaceTable
        race = table and (lambda d: table.message(d, c.instructions, c.work_group_size[0]))
        raise kernel_error(filename, entry.name, record, c.instructions, c.work_group_size,
                           c.locals, race=race)


def new_record() -> np.ndarray:
    return np.zeros(ERR_SLOTS, np.int64)

