"""The xevm simulator (ttlc.testing.xevm_simulator, docs/xevm.md, *Simulator*): what the
modules target xevm emits mean, checked without a GPU.

* The xevm operations the emitter is to use for cooperative matrices
  (``xevm.blockload2d``, ``blockstore2d``, ``blockprefetch2d``, ``mma``) run on
  hand-written modules whose expected results are worked out here from the XeVM dialect and
  the lane distribution of Intel's 2-D block and DPAS instructions (written out with
  explicit loops, independently of the simulator's reshapes).
* Emitted modules give the reference interpreter's results: the examples, the kernels of
  the coopmatrix tests (test_interp_coop.py) on random inputs, the kernel ABI, and
  generated programs with the subgroup sizes pvc offers (``TTLC_XEVM_SIM_SEEDS``, 200 by
  default; ``make fuzz`` runs 1,000), every one of which is emitted.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest

import test_interp_coop as coop
import test_xevm
from interp_testing import BAD_GRIDS
import ttlc
from ttlc.testing import xevm_simulator as simulate
from ttlc.testing.xevm_simulator import SimulationError
from ttlc.runtime.inputs import generated_inputs
from ttlc.testing import generate
from ttlc.testing.differential import arrays_of, differences

ROOT = Path(__file__).resolve().parents[2]
SEEDS = int(os.environ.get("TTLC_XEVM_SIM_SEEDS", "200"))
S = 16


# ---- hand-written modules: the xevm operations -------------------------------------------------
def module(body: str, params: str = "%src: !llvm.ptr<1>, %out: !llvm.ptr<1>",
           lanes: int = S, declare: str = "") -> str:
    """A kernel of `lanes` work-items running `body`; `declare`: module-level lines."""
    declare += "\n" if declare else ""
    return f"""module attributes {{gpu.container_module}} {{
  gpu.module @kernels [#xevm.target<chip = "pvc">] {{
{declare}    gpu.func @k({params}) kernel attributes {{known_block_size = array<i32: {lanes}, 1, 1>, intel_reqd_sub_group_size = 16 : i32}} {{
      %lane = xevm.lane_id : i32
      %l64 = arith.extui %lane : i32 to i64
{body}
      gpu.return
    }}
  }}
}}
"""


def consts(**values) -> str:
    return "\n".join(f"      %{k} = arith.constant {v} : i32" for k, v in values.items())


def store_lanes(value: str, vector: str, n: int, elem: str) -> str:
    """Lane l stores its n elements at out[l * n ...]."""
    return f"""      %n = arith.constant {n} : i64
      %off = arith.muli %l64, %n : i64
      %p = llvm.getelementptr %out[%off] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, {elem}
      llvm.store {value}, %p : {vector}, !llvm.ptr<1>"""


def load_lanes(name: str, ptr: str, vector: str, n: int, elem: str) -> str:
    return f"""      %n{name} = arith.constant {n} : i64
      %off{name} = arith.muli %l64, %n{name} : i64
      %p{name} = llvm.getelementptr {ptr}[%off{name}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, {elem}
      %{name} = llvm.load %p{name} : !llvm.ptr<1> -> {vector}"""


def blockload(bits, width, height, v_blocks=1, transpose=False, pack=False, result="vector<8xi16>",
              ptr="%src") -> str:
    return (f"      %v = xevm.blockload2d {ptr}, %bw, %bh, %pitch, %x, %y <{{elem_size_in_bits={bits} "
            f": i32, tile_width={width} : i32, tile_height={height} : i32, v_blocks={v_blocks} : "
            f"i32, transpose={str(transpose).lower()}, pack_register={str(pack).lower()}, "
            f"cache_control=#xevm.load_cache_control<Default>}}> : (!llvm.ptr<1>, i32, i32, i32, "
            f"i32, i32) -> {result}")


def matrix(rows, cols, dtype):
    """Entry (r, c) is 100 r + c + 1 (row-major, as the base matrix of a block)."""
    return (100 * np.arange(rows)[:, None] + np.arange(cols)[None, :] + 1).astype(dtype)


def load_block(src: np.ndarray, geometry: dict, load: str, n: int, dtype) -> np.ndarray:
    """The n elements of each lane after ``load`` (a blockload2d to %v) from src with the
    base matrix and position of `geometry` (bw, bh, pitch, x, y)."""
    out = np.zeros((S, n), dtype)
    vector = load.rpartition("-> ")[2]
    body = consts(**geometry) + "\n" + load + "\n" + \
        store_lanes("%v", vector, n, vector.split("x")[1].rstrip(">"))
    simulate.simulate(module(body), "k", [src, out])
    return out


@pytest.mark.parametrize("x,y", [(0, 0), (3, 2), (20, 0), (-2, -1)])
def test_blockload2d_deals_rows_to_elements_and_columns_to_lanes(x, y):
    """16-bit, 16 wide, 8 high: element i of lane l is the entry at row y + i, column
    x + l; outside the 8 x 32 base matrix it is 0."""
    src = matrix(8, 32, np.int16)
    out = load_block(src, dict(bw=64, bh=8, pitch=64, x=x, y=y), blockload(16, 16, 8), 8,
                     np.int16)
    for lane in range(S):
        for i in range(8):
            r, c = y + i, x + lane
            want = src[r, c] if 0 <= r < 8 and 0 <= c < 32 else 0
            assert out[lane, i] == want, (lane, i)


def test_blockload2d_v_blocks_follow_each_other():
    """Two blocks of 16 columns: elements 0-7 from the first, 8-15 from the second."""
    src = matrix(8, 48, np.float16)
    out = load_block(src, dict(bw=96, bh=8, pitch=96, x=5, y=0),
                     blockload(16, 16, 8, v_blocks=2, result="vector<16xf16>"), 16, np.float16)
    for lane in range(S):
        assert list(out[lane, :8]) == [src[i, 5 + lane] for i in range(8)]
        assert list(out[lane, 8:]) == [src[i, 21 + lane] for i in range(8)]


def test_blockload2d_pitch_is_the_row_distance():
    """A pitch of 128 bytes over rows of 64 valid bytes: row r starts 128 r bytes in."""
    src = matrix(8, 64, np.int16)  # rows of 128 bytes, the matrix is the first 32 columns
    out = load_block(src, dict(bw=64, bh=8, pitch=128, x=24, y=0), blockload(16, 16, 8), 8,
                     np.int16)
    for lane in range(S):
        assert list(out[lane]) == [src[i, 24 + lane] if 24 + lane < 32 else 0 for i in range(8)]


def test_blockload2d_transpose_gives_each_lane_a_row():
    """32-bit, 8 wide and 16 high, transposed: element i of lane l is row y + l, column
    x + i (the transposed block's row i spread over the lanes)."""
    src = matrix(20, 12, np.int32)
    out = load_block(src, dict(bw=48, bh=20, pitch=48, x=2, y=3),
                     blockload(32, 8, 16, transpose=True, result="vector<8xi32>"), 8, np.int32)
    for lane in range(S):
        for i in range(8):
            assert out[lane, i] == (src[3 + lane, 2 + i] if 2 + i < 12 else 0)


def test_blockload2d_pack_register_packs_row_pairs_into_32_bits():
    """16-bit VNNI: element i of lane l holds rows 2i (low half) and 2i + 1 (high half)
    of column l."""
    src = matrix(16, 16, np.uint16)
    out = load_block(src, dict(bw=32, bh=16, pitch=32, x=0, y=0),
                     blockload(16, 16, 16, pack=True, result="vector<8xi32>"), 8, np.uint32)
    for lane in range(S):
        for i in range(8):
            assert out[lane, i] == int(src[2 * i, lane]) | int(src[2 * i + 1, lane]) << 16


def test_blockload2d_pack_register_of_bytes_packs_four_rows():
    src = (np.arange(32 * 16).reshape(32, 16) % 251).astype(np.uint8)
    out = load_block(src, dict(bw=16, bh=32, pitch=16, x=0, y=0),
                     blockload(8, 16, 32, pack=True, result="vector<8xi32>"), 8, np.uint32)
    for lane in range(S):
        for i in range(8):
            assert out[lane, i] == sum(int(src[4 * i + k, lane]) << (8 * k) for k in range(4))


@pytest.mark.parametrize("x,y", [(0, 0), (10, 3)])
def test_blockstore2d_writes_the_block_inside_the_matrix_only(x, y):
    """Element i of lane l goes to row y + i, column x + l; entries outside the 8 x 24
    matrix are dropped, the rest of the memory is untouched."""
    vals = np.array([[1000 * lane + i for i in range(8)] for lane in range(S)], np.int32)
    dst = np.full((9, 24), -1, np.int32)  # one row past the 8 x 24 base matrix
    body = load_lanes("w", "%src", "vector<8xi32>", 8, "i32") + "\n" + \
        consts(bw=96, bh=8, pitch=96, x=x, y=y) + """
      xevm.blockstore2d %out, %bw, %bh, %pitch, %x, %y, %w <{elem_size_in_bits=32 : i32, tile_width=16 : i32, tile_height=8 : i32, cache_control=#xevm.store_cache_control<Default>}> : (!llvm.ptr<1>, i32, i32, i32, i32, i32, vector<8xi32>)"""
    simulate.simulate(module(body), "k", [vals, dst])
    want = np.full((9, 24), -1, np.int32)
    for lane in range(S):
        for i in range(8):
            if y + i < 8 and x + lane < 24:
                want[y + i, x + lane] = 1000 * lane + i
    assert np.array_equal(dst, want)


def test_blockprefetch2d_changes_nothing():
    src = matrix(8, 32, np.int16)
    before = src.copy()
    body = consts(bw=64, bh=8, pitch=64, x=0, y=0) + """
      xevm.blockprefetch2d %src, %bw, %bh, %pitch, %x, %y <{elem_size_in_bits=16 : i32, tile_width=16 : i32, tile_height=8 : i32, v_blocks=1 : i32, cache_control=#xevm.load_cache_control<L1uc_L2uc_L3uc>}> : (!llvm.ptr<1>, i32, i32, i32, i32, i32)"""
    simulate.simulate(module(body), "k", [src, np.zeros(1, np.int8)])
    assert np.array_equal(src, before)


def _mma(a_lanes, b_lanes, c_lanes, types, vectors, result):
    """Run xevm.mma on lanes' vectors given by hand; the lanes' results."""
    va, vb, vc = vectors
    body = "\n".join([load_lanes("a", "%pa", va, a_lanes.shape[1], str(a_lanes.dtype)[0] +
                                 str(8 * a_lanes.dtype.itemsize)),
                      load_lanes("b", "%pb", vb, 8, "i32"),
                      load_lanes("c", "%pc", vc, 8, "f32" if c_lanes.dtype.kind == "f" else "i32")])
    body = body.replace("(!llvm.ptr<1>, i64) -> !llvm.ptr<1>, u", "(!llvm.ptr<1>, i64) -> "
                                                                    "!llvm.ptr<1>, i")
    body += f"""
      %d = xevm.mma %a, %b, %c {{shape=<m=8, n=16, k={types[1]}>, types=<{types[0]}>}} : ({va}, {vb}, {vc}) -> {result}
""" + store_lanes("%d", result, 8, result.split("x")[1].rstrip(">"))
    out = np.zeros((S, 8), np.float32 if "f32" in result else np.int32)
    params = "%pa: !llvm.ptr<1>, %pb: !llvm.ptr<1>, %pc: !llvm.ptr<1>, %out: !llvm.ptr<1>"
    simulate.simulate(module(body, params), "k", [a_lanes, b_lanes, c_lanes, out])
    return out


def test_subgroup_block_load_and_store_stride_by_the_subgroup_size():
    """xevm.blockload: element i of lane l is ptr[l + 16 i]; xevm.blockstore writes it
    back the same way, 64 elements further."""
    data = np.arange(128, dtype=np.int32)
    body = """      %v = xevm.blockload %src : (!llvm.ptr<1>) -> vector<4xi32>
      %n = arith.constant 64 : i64
      %p = llvm.getelementptr %src[%n] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
      %one = arith.constant 1 : i32
      %l32 = arith.addi %lane, %one : i32
      %w = llvm.insertelement %l32, %v[%one : i32] : vector<4xi32>
      xevm.blockstore %p, %w : (!llvm.ptr<1>, vector<4xi32>)"""
    simulate.simulate(module(body), "k", [data, np.zeros(1, np.int8)])
    want = np.arange(128)
    for lane in range(S):  # element 1 of lane l, at 64 + l + 16, became l + 1
        want[64 + lane + 16] = lane + 1
        for i in (0, 2, 3):
            want[64 + lane + 16 * i] = lane + 16 * i
    assert np.array_equal(data, want)


def test_divergent_loops_run_each_lane_its_own_count():
    """scf.for with a bound per lane (its lane id) and an scf.if inside: lane l sums
    0..l-1 and doubles the even terms."""
    body = """      %zero = arith.constant 0 : i32
      %one = arith.constant 1 : i32
      %two = arith.constant 2 : i32
      %s = scf.for %i = %zero to %lane step %one iter_args(%acc = %zero) -> (i32) : i32 {
        %r = arith.remsi %i, %two : i32
        %even = arith.cmpi eq, %r, %zero : i32
        %t = scf.if %even -> (i32) {
          %d = arith.muli %i, %two : i32
          scf.yield %d : i32
        } else {
          scf.yield %i : i32
        }
        %next = arith.addi %acc, %t : i32
        scf.yield %next : i32
      }
      %p = llvm.getelementptr %out[%l64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
      llvm.store %s, %p : i32, !llvm.ptr<1>"""
    out = np.zeros(S, np.int32)
    simulate.simulate(module(body), "k", [np.zeros(1, np.int8), out])
    assert list(out) == [sum(2 * i if i % 2 == 0 else i for i in range(lane)) for lane in range(S)]


def test_gpu_shuffle_in_divergent_code_is_a_kernel_error():
    """gpu.shuffle is defined only when the first width lanes are all active; lanes 0-7
    shuffling among themselves do not make it defined."""
    body = """      %eight = arith.constant 8 : i32
      %four = arith.constant 4 : i32
      %low = arith.cmpi slt, %lane, %eight : i32
      %width = arith.constant 16 : i32
      scf.if %low {
        %x, %ok = gpu.shuffle xor %lane, %four, %width : i32
      }"""
    with pytest.raises(ttlc.KernelError, match="lane 8 of subgroup 0 is not active"):
        simulate.simulate(module(body), "k", [np.zeros(1, np.int8), np.zeros(1, np.int8)])


ATTRS = "{convergent, no_unwind, will_return}"


def builtin_module(calls, values: str, ty: str, cond: str) -> str:
    """Lanes where `cond` (defining %on from %lane) holds call each builtin (name, mangled
    parameters) on %x (defined by `values`, of type `ty`) and store the result at
    out[k * S + lane]."""
    decls, body = [], [values, cond, "      scf.if %on {"]
    for k, (name, codes) in enumerate(calls):
        symbol = f"@_Z{len(name)}{name}{codes}"
        decls.append(f"    llvm.func spir_funccc {symbol}({ty}) -> {ty} attributes {ATTRS}")
        body += [f"        %r{k} = llvm.call spir_funccc {symbol}(%x) {ATTRS} : ({ty}) -> {ty}",
                 f"        %o{k} = arith.constant {k * S} : i64",
                 f"        %i{k} = arith.addi %l64, %o{k} : i64",
                 f"        %p{k} = llvm.getelementptr %out[%i{k}] : (!llvm.ptr<1>, i64) -> "
                 f"!llvm.ptr<1>, {ty}",
                 f"        llvm.store %r{k}, %p{k} : {ty}, !llvm.ptr<1>"]
    return module("\n".join(body + ["      }"]), declare="\n".join(decls))


#: the non-uniform builtins: language operation, OpenCL name
NON_UNIFORM = [("reduce_add", "sub_group_non_uniform_reduce_add"),
               ("reduce_max", "sub_group_non_uniform_reduce_max"),
               ("inclusive_scan_add", "sub_group_non_uniform_scan_inclusive_add"),
               ("inclusive_scan_min", "sub_group_non_uniform_scan_inclusive_min"),
               ("exclusive_scan_max", "sub_group_non_uniform_scan_exclusive_max"),
               ("exclusive_scan_min", "sub_group_non_uniform_scan_exclusive_min")]


@pytest.mark.parametrize("ty,code", [("i32", "i"), ("f32", "f")])
def test_non_uniform_builtins_combine_the_active_lanes(ty, code):
    """Lanes with l mod 3 != 0 active, lane l contributing 7 - 2 l: each builtin over
    them in lane order (worked out here lane by lane); inactive lanes store nothing."""
    diff = "%xi" if ty == "f32" else "%x"
    values = ("      %s = arith.constant 7 : i32\n      %two = arith.constant 2 : i32\n"
              f"      %d = arith.muli %lane, %two : i32\n      {diff} = arith.subi %s, %d : i32"
              + ("\n      %x = arith.sitofp %xi : i32 to f32" if ty == "f32" else ""))
    cond = ("      %three = arith.constant 3 : i32\n      %m = arith.remsi %lane, %three : i32\n"
            "      %zero3 = arith.constant 0 : i32\n      %on = arith.cmpi ne, %m, %zero3 : i32")
    mlir = builtin_module([(name, code) for _, name in NON_UNIFORM], values, ty, cond)
    dtype = np.int32 if ty == "i32" else np.float32
    out = np.full(len(NON_UNIFORM) * S, 99, dtype)
    simulate.simulate(mlir, "k", [np.zeros(1, np.int8), out])
    active = [lane for lane in range(S) if lane % 3]
    x = {lane: 7 - 2 * lane for lane in active}
    lowest, highest = (-2 ** 31, 2 ** 31 - 1) if ty == "i32" else (-np.inf, np.inf)
    for k, (op, _) in enumerate(NON_UNIFORM):
        kind, fn = op.rsplit("_", 1)
        for lane in range(S):
            got = out[k * S + lane]
            if lane not in active:
                assert got == 99, (op, lane)
                continue
            before = [x[m] for m in active if m < lane]
            upto = before + [x[lane]]
            want = {"reduce": list(x.values()), "inclusive_scan": upto,
                    "exclusive_scan": before}[kind]
            if fn == "add":
                expect = sum(want)
            elif fn == "max":
                expect = max(want) if want else lowest
            else:
                expect = min(want) if want else highest
            assert got == expect, (op, lane, got, expect)


def test_sub_group_shuffle_from_an_inactive_lane_is_a_kernel_error():
    """Lanes 4-15 active read lane 9 (defined) or lane 2 (inactive: undefined)."""
    def run(src: int):
        decl = (f"    llvm.func spir_funccc @_Z17sub_group_shuffleij(i32, i32) -> i32 "
                f"attributes {ATTRS}")
        body = f"""      %four = arith.constant 4 : i32
      %src = arith.constant {src} : i32
      %on = arith.cmpi sge, %lane, %four : i32
      scf.if %on {{
        %r = llvm.call spir_funccc @_Z17sub_group_shuffleij(%lane, %src) {ATTRS} : (i32, i32) -> i32
        %p = llvm.getelementptr %out[%l64] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
        llvm.store %r, %p : i32, !llvm.ptr<1>
      }}"""
        out = np.full(S, -1, np.int32)
        simulate.simulate(module(body, declare=decl), "k", [np.zeros(1, np.int8), out])
        return out
    assert list(run(9)) == [-1] * 4 + [9] * 12
    with pytest.raises(ttlc.KernelError, match="lane 4 reads lane 2, which is not an active"):
        run(2)
    with pytest.raises(ttlc.KernelError, match="reads lane 16"):
        run(16)


@pytest.mark.parametrize("symbol,types,message", [
    ("_Z32sub_group_non_uniform_reduce_addf", "i32", r"takes \(f32\), not \(i32\)"),
    ("_Z32sub_group_non_uniform_reduce_mulf", "f32", "is not simulated"),
    ("_Z99sub_group_shuffleij", "i32, i32", "not a mangled OpenCL builtin"),
])
def test_builtins_are_checked_against_their_mangled_names(symbol, types, message):
    decl = f"    llvm.func spir_funccc @{symbol}({types}) -> i32 attributes {ATTRS}"
    with pytest.raises(SimulationError, match=message):
        simulate.parse(module("", declare=decl))


def test_a_barrier_reached_by_part_of_a_work_group_is_a_kernel_error():
    body = """      %one = arith.constant 1 : i32
      %sg = xevm.subgroup_id : i32
      %first = arith.cmpi slt, %sg, %one : i32
      scf.if %first {
        gpu.barrier
      }"""
    with pytest.raises(ttlc.KernelError, match="barrier reached by part of a work-group"):
        simulate.simulate(module(body, lanes=2 * S), "k", [np.zeros(1, np.int8)] * 2)


def _bits(x) -> int:
    return int(np.asarray(x).view(np.dtype(f"u{np.asarray(x).itemsize}")))


#: DPAS cases: (A, B element type, K, C/D type, types attribute, a vector, C/D vector, how
#: lane l holds A in its element i, how it holds B in its element i); A is 8 x K, B K x 16
MMA = {
    # f16: A row i over the lanes; B in VNNI pairs of rows by column
    "f16": (np.float16, 16, np.float32, "d=f32, a=f16, b=f16, c=f32", "vector<8xi16>",
            "vector<8xf32>", lambda A, lane, i: _bits(A[i, lane]),
            lambda B, lane, i: _bits(B[2 * i, lane]) | _bits(B[2 * i + 1, lane]) << 16),
    # s8: lane l holds A[i, 2l] and A[i, 2l + 1] in element i (16 bits), B in groups of
    # four rows; the sums in i32
    "s8": (np.int8, 32, np.int32, "d=i32, a=s8, b=s8, c=i32", "vector<8xi16>",
           "vector<8xi32>", lambda A, lane, i: _bits(A[i, 2 * lane]) | _bits(A[i, 2 * lane + 1]) << 8,
           lambda B, lane, i: sum(_bits(B[4 * i + k, lane]) << (8 * k) for k in range(4))),
}


@pytest.mark.parametrize("kind", sorted(MMA))
def test_mma_dpas_8x16(kind):
    """C and D (8 x 16) like A: element i of lane l is entry (i, l); D = C + A B."""
    ab, K, cd, types, va, vcd, lane_a, lane_b = MMA[kind]
    rng = np.random.default_rng(3)
    small = 128 if ab == np.int8 else 5
    A = rng.integers(-small, small, (8, K)).astype(ab)
    B = rng.integers(-small, small, (K, 16)).astype(ab)
    C = rng.integers(-1000, 1000, (8, 16)).astype(cd)
    a = np.array([[lane_a(A, lane, i) for i in range(8)] for lane in range(S)], np.uint16)
    b = np.array([[lane_b(B, lane, i) for i in range(8)] for lane in range(S)], np.uint32)
    c = np.array([[C[i, lane] for i in range(8)] for lane in range(S)], cd)
    d = _mma(a.view(np.int16), b.view(np.int32), c, (types, K), (va, "vector<8xi32>", vcd), vcd)
    want = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)
    for lane in range(S):
        for i in range(8):
            assert d[lane, i] == want[i, lane]


GEMM = module(consts(w16=32, w32=64, h8=8, h16=16, zero=0) + """
      %a = xevm.blockload2d %pa, %w16, %h8, %w16, %zero, %zero <{elem_size_in_bits=16 : i32, tile_width=16 : i32, tile_height=8 : i32, v_blocks=1 : i32, transpose=false, pack_register=false}> : (!llvm.ptr<1>, i32, i32, i32, i32, i32) -> vector<8xi16>
      %b = xevm.blockload2d %pb, %w16, %h16, %w16, %zero, %zero <{elem_size_in_bits=16 : i32, tile_width=16 : i32, tile_height=16 : i32, v_blocks=1 : i32, transpose=false, pack_register=true}> : (!llvm.ptr<1>, i32, i32, i32, i32, i32) -> vector<8xi32>
      %c = xevm.blockload2d %pc, %w32, %h8, %w32, %zero, %zero <{elem_size_in_bits=32 : i32, tile_width=16 : i32, tile_height=8 : i32, v_blocks=1 : i32, transpose=false, pack_register=false}> : (!llvm.ptr<1>, i32, i32, i32, i32, i32) -> vector<8xf32>
      %d = xevm.mma %a, %b, %c {shape=<m=8, n=16, k=16>, types=<d=f32, a=f16, b=f16, c=f32>} : (vector<8xi16>, vector<8xi32>, vector<8xf32>) -> vector<8xf32>
      xevm.blockstore2d %pc, %w32, %h8, %w32, %zero, %zero, %d <{elem_size_in_bits=32 : i32, tile_width=16 : i32, tile_height=8 : i32}> : (!llvm.ptr<1>, i32, i32, i32, i32, i32, vector<8xf32>)""",
                params="%pa: !llvm.ptr<1>, %pb: !llvm.ptr<1>, %pc: !llvm.ptr<1>", lanes=2 * S)


def test_block_loads_mma_and_block_store_make_a_gemm():
    """The path of a cooperative matrix_mul_add: row-major A and C, B packed on loading;
    two subgroups do the same (the store is the same)."""
    rng = np.random.default_rng(5)
    A = rng.integers(-4, 5, (8, 16)).astype(np.float16)
    B = rng.integers(-4, 5, (16, 16)).astype(np.float16)
    C = rng.integers(-9, 9, (8, 16)).astype(np.float32)
    want = C.astype(np.float64) + A.astype(np.float64) @ B.astype(np.float64)  # NumPy
    simulate.simulate(GEMM, "k", [A, B, C])
    assert np.array_equal(C, want.astype(np.float32))


# ---- the simulator's own errors ----------------------------------------------------------------
def test_an_unknown_operation_is_named_with_its_line():
    text = module("      %z = arith.addui_extended %lane, %lane : i32")
    with pytest.raises(SimulationError, match=r"line 6: operation arith.addui_extended is not "
                                              r"simulated"):
        simulate.parse(text)


def test_a_block_load_in_part_of_a_subgroup_is_a_kernel_error():
    body = consts(bw=64, bh=8, pitch=64, x=0, y=0, eight=8) + """
      %low = arith.cmpi slt, %lane, %eight : i32
      scf.if %low {
""" + blockload(16, 16, 8) + """
      }"""
    with pytest.raises(ttlc.KernelError, match="reached by part of a subgroup"):
        simulate.simulate(module(body), "k", [matrix(8, 32, np.int16), np.zeros(1, np.int8)])


def test_a_block_operand_must_be_the_same_on_every_lane():
    body = consts(bw=64, bh=8, pitch=64, y=0) + "\n      %x = arith.addi %lane, %y : i32\n" + \
        blockload(16, 16, 8)
    with pytest.raises(ttlc.KernelError, match="operand %x differs between the lanes"):
        simulate.simulate(module(body), "k", [matrix(8, 32, np.int16), np.zeros(1, np.int8)])


def test_an_access_outside_the_arguments_is_a_kernel_error():
    body = """      %far = arith.constant 1000 : i64
      %p = llvm.getelementptr %src[%far] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      %v = llvm.load %p : !llvm.ptr<1> -> f32"""
    with pytest.raises(ttlc.KernelError, match="line 8: llvm.load: an access of 4 bytes"):
        simulate.simulate(module(body), "k", [np.zeros(4, np.float32), np.zeros(1, np.int8)])


@pytest.mark.parametrize("grid, message", BAD_GRIDS)
def test_grids_no_gpu_launches_are_refused(grid, message):
    """A grid size of 0 or past the limit is the ValueError of every target, for a
    hand-written module as for ttlc's."""
    with pytest.raises(ValueError, match=message):
        simulate.simulate(module(""), "k", [np.zeros(4, np.float32), np.zeros(1, np.int8)],
                          grid)


# ---- emitted modules give the reference interpreter's results ---------------------------------
@functools.lru_cache(maxsize=8)
def _simulated(text: str):
    ttlc.check(text)
    try:
        return simulate.compile(text)
    except ttlc.CompileError as e:
        assert "target xevm" in str(e) or "target pvc" in str(e), str(e)  # docs/xevm.md
        return str(e).splitlines()[0]


def simulated(text: str):
    """The program's module on the simulator; skip where target xevm refuses it."""
    module = _simulated(text)
    if isinstance(module, str):
        pytest.skip(f"not emitted: {module}")
    return module


def assert_agree(text: str, make_args, grid=(1, 1, 1), kernel=None, scaled=False,
                 any_inputs=False):
    """Both runs write the same (``differences``; ``scaled``: floats within 2**-16 of
    their array's largest magnitude).  ``any_inputs``: the inputs may break the program's
    rules (a KernelError of the reference): nothing to compare then."""
    module = simulated(text)
    kernel = kernel or next(iter(module))
    want, got = make_args(), make_args()
    try:
        with np.errstate(all="ignore"):
            ttlc.compile(text, target="interp")[kernel](*want, grid=grid)
    except ttlc.KernelError:
        if any_inputs:
            pytest.skip("the random inputs break the program's rules")
        raise
    module[kernel](*got, grid=grid)
    want, got = arrays_of(want), arrays_of(got)
    assert len(want) == len(got) > 0
    for k, (g, w) in enumerate(zip(got, want)):
        if scaled and w.dtype.kind == "f":
            atol = 2.0 ** -16 * float(np.max(np.abs(w.astype(np.float64)), initial=1.0))
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=2.0 ** -16, atol=atol, err_msg=f"array {k}")
        else:
            assert differences(g, w) is None, f"array {k}: {differences(g, w)}"


