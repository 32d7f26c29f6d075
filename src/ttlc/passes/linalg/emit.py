"""What every BLAS lowering shares: where code goes, sizes, constants, alpha, beta, update.

An ``Emitter`` builds the replacement of one BLAS instruction into two scratch regions:
``pre`` (constants, ``size`` queries, views, the casts of alpha and beta: collective
code run once, before the rest) and ``body`` (the SPMD regions doing the work).  The
pass splices ``pre + body`` where the instruction was.  Known sizes stay Python ints
through ``IndexMath`` (``..index_math``), so static shapes give constant bounds, and
each constant is made once (in ``pre``) however often it is used.

The BLAS update follows the interpreter (``ttlc.interp.semantics._update``): the product
accumulates in the output's element type (16-bit floats in f32, ``accumulate_type``),
then ``alpha * value``, then ``+ beta * out`` unless beta is zero (the output is not read:
NaN in it is overwritten), then one cast to the output's type.  With ``.atomic`` (beta is
a constant 0 or 1) the update is an atomic store (beta 0) or an atomic add (beta 1).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from ...analysis.uniformity import same_in_every_group
from ...ir.builder import Builder, _constant_value
from ...ir.core import Instruction, Region, Value
from ...ir.numerics import accumulate_type, wrap
from ...ir.types import I32, INDEX, CoopMatrixType, MemrefType, ScalarType, Type
from ...target import Target
from ..index_math import IndexMath, Int
from .tiles import subgroup_registers

Number = Union[int, float, complex]


def constant_number(v: Value) -> Optional[Number]:
    """The value of a scalar defined by a ``constant`` instruction, else None."""
    if v.owner is not None and v.owner.opcode == "constant" and isinstance(v.type, ScalarType):
        value = v.owner.attrs.get("value")
        if not isinstance(value, bool):
            return value
    return None


def checked_flag(rows: bool, cols: bool) -> Optional[str]:
    """The checked modifier guarding coopmatrix rows and/or columns (None: unchecked)."""
    if rows and cols:
        return "both_checked"
    if rows:
        return "rows_checked"
    if cols:
        return "cols_checked"
    return None


class _Math(IndexMath):
    """IndexMath whose constants come from the emitter's cache (made once, in ``pre``)."""

    def __init__(self, b: Builder, em: "Emitter"):
        super().__init__(b)
        self.em = em

    def value(self, x: Int, t: ScalarType) -> Value:
        if isinstance(x, Value):
            return x
        return self.em.const(wrap(x, t.bits), t)


