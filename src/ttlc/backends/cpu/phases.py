"""A ``parallel`` region run one subgroup after the other, split at its barriers.

When a work-group has more subgroups than run in lockstep (``function.loops_over_subgroups``),
the region's code is emitted for one subgroup only and run in a loop over the subgroups,
so that code and compile time do not grow with the work-group.  A barrier ends such a
loop and begins the next (work-item loop fission, as pocl does it): the region becomes a
sequence of *phases*, each a loop over the subgroups; every subgroup has finished a phase
before any starts the next, which is what the barrier asks.

A ``for`` or ``if`` containing a barrier must be reached by the whole work-group (spec,
"Barrier"), so its bounds or condition are the same for every work-item; it runs once at
the work-group's level (the values of subgroup 0), and its body is again a sequence of
phases.  Values that one phase defines and another uses, the loop-carried values of such
loops and the results of such ``if``s are kept per subgroup in the kernel's scratch memory
(``Slots``): stored at the end of the phase that defines them, loaded at the start of a
phase that uses them.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Union

from llvmlite import ir

from ...ir.core import Instruction, Region, Value
from .function import FunctionCodegen, has_barrier
from .values import F16, F32, F64, I8, I32, I64, LLTYPE, CoopVal, Cplx, GroupVal, Lanes, MemVal

#: the shapes of values made of several LLVM values, taken apart and rebuilt by ``Slots``
_STRUCTS = (Cplx, Lanes, MemVal, GroupVal, CoopVal)
#: LLVM values that are the same in every subgroup: never stored
_FIXED = (ir.Constant, ir.GlobalValue, ir.Argument)


def _body(region: Region) -> List[Instruction]:
    insts = region.instructions
    return insts[:-1] if insts and insts[-1].opcode == "yield" else list(insts)


def _yielded(region: Region) -> List[Value]:
    insts = region.instructions
    return list(insts[-1].slots["values"]) if insts and insts[-1].opcode == "yield" else []


Segment = Union[List[Instruction], Instruction]


def segments(insts: Sequence[Instruction]) -> List[Segment]:
    """The instructions as runs without barriers (lists: one phase each) and the
    instructions that contain one (a ``barrier``, ``for`` or ``if``), in order."""
    out: List[Segment] = []
    run: List[Instruction] = []
    for inst in insts:
        if has_barrier(inst):
            if run:
                out.append(run)
                run = []
            out.append(inst)
        else:
            run.append(inst)
    if run:
        out.append(run)
    return out


def tail_position(items: Sequence[Segment], carried: Sequence[Value],
                  yielded: Sequence[Value]) -> Optional[int]:
    """Where the copy of a region's yielded values into their slots can go: the end of
    the last run (its index in items) after which nothing reads the region's carried
    values (their slots then already hold the next ones) and nothing defines a yielded
    value; None: a phase of its own after the last segment.  (A loop body ending in
    ``barrier; yield`` copies in the phase before the barrier.)"""
    later_uses: Set[Value] = set()
    later_defs: Set[Value] = set()
    for k in reversed(range(len(items))):
        insts = items[k] if isinstance(items[k], list) else [items[k]]
        if (isinstance(items[k], list) and later_uses.isdisjoint(carried)
                and later_defs.isdisjoint(yielded)):
            return k
        later_uses.update(_operands(insts))
        later_defs.update(r for i in insts for r in i.results)
    return None


def _operands(insts: Iterable[Instruction]) -> List[Value]:
    """Every value the instructions (and their regions) use, once, in order."""
    seen: Dict[Value, None] = {}
    for inst in insts:
        for v in inst.operands:
            seen.setdefault(v, None)
        for r in inst.regions:
            for i in r.walk():
                for v in i.operands:
                    seen.setdefault(v, None)
    return list(seen)


class Plan:
    """Which values a phase defines and another uses (``spilled``): the same walk over
    the region as the emission, counting phases instead of emitting them."""

    WORK_GROUP = -1

    def __init__(self, region: Region):
        self.defined: Dict[Value, int] = {}
        self.used: Dict[Value, Set[int]] = {}
        self.count = 0
        self._walk(_body(region), [])
        self.spilled = {v for v, p in self.defined.items() if self.used.get(v, {p}) - {p}}

    def _phase(self, used: Iterable[Value], defined: Iterable[Value] = ()) -> None:
        p, self.count = self.count, self.count + 1
        self._use(p, used)
        for v in defined:
            self.defined[v] = p

    def _use(self, p: int, values: Iterable[Value]) -> None:
        for v in values:
            self.used.setdefault(v, set()).add(p)

    def _walk(self, insts: Sequence[Instruction], tail: List[Value],
              carried: Sequence[Value] = ()) -> None:
        items = segments(insts)
        at = tail_position(items, carried, tail) if tail else None
        for k, item in enumerate(items):
            if isinstance(item, list):
                self._phase(_operands(item) + (tail if k == at else []),
                            [r for i in item for r in i.results])
            elif item.opcode == "for":
                self._use(self.WORK_GROUP, [item.slots[s] for s in ("from", "to", "step")
                                            if s in item.slots])
                self._phase(item.slots.get("init", []))
                body = item.regions[0]
                self._walk(_body(body), _yielded(body), body.args[1:])
            elif item.opcode == "if":
                self._use(self.WORK_GROUP, [item.slots["condition"]])
                for r in item.regions:
                    self._walk(_body(r), _yielded(r))
        if tail and at is None:
            self._phase(tail)


def _bits(t: ir.Type) -> int:
    if isinstance(t, ir.VectorType):
        return t.count * _bits(t.element)
    if isinstance(t, ir.IntType):
        return t.width
    return {F16: 16, F32: 32, F64: 64}.get(t, 64)


def _leaves(x) -> list:
    """The LLVM values a value of the code generator is made of, in a fixed order."""
    if isinstance(x, ir.Value):
        return [x]
    if isinstance(x, (list, tuple)):
        return [leaf for e in x for leaf in _leaves(e)]
    if isinstance(x, _STRUCTS):
        return [leaf for f in fields(x) for leaf in _leaves(getattr(x, f.name))]
    if hasattr(x, "store"):  # a HeldMatrix (amx): never held across a barrier
        raise AssertionError("internal error: a coopmatrix in tile registers across a barrier")
    return []


def _rebuild(x, leaves):
    if isinstance(x, ir.Value):
        return next(leaves)
    if isinstance(x, list):
        return [_rebuild(e, leaves) for e in x]
    if isinstance(x, tuple):
        return tuple(_rebuild(e, leaves) for e in x)
    if isinstance(x, _STRUCTS):  # (a subclass holding it another way, coop.PiecesVal, as
        # the structure it is)
        kind = next(t for t in _STRUCTS if isinstance(x, t))
        return kind(*[_rebuild(getattr(x, f.name), leaves) for f in fields(x)])
    return x


class Slots:
    """One value per subgroup in the kernel's scratch memory: the LLVM values of a
    template value of the code generator (all of them with ``every``, else those that
    may differ between subgroups), each an array over the subgroups."""

    def __init__(self, cg: FunctionCodegen, template, every: bool = False):
        self.template = template
        #: (index among the leaves, LLVM type, byte offset, bytes per subgroup)
        self.kept = []
        for k, leaf in enumerate(_leaves(template)):
            if every or not isinstance(leaf, _FIXED):
                size = -(-_bits(leaf.type) // 8)
                stride = 1 << (size - 1).bit_length() if size < 64 else -(-size // 64) * 64
                offset = -(-cg.local_bytes // 64) * 64
                cg.local_bytes = offset + stride * cg.subgroup_loop
                self.kept.append((k, leaf.type, offset, stride))

    def _at(self, cg: FunctionCodegen, offset: int, stride: int, g: ir.Value) -> ir.Value:
        b = cg.b
        at = b.add(ir.Constant(I64, offset), b.mul(b.zext(g, I64), ir.Constant(I64, stride)))
        return b.gep(cg.local, [at], source_etype=I8)

    def store(self, cg: FunctionCodegen, value, g: ir.Value) -> None:
        leaves = _leaves(value)
        for k, _, offset, stride in self.kept:
            cg.b.store(leaves[k], self._at(cg, offset, stride, g), align=min(stride, 64))

    def load(self, cg: FunctionCodegen, g: ir.Value):
        leaves = _leaves(self.template)
        for k, t, offset, stride in self.kept:
            leaves[k] = cg.b.load(self._at(cg, offset, stride, g), typ=t, align=min(stride, 64))
        return _rebuild(self.template, iter(leaves))


class Phases:
    """The emission of one parallel region as phases (``emit``)."""

    def __init__(self, cg: FunctionCodegen, region: Region):
        self.cg = cg
        self.plan = Plan(region)
        #: values kept in scratch memory: spilled ones, loop-carried values and results
        self.slots: Dict[Value, Slots] = {}
        self.items(_body(region))

    def items(self, insts: Sequence[Instruction], yielded: Sequence[Value] = (),
              tail: Optional[Callable] = None, carried: Sequence[Value] = ()) -> None:
        """The instructions' phases; tail(g), which copies the yielded values, where
        ``tail_position`` puts it."""
        items = segments(insts)
        at = tail_position(items, carried, yielded) if tail is not None else None
        for k, item in enumerate(items):
            if isinstance(item, list):
                self.run(item, tail if k == at else None)
            elif item.opcode == "for":
                self.loop(item)
            elif item.opcode == "if":
                self.branch(item)
        if tail is not None and at is None:
            self.phase([], tail)

    def phase(self, uses: Sequence[Value], emit: Callable) -> None:
        """emit(g) in a loop over the subgroups, g the subgroup (an i32), after loading the
        values of ``uses`` that live in scratch memory."""
        cg = self.cg

        def body():
            g = cg.subgroup_index
            for v in uses:
                if v in self.slots:
                    cg.env[v] = self.slots[v].load(cg, g)
            emit(g)
        over_subgroups(cg, body)

    def run(self, insts: List[Instruction], tail: Optional[Callable]) -> None:
        cg = self.cg

        def emit(g):
            for inst in insts:
                cg.emit(inst)
            for inst in insts:
                for r in inst.results:
                    if r in self.plan.spilled:
                        slots = self.slots.get(r)
                        if slots is None:
                            slots = self.slots[r] = Slots(cg, cg.env[r])
                        slots.store(cg, cg.env[r], g)
            if tail is not None:
                tail(g)
        self.phase(_operands(insts), emit)

    def uniform(self, v: Value) -> ir.Value:
        """A value that is the same in every work-item, at the work-group's level: the one
        of subgroup 0 when it lives in scratch memory."""
        cg = self.cg
        if v not in self.slots:
            return cg.get(v)
        x = self.slots[v].load(cg, ir.Constant(I32, 0))
        x = cg.vector(x) if isinstance(x, Lanes) else x
        return cg.lane(x, ir.Constant(I32, 0))

    def carried(self, values: Sequence[Value]) -> List[Slots]:
        """Slots for loop-carried values or results of these types (their representation
        as ``FunctionCodegen.part_types`` gives it)."""
        cg = self.cg
        return [Slots(cg, cg.zero(v.type, v in cg.varying), every=True) for v in values]

    def copy(self, values: Sequence[Value], into: List[Slots], like: Sequence[Value]):
        """tail(g) storing values into the slots, each as the corresponding value of like
        (uniform or varying)."""
        cg = self.cg

        def tail(g):
            xs = []
            for v in values:  # everything loaded before anything is stored (a swap)
                if v in self.slots:
                    cg.env[v] = self.slots[v].load(cg, g)
                xs.append(cg.get(v))
            for x, s, w in zip(xs, into, like):
                s.store(cg, cg.coerce(x, w in cg.varying), g)
        return tail

    def loop(self, inst: Instruction) -> None:
        """A ``for`` containing a barrier: its control at the work-group's level."""
        cg = self.cg
        b = cg.b
        body = inst.regions[0]
        ll = LLTYPE[inst.slots["from"].type.name]
        lo, hi = self.uniform(inst.slots["from"]), self.uniform(inst.slots["to"])
        step = self.uniform(inst.slots["step"]) if "step" in inst.slots else ir.Constant(ll, 1)
        args = body.args[1:]
        carried = self.carried(args)
        inits = list(inst.slots.get("init", []))
        if inits:
            self.phase([], self.copy(inits, carried, args))
        pre = b.block
        header, body_bb, done = cg.block("for.wg"), cg.block("for.wg.body"), cg.block("for.wg.done")
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(ll, name="i")
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body_bb, done)
        b.position_at_end(body_bb)
        cg.env[body.args[0]] = i
        self.slots.update(zip(args, carried))
        yielded = _yielded(body)
        self.items(_body(body), yielded, self.copy(yielded, carried, args) if yielded else None,
                   args)
        i.add_incoming(b.add(i, step), b.block)
        b.branch(header)
        b.position_at_end(done)
        self.slots.update(zip(inst.results, carried))

    def branch(self, inst: Instruction) -> None:
        """An ``if`` containing a barrier: its condition at the work-group's level."""
        cg = self.cg
        b = cg.b
        cond = self.uniform(inst.slots["condition"])
        results = self.carried(inst.results)
        merge = cg.block("endif.wg")
        blocks = [cg.block(name) for name in ("then.wg", "else.wg")[:len(inst.regions)]]
        b.cbranch(cond, blocks[0], blocks[1] if len(blocks) > 1 else merge)
        for region, block in zip(inst.regions, blocks):
            b.position_at_end(block)
            yielded = _yielded(region)
            self.items(_body(region), yielded,
                       self.copy(yielded, results, inst.results) if yielded else None)
            b.branch(merge)
        b.position_at_end(merge)
        self.slots.update(zip(inst.results, results))


def over_subgroups(cg: FunctionCodegen, emit: Callable[[], None]) -> None:
    """emit() in a loop over the work-group's subgroups, ``cg.subgroup_index`` the one
    running."""
    b = cg.b
    pre = b.block
    header, done = cg.block("subgroups"), cg.block("subgroups.done")
    b.branch(header)
    b.position_at_end(header)
    g = b.phi(I32, name="subgroup")
    g.add_incoming(ir.Constant(I32, 0), pre)
    saved, cg.subgroup_index = cg.subgroup_index, g
    try:
        emit()
    finally:
        cg.subgroup_index = saved
    following = b.add(g, ir.Constant(I32, 1))
    g.add_incoming(following, b.block)
    b.cbranch(b.icmp_signed("<", following, ir.Constant(I32, cg.subgroup_loop)), header, done)
    b.position_at_end(done)