EXAMPLES = sorted((ROOT / "examples").glob("*.ir"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_agree_with_the_interpreter(path):
    text = path.read_text()
    for func in ttlc.check(text).functions:
        assert_agree(text, lambda: generated_inputs(func, dim=5, seed=1)[0], grid=(3, 1, 1),
                     kernel=func.name, scaled=True)


def test_broadcast_in_divergent_code_from_an_active_lane_or_an_inactive_one():
    """Work-items 4-15 of each subgroup broadcast from lane 9 (as the interpreter does)
    or from lane 2, which is inactive: undefined, reported like the interpreter's
    checked mode does."""
    text = coop.kernel(coop.BROADCAST_FROM, IDS=coop.IDS)
    A = np.random.default_rng(5).integers(-99, 99, 32).astype(np.int32)

    def make_args(lane):
        return lambda: [A.copy(), np.zeros(32, np.int32), np.int32(lane)]
    assert_agree(text, make_args(9))
    with pytest.raises(ttlc.KernelError, match="lane 4 reads lane 2, which is not an active"):
        simulated(text)["k"](*make_args(2)())


COMPLEX_EXP = """func @k(%x: memref<c32x4>) attributes {subgroup_size=16, work_group_size=[16,1]} {
    parallel {
        %l = subgroup_local_id : i32
        %four = constant 4 : i32
        %in = less_than %l, %four : bool
        if %in {
            %i = cast %l : index
            %v = load %x[%i] : c32
            %e = exp %v : c32
            store %e, %x[%i]
        }
    }
}"""


def test_exp_of_a_real_complex_number_that_overflows_keeps_its_imaginary_zero():
    """exp(100 + 0i) is inf + 0i as NumPy (C's cexp) has it, not inf + NaN i (inf * sin 0);
    with a nonzero imaginary part the overflow reaches both parts."""
    def make_args():
        return [np.array([100, complex(100, -0.0), 1, 100 + 1j], np.complex64)]
    assert_agree(COMPLEX_EXP, make_args)
    x = make_args()[0]
    simulated(COMPLEX_EXP)["k"](x)
    assert x[0] == complex(np.inf, 0) and np.signbit(x[1].imag)
    assert x[2].imag == 0 and abs(x[2].real - np.e) < 1e-6
    assert np.isinf(x[3].real) and np.isinf(x[3].imag)


def test_kernel_abi_groups_offsets_dynamic_sizes_and_bool():
    """test_xevm's ABI kernel: a group with a dynamic offset and size, an index and a
    bool, on two work-groups in y."""
    for flag in (True, False):
        def make_args():
            a = np.zeros((8, 5), np.float32, order="F")
            bufs = [np.arange(20, dtype=np.float16) * (k + 1) for k in range(2)]
            return [a, ttlc.Group(bufs, offset=3, shapes=[(9,), (9,)]), 4, flag]
        assert_agree(test_xevm.ABI, make_args, grid=(1, 2, 1))


STRIDED = """func @k(%A: memref<f32x?x?,strided<?,?>>, %B: memref<f32x?x?,strided<?,?>>) {
    %two = constant 2.0 : f32
    %one = constant 1.0 : f32
    axpby %two, %A, %one, %B
}
"""


def test_views_of_one_array_are_one_memory():
    """B is every second row of the array A reads every other row of."""
    base = np.asfortranarray(np.arange(48, dtype=np.float32).reshape(8, 6))
    got = base.copy(order="F")
    simulated(STRIDED)["k"](got[0::2], got[1::2])
    want = base.copy(order="F")
    want[1::2] += 2 * want[0::2]  # NumPy
    assert np.array_equal(got, want)


NULL = """func @k(%A: memref<f32x?>, %B: memref<f32x4>) attributes {subgroup_size=16} {
    %a = associated %A : bool
    %c0 = constant 0 : index
    if %a {
        %s = size %A[0] : index
        %sf = cast %s : f32
        store %sf, %B[%c0]
    } else {
        %m = constant -1.0 : f32
        store %m, %B[%c0]
    }
}
"""


@pytest.mark.parametrize("a", [None, np.zeros(0, np.float32), np.ones(3, np.float32)],
                         ids=["null", "empty", "three"])
def test_null_and_empty_memrefs(a):
    assert_agree(NULL, lambda: [a, np.full(4, 7, np.float32)])


ATOMICS = """func @k(%x: memref<f32x4>, %n: memref<i64x4>, %old: memref<i32x66>)
        attributes{subgroup_size=16, work_group_size=[16,2]} {
    %c0 = constant 0 : index
    %c1 = constant 1 : index
    %two = constant 2 : i64
    %u = atomic_max %two, %n[%c0] : i64
    %v = atomic_min %two, %n[%c1] : i64
    parallel {
        %one = constant 1.0 : f32
        %s = atomic_add %one, %x[%c0] : f32
        %m = constant 1 : i32
        %p = atomic_add %m, %old[%c0] : i32
        %q = cast %p : index
        %c2 = constant 2 : index
        %r = add %q, %c2 : index
        %mine = constant 1 : i32
        %t = atomic_add %mine, %old[%r] : i32
    }
}
"""


def test_atomics_and_work_group_memory():
    """Atomic updates per work-item (the previous values are a permutation) and once per
    work-group; an alloca shared by the work-group through a barrier."""
    def make_args():
        return [np.zeros(4, np.float32), np.array([0, 5, 7, 9]), np.zeros(66, np.int32)]
    assert_agree(ATOMICS, make_args, grid=(2, 1, 1))
    args = make_args()
    simulate.compile(ATOMICS)["k"](*args, grid=(2, 1, 1))
    assert args[0][0] == 64 and list(args[1]) == [2, 2, 7, 9]  # 2 work-groups of 32
    assert args[2][0] == 64 and args[2][1] == 0 and list(args[2][2:]) == [1] * 64
    shared = """func @k(%A: memref<f32x32>, %B: memref<f32x32>)
            attributes{subgroup_size=16, work_group_size=[32,1]} {
        %t = alloca : memref<f32x32,local>
        parallel {
            %i = subgroup_local_id : i32
            %s = subgroup_id.x : i32
            %c16 = constant 16 : i32
            %k = mul %s, %c16 : i32
            %w = add %k, %i : i32
            %x = cast %w : index
            %v = load %A[%x] : f32
            store %v, %t[%x]
            barrier.local
            %c31 = constant 31 : index
            %r = sub %c31, %x : index
            %u = load %t[%r] : f32
            store %u, %B[%x]
        }
    }
    """
    assert_agree(shared, lambda: [np.arange(32, dtype=np.float32), np.zeros(32, np.float32)],
                 grid=(2, 1, 1))


BLOCKS = """func @k(%A: memref<f16x32x32> {alignment=64}, %B: memref<f16x32x32> {alignment=64},
             %C: memref<f32x32x32> {alignment=64}) attributes {subgroup_size=16, work_group_size=[16,1]} {
  parallel {
    %c0 = constant 0 : index
    %c16 = constant 16 : index
    %a = cooperative_matrix_load %A[%c16, %c0] : coopmatrix<f16x16x16,matrix_a>
    %b = cooperative_matrix_load %B[%c0, %c16] : coopmatrix<f16x16x8,matrix_b>
    %c = cooperative_matrix_load %C[%c0, %c0] : coopmatrix<f32x16x8,matrix_acc>
    %d = cooperative_matrix_mul_add %a, %b, %c : coopmatrix<f32x16x8,matrix_acc>
    cooperative_matrix_prefetch 1, %A[%c0, %c0], 16, 16
    cooperative_matrix_store %d, %C[%c16, %c16]
  }
}
"""


def test_block_io_and_dpas_agree_with_the_interpreter():
    """Aligned column-major tiles: the loads, the store and the prefetch are 2-D block
    operations and the multiply-add is DPAS (docs/xevm.md)."""
    module = simulated(BLOCKS)
    for op in ("xevm.blockload2d", "xevm.blockstore2d", "xevm.blockprefetch2d", "xevm.mma"):
        assert op in module.mlir, op
    def aligned(values: np.ndarray) -> np.ndarray:
        """A column-major copy whose first element is 64-byte aligned."""
        raw = np.zeros(values.nbytes + 64, np.uint8)
        start = -raw.ctypes.data % 64
        out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape[::-1]).T
        out[...] = values
        return out

    def make_args():
        rng = np.random.default_rng(6)
        return [aligned(rng.integers(-4, 5, (32, 32)).astype(t))
                for t in (np.float16, np.float16, np.float32)]
    assert_agree(BLOCKS, make_args)


def _coop_kernels():
    """(id, kernel text, grid) for the kernels of test_interp_coop.py that need no chosen
    inputs, with parameters its tests use."""
    k, ids = coop.kernel, coop.IDS
    yield "divergent_insert", k(coop.DIVERGENT_INSERT, IDS=ids)
    for ty in ("i8", "i32", "i64", "f16", "bf16", "f32", "f64"):
        for load, store in (("cooperative_matrix_load", "cooperative_matrix_store"),
                            ("cooperative_matrix_atomic_load", "cooperative_matrix_atomic_store")):
            yield f"roundtrip_{ty}_{load[19:]}", k(coop.ROUNDTRIP, T=ty, LOAD=load, STORE=store,
                                                    IDS=ids)
    yield "transposed_load", k(coop.TRANSPOSED_LOAD, IDS=ids)
    yield "transposed_store", k(coop.TRANSPOSED_STORE, IDS=ids)
    for op, ty in (("add", "i32"), ("add", "f32"), ("max", "i32"), ("min", "f64")):
        yield f"atomic_{op}_{ty}", k(coop.ATOMIC_ALL, T=ty, OP=op, IDS=ids)
    yield "construct", k(coop.CONSTRUCT, IDS=ids)
    for ty in ("f32", "i32", "i8"):
        yield f"scale_{ty}", k(coop.SCALE, T=ty, IDS=ids)
    yield "prefetch", coop.PREFETCH
    for M, N in ((16, 8), (4, 15)):
        yield f"apply_{M}x{N}", k(coop.APPLY, M=M, N=N, NG=2 * N, IDS=ids)
    yield "apply_divergent", k(coop.APPLY_DIVERGENT, IDS=ids)
    for ta, tb, tc, td, M, K, N in (("f32", "f32", "f32", "f32", 16, 8, 16),
                                    ("f64", "f64", "f64", "f64", 32, 4, 8),
                                    ("f16", "f16", "f32", "f32", 16, 16, 8),
                                    ("bf16", "bf16", "bf16", "bf16", 16, 8, 8),
                                    ("i8", "i8", "i32", "i32", 32, 32, 16),
                                    ("i16", "i8", "i64", "i64", 16, 8, 8),
                                    ("f32", "f32", "f32", "i32", 16, 8, 8)):
        yield f"mul_add_{ta}_{tc}_{M}x{K}x{N}", k(coop.MUL_ADD, TA=ta, TB=tb, TC=tc, TD=td, M=M,
                                                  K=K, N=N, KG=2 * K, NG=2 * N, IDS=ids)
    for op in ("add", "max", "min"):
        yield f"reduce_{op}", k(coop.REDUCE, T="f32", OP=op, IDS=ids)
    yield "unary_cast", coop.UNARY_CAST
    yield "int_div", k(coop.INT_DIV, IDS=ids)
    yield "loop", coop.LOOP
    for ty in ("i32", "f64", "bf16"):
        yield f"broadcast_{ty}", k(coop.BROADCAST, T=ty, IDS=ids)
    # scans and reductions over the active work-items; narrow integers' exclusive max
    # and min scans give the first active work-item the narrow identity
    for ty, op in (("i32", "reduce_add"), ("f32", "reduce_max"), ("i8", "reduce_min"),
                   ("f64", "reduce_add"), ("f16", "reduce_add"), ("i8", "exclusive_scan_max"),
                   ("i16", "exclusive_scan_min"), ("bf16", "exclusive_scan_max"),
                   ("f32", "inclusive_scan_add"), ("i64", "inclusive_scan_min"),
                   ("c64", "exclusive_scan_add"), ("c32", "reduce_add")):
        for limit, kind in ((64, "uniform"), (0, "divergent")):
            yield f"subgroup_{op}_{ty}_{kind}", k(coop.SUBGROUP_OP, T=ty, OP=op, LIMIT=limit,
                                                  IDS=ids, S=16, WGX=32, WGY=2)
    yield "inactive", k(coop.INACTIVE, IDS=ids)
    # in subgroups of 16 (the interpreter test's 4 is no size of pvc)
    narrow = coop.PARTIAL_NARROW_STORE.replace("subgroup_size=4, work_group_size=[4,1]",
                                               "subgroup_size=16, work_group_size=[16,1]")
    for ty in ("bf16", "i16"):
        yield f"partial_narrow_store_{ty}", k(narrow.replace("x4x1,", "x16x1,"), T=ty)


COOP = dict(_coop_kernels())


@pytest.mark.parametrize("name", sorted(COOP))
def test_coopmatrix_kernels_agree_with_the_interpreter(name):
    text = COOP[name]
    func = ttlc.check(text).functions[0]
    assert_agree(text, lambda: generated_inputs(func, dim=5, seed=2)[0], grid=(2, 1, 1),
                 scaled=True, any_inputs=True)


#: generated programs are compared in chunks (one test each)
CHUNK = 50


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_generated_programs_agree_with_the_interpreter(first):
    """Generated programs with the subgroup sizes pvc offers: every one is emitted."""
    for seed in range(first, min(first + CHUNK, SEEDS)):
        case = generate(seed, subgroup_sizes=test_xevm.SIZES)
        module = simulate.compile(case.text)
        want, got = case.make_args(), case.make_args()
        with np.errstate(all="ignore"):
            ttlc.compile(case.text, target="interp")[case.kernel_name](*want, grid=case.grid)
        module[case.kernel_name](*got, grid=case.grid)
        for k, (g, w) in enumerate(zip(arrays_of(got), arrays_of(want))):
            assert differences(g, w) is None, \
                f"seed {seed}, array {k}: {differences(g, w)}\n{case.text}"
