"""AMX tile instructions in plain LLVM IR, so that the AMX path runs on CPUs without AMX.

Tests set ``jit.EMULATE_AMX`` (not a user option: it is slow): the code ``amx.py``
generates is then the same, staging and all, but each tile instruction is a call of an
internal function here working on a tile file of 8 x 1 KiB in the kernel's per-thread
scratch memory, the tile shapes (rows, bytes per row) given by the call from the
kernel's tile configuration.  Products follow the instructions' definition: for each
row m and column n of the f32 accumulator, the sum over pairs k of
``a[m][2k] b[k][n][0] + a[m][2k+1] b[k][n][1]`` with the 16-bit values widened to f32
(AMX flushes denormals and rounds each pair's sum once; this emulation rounds each
product's addition, which is the same for the exactly representable test data).
"""
from __future__ import annotations

from typing import Callable, Dict, List

from llvmlite import ir

from .values import F16, F32, I8, I16, I32, I64, PTR

#: bytes of one tile register (16 rows of 64 bytes)
TILE_BYTES = 1024
#: tile registers 0-7
TILE_FILE_BYTES = 8 * TILE_BYTES


def _loop(b: ir.IRBuilder, n: ir.Value, body: Callable[[ir.Value], None]) -> None:
    """for i in 0 .. n-1: body(i) (i64)."""
    head = b.append_basic_block("head")
    step = b.append_basic_block("step")
    done = b.append_basic_block("done")
    start = b.block
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(ir.Constant(I64, 0), start)
    b.cbranch(b.icmp_signed("<", i, n), step, done)
    b.position_at_end(step)
    body(i)
    i.add_incoming(b.add(i, ir.Constant(I64, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def _at(b: ir.IRBuilder, p: ir.Value, offset: ir.Value) -> ir.Value:
    return b.gep(p, [offset], source_etype=I8)


def _mul(b: ir.IRBuilder, x: ir.Value, k: int) -> ir.Value:
    return b.mul(x, ir.Constant(I64, k))


def _tile(b: ir.IRBuilder, file: ir.Value, t: ir.Value) -> ir.Value:
    """Tile register t (i8) in the tile file."""
    return _at(b, file, _mul(b, b.zext(t, I64), TILE_BYTES))


def _move(b: ir.IRBuilder, args, to_tile: bool) -> None:
    """rows of colsb bytes between a tile and memory (stride bytes apart)."""
    t, mem, stride, file, rows, colsb = args
    tile = _tile(b, file, t)

    def row(r):
        at_tile, at_mem = _at(b, tile, _mul(b, r, 64)), _at(b, mem, b.mul(r, stride))
        src, dst = (at_mem, at_tile) if to_tile else (at_tile, at_mem)
        _loop(b, colsb, lambda c: b.store(b.load(_at(b, src, c), typ=I8), _at(b, dst, c)))
    _loop(b, rows, row)


def _zero(b: ir.IRBuilder, args) -> None:
    tile = _tile(b, args[1], args[0])
    _loop(b, ir.Constant(I64, TILE_BYTES), lambda c: b.store(ir.Constant(I8, 0), _at(b, tile, c)))


def _widen(b: ir.IRBuilder, bits: ir.Value, elem: str) -> ir.Value:
    """A 16-bit value (i16 bits) as f32."""
    if elem == "bf16":
        return b.bitcast(b.shl(b.zext(bits, I32), ir.Constant(I32, 16)), F32)
    return b.fpext(b.bitcast(bits, F16), F32)


def _product(elem: str):
    def emit(b: ir.IRBuilder, args) -> None:
        """dst (rows x n f32) += a (rows x k pairs) . b (k pairs x n)."""
        d, a, bm, file, rows, n, pairs = args
        sum_ = b.alloca(F32)
        dst, a, bm = (_tile(b, file, t) for t in (d, a, bm))

        def entry(m, j):
            out = _at(b, dst, b.add(_mul(b, m, 64), _mul(b, j, 4)))
            b.store(b.load(out, typ=F32), sum_)

            def pair(k):
                for h in (0, 1):
                    x = b.load(_at(b, a, b.add(_mul(b, m, 64), b.add(_mul(b, k, 4),
                                                                    ir.Constant(I64, 2 * h)))),
                               typ=I16)
                    y = b.load(_at(b, bm, b.add(_mul(b, k, 64), b.add(_mul(b, j, 4),
                                                                     ir.Constant(I64, 2 * h)))),
                               typ=I16)
                    p = b.fmul(_widen(b, x, elem), _widen(b, y, elem))
                    b.store(b.fadd(b.load(sum_, typ=F32), p), sum_)
            _loop(b, pairs, pair)
            b.store(b.load(sum_, typ=F32), out)
        _loop(b, rows, lambda m: _loop(b, n, lambda j: entry(m, j)))
    return emit


#: emulated instruction -> (parameter types, body): the intrinsic's parameters, then the
#: tile file and the shapes of the tiles involved
_FUNCTIONS: Dict[str, tuple] = {
    "tileloadd64": ([I8, PTR, I64, PTR, I64, I64], lambda b, args: _move(b, args, True)),
    "tilestored64": ([I8, PTR, I64, PTR, I64, I64], lambda b, args: _move(b, args, False)),
    "tilezero": ([I8, PTR], _zero),
    "tdpbf16ps": ([I8, I8, I8, PTR, I64, I64, I64], _product("bf16")),
    "tdpfp16ps": ([I8, I8, I8, PTR, I64, I64, I64], _product("f16")),
}


def call(b: ir.IRBuilder, what: str, args: List[ir.Value], file: ir.Value,
         shapes: List[int]) -> None:
    """Emulate the tile instruction llvm.x86.<what> (``_FUNCTIONS``; the configuration's
    ldtilecfg and tilerelease do nothing) on the tile file at ``file``."""
    if what not in _FUNCTIONS:
        return
    module = b.module
    name = f"ttlc.amx.emulated.{what}"
    fn = module.globals.get(name)
    if fn is None:
        params, body = _FUNCTIONS[what]
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), params), name)
        fn.linkage = "internal"
        fb = ir.IRBuilder(fn.append_basic_block("entry"))
        body(fb, fn.args)
        fb.ret_void()
    b.call(fn, list(args) + [file] + [ir.Constant(I64, x) for x in shapes])
