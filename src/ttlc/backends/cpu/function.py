"""The state of the code generator for one kernel, and the walk over its regions.

``FunctionCodegen`` holds what emitting one kernel needs (the LLVM function and builder,
the values of the ttlc values, the lane mask, which values vary, the checked-code error
exit) with the small helpers every emitter uses, builds the function's frame (arguments,
the loop over work-groups), and emits a region by handing each instruction to its
emitter.  The table of emitters is given to it (``codegen.EMITTERS``): the modules of
the emitters build on this one, not the other way round.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from llvmlite import ir

from ...analysis.uniformity import analyze_varying
from ...ir.core import Function, Instruction, Region, Value
from ...ir.numerics import fold_int, wrap
from ...ir.types import DYNAMIC, BoolType, CoopMatrixType, GroupType, MemrefType, ScalarType, Type
from ...target import ExecConfig, get_target
from . import races
from .abi import ArgSlots, InstRef, KernelInfo, arg_layout
from ...runtime.findings import ERR_SLOTS
from .values import (F32, I1, I8, I16, I32, I64, LLTYPE, PTR, CoopVal, Cplx, FoldingBuilder,
                     GroupVal, IndexLike, Lanes, MemVal, UndefVector, Unsupported, VectorConstant,
                     is_vec, mangle, parts, zero_of)


def _pow2_vector(t: ir.Type) -> Optional[ir.VectorType]:
    """The vector type of t's elements with the next power-of-two length, where t is a
    vector of more than one register's worth whose length is not a power of two."""
    if not isinstance(t, ir.VectorType) or t.count <= 8 or t.count & (t.count - 1) == 0:
        return None
    return ir.VectorType(t.element, 1 << (t.count - 1).bit_length())


#: instructions without effects, which ``drop_unused`` removes where nothing uses them
_PURE = frozenset("""
    shufflevector insertelement extractelement getelementptr add sub mul and or xor shl lshr
    ashr fadd fsub fmul fneg icmp fcmp select trunc zext sext fptrunc fpext bitcast sitofp
    uitofp fptosi fptoui
""".split())


def drop_unused(fn: ir.Function) -> None:
    """Remove the instructions without effects whose results nothing uses, until none is
    left.  Code generation leaves many: a coopmatrix joined from pieces only for its
    pieces to be taken again (``FoldingBuilder.shuffle_vector`` takes them directly), the
    vectors of indices of accesses that need none; LLVM would parse them only to drop
    them."""
    uses: Dict[int, int] = {}
    for block in fn.blocks:
        for inst in block.instructions:
            for v in ([v for v, _ in inst.incomings] if isinstance(inst, ir.PhiInstr)
                      else inst.operands):
                uses[id(v)] = uses.get(id(v), 0) + 1
    dead = [inst for block in fn.blocks for inst in block.instructions
            if inst.opname in _PURE and id(inst) not in uses]
    dropped = set()
    while dead:
        inst = dead.pop()
        dropped.add(id(inst))
        for v in inst.operands:
            uses[id(v)] -= 1
            if not uses[id(v)] and getattr(v, "opname", None) in _PURE \
                    and isinstance(v, ir.Instruction):
                dead.append(v)
    if dropped:
        for block in fn.blocks:
            block.instructions[:] = [i for i in block.instructions if id(i) not in dropped]


def not_unrolled(latch: ir.Instruction) -> None:
    """Tell LLVM's loop unroller to leave the loop whose back edge is `latch` as it is:
    its own loop identifier (a metadata node whose first operand is itself, as LLVM
    requires) with ``llvm.loop.unroll.disable``."""
    module = latch.parent.parent.module
    disable = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    # made directly: ``add_metadata`` would merge equal nodes, and a loop's must be its own
    loop = ir.values.MDValue(module, [], name=str(len(module.metadata)))
    loop.operands = (loop, disable)
    latch.set_metadata("llvm.loop", loop)