class Emitter:
    """Builds the lowering of one BLAS instruction ``inst``.

    ``sgs`` is the subgroup size the code is specialised for (the function's, which the
    work-group-size pass has set), ``subgroups`` the grid of subgroups of the work-group
    (x, y), ``params`` the function's parameters.
    """

    def __init__(self, inst: Instruction, target: Target, sgs: int, subgroups: Tuple[int, int],
                 params: Sequence[Value] = ()):
        self.inst = inst
        self.params = tuple(params)
        written = inst.slots[inst.opdef.blas.written]
        self.target = subgroup_registers(target, sgs, accumulate_type(written.type.element).size)
        self.sgs = sgs
        self.subgroups = subgroups
        self.pre = Region()
        self.body = Region()
        self.pb = Builder(self.pre)
        self.b = Builder(self.body)
        self.pm = _Math(self.pb, self)   # index arithmetic in pre (uniform, run once)
        self.m = _Math(self.b, self)     # index arithmetic at the insertion point
        self._consts: Dict[Tuple[str, str, str], Value] = {}
        self._sizes: Dict[Tuple[int, int], Value] = {}
        self.atomic = bool(inst.modifier("atomic"))
        self._alpha: Dict[ScalarType, Value] = {}
        self._beta: Dict[ScalarType, Value] = {}
        self._beta_zero: Optional[Value] = None

    def same_in_every_group(self, v: Value) -> bool:
        """Whether `v` (an operand of the instruction) is the same in every work-group and
        every time the instruction runs (``analysis.uniformity.same_in_every_group``)."""
        return same_in_every_group(v, self.params)

    # ---- constants, sizes, casts ---------------------------------------------------------
    def const(self, value: Number, t: Type) -> Value:
        """A constant (a scalar or coopmatrix type), made once in ``pre``."""
        value = _constant_value(value, t)
        key = (str(t), type(value).__name__, repr(value))
        v = self._consts.get(key)
        if v is None:
            v = self._consts[key] = self.pb.constant(value, t)
        return v

    def index(self, x: Int) -> Value:
        """An index as a value (constants from the cache)."""
        return self.pm.value(x, INDEX)

    def dim(self, m: Value, mode: int) -> Int:
        """Size of a mode of a memref: an int when static, else a ``size`` made once."""
        t: MemrefType = m.type
        if t.shape[mode] is not None:
            return t.shape[mode]
        key = (id(m), mode)
        v = self._sizes.get(key)
        if v is None:
            v = self._sizes[key] = self.pb.size(m, mode)
        return v

    def pick_dim(self, *candidates: Tuple[Value, int]) -> Int:
        """The size of one problem dimension that several operands share: a static size
        if any operand knows it (dynamic sizes match anything at compile time), else the
        first operand's ``size``."""
        for m, mode in candidates:
            if m.type.shape[mode] is not None:
                return m.type.shape[mode]
        return self.dim(*candidates[0])

    def scalar_to(self, v: Value, t: ScalarType) -> Value:
        """A scalar operand converted (exactly: promotion) to t, in ``pre``; constants fold."""
        if v.type == t:
            return v
        c = constant_number(v)
        if c is not None:
            if t.is_complex:
                c = complex(c)
            elif t.is_float:
                c = float(c)
            return self.const(c, t)
        return self.pb.cast(v, t)

    def cast(self, v: Value, t: Type) -> Value:
        """v converted to t (scalar or coopmatrix) at the insertion point, if it differs."""
        return v if v.type == t else self.b.cast(v, t)

    def subgroup_size_index(self) -> Value:
        """The subgroup size as an index constant."""
        return self.index(self.sgs)

    def last_lane(self) -> Value:
        """The subgroup-local id of the last work-item of a subgroup (i32)."""
        return self.const(self.sgs - 1, I32)

    def view_as_column(self, vec: Value) -> Value:
        """An n x 1 matrix view of a vector (``expand``), made in ``pre``."""
        return self.pb.expand(vec, 0, [self.dim(vec, 0), 1])

    def line(self, m: Value, mode: int, n: Int) -> Value:
        """The first n entries along `mode` of the matrix m at index 0 of its other mode
        (a row: mode 1, a column: mode 0) as a vector view (``subview``), made in ``pre``."""
        line = (0, n if isinstance(n, int) else self.index(n))
        return self.pb.subview(m, [line, (0, 0)] if mode == 0 else [(0, 0), line])

    # ---- alpha and beta ------------------------------------------------------------------
    @property
    def alpha(self) -> Value:
        return self.inst.slots["alpha"]

    @property
    def beta(self) -> Value:
        return self.inst.slots["beta"]

    def alpha_in(self, t: ScalarType) -> Value:
        if t not in self._alpha:
            self._alpha[t] = self.scalar_to(self.alpha, t)
        return self._alpha[t]

    def beta_in(self, t: ScalarType) -> Value:
        if t not in self._beta:
            self._beta[t] = self.scalar_to(self.beta, t)
        return self._beta[t]

    @staticmethod
    def _is_real_one(v: Value) -> bool:
        """A real constant 1 (multiplying by it changes nothing, even for inf and NaN;
        complex 1 is still multiplied: (1+0j) * inf is not inf in complex arithmetic)."""
        c = constant_number(v)
        return c is not None and not v.type.is_complex and c == 1

    @property
    def alpha_is_one(self) -> bool:
        return self._is_real_one(self.alpha)

    @property
    def beta_is_one(self) -> bool:
        return self._is_real_one(self.beta)

    def beta_cases(self, emit: Callable[[bool], None]) -> None:
        """Emit ``emit(read)`` for the beta of the instruction: ``read`` is whether the
        output is read (beta != 0).  A constant beta gives one case; otherwise both,
        under ``if beta == 0`` (BLAS convention: beta 0 never reads the output)."""
        c = constant_number(self.beta)
        if c is not None:
            emit(c != 0)
            return
        branch = self.b.if_(self.beta_is_zero())
        with branch:
            emit(False)
        with branch.else_():
            emit(True)

    def beta_is_zero(self) -> Value:
        """``beta == 0`` (a beta known only at run time), made once in ``pre``."""
        if self._beta_zero is None:
            self._beta_zero = self.pb.equal(self.beta, self.const(0, self.beta.type))
        return self._beta_zero

    # ---- the update out := alpha value + beta out --------------------------------------
    def update_scalar(self, value: Value, out: Value, index: Sequence[Value], read: bool) -> None:
        """One element: ``out[index] := alpha value + beta out[index]`` (value in the
        accumulator type; the beta term only when ``read``)."""
        b = self.b
        acc = value.type
        oe: ScalarType = out.type.element
        v = value if self.alpha_is_one else b.mul(self.alpha_in(acc), value)
        index = list(index)
        if self.atomic:
            o = self.cast(v, oe)
            if read:
                b.atomic_add(o, out, index, result=oe)
            else:
                b.atomic_store(o, out, index)
            return
        if read:
            c = self.cast(b.load(out, index), acc)
            if not self.beta_is_one:
                c = b.mul(self.beta_in(acc), c)
            v = b.add(v, c)
        b.store(self.cast(v, oe), out, index)

    def scale_tile(self, value: Value) -> Value:
        """alpha value for a coopmatrix (nothing to do for a real alpha of 1)."""
        if self.alpha_is_one:
            return value
        return self.b.cooperative_matrix_scale(self.alpha_in(value.type.component), value,
                                               name="alpha_ab")

    def update_tile(self, value: Value, out: Value, x: Value, y: Value, flag: Optional[str],
                    scaled: bool = False, transpose: bool = False) -> None:
        """A coopmatrix tile: ``out[x:, y:] := alpha value + beta out[x:, y:]`` (``scaled``:
        value already holds alpha value; ``transpose``: the tile is out's block
        transposed, accessed with ``.t``).  Where the output's type is not the
        accumulator's, a beta known only at run time adds beta out under ``if beta !=
        0`` (beta 0 never reads the output) and the conversion and the store follow
        once, not once per case (bf16 rounds f32 in nine instructions a vector); of one
        type, each case stores its own (a phi of the whole f32 tile made f32 ?x?x?
        gemms 1.1-1.2x slower)."""
        b = self.b
        t: CoopMatrixType = value.type
        acc = t.component
        ot = t.with_component(out.type.element)
        ta = {"ta": "t"} if transpose else {}
        v = value if scaled else self.scale_tile(value)

        def beta_term() -> Value:
            c = self.cast(b.cooperative_matrix_load(out, x, y, ot, checked=flag, name="c", **ta),
                          t)
            return c if self.beta_is_one else b.cooperative_matrix_scale(self.beta_in(acc), c)

        if self.atomic:
            def atomic(read: bool) -> None:
                o = self.cast(v, ot)
                if read:
                    b.cooperative_matrix_atomic_add(o, out, x, y, checked=flag, result=ot, **ta)
                else:
                    b.cooperative_matrix_atomic_store(o, out, x, y, checked=flag, **ta)
            self.beta_cases(atomic)
            return

        def store(read: bool) -> None:
            c = b.add(v, beta_term()) if read else v
            b.cooperative_matrix_store(self.cast(c, ot), out, x, y, checked=flag, **ta)

        if constant_number(self.beta) is not None or ot == t:
            self.beta_cases(store)
            return
        branch = b.if_(self.beta_is_zero(), results=[t], names=["updated"])
        with branch:
            b.yield_([v])
        with branch.else_():
            b.yield_([b.add(v, beta_term())])
        b.cooperative_matrix_store(self.cast(branch.results[0], ot), out, x, y, checked=flag,
                                   **ta)

    # ---- the result ------------------------------------------------------------------------
    def instructions(self) -> List[Instruction]:
        return self.pre.instructions + self.body.instructions

