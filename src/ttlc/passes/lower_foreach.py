"""lower-foreach: map foreach and foreach_tile onto the work-group.

Every ``foreach`` / ``foreach_tile`` (collective instructions whose region is SPMD) is
replaced by a ``parallel`` region holding loops that distribute the iteration space
over the work-items or subgroups of the work-group.  Both instructions promise no
order, so any distribution that visits every point (tile) exactly once is correct; the
one chosen here follows the reference implementation:

``foreach_tile`` (one tile per subgroup at a time; tile offsets stay uniform)
    one mode: tiles over ``subgroup_linear_id`` (stride: all subgroups x tile);
    more modes: mode 1 over ``subgroup_id.x`` (stride ``num_subgroups.x * tile_1``),
    mode 2 over ``subgroup_id.y`` (stride ``num_subgroups.y * tile_2``), modes 3.. as
    plain loops inside (every subgroup runs them whole).  The loop nest is mode 2
    (outermost), mode 1, mode 3, ..., mode N.
    A distributed mode is split into full tiles and the remainder tile: the loop runs
    over the full tiles, where the size is the constant tile shape (so constant
    propagation can fold tests such as ``less_than %size, 32``).  When the number of
    full tiles is a known multiple of the workers, every worker runs the same number of
    them: the loop then has the same bounds for all (``for %t = from, end, step``, the
    worker's offset added inside), so that lockstep targets (the CPU) need no lane mask
    for it.  The remainder tile, if
    any, is run by the subgroup the round-robin would give it to (tile number
    ``full mod workers``), with size ``to - offset``.  Inside the outer mode's remainder
    tile every tile is partial: there the inner mode's full tiles and its remainder
    share one loop (size ``min(tile, to - offset)``), so the region is cloned three times
    for two modes with remainders, not four.  A ``foreach_tile`` marked
    ``EDGES_IN_ONE_COPY`` (by lower-linalg) whose two modes both have remainders of
    sizes known only at run time and whose region tests that its tile is full in both
    (an ``and`` of the modes' ``size == tile``, as a gemm does) has the tiles partial in
    either mode as one copy of their own, the test false there: two copies.  Plain
    loops compute ``size = min(tile, to - var)``.

``foreach`` (one point per work-item at a time)
    one mode: points over the work-item's linear id in the work-group
    (``subgroup_linear_id * subgroup_size + subgroup_local_id``, stride: the work-group
    size); more modes: mode 1 over the x index
    (``subgroup_id.x * subgroup_size + subgroup_local_id``, stride
    ``work_group_size[0]``), mode 2 over ``subgroup_id.y`` (stride
    ``work_group_size[1]``), modes 3.. as plain loops inside.

Sizes come from the function attributes (run work-group-size first; without it the
attributes are required).  Known quantities are folded while lowering (``index_math``),
so static bounds give loops with constant bounds and no remainder code when the tiles
divide the range.  Builtins are ``i32`` and are cast to the loop type; the loops run in
the type of the bounds, except for ``i8``/``i16`` bounds, which loop in ``i32`` (so
offset arithmetic cannot wrap) and cast the variables back for the body.  Bounds within
one stride of the largest value of their type may wrap in the loop increment, as in the
reference implementation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..analysis.effects import DISJOINT
from ..ir.builder import Builder
from ..ir.core import Instruction, Program, Region, Value
from ..ir.ops import FOREACH_OPS
from ..ir.rewrite import (clone_instructions, replace, replace_all_uses, set_attribute,
                          walk_with_parent)
from ..ir.types import BOOL, I32, ScalarType
from . import PassContext
from .index_math import Bool, Int, IndexMath, known, require_sizes, set_locations


#: attribute (not printed) of a foreach_tile whose tiles partial in either mode may run as
#: one copy of its region (``_emit_two_copies``).  lower-linalg sets it for gemms of
#: 16-bit operands, whose tile code (conversions, transposed loads) is large: their
#: `?x?x?` kernels compiled in 100-150 ms instead of 130-210, at the same speed; f32
#: gemms of run-time sizes ran 1.1x slower as two copies (their row remainder in the
#: full columns, at one offset for all, became a loop's variable), so they keep three.
EDGES_IN_ONE_COPY = "edge_tiles_in_one_copy"


def lower_foreach(program: Program, ctx: PassContext) -> None:
    """Replace foreach and foreach_tile by parallel regions with distributed loops."""
    for func in program.functions:
        found = [(region, inst) for region, inst in walk_with_parent(func.body)
                 if inst.opcode in FOREACH_OPS]
        if not found:
            continue
        sgs, wgs = require_sizes(program, func, found[0][1].loc, "lower-foreach", ctx)
        for region, inst in found:
            _Lowering(inst, sgs, wgs).replace_in(region)


@dataclass
class _Mode:
    """How one mode of the iteration space is traversed."""

    index: int
    type: ScalarType  # type of the loop variable in the region (the bounds' type)
    loop_type: ScalarType  # type the loop runs in
    lo: Int
    hi: Int
    tile: int = 1
    distributed: bool = False
    start: Int = 0  # distributed: first offset of this worker
    #: distributed foreach_tile whose workers all run the same number of full tiles: the
    #: worker's offset from the loop variable (None: the loop starts at ``start``)
    offset: Optional[Int] = None
    step: Int = 1  # distributed: workers * tile
    main_end: Int = 0  # foreach_tile: end of the full tiles
    remainder: Bool = False  # foreach_tile: does this worker run the remainder tile?
    remainder_size: Int = 0


class _Lowering:
    def __init__(self, inst: Instruction, sgs: int, wgs: Tuple[int, int]):
        self.inst = inst
        self.tiled = inst.opcode == "foreach_tile"
        self.sgs, self.wgs = sgs, wgs
        self.body = inst.regions[0]
        #: region arguments the body uses (only those are bound in each copy)
        self.used = {v for i in self.body.walk() for v in i.operands}
        self.scratch = Region()
        self.b = Builder(self.scratch)
        self.m = IndexMath(self.b)

    def replace_in(self, region: Region) -> None:
        par = self.b.parallel()
        if DISJOINT in self.inst.attrs:  # a lowered BLAS instruction stays one
            set_attribute(par.inst, DISJOINT, self.inst.attrs[DISJOINT])
        with par:
            modes, order = self._plan()
            full_tests = self._full_tests(modes) if self.inst.attrs.get(EDGES_IN_ONE_COPY) \
                else []
            if full_tests:
                self._emit_two_copies(modes, order, full_tests)
            else:
                self._emit(modes, order, 0, {})
        set_locations(self.scratch, self.inst.loc)
        replace(region, self.inst, self.scratch.instructions)

    # ---- the distribution --------------------------------------------------------------
    def _plan(self) -> Tuple[List[_Mode], List[int]]:
        b, m, sgs = self.b, self.m, self.sgs
        wx, wy = self.wgs
        nsg_x, nsg_y = wx // sgs, wy
        lows, highs = self.inst.slots["from"], self.inst.slots["to"]
        n = len(lows)

        # worker ids (i32), only the builtins that are needed; known when a single worker
        def local_id() -> Int:
            return 0 if sgs == 1 else b.subgroup_local_id()

        ids: List[Tuple[Int, int]] = []  # (id, number of workers) for modes 1 and 2
        if n == 1:
            workers = nsg_x * nsg_y
            sg: Int = 0 if workers == 1 else b.subgroup_linear_id()
            if self.tiled:
                ids.append((sg, workers))
            else:
                ids.append((m.add(m.mul(sg, sgs, I32), local_id(), I32), wx * wy))
        else:
            sg_x: Int = 0 if nsg_x == 1 else b.subgroup_id("x")
            sg_y: Int = 0 if nsg_y == 1 else b.subgroup_id("y")
            if self.tiled:
                ids += [(sg_x, nsg_x), (sg_y, nsg_y)]
            else:
                ids += [(m.add(m.mul(sg_x, sgs, I32), local_id(), I32), wx), (sg_y, wy)]

        tiles = self.inst.attrs["tile_shape"] if self.tiled else [1] * n
        modes: List[_Mode] = []
        for k in range(n):
            ty = lows[k].type
            lt = I32 if ty.bits < 32 else ty
            lo = m.cast(_known_or(lows[k]), ty, lt)
            hi = m.cast(_known_or(highs[k]), ty, lt)
            mode = _Mode(k, ty, lt, lo, hi, tiles[k])
            if k < len(ids):
                worker, workers = ids[k]
                worker = m.cast(worker, I32, lt)
                mode.distributed = True
                offset = m.mul(worker, mode.tile, lt)
                mode.start = m.add(lo, offset, lt)
                mode.step = workers * mode.tile
                if self.tiled:
                    full = m.div(m.sub(hi, lo, lt), mode.tile, lt)
                    k_full = known(full)
                    if workers > 1 and k_full is not None and k_full % workers == 0:
                        mode.offset = offset
                    mode.main_end = m.add(lo, m.mul(full, mode.tile, lt), lt)
                    left = m.less_than(mode.main_end, hi, lt)
                    if left is not False:
                        owner = m.rem(full, workers, lt)
                        mode.remainder = m.and_(left, m.equal(worker, owner, lt))
                    if mode.remainder is not False:
                        mode.remainder_size = m.sub(hi, mode.main_end, lt)
            modes.append(mode)
        # loop bounds once, before the loop nest (they are invariant)
        for mode in modes:
            lt = mode.loop_type
            if mode.distributed:
                end = mode.main_end if self.tiled else mode.hi
                if _statically_empty(mode.start, end):
                    continue
                if mode.offset is not None:
                    mode.lo, mode.offset = m.value(mode.lo, lt), m.value(mode.offset, lt)
                else:
                    mode.start = m.value(mode.start, lt)
                mode.step = m.value(mode.step, lt)
                if self.tiled:
                    mode.main_end = m.value(mode.main_end, lt)
                else:
                    mode.hi = m.value(mode.hi, lt)
            else:
                mode.lo, mode.hi = m.value(mode.lo, lt), m.value(mode.hi, lt)
                if self.tiled:
                    mode.step = m.value(mode.tile, lt)
        order = [0] if n == 1 else [1, 0] + list(range(2, n))
        return modes, order

    # ---- the loop nest ---------------------------------------------------------------------
    def _emit(self, modes: List[_Mode], order: List[int], level: int,
              binds: Dict[int, Tuple[Int, Int]], edge: bool = False) -> None:
        """The loops of modes ``order[level:]`` around a copy of the region; ``edge``:
        inside the remainder tile of an outer mode."""
        if level == len(order):
            self._clone_body(modes, binds)
            return
        b, m = self.b, self.m
        mode = modes[order[level]]
        lt = mode.loop_type

        def inner(var: Int, size: Int, in_remainder: bool = False) -> None:
            self._emit(modes, order, level + 1, {**binds, mode.index: (var, size)},
                       edge or in_remainder)

        if not mode.distributed:
            loop = b.for_(mode.lo, mode.hi, mode.step if self.tiled else None)
            with loop as (var, *_):
                inner(var, m.min(mode.step, m.sub(mode.hi, var, lt), lt) if self.tiled else 0)
            return
        if edge and self.tiled and mode.remainder is not False:
            # every tile here is partial in an outer mode: this mode's full tiles and its
            # remainder share one copy of the region, sized min(tile, to - offset) (a
            # gemm's edge tiles check rows and columns alike; ?x?x? had four copies)
            hi = m.value(mode.hi, lt)
            with b.for_(self._first(mode), hi, m.value(mode.step, lt)) as (var, *_):
                inner(var, m.min(mode.tile, m.sub(hi, var, lt), lt))
            return
        end = mode.main_end if self.tiled else mode.hi
        if _statically_empty(mode.start, end):
            pass
        elif mode.offset is not None:
            with b.for_(mode.lo, end, mode.step) as (first, *_):
                inner(m.add(first, mode.offset, lt), mode.tile)
        else:
            with b.for_(mode.start, end, mode.step) as (var, *_):
                inner(var, mode.tile)
        if not self.tiled or mode.remainder is False:
            return
        if mode.remainder is True:
            inner(mode.main_end, mode.remainder_size, True)
        else:
            with b.if_(mode.remainder):
                inner(mode.main_end, mode.remainder_size, True)

    def _first(self, mode: _Mode) -> Value:
        """The first offset of this worker in a distributed mode."""
        m, lt = self.m, mode.loop_type
        start = mode.start if mode.offset is None else m.add(mode.lo, mode.offset, lt)
        return m.value(start, lt)

    def _full_tests(self, modes: List[_Mode]) -> List[Instruction]:
        """The region's tests that its tile is full in both modes (``and`` of the two
        modes' ``equal`` of size and tile, as a gemm makes) where the tiles of two
        distributed modes have remainders of sizes known only at run time; else none.
        Such a region's edge tiles run as one copy (``_emit_two_copies``)."""
        if not self.tiled or len(modes) != 2 or not all(
                mode.distributed and mode.remainder is not False
                and known(mode.remainder_size) is None for mode in modes):
            return []
        args = self.body.args
        sizes = {args[2 + mode.index]: mode for mode in modes}
        tests: Dict[Value, int] = {}
        for i in self.body.walk():
            if i.opcode == "equal":
                for x, y in (i.operands, i.operands[::-1]):
                    if x in sizes and known(y) == sizes[x].tile:
                        tests[i.results[0]] = sizes[x].index
        return [i for i in self.body.walk() if i.opcode == "and"
                and {tests.get(v) for v in i.operands} == {0, 1}]

    def _emit_two_copies(self, modes: List[_Mode], order: List[int],
                         full_tests: List[Instruction]) -> None:
        """The region as two copies, one for the full tiles and one for the tiles partial
        in either mode, the latter's tests of a full tile (``_full_tests``) false: a loop
        over this worker's tiles of the outer mode, full ones and the remainder, each
        with the inner mode's full tiles (in a full outer tile: sizes the tiles) and then
        its edge tiles, from its remainder tile (in a full outer tile, where this worker
        owns it) or from its first tile (the outer remainder), sizes min(tile, to -
        offset).  A gemm of run-time sizes had a copy of its tile code for each of the
        full tiles, the two edges and the corner; the edges of each outer tile follow
        its full tiles."""
        b, m = self.b, self.m
        outer, inner = (modes[k] for k in order)
        lo, li = outer.loop_type, inner.loop_type
        hi_o, hi_i = m.value(outer.hi, lo), m.value(inner.hi, li)

        def pick(cond: Bool, then: Int, other: Int) -> Value:
            """then where cond, else other (an index of the inner mode)."""
            branch = b.if_(m.flag(cond), results=[li])
            with branch:
                b.yield_([m.value(then, li)])
            with branch.else_():
                b.yield_([m.value(other, li)])
            return branch.results[0]

        # the inner mode's full tiles run from `start` (its loop's first value) to
        # main_end in a full outer tile, not at all in the outer remainder
        start = inner.lo if inner.offset is not None else inner.start
        first_i, owned = self._first(inner), pick(inner.remainder, inner.main_end, hi_i)
        with b.for_(self._first(outer), hi_o, m.value(outer.step, lo)) as (j, *_):
            full_outer = m.less_than(j, outer.main_end, lo)
            with b.for_(m.value(start, li), pick(full_outer, inner.main_end, start),
                        m.value(inner.step, li)) as (var, *_):
                i = var if inner.offset is None else m.add(var, inner.offset, li)
                self._clone_body(modes, {outer.index: (j, outer.tile),
                                         inner.index: (i, inner.tile)})
            with b.for_(pick(full_outer, owned, first_i), hi_i,
                        m.value(inner.step, li)) as (i, *_):
                self._clone_body(modes, {
                    outer.index: (j, m.min(outer.tile, m.sub(hi_o, j, lo), lo)),
                    inner.index: (i, m.min(inner.tile, m.sub(hi_i, i, li), li))},
                    never_full=full_tests)

    def _clone_body(self, modes: List[_Mode], binds: Dict[int, Tuple[Int, Int]],
                    never_full: Sequence[Instruction] = ()) -> None:
        """A copy of the foreach region with its arguments bound, at the insertion point;
        ``never_full``: tests of the region false in this copy."""
        args = self.body.args
        n = len(modes)
        mapping: Dict[Value, Value] = {}
        partial: Dict[Value, int] = {}  # a remainder tile's size -> the tile it is below
        for mode in modes:
            var, size = binds[mode.index]
            if args[mode.index] in self.used:
                mapping[args[mode.index]] = self._bind(var, mode)
            if self.tiled and args[n + mode.index] in self.used:
                mapping[args[n + mode.index]] = self._bind(size, mode)
                if size is mode.remainder_size and known(size) is None:
                    partial[args[n + mode.index]] = mode.tile
        full_tests = [i for i in self.body.walk()
                      if i.opcode == "equal" and _is_tile_of(i.operands, partial)]
        full_tests += never_full
        never = self.b.constant(False, BOOL) if full_tests else None
        region = self.b.insertion_region
        for inst in clone_instructions(self.body.instructions, mapping):
            region.append(inst)
        for test in full_tests:
            replace_all_uses(region, mapping[test.results[0]], never)

    def _bind(self, x: Int, mode: _Mode) -> Value:
        m = self.m
        return m.value(m.cast(x, mode.loop_type, mode.type), mode.type)


def _is_tile_of(operands, partial: Dict[Value, int]) -> bool:
    """``equal`` of a remainder tile's size and its tile: never true, as the remainder
    tile runs only where it is not empty and its size is the range modulo the tile (a
    gemm tests whether its tile is full: the test folds, and its unchecked copy of the
    tile code with it)."""
    a, c = operands
    for x, y in ((a, c), (c, a)):
        if x in partial and known(y) == partial[x]:
            return True
    return False


def _known_or(v: Value) -> Int:
    k = known(v)
    return v if k is None else k


def _statically_empty(start: Int, end: Int) -> bool:
    ks, ke = known(start), known(end)
    return ks is not None and ke is not None and ks >= ke