class LoopCarrier:
    """A carried value of a uniform loop that a back-end feature holds its own way for the
    whole loop (``FunctionCodegen.loop_carriers``), as ``emit_for`` drives it: ``enter``
    before the loop (in the block before it), ``header`` at the top of the loop's header
    (where its phis go), the body's instructions update it in place, ``latch`` at the end
    of the body (the block that branches back), ``leave`` after the loop for the result."""

    #: copies of the body per iteration it would like (given when the trip count is a
    #: constant multiple of it)
    unroll = 1
    #: whether the loop must stay a loop (LLVM's unroller told not to unroll it)
    rolled = False

    def enter(self, cg: "FunctionCodegen", init, copies: int) -> "LoopCarrier":
        raise NotImplementedError

    def header(self, cg: "FunctionCodegen", pre: ir.Block) -> None:
        pass

    def latch(self, cg: "FunctionCodegen", end: ir.Block) -> None:
        pass

    def leave(self, cg: "FunctionCodegen"):
        raise NotImplementedError


class FunctionCodegen:
    """Emits one kernel into an LLVM module."""

    def __init__(self, module: ir.Module, func: Function, symbol: str, checked: bool,
                 emitters: Dict[str, Callable], loop_carriers: Sequence[Callable] = ()):
        self.module = module
        self.func = func
        self.symbol = symbol
        self.checked = checked
        self.cfg = ExecConfig.of(func, get_target("cpu"))
        self.varying = analyze_varying(func)
        #: how many subgroups each ``parallel`` region runs one after the other in a loop,
        #: each as S lanes (``loops_over_subgroups``); 1: the work-group's W lanes together
        self.subgroup_loop = (self.cfg.subgroups if self.cfg.subgroups > LOCKSTEP_SUBGROUPS
                              and not checked and loops_over_subgroups(func, self.varying)
                              else 1)
        #: inside such a loop, the subgroup it runs (an i32)
        self.subgroup_index: Optional[ir.Value] = None
        self.W = self.cfg.lanes // self.subgroup_loop
        self.wgx = self.cfg.work_group_size[0]
        self.S = self.cfg.subgroup_size
        self.env: Dict[Value, Any] = {}
        self.mask: Optional[ir.Value] = None
        self.spmd = False
        self.instructions: List[InstRef] = []
        self.inst_ids: Dict[int, int] = {}
        self.local_bytes = 0
        self.current: Optional[Instruction] = None
        #: id of the cut of a phi carried with padding (``phi``) -> (the cut, the phi)
        self._padded_phis: Dict[int, tuple] = {}
        self.error_block: Optional[ir.Block] = None
        self.roots: Dict[Value, Optional[int]] = {}
        self.writes: Dict[int, InstRef] = {}
        #: checked code of a kernel accessing local memory: its shadow (``races``)
        self.races = None
        #: (offset, bytes, element size, name) of each alloca (``KernelInfo.locals``)
        self.locals: list = []
        #: memref values viewing an alloca's memory -> its index in ``locals``
        self.allocas: Dict[Value, int] = {}
        #: checked code: index in ``locals`` -> i64 slot holding the lifetime_stop that
        #: ended the alloca's lifetime in this work-group (-1: alive)
        self.lifetimes: Dict[int, ir.Value] = {}
        #: (block, memref pointer, the non-static terms of a position) -> the pinned
        #: origin of the tiles there (``coop_memory._origin``)
        self.pinned_origins: Dict[tuple, ir.Value] = {}
        #: called once the function is complete (e.g. to add set-up code to its entry
        #: block and clean-up before its returns, as the AMX tile configuration needs)
        self.finish_hooks: List[Callable[[], None]] = []
        #: opcode -> emitter (cg, instruction) -> its result(s) (``codegen.EMITTERS``)
        self.emitters = emitters
        #: functions (cg, for instruction) -> {index: ``LoopCarrier``}: carried values of a
        #: uniform loop that a back-end feature holds its own way for the whole loop
        #: (``amx.claim_loop``: accumulators in tile registers; ``mul_add.claim_loop``:
        #: FMA accumulators as their pieces of columns).
        self.loop_carriers = tuple(loop_carriers)

    # ---- small helpers -------------------------------------------------------------------
    @property
    def b(self) -> ir.IRBuilder:
        return self.builder

    def vt(self, t: ir.Type) -> ir.VectorType:
        return ir.VectorType(t, self.W)

    def like(self, x, t: ir.Type) -> ir.Type:
        """t, or a vector of t with as many lanes as x."""
        return ir.VectorType(t, x.type.count) if is_vec(x) else t

    def const_like(self, x, t: ir.Type, value) -> ir.Value:
        if is_vec(x):
            return VectorConstant(t, [value] * x.type.count)
        return ir.Constant(t, value)

    def block(self, name: str) -> ir.Block:
        return self.fn.append_basic_block(name)

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Value],
                  overloads: Sequence[ir.Type] = ()) -> ir.Value:
        full = name + "".join("." + mangle(t) for t in overloads)
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, [a.type for a in args]), full)
        return self.b.call(fn, list(args))

    def extern(self, name: str, ret: ir.Type, argtypes: Sequence[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(argtypes)), name)
        return fn

    def splat(self, x):
        if isinstance(x, Lanes):
            return self.vector(x)
        if hasattr(x, "mats"):  # a coopmatrix has one representation
            return x
        if isinstance(x, Cplx):
            return Cplx(self.splat(x.re), self.splat(x.im))
        if is_vec(x):
            return x
        vt = self.vt(x.type)
        if isinstance(x, ir.Constant) and not isinstance(x.type, ir.PointerType):
            return VectorConstant(x.type, [x.constant] * self.W)
        v = self.b.insert_element(UndefVector(vt), x, ir.Constant(I32, 0))
        return self.b.shuffle_vector(v, UndefVector(vt), VectorConstant(I32, [0] * self.W))

    def match(self, *xs):
        """Broadcast scalars to vectors when any operand is a vector."""
        if any(any(is_vec(p) for p in parts(x)) for x in xs):
            return [self.splat(x) for x in xs]
        return list(xs)

    def varying_repr(self, x):
        return isinstance(x, Lanes) or any(is_vec(p) for p in parts(x))

    def coerce(self, x, varying: bool):
        if hasattr(x, "mats"):
            return x
        if varying:
            return self.splat(x)
        assert not self.varying_repr(x), "internal error: a varying value where a uniform one is expected"
        return x

    def iota(self, t: ir.IntType = I64) -> ir.Constant:
        return ir.Constant(self.vt(t), list(range(self.W)))

    def reduce_or(self, m: ir.Value) -> ir.Value:
        if not is_vec(m):
            return m
        return self.intrinsic("llvm.vector.reduce.or", I1, [m], [m.type])

    def reduce_and(self, m: ir.Value) -> ir.Value:
        if not is_vec(m):
            return m
        return self.intrinsic("llvm.vector.reduce.and", I1, [m], [m.type])

    def and_mask(self, m: Optional[ir.Value], c: ir.Value) -> ir.Value:
        if m is None:
            return c
        m, c = self.match(m, c)
        return self.b.and_(m, c)

    def lane(self, x, l: ir.Value):
        """The value of lane l (a scalar i32) of x."""
        if isinstance(x, Cplx):
            return Cplx(self.lane(x.re, l), self.lane(x.im, l))
        return self.b.extract_element(x, l) if is_vec(x) else x

    # index arithmetic on Python ints (static) and LLVM i64 values (scalar or vector)
    def ival(self, x: IndexLike) -> ir.Value:
        if isinstance(x, Lanes):
            return self.vector(x)
        return ir.Constant(I64, x) if isinstance(x, int) else x

    def iadd(self, a: IndexLike, c: IndexLike) -> IndexLike:
        if isinstance(a, int) and isinstance(c, int):
            return a + c
        if isinstance(a, int) and a == 0:
            return c
        if isinstance(c, int) and c == 0:
            return a
        if isinstance(a, Lanes) or isinstance(c, Lanes):
            r = self.lanes_binary("add", a, c, 64)
            if r is not None:
                return r
        x, y = self.match(self.ival(a), self.ival(c))
        return self.b.add(x, y)

    def imul(self, a: IndexLike, c: IndexLike) -> IndexLike:
        if isinstance(a, int) and isinstance(c, int):
            return a * c
        if isinstance(a, int) and a in (0, 1):
            return 0 if a == 0 else c
        if isinstance(c, int) and c in (0, 1):
            return 0 if c == 0 else a
        if isinstance(a, Lanes) or isinstance(c, Lanes):
            r = self.lanes_binary("mul", a, c, 64)
            if r is not None:
                return r
        x, y = self.match(self.ival(a), self.ival(c))
        return self.b.mul(x, y)

    def get(self, v: Value):
        """The value as LLVM values (Lanes become vectors)."""
        x = self.env[v]
        return self.vector(x) if isinstance(x, Lanes) else x

    def raw(self, v: Value):
        """The value as stored: Lanes stay Lanes."""
        return self.env[v]

    def index_of(self, x) -> IndexLike:
        """An int attribute or an index value (Lanes kept)."""
        return x if isinstance(x, int) else self.raw(x)

    def vector(self, x: Lanes) -> ir.Value:
        c = ir.Constant(self.vt(x.type), list(x.offsets))
        if x.base is None:
            return c
        return self.b.add(self.splat(x.base), c)

    def as_lanes(self, x) -> Optional[Lanes]:
        """x as Lanes when it is Lanes, a uniform integer or an int (as i64); else None."""
        if isinstance(x, Lanes):
            return x
        if isinstance(x, int):
            return Lanes(ir.Constant(I64, x), (0,) * self.W, I64)
        if isinstance(x, ir.Value) and isinstance(x.type, ir.IntType):
            return Lanes(x, (0,) * self.W, x.type)
        return None

    def scalar_op(self, op: str, a: Optional[ir.Value], c: Optional[ir.Value], t: ir.IntType):
        """a op c on uniform integers (None is 0), folded when both are constants."""
        if op in ("add", "sub"):
            if c is None:
                return a
            if a is None:
                return c if op == "add" else self.scalar_op("sub", ir.Constant(t, 0), c, t)
        if isinstance(a, ir.Constant) and isinstance(c, ir.Constant):
            return ir.Constant(t, fold_int(op, int(a.constant), int(c.constant), t.width))
        return {"add": self.b.add, "sub": self.b.sub, "mul": self.b.mul}[op](a, c)

    def lanes_binary(self, op: str, a, c, bits: int) -> Optional[Lanes]:
        """An integer instruction on Lanes operands, when the result is Lanes too."""
        la, lc = self.as_lanes(a), self.as_lanes(c)
        if la is None or lc is None:
            return None
        t = la.type
        if la.base is None and lc.base is None or (
                isinstance(la.base, ir.Constant) and isinstance(lc.base, ir.Constant)):
            # every lane known: fold
            ba = 0 if la.base is None else int(la.base.constant)
            bc = 0 if lc.base is None else int(lc.base.constant)
            out = []
            for x, y in zip(la.offsets, lc.offsets):
                r = fold_int(op, wrap(ba + x, bits), wrap(bc + y, bits), bits)
                if r is None:
                    return None
                out.append(r)
            return Lanes(None, tuple(out), t)
        if op in ("add", "sub"):
            sign = 1 if op == "add" else -1
            return Lanes(self.scalar_op(op, la.base, lc.base, t),
                         tuple(wrap(x + sign * y, bits) for x, y in zip(la.offsets, lc.offsets)), t)
        if op in ("mul", "shl"):
            for x, y in ((la, lc), (lc, la)):
                if not any(y.offsets) and isinstance(y.base, ir.Constant):
                    k = int(y.base.constant)
                    if op == "shl":
                        if x is not la:
                            return None
                        k = 1 << (k & (bits - 1))
                    base = None if x.base is None else self.scalar_op(
                        "mul", x.base, ir.Constant(t, wrap(k, bits)), t)
                    return Lanes(base, tuple(wrap(o * k, bits) for o in x.offsets), t)
        return None

    def lanes_cast(self, x: Lanes, dst: ir.IntType) -> Optional[Lanes]:
        src = x.type
        if dst.width == src.width:
            return x
        if dst.width < src.width:
            base = None if x.base is None else self.b.trunc(x.base, dst)
            return Lanes(base, tuple(wrap(o, dst.width) for o in x.offsets), dst)
        if x.base is None or isinstance(x.base, ir.Constant):
            b0 = 0 if x.base is None else int(x.base.constant)
            return Lanes(None, tuple(wrap(b0 + o, src.width) for o in x.offsets), dst)
        return None  # sign extension of base + offset is not base' + offset'

    # ---- representation of types -----------------------------------------------------------
    def part_types(self, t: Type, varying: bool) -> List[ir.Type]:
        if isinstance(t, CoopMatrixType):
            vt = ir.VectorType(LLTYPE[t.component.name], t.rows * t.cols)
            return [vt] * ((2 if t.component.is_complex else 1) * (self.W // self.S))
        if isinstance(t, BoolType):
            base = [I1]
        elif isinstance(t, ScalarType):
            base = [LLTYPE[t.name]] * (2 if t.is_complex else 1)
        else:
            raise Unsupported(f"values of type {t}")
        return [self.vt(x) for x in base] if varying else base

    def from_parts(self, t: Type, ps: list):
        if isinstance(t, CoopMatrixType):
            if t.component.is_complex:
                return CoopVal([Cplx(ps[k], ps[k + 1]) for k in range(0, len(ps), 2)], t)
            return CoopVal(list(ps), t)
        return Cplx(ps[0], ps[1]) if isinstance(t, ScalarType) and t.is_complex else ps[0]

    def zero(self, t: Type, varying: bool):
        return self.from_parts(t, [zero_of(x) for x in self.part_types(t, varying)])

    def phi(self, t: Type, varying: bool):
        """A phi of type t at the start of the current block.  A vector whose length is
        not a power of two (a coopmatrix of 8 x 9 f64) is carried as the next power of
        two (the added lanes undefined) and cut after the phis: LLVM's instruction
        selection would split it into pieces across the edge and rebuild it lane by lane
        at every loop iteration (unpacks, inserts and spills in a gemm's K loop)."""
        return self.from_parts(t, [self.phi_of(x) for x in self.part_types(t, varying)])

    def phi_of(self, x: ir.Type) -> ir.Value:
        """A phi of the LLVM type x at the start of the current block (padded as ``phi``
        says), whatever the block already holds (a result of an ``if`` merged before it
        may have joined its phis there: ``mul_add.merged_columns``); ``add_incoming``
        gives it its values."""
        wide = _pow2_vector(x)
        block = self.b.block
        after = next((i for i in block.instructions if not isinstance(i, ir.PhiInstr)), None)
        if after is not None:  # (after the phis made before it, in their order)
            self.b.position_before(after)
        carried = self.b.phi(x if wide is None else wide)
        self.b.position_at_end(block)
        if wide is None:
            return carried
        cut = self.b.shuffle_vector(carried, UndefVector(wide), VectorConstant(I32, range(x.count)))
        self._padded_phis[id(cut)] = (cut, carried)
        return cut

    def add_incoming(self, phi, value, block: ir.Block) -> None:
        for p, v in zip(parts(phi), parts(value)):
            padded = self._padded_phis.get(id(p))
            if padded is None:
                p.add_incoming(v, block)
                continue
            carried = padded[1]
            n = v.type.count
            with self.b.goto_block(block):  # (before its terminator)
                v = self.b.shuffle_vector(v, UndefVector(v.type), VectorConstant(
                    I32, list(range(n)) + [n] * (carried.type.count - n)))
            carried.add_incoming(v, block)

    # ---- bf16 and friends ---------------------------------------------------------------------
    def bf16_to_f32(self, x: ir.Value) -> ir.Value:
        wide = self.b.zext(x, self.like(x, I32))
        return self.b.bitcast(self.b.shl(wide, self.const_like(x, I32, 16)), self.like(x, F32))

    def f32_to_bf16(self, x: ir.Value) -> ir.Value:
        """Round to nearest even (as ml_dtypes); NaN stays a quiet NaN."""
        b = self.b
        i32 = self.like(x, I32)
        bits = b.bitcast(x, i32)
        hi = b.lshr(bits, self.const_like(x, I32, 16))
        lsb = b.and_(hi, self.const_like(x, I32, 1))
        rounded = b.lshr(b.add(bits, b.add(lsb, self.const_like(x, I32, 0x7FFF))),
                         self.const_like(x, I32, 16))
        nan = b.fcmp_unordered("uno", x, x)
        quiet = b.or_(hi, self.const_like(x, I32, 0x40))
        return b.trunc(b.select(nan, quiet, rounded), self.like(x, I16))

    def to_compute(self, t: ScalarType, x):
        """Operand in its compute type: bf16 as f32; everything else unchanged."""
        return self.bf16_to_f32(x) if t.name == "bf16" else x

    def from_compute(self, t: ScalarType, x):
        return self.f32_to_bf16(x) if t.name == "bf16" else x

    # ---- errors of checked code ----------------------------------------------------------------
    def inst_id(self, inst: Instruction) -> int:
        key = id(inst)
        if key not in self.inst_ids:
            self.inst_ids[key] = len(self.instructions)
            self.instructions.append(InstRef.of(inst))
        return self.inst_ids[key]

    def fail_if(self, bad: ir.Value, code: int, details: Sequence[Any] = (),
                lane: Optional[ir.Value] = None) -> None:
        """Checked code: report error `code` when `bad` (per lane: in an active lane);
        ``lane`` (i32) names the work-item when bad is uniform."""
        b = self.b
        details = [self.ival(d) if not isinstance(d, ir.Value) else d for d in details]
        if not is_vec(bad) and any(is_vec(d) for d in details):
            bad = self.splat(bad)  # a uniform condition, varying details: the first lane's
        if is_vec(bad) and self.mask is not None:
            bad = b.and_(bad, self.mask)
        any_bad = self.reduce_or(bad)
        fail = self.block("check.fail")
        ok = self.block("check.ok")
        b.cbranch(any_bad, fail, ok)
        b.position_at_end(fail)
        if is_vec(bad):
            lane = self.first_lane(bad)
            lane_i64 = b.zext(lane, I64)
        elif lane is not None:
            lane_i64 = b.zext(lane, I64)
        else:
            lane_i64 = ir.Constant(I64, -1)
        values = [ir.Constant(I64, self.inst_id(self.current)), lane_i64]
        for v in details:
            if is_vec(v):
                v = b.extract_element(v, lane)
            if isinstance(v.type, ir.IntType) and v.type.width < 64:
                v = b.sext(v, I64)
            values.append(v)
        b.store(ir.Constant(I64, code), self.err)
        for k, v in enumerate(values[:ERR_SLOTS - 4]):
            b.store(v, b.gep(self.err, [ir.Constant(I64, 4 + k)], source_etype=I64))
        b.branch(self.error_exit())
        b.position_at_end(ok)

    def first_lane(self, m: ir.Value) -> ir.Value:
        """Index (i32) of the first true lane of a mask (W if none)."""
        b = self.b
        bits = b.bitcast(m, ir.IntType(m.type.count))
        n = self.intrinsic("llvm.cttz", bits.type, [bits, ir.Constant(I1, 0)], [bits.type])
        if bits.type.width > 32:
            return b.trunc(n, I32)
        if bits.type.width < 32:
            return b.zext(n, I32)
        return n

    def error_exit(self) -> ir.Block:
        if self.error_block is None:
            self.error_block = self.fn.append_basic_block("error")
            saved = self.b.block
            self.b.position_at_end(self.error_block)
            for k, g in enumerate(self.gid):
                self.b.store(g, self.b.gep(self.err, [ir.Constant(I64, 1 + k)], source_etype=I64))
            self.b.ret(ir.Constant(I32, 1))
            self.b.position_at_end(saved)
        return self.error_block

    # ---- the function ---------------------------------------------------------------------------
    def build(self) -> KernelInfo:
        self.check_supported(self.func.body)
        layout, nslots = arg_layout(self.func)
        fnty = ir.FunctionType(I32, [PTR, I64, I64, PTR, PTR])
        self.fn = ir.Function(self.module, fnty, self.symbol)
        args, first, end, local, err = self.fn.args
        args.name, first.name, end.name, local.name, err.name = "args", "first", "end", "local", "err"
        self.local, self.err = local, err
        entry = self.fn.append_basic_block("entry")
        self.builder = FoldingBuilder(entry)
        b = self.b

        def slot(k: int) -> ir.Value:
            return b.gep(args, [ir.Constant(I64, k)], source_etype=I64)

        self.num_groups = [b.load(slot(k), typ=I64, name=f"ng{'xyz'[k]}") for k in range(3)]
        if self.checked:
            self.races = races.setup(self)
        for index, (a, lay) in enumerate(zip(self.func.args, layout)):
            self.roots[a.value] = index
            self.env[a.value] = self.unpack_arg(a.value.type, lay, slot)
        header = self.block("groups")
        body = self.block("group")
        done = self.block("done")
        # the group's (x, y, z) from the linear id once, then counted along with it (no
        # division per work-group: a 64-bit div costs as much as a small gemm's FMAs)
        nx, ny, _ = self.num_groups
        rest0 = b.udiv(first, nx)
        start = (b.urem(first, nx), b.urem(rest0, ny), b.udiv(rest0, ny))
        pre = b.block
        b.branch(header)
        b.position_at_end(header)
        gid = b.phi(I64, name="gid")
        gid.add_incoming(first, pre)
        coords = [b.phi(I64, name=f"g{'xyz'[k]}") for k in range(3)]
        for c, s in zip(coords, start):
            c.add_incoming(s, pre)
        b.cbranch(b.icmp_signed("<", gid, end), body, done)
        b.position_at_end(body)
        self.gid = tuple(coords)
        self.emit_region(self.func.body)
        one, zero = ir.Constant(I64, 1), ir.Constant(I64, 0)
        gx, gy, gz = coords
        x1, y1 = b.add(gx, one), b.add(gy, one)
        wrap_x = b.icmp_unsigned("==", x1, nx)
        wrap_y = b.and_(wrap_x, b.icmp_unsigned("==", y1, ny))
        nxt = [b.select(wrap_x, zero, x1), b.select(wrap_x, b.select(wrap_y, zero, y1), gy),
               b.select(wrap_y, b.add(gz, one), gz)]
        for c, v in zip(coords, nxt):
            c.add_incoming(v, b.block)
        gid.add_incoming(b.add(gid, one), b.block)
        b.branch(header)
        b.position_at_end(done)
        b.ret(ir.Constant(I32, 0))
        for hook in self.finish_hooks:
            hook()
        drop_unused(self.fn)
        return KernelInfo(self.func.name, self.symbol, self.cfg, layout, nslots,
                          self.local_bytes, self.instructions, self.writes, self.locals)

    def check_supported(self, region: Region) -> None:
        for inst in region.walk():
            if inst.opcode not in self.emitters and inst.opcode != "yield":
                raise Unsupported(inst)

    def unpack_arg(self, t: Type, lay: ArgSlots, slot):
        b = self.b
        k = lay.first
        if isinstance(t, MemrefType):
            ptr = b.load(slot(k), typ=PTR)
            n = t.order
            shape = [s if s is not DYNAMIC else b.load(slot(k + 1 + i), typ=I64)
                     for i, s in enumerate(t.shape)]
            stride = [s if s is not DYNAMIC else b.load(slot(k + 1 + n + i), typ=I64)
                      for i, s in enumerate(t.stride)]
            return MemVal(ptr, shape, stride, t)
        if isinstance(t, GroupType):
            ptrs = b.load(slot(k), typ=PTR)
            dopes = b.load(slot(k + 1), typ=PTR)
            count = b.load(slot(k + 2), typ=I64)
            assoc = b.icmp_signed("!=", b.load(slot(k + 3), typ=I64), ir.Constant(I64, 0))
            return GroupVal(ptrs, dopes, count, assoc, t)
        if isinstance(t, BoolType):
            return b.icmp_signed("!=", b.load(slot(k), typ=I8), ir.Constant(I8, 0))
        assert isinstance(t, ScalarType)
        lt = LLTYPE[t.name]
        if t.is_complex:
            re_ = b.load(slot(k), typ=lt)
            im_ptr = b.gep(slot(k), [ir.Constant(I64, 1)], source_etype=lt)
            return Cplx(re_, b.load(im_ptr, typ=lt))
        return b.load(slot(k), typ=lt)

    # ---- regions ------------------------------------------------------------------------------
    def emit_region(self, region: Region, mask: Optional[ir.Value] = None,
                    keep_mask: bool = True) -> Optional[list]:
        saved = self.mask
        if not keep_mask or mask is not None:
            self.mask = mask
        result = None
        try:
            for inst in region.instructions:
                if inst.opcode == "yield":
                    result = [self.get(v) for v in inst.slots["values"]]
                    break
                self.emit(inst)
        finally:
            self.mask = saved
        return result

    def emit(self, inst: Instruction) -> None:
        """One instruction (not a yield): its results into ``env``."""
        self.current = inst
        out = self.emitters[inst.opcode](self, inst)
        if inst.results:
            if len(inst.results) == 1 and inst.opcode not in ("for", "if"):
                out = [out]
            for r, v in zip(inst.results, out):
                self.env[r] = v


#: the most subgroups of a work-group that run a ``parallel`` region in lockstep as one
#: vector program (their independent instructions interleave); more loop over the
#: subgroups (``loops_over_subgroups``, ``phases``), so that code does not grow with the
#: work-group
LOCKSTEP_SUBGROUPS = 4


def has_barrier(inst: Instruction) -> bool:
    return inst.opcode == "barrier" or any(
        i.opcode == "barrier" for r in inst.regions for i in r.walk())


def splits_at_barriers(region: Region, varying: Set[Value]) -> bool:
    """Whether every barrier of the (parallel) region sits in control flow that runs at
    the work-group's level: ``for`` loops with uniform bounds and ``if``s with uniform
    conditions (``analysis.uniformity``), nothing else."""
    for inst in region.instructions:
        if inst.opcode == "barrier" or not has_barrier(inst):
            continue
        if inst.opcode == "for":
            if (any(inst.slots.get(k) in varying for k in ("from", "to", "step"))
                    or inst.regions[0].args[0] in varying):
                return False
        elif inst.opcode != "if" or inst.slots["condition"] in varying:
            return False
        if not all(splits_at_barriers(r, varying) for r in inst.regions):
            return False
    return True


def loops_over_subgroups(func: Function, varying: Set[Value]) -> bool:
    """Whether the subgroups of a work-group may run the function's ``parallel`` regions
    one after the other, phase by phase: every barrier there sits in control flow that
    the work-group runs together (``splits_at_barriers``).  Outside the regions, where
    collective code runs once for the work-group, every subgroup has finished a region
    before.

    Atomics need no lockstep: the spec orders the work-items of a work-group only at
    barriers, so between two barriers every interleaving of their instructions is an
    execution the program must expect, this subgroup-after-subgroup one as well as the
    interpreter's instruction-by-instruction one; the memory semantics (relaxed by
    default; acquire/release) order a work-item's own accesses, which both keep.  What
    differs is only what racing work-items observe (the value an atomic update fetched,
    the rounding of a sum of floats), of which the spec promises none.  Nor does a
    subgroup wait for another outside barriers: ``for`` loops have bounds, so none spins.

    Checked code keeps the work-group's lanes together: its race detection and its
    check of barriers in divergent control flow compare the lanes of the whole
    work-group at each instruction."""
    return all(splits_at_barriers(inst.regions[0], varying)
               for inst in func.body.walk() if inst.opcode == "parallel")


def lane_loop(cg: FunctionCodegen, mask, fn, result_types: Sequence[ir.Type],
              lanes: Optional[int] = None) -> list:
    """for l in 0..n-1, when lane l is active: results[l] = fn(l) (scalars), in lane order;
    n is the work-group size W, or ``lanes`` (vectors of another length: coopmatrices)."""
    b = cg.b
    n = cg.W if lanes is None else lanes
    vt = lambda t: ir.VectorType(t, n)  # noqa: E731
    pre = b.block
    header, body, latch, done = (cg.block("lanes"), cg.block("lane"), cg.block("lane.next"),
                                 cg.block("lanes.done"))
    b.branch(header)
    b.position_at_end(header)
    lane = b.phi(I32, name="lane")
    lane.add_incoming(ir.Constant(I32, 0), pre)
    acc = [b.phi(vt(t)) for t in result_types]
    for p, t in zip(acc, result_types):
        p.add_incoming(zero_of(vt(t)), pre)
    active = b.extract_element(mask, lane) if mask is not None else ir.Constant(I1, 1)
    b.cbranch(active, body, latch)
    b.position_at_end(body)
    vals = fn(lane)
    new = [b.insert_element(a, v, lane) for a, v in zip(acc, vals)]
    body_end = b.block
    b.branch(latch)
    b.position_at_end(latch)
    merged = []
    for a, n_, t in zip(acc, new, result_types):
        m = b.phi(vt(t))
        m.add_incoming(a, header)
        m.add_incoming(n_, body_end)
        merged.append(m)
    nxt = b.add(lane, ir.Constant(I32, 1))
    lane.add_incoming(nxt, latch)
    for a, m in zip(acc, merged):
        a.add_incoming(m, latch)
    b.cbranch(b.icmp_signed("<", nxt, ir.Constant(I32, n)), header, done)
    b.position_at_end(done)
    return merged
