"""The execution configuration: the subgroup size and work-group size a function runs with.

They are decided here and nowhere else, from the target description (``Target``):

- ``ExecConfig.of(func, target)`` -- what ``func`` runs with on ``target``: its
  attributes (spec, "Function", attributes ``subgroup_size`` and ``work_group_size``),
  and for what it leaves open the target's rule, ``Target.auto_work_group_limit``: the
  interpreter runs a function as written, with one subgroup of its preferred size
  (subgroup 16, work-group ``[16, 1]``); compiled targets take what ``choose`` gives,
  a chosen work-group having at most ``auto_work_group_limit`` work-items (16 on the CPU,
  whose work-items are SIMD lanes of one thread; there no more than one vector register
  holds of the widest element type, at least 8: ``auto_limit``).  The interpreter, the lowering
  passes and the CPU code generator read it.
- ``choose(func, target, limit)`` -- the heuristic below; the work-group-size pass
  writes its result into the function with ``limit = target.max_work_group_size``.

Given values are kept and checked against the target: a subgroup size the target does
not support, or a work-group larger than its ``max_work_group_size``, is an error.  Back ends
compile with ``compiled_config``, which differs in one case: where a subgroup is SIMD
lanes (the CPU), a function that asks for more work-items than ``auto_limit`` but cannot
observe its work-group (``observed_sizes``) runs with one subgroup of its subgroup size
if it can observe that, else with the chosen sizes (its results are the same; more lanes
only cost compile time).
Where only ``work_group_size`` is given, the interpreter takes the first of its subgroup
sizes that divides its first entry.  The
chosen values always verify (the constraints that depend on the subgroup size --
coopmatrix rows of ``mul_add`` and ``reduce``, the first tile size of ``foreach_tile``,
extract/insert indices -- are checked by running the verifier on each candidate).

Subgroup size.  Candidates are the target's supported sizes, starting with the one the
function's element types call for, then the target's order (its preferred size first):

- on SIMT machines (GPUs), the preferred size, except that 8- and 16-byte element types
  (f64, i64, index, c32, c64) take the smallest supported size: wide elements need twice
  the registers per work-item;
- where a subgroup is a set of SIMD lanes (``target.vector_bytes``, the CPU), as many
  lanes as one vector register holds of the widest element type (f32 -> 16, f64 -> 8),
  when the target supports that many; fewer, down to NARROW_BYTES, where the function's
  work is gemm of a few static rows (``narrow_lanes``: f32 3 x 40 in 8 lanes with
  AVX-512);
- otherwise (the interpreter) the preferred size.

The element types considered are those of the operands of collective BLAS instructions
(axpby, cumsum, gemm, gemv, ger, hadamard, sum) and of coopmatrix values.  The first
candidate with which the function verifies is taken (so coopmatrix shapes or tile sizes
that need a smaller subgroup get one); with a given ``work_group_size`` only sizes that
divide its first entry are candidates.

Work-group size.  Each subgroup is thought of as owning a block of ``sgs x sgs`` entries
of a BLAS output (fewer columns if that would not fit ``target.register_budget``).  For the
largest output shape ``M x N`` in the function (largest rows and largest columns over all
BLAS outputs; a dynamic size counts as unbounded), the heuristic tries ``m x n``
subgroups, m and n powers of two, with ``m <= ceil(M / sgs)``, ``n <= ceil(N / block
columns)`` and ``m n <= limit / sgs``, and takes the one with the best ratio of work to
loads, ``LM LN / (LM + LN)`` for the covered block ``LM x LN`` (ties: fewer rows).  Then,
since ``foreach_tile`` hands one tile to each subgroup and ``foreach`` one iteration to
each work-item, m grows (doubling, within the limit) until the work-group has at least as
many subgroups as the largest tile count (``foreach_tile``) or iteration count divided
by the subgroup size (``foreach``); a count that is not a compile-time constant counts as
unbounded.  The result is ``work_group_size = [m sgs, n]``; a function with no BLAS or
foreach gets one subgroup, ``[sgs, 1]``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..diagnostics import CompileError, Diagnostic
from ..ir.core import Function, Program, Value
from ..ir.ops import ATOMIC_UPDATES, FOREACH_OPS, SPMD
from ..ir.types import CoopMatrixType, MemrefType
from .description import Target


@dataclass(frozen=True)
class ExecConfig:
    """The subgroup size and the work-group size ``[x, y]`` of a function."""

    subgroup_size: int
    work_group_size: Tuple[int, int]

    @property
    def lanes(self) -> int:
        """Work-items in a work-group."""
        return self.work_group_size[0] * self.work_group_size[1]

    @property
    def subgroups(self) -> int:
        return self.lanes // self.subgroup_size

    def attributes(self) -> Dict[str, object]:
        """The function attributes that state this configuration."""
        return {"subgroup_size": self.subgroup_size, "work_group_size": list(self.work_group_size)}

    def problem(self, func_name: str) -> Optional[str]:
        """Why code for function @func_name cannot use these sizes (None: it can).  The
        sizes of verified functions always can; passes may be given unverified ones."""
        sgs, (x, y) = self.subgroup_size, self.work_group_size
        if sgs <= 0 or sgs & (sgs - 1):
            return f"subgroup_size {sgs} of @{func_name} is not a power of two"
        if x <= 0 or y <= 0 or x % sgs:
            return (f"work_group_size [{x},{y}] of @{func_name} must be positive with its "
                    f"first entry a multiple of the subgroup size {sgs}")
        return None

    @staticmethod
    def of(func: Function, target: Target, program: Optional[Program] = None) -> "ExecConfig":
        """The sizes ``func`` runs with on ``target`` (see the module docstring); ``program``,
        which holds ``func``, gives error messages their source."""
        sgs, wgs = func.subgroup_size, func.work_group_size
        if sgs is not None and wgs is not None:
            return ExecConfig(sgs, tuple(wgs))
        if not target.auto_work_group_limit:
            if sgs is None:  # the first of the target's sizes that work_group_size[0] allows
                sgs = next((s for s in target.subgroup_sizes if wgs is None or wgs[0] % s == 0),
                           target.default_subgroup_size)
            return ExecConfig(sgs, tuple(wgs) if wgs is not None else (sgs, 1))
        return choose(func, target, auto_limit(func, target), program)


def compiled_config(func: Function, target: Target, program: Optional[Program] = None) -> ExecConfig:
    """The sizes a back end compiles func with (``passes.lower_copy`` writes them into
    the function before lowering it): ``ExecConfig.of``, except where a subgroup is SIMD
    lanes (the CPU) and the function asks for more work-items than ``auto_limit``
    without being able to observe them (``observed_sizes``): more lanes would only cost
    compile time, so it runs with one subgroup of its subgroup size if it can observe
    that, else with the chosen sizes (the given ones must still be valid)."""
    config = ExecConfig.of(func, target, program)
    limit = auto_limit(func, target)
    if not target.vector_bytes or func.work_group_size is None or config.lanes <= limit:
        return config
    observed = observed_sizes(func)
    if observed == "work_group":
        return config
    if func.subgroup_size is not None:  # ExecConfig.of took both given sizes unchecked
        choose(func, target, limit, program)
    if observed == "subgroup":
        return ExecConfig(config.subgroup_size, (config.subgroup_size, 1))
    return choose(func, target, limit, program, given=False)


#: the narrowest vector a subgroup of SIMD lanes is narrowed to for gemm of few rows
#: (``narrow_lanes``): 32 bytes, one ymm register.  f32 and f64 gemm of 2-8 rows with
#: AVX-512 ran 1.08-1.7x as fast in ymm as in (mostly empty) zmm registers, which Zen 4
#: executes in two halves; in xmm registers from 0.62 to 1.72x (docs/performance.md)
NARROW_BYTES = 32


def narrow_lanes(func: Function, target: Target) -> Optional[int]:
    """Where subgroups are SIMD lanes (the CPU) and a function's only collective work is
    f32 or f64 gemm (no SPMD code of its own) whose outputs have few static rows (at
    most half a vector register): the fewest lanes of at least NARROW_BYTES that hold
    every gemm's rows, where the target supports that subgroup size; else None.  A
    subgroup of a whole register would compute mostly padding rows, every FMA as costly
    as a full one.  One row keeps the register where its gemm is dot products down B's
    columns (``linalg.matmul.one_row_as_gemv``: K of half a register or more), and where
    K is within half the narrow lanes (f64 1x21x2 and 1x30x2 in 4 lanes: 0.88x); between
    the two it is narrowed, to dot products of the narrow lanes: with AVX-512 f32
    1x40x7 ran at 0.82 of LIBXSMM in 16 lanes, 1.77 in 8; 1x21x6 with A shared 0.84 ->
    1.82, f64 1x40x3 1.15 -> 1.38."""
    if not target.vector_bytes:
        return None
    rows, elem, ks = 0, None, []
    for inst in func.body.walk():
        if inst.opdef.kind == SPMD or inst.opcode in FOREACH_OPS:
            return None
        if inst.opdef.blas is None:
            continue
        if inst.opcode != "gemm":
            return None
        types = {inst.slots[s].type.element for s in ("A", "B", "C")}
        M = inst.slots["C"].type.shape[0]
        if len(types) != 1 or M is None or (elem is not None and types != {elem}):
            return None
        elem = next(iter(types))
        if elem.name not in ("f32", "f64"):
            return None
        rows = max(rows, M)
        A = inst.slots["A"].type
        ks.append(A.shape[1 if inst.modifier("ta") == "n" else 0])
    if elem is None:
        return None
    lanes = max(1 << (rows - 1).bit_length(), NARROW_BYTES // elem.size)
    full = target.vector_bytes // elem.size
    if 2 * lanes > full or lanes not in target.subgroup_sizes:
        return None
    if rows == 1 and not all(K is not None and lanes < 2 * K < full for K in ks):
        return None
    return lanes


def auto_limit(func: Function, target: Target) -> int:
    """The most work-items a chosen work-group has: the target's auto_work_group_limit,
    and where a subgroup is SIMD lanes (the CPU) no more than one vector register holds of
    the function's widest element type (at least one register of f64: 8 lanes with
    AVX-512, 4 with AVX2): an f64 kernel runs as one subgroup of one register, not two in
    lockstep, whose tiles of odd shapes need masks and permutes (batched f64 gemm 56x9x56
    on AVX-512: 3.7x faster, 32^3 and 64^3: 1.3-1.4x, 8^3 and 16^3 alike)."""
    limit = target.auto_work_group_limit
    widest = max(_element_sizes(func), default=0)
    if target.vector_bytes and widest:
        limit = min(limit, max(target.vector_bytes // 8, target.vector_bytes // widest))
    return min(limit, narrow_lanes(func, target) or limit)


#: instructions that see how many subgroups a work-group has or which one runs them
_WORK_GROUP_OBSERVERS = ("parallel", "num_subgroups", "subgroup_id", "subgroup_linear_id")


def observed_sizes(func: Function) -> str:
    """Which of its sizes func's behaviour can depend on: ``"work_group"`` if it opens an
    SPMD region with ``parallel``, reads the number of subgroups or a subgroup id, waits
    at a barrier inside a ``foreach``/``foreach_tile`` body or updates memory atomically
    outside one; ``"subgroup"`` if it
    only runs SPMD code in such bodies (subgroup operations, coopmatrices,
    ``subgroup_local_id``) or reads ``subgroup_size``; ``""`` if neither.  The spec
    leaves the distribution of collective instructions and of ``foreach`` iterations and
    tiles over the work-items to the implementation, so without those a work-group of
    one subgroup (or of any size) gives the same results."""
    seen = ""

    # in a collective region every work-item executes a mixed instruction (spec,
    # "Store"), so the count of an atomic update's updates there is the work-group's size
    def walk(region, spmd: bool) -> bool:
        nonlocal seen
        for inst in region.instructions:
            if (inst.opcode in _WORK_GROUP_OBSERVERS or (spmd and inst.opcode == "barrier")
                    or (not spmd and inst.opcode in ATOMIC_UPDATES)):
                return True
            if inst.opdef.kind == SPMD or inst.opcode == "subgroup_size":
                seen = "subgroup"
            if any(walk(r, spmd or inst.opcode in FOREACH_OPS) for r in inst.regions):
                return True
        return False
    return "work_group" if walk(func.body, False) else seen


# ---- what the function asks for ---------------------------------------------------------------
Shape = Tuple[Optional[int], Optional[int]]  # rows, columns; None: dynamic


def _element_sizes(func: Function) -> List[int]:
    sizes = []
    for inst in func.body.walk():
        roles = inst.opdef.blas
        if roles is not None:
            for slot in roles.slots:
                v = inst.slots.get(slot)
                if isinstance(v, Value) and isinstance(v.type, MemrefType):
                    sizes.append(v.type.element.size)
        values = list(inst.results) + [a for r in inst.regions for a in r.args]
        for v in values:
            if isinstance(v.type, CoopMatrixType):
                sizes.append(v.type.component.size)
    return sizes


def _blas_shapes(func: Function) -> List[Tuple[Shape, int]]:
    """(rows, columns) of every BLAS output with its element size."""
    out = []
    for inst in func.body.walk():
        roles = inst.opdef.blas
        if roles is None:
            continue
        v = inst.slots.get(roles.written)
        if not isinstance(v, Value) or not isinstance(v.type, MemrefType):
            continue
        shape = v.type.shape
        rows = shape[0] if len(shape) >= 1 else 1
        cols = shape[1] if len(shape) >= 2 else 1
        out.append(((rows, cols), v.type.element.size))
    return out


def _constant(v: Value) -> Optional[int]:
    inst = v.owner
    if inst is not None and inst.opcode == "constant":
        value = inst.attrs.get("value")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _parallel_counts(func: Function, sgs: int) -> List[Optional[int]]:
    """Subgroups each foreach_tile (tiles) and foreach (iterations / sgs) could use."""
    out: List[Optional[int]] = []
    for inst in func.body.walk():
        if inst.opcode not in FOREACH_OPS:
            continue
        count: Optional[int] = 1
        tiles = inst.attrs.get("tile_shape") if inst.opcode == "foreach_tile" else None
        for k, (lo, hi) in enumerate(zip(inst.slots["from"], inst.slots["to"])):
            a, b = _constant(lo), _constant(hi)
            if a is None or b is None or count is None:
                count = None
                continue
            extent = max(0, b - a)
            if tiles is not None:
                extent = -(-extent // tiles[k]) if k < len(tiles) and tiles[k] > 0 else extent
            count *= extent
        if count is not None and tiles is None:
            count = -(-count // sgs)
        out.append(count)
    return out


# ---- the heuristic ------------------------------------------------------------------------------
def subgroup_candidates(func: Function, target: Target) -> List[int]:
    """Supported subgroup sizes in the order the heuristic prefers them."""
    sizes = list(target.subgroup_sizes)
    widest = max(_element_sizes(func), default=0)
    first = sizes[0]
    if target.simt:
        if widest >= 8:
            first = min(sizes)
    elif target.vector_bytes and widest:
        lanes = narrow_lanes(func, target) or target.vector_bytes // widest
        if lanes in sizes:
            first = lanes
    return [first] + [s for s in sizes if s != first]


def _pow2_at_most(x: int) -> int:
    return 1 << (max(1, x).bit_length() - 1)


def work_group_for(func: Function, sgs: int, target: Target, limit: int) -> Tuple[int, int]:
    """work_group_size = [m sgs, n] for subgroup size sgs and at most `limit` work-items
    (see the module docstring)."""
    max_sg = max(1, limit // sgs)
    shapes = _blas_shapes(func)
    m = n = 1
    if shapes:
        def biggest(i):
            values = [s[0][i] for s in shapes]
            return None if any(v is None for v in values) else max(values)

        rows, cols = biggest(0), biggest(1)
        elem = max(size for _, size in shapes)
        block_rows, block_cols = sgs, sgs
        while block_cols > 1 and block_rows * block_cols * elem > target.register_budget:
            block_cols //= 2
        m_limit = max_sg if rows is None else min(max_sg, -(-rows // block_rows))
        n_limit = max_sg if cols is None else min(max_sg, -(-cols // block_cols))
        best = -1.0
        mm = 1
        while mm <= m_limit:
            nn = _pow2_at_most(min(n_limit, max_sg // mm))
            lm, ln = mm * block_rows, nn * block_cols
            ratio = lm * ln / (lm + ln)
            if ratio > best:
                best, m, n = ratio, mm, nn
            mm *= 2
    want = 1
    for count in _parallel_counts(func, sgs):
        want = max(want, max_sg if count is None else min(max_sg, count))
    while m * n < want and 2 * m * n <= max_sg:
        m *= 2
    return (m * sgs, n)


def _verifies(func: Function, program: Program) -> Optional[Diagnostic]:
    """None if func verifies as it is, else its first diagnostic."""
    from ..check.verifier import Verifier  # here: running a kernel needs no verifier

    vf = Verifier(Program([func], program.source, program.filename))
    vf.func = func
    vf.verify_function(func)
    return vf.diagnostics[0] if vf.diagnostics else None


def _error(func: Function, program: Program, message: str) -> CompileError:
    loc = func.attrs_loc if func.attrs and func.attrs_loc.line else func.loc
    return CompileError([Diagnostic(loc, message)], program.source, program.filename)


def choose(func: Function, target: Target, limit: int,
           program: Optional[Program] = None, given: bool = True) -> ExecConfig:
    """The function's sizes with what it leaves open chosen for target, a chosen
    work-group having at most `limit` work-items; given sizes are checked against the
    target (CompileError).  ``program`` holds func (the source of error messages).
    With ``given=False`` the function's attributes are ignored and both sizes chosen."""
    program = program or Program([func])
    sgs, wgs = (func.subgroup_size, func.work_group_size) if given else (None, None)
    supported = ", ".join(str(s) for s in target.subgroup_sizes)
    if sgs is not None and sgs not in target.subgroup_sizes:
        raise _error(func, program, f"subgroup size {sgs} is not supported by target "
                     f"{target.name} (supported: {supported})")
    if wgs is not None and wgs[0] * wgs[1] > target.max_work_group_size:
        raise _error(func, program, f"work-group size {wgs[0]} x {wgs[1]} exceeds the maximum "
                     f"of {target.max_work_group_size} work-items of target {target.name}")
    if sgs is not None and wgs is not None:
        return ExecConfig(sgs, tuple(wgs))
    candidates = [sgs] if sgs is not None else subgroup_candidates(func, target)
    if wgs is not None:
        candidates = [s for s in candidates if wgs[0] % s == 0]
        if not candidates:
            raise _error(func, program, f"no subgroup size supported by target {target.name} "
                         f"({supported}) divides work_group_size[0] = {wgs[0]}")

    def config(s: int) -> ExecConfig:
        return ExecConfig(s, tuple(wgs) if wgs is not None else work_group_for(func, s, target, limit))

    # an invalid function (the pass ran without check-ir) gets the first candidate
    check = _verifies(func, program) is None
    first_problem = None
    for s in candidates:
        chosen = config(s)
        trial = Function(func.name, func.args, func.body, {**func.attrs, **chosen.attributes()},
                         func.loc, func.attrs_loc)
        problem = _verifies(trial, program) if check else None
        if problem is None:
            return chosen
        first_problem = first_problem or problem
    raise CompileError([Diagnostic(first_problem.loc, f"{first_problem.message} (no subgroup "
                                   f"size of target {target.name} fits @{func.name}; tried "
                                   f"{', '.join(str(s) for s in candidates)})",
                                   first_problem.notes)],
                       program.source, program.filename)
