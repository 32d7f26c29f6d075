"""Launches of target cpu: the quick argument path agrees with ``marshal``.

A launch first tries ``ttlc.runtime.args.quick`` (checks specialised to the kernel's
parameter types) and falls back to ``marshal`` for everything else, including every
error.  Here both paths fill the kernel's slot array for many random arguments: whenever
the quick path accepts, ``marshal`` must accept too and give the same slot bytes; when
``marshal`` rejects, the quick path must not have accepted.  A kernel's launcher remembers
array layouts and the last grid: every refusal after a launch of valid arguments is still
the general path's error, word for word.
"""
from __future__ import annotations

import ctypes
import threading

import ml_dtypes
import numpy as np
import pytest

import ttlc
from interp_testing import DLPackOnly
from ttlc.diagnostics import KernelError
from ttlc.runtime import check_grid

pytest.importorskip("llvmlite")
from ttlc.backends.cpu.rtlib import LAUNCH_HEAD as HEAD  # noqa: E402

MEMREFS = """
func @m(%a: memref<f32x?x?>, %b: memref<f64x4x?,strided<1,?>>, %c: memref<i32x?x3x?,strided<?,?,?>>,
        %d: memref<i8>, %e: memref<f32x?> {alignment=32},
        %f: memref<i16x?x?> {shape_gcd=[2],stride_gcd=[1,4]},
        %g: memref<f64x2x2>, %h: memref<f32x?x?,strided<1,7>>) {}
"""
SCALARS = """
func @s(%a: i8, %b: i16, %c: i32, %d: i64, %e: index, %f: f32, %g: f64, %h: bool,
        %i: f16, %j: bf16, %k: c32, %l: c64) {}
"""
#: valid arguments of @s
GOOD_SCALARS = [1, 2, 3, 4, 5, 1.5, 2.5, True, 0.25, -3.0, 1 + 2j, 2 - 1j]


@pytest.fixture(scope="module")
def memrefs():
    return ttlc.compile(MEMREFS, target="cpu")


@pytest.fixture(scope="module")
def scalars():
    return ttlc.compile(SCALARS, target="cpu")


def decode(module, name, buf) -> list:
    """The slot words of a launch (after the buffer's head), a group's pointer and dope
    arrays read out."""
    info = module.infos[name]
    words = list(buf[HEAD:HEAD + info.num_slots])
    for lay, a in zip(info.slots, module[name].func.args):
        if lay.kind == "group":
            k, n = lay.first, words[lay.first + 2]
            order = a.value.type.memref.order
            ptrs = (ctypes.c_int64 * n).from_address(words[k])[:] if n else []
            dopes = (ctypes.c_int64 * (2 * order * n)).from_address(words[k + 1])[:] if n else []
            words[k], words[k + 1] = ptrs, dopes
    return words


def both_paths(module, name, args, grid=(2, 3, 4)):
    """(quick slots or None, marshal slots or the exception marshal raised)."""
    func, info = module[name].func, module.infos[name]
    plan = module._plan(func)
    quick, keep = None, []
    flat = plan.quick(args, keep)
    if flat is not None:
        buf = plan.buffer()
        plan.struct.pack_into(buf, 0, *[0] * HEAD, *grid, *flat)  # (the head: unused here)
        quick = decode(module, name, buf)
    buf = plan.buffer()
    try:
        keep = module._marshal_and_pack(info, func, args, grid, buf)  # noqa: F841
    except (TypeError, ValueError, KernelError) as e:
        return quick, e
    return quick, decode(module, name, buf)


def agree(module, name, args, valid: list = None) -> bool:
    """Check the two paths; True when the quick path accepted the arguments (whether
    marshal did is appended to `valid`)."""
    quick, slow = both_paths(module, name, args)
    if valid is not None:
        valid.append(not isinstance(slow, Exception))
    if quick is None:
        return False
    assert not isinstance(slow, Exception), f"quick path accepted what marshal rejects: {slow}"
    assert quick == slow
    return True


DTYPES = [np.float32, np.float64, np.int32, np.int8, np.int16]


def random_array(rng, order_hint, dtype_hint):
    """Arrays of every kind marshal meets: orders, slices, size-1 and empty modes, C order,
    negative and zero strides, wrong dtypes, read-only views, 0-d arrays, non-arrays."""
    dtype = dtype_hint if rng.random() < 0.7 else DTYPES[rng.integers(len(DTYPES))]
    order = order_hint if rng.random() < 0.8 else int(rng.integers(0, 4))
    shape = tuple(int(rng.choice([0, 1, 1, 2, 3, 4, 5, 8])) if rng.random() < 0.1 else
                  int(rng.choice([1, 2, 3, 4, 6, 8])) for _ in range(order))
    big = tuple(s * int(rng.integers(1, 3)) + int(rng.integers(0, 2)) for s in shape)
    base = np.arange(int(np.prod(big)), dtype=np.float64).reshape(big, order="F").astype(dtype)
    kind = rng.integers(8)
    if kind == 0:
        base = np.ascontiguousarray(base)
    index = tuple(slice(None, s) if rng.random() < 0.7 else slice(None, None, 2) for s in shape)
    x = base[index] if order else base
    if kind == 1 and order:
        x = x[::-1]
    elif kind == 2 and order:
        x = np.broadcast_to(x[:1], x.shape)
    elif kind == 3:
        x = x.view()
        x.flags.writeable = False
    elif kind == 4 and rng.random() < 0.3:
        return [1.0] * 4 if rng.random() < 0.5 else None
    if rng.random() < 0.1 and x.size:  # an address off by one element
        flat = np.zeros(x.size + 1, dtype)
        x = flat[1:].reshape(x.shape, order="F")
    wrap = rng.random()
    if wrap < 0.1:  # another library's tensor
        return DLPackOnly(x)
    if wrap < 0.15:
        return memoryview(x)
    return x


def test_quick_memrefs_agree_with_marshal(memrefs):
    rng = np.random.default_rng(7)
    orders = [2, 2, 3, 0, 1, 2, 2, 2]
    dtypes = [np.float32, np.float64, np.int32, np.int8, np.float32, np.int16, np.float64,
              np.float32]
    good = [np.zeros((3, 5), np.float32, order="F"), np.zeros((4, 6), np.float64, order="F"),
            np.zeros((2, 3, 4), np.int32, order="F"), np.zeros((), np.int8),
            None, np.zeros((4, 4), np.int16, order="F"), np.zeros((2, 2), np.float64, order="F"),
            np.zeros((7, 2), np.float32, order="F")]
    raw = np.zeros(64, np.float32)
    good[4] = raw[(-raw.ctypes.data % 32) // 4:][:8]
    assert agree(memrefs, "m", good)  # plain Fortran arrays take the quick path
    accepted, valid = 0, []
    for _ in range(3000):
        args = list(good)
        for i in rng.choice(8, size=int(rng.integers(1, 3)), replace=False):
            args[i] = random_array(rng, orders[i], dtypes[i])
        accepted += agree(memrefs, "m", args, valid)
    # the quick path takes most valid arguments (not None or empty arrays)
    assert sum(valid) > 200 and accepted > 0.8 * sum(valid)


def test_dlpack_and_buffer_arguments_take_the_quick_path():
    """Another library's tensor (DLPack) and a buffer-protocol object are viewed without a
    copy by the quick path too (no marshal: a few microseconds, not tens): the kernel
    writes through them into the caller's memory."""
    k = ttlc.compile("""
    func @double(%x: memref<f32x?x?>) {
        %one = constant 1.0 : f32
        axpby %one, %x, %one, %x
    }""", target="cpu")
    plan = k._plan(k["double"].func)
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    for given in (DLPackOnly(x), memoryview(x), DLPackOnly(x[:, ::2])):
        keep = []
        assert plan.quick([given], keep) is not None and len(keep) == 1
        assert agree(k, "double", [given])
    k["double"](DLPackOnly(x), grid=(1,))
    k["double"](memoryview(x), grid=(1,))
    np.testing.assert_array_equal(x, 4 * np.arange(6).reshape(2, 3))
    frozen = x.copy(order="F")
    frozen.flags.writeable = False  # a read-only buffer: marshal's error, as before
    with pytest.raises(KernelError, match="read-only"):
        k["double"](memoryview(frozen), grid=(1,))
    assert plan.quick([[1.0, 2.0]], []) is None  # not an array: marshal names it


def test_static_strides_of_size_one_modes(memrefs):
    """marshal substitutes the type's stride where a mode has size 1; so does quick."""
    args = [np.zeros((3, 5), np.float32, order="F"), np.zeros((4, 1), np.float64, order="F"),
            np.zeros((1, 3, 1), np.int32, order="F")[:, :, :], np.zeros((), np.int8),
            None, np.zeros((4, 1), np.int16, order="F"), np.zeros((2, 2), np.float64, order="F"),
            np.zeros((3, 1), np.float32, order="F")]  # stride 7 given for the size-1 mode
    raw = np.zeros(64, np.float32)
    args[4] = raw[(-raw.ctypes.data % 32) // 4:][:8]
    assert agree(memrefs, "m", args)


VALUES = [0, 1, -1, 127, 128, -128, -129, 2 ** 15, 2 ** 31 - 1, 2 ** 31, -2 ** 63, 2 ** 63 - 1,
          2 ** 63, 2 ** 53, 2 ** 53 + 1, -2 ** 53 - 1, 10 ** 400, True, False, 0.5, -2.75, 1e-45,
          3.4028235e38, 3.4028235677973366e38, 3.4028235677973367e38, 1e39, -1e300, 1e308,
          float("inf"), float("-inf"), float("nan"), np.float32(1.5), np.float64(0.1),
          np.float16(2), np.int8(-3), np.int64(2 ** 40), np.uint64(2 ** 63), np.uint8(200),
          np.int32(-7), np.bool_(True), np.array(3), np.array(2.5), 1 + 2j, "1", None,
          np.zeros(1, np.float32), 65504.0, 65519.99, 65520.0, -65520.0, 6e-8, 2.0 ** -25,
          3.3895313892515355e38, 3.3961775292304666e38, 3.396177529230467e38, -3.4e38,
          ml_dtypes.bfloat16(1.5), ml_dtypes.bfloat16("nan"), np.float16("inf"), 1e39 + 1j,
          np.complex64(1 - 2j), np.complex128(complex(1e300, float("nan"))), 1j * 1e39]


@pytest.mark.parametrize("position", range(len(GOOD_SCALARS)), ids=list("abcdefghijkl"))
def test_quick_scalars_agree_with_marshal(scalars, position):
    """Every kind of value for each scalar parameter; both paths give the same bytes."""
    good = GOOD_SCALARS
    assert agree(scalars, "s", good)
    for v in VALUES:
        args = list(good)
        args[position] = v
        agree(scalars, "s", args)
    assert not agree(scalars, "s", good[:-1]) and not agree(scalars, "s", good + [1])


@pytest.mark.parametrize("position", [5, 6, 8, 9, 10, 11], ids=list("fgijkl"))
def test_quick_floats_round_as_marshal(scalars, position):
    """Doubles of every magnitude a 16-bit or 32-bit float holds (subnormals, halfway
    cases of f16, bf16 and f32, ties of bf16 after rounding to f32), each also negated
    and as f32: the quick path takes them all and rounds them as ``marshal`` (NumPy,
    ml_dtypes) does, bit for bit."""
    rng = np.random.default_rng(position)
    exponents = rng.integers(-150, 128, 400)  # (below f32's overflow)
    values = [float(np.ldexp(1 + rng.random(), e)) for e in exponents]
    # halfway between neighbours of each kind, and a little off halfway
    for bits, mantissa in ((16, 10), (8, 7), (24, 23)):
        for e in rng.integers(-20, 15, 30):
            m = int(rng.integers(0, 2 ** mantissa))
            half = np.ldexp(1 + (m + 0.5) / 2 ** mantissa, int(e))
            values += [float(half), float(np.nextafter(half, 0)), float(np.nextafter(half, 4))]
    values += [-v for v in values] + [float(np.float32(v)) for v in values]
    good = list(GOOD_SCALARS)
    taken = 0
    for v in values:
        args = list(good)
        args[position] = v
        taken += agree(scalars, "s", args)
    assert taken > len(values) // 2  # (f16 refuses what overflows it: marshal decides)


GROUPS = """
func @g(%a: group<memref<f32x?x?>x?>, %b: group<memref<f64x4x?>x3> {shape_gcd=[2]},
        %c: group<memref<i32x?>x?, offset: ?>, %x: memref<f32x?>) {}
"""


def test_quick_groups_agree_with_marshal():
    module = ttlc.compile(GROUPS, target="cpu")
    rng = np.random.default_rng(11)
    good = [[np.zeros((3, 5), np.float32, order="F"), np.ones((2, 2), np.float32, order="F")],
            (np.zeros((4, 2)).T.copy().T, np.zeros((4, 4), order="F"), np.zeros((4, 6), order="F")),
            [np.arange(5, dtype=np.int32)], np.zeros(3, np.float32)]
    assert agree(module, "g", good)
    orders, dtypes = [2, 2, 1], [np.float32, np.float64, np.int32]
    accepted = 0
    for _ in range(1500):
        args = list(good)
        i = int(rng.integers(3))
        n = int(rng.choice([0, 1, 2, 3, 4]))
        members = [random_array(rng, orders[i], dtypes[i]) for _ in range(n)]
        kind = rng.integers(7)
        args[i] = (tuple(members) if kind == 0 else np.zeros(3, np.float32) if kind == 1 and n
                   else ttlc.Group(members) if kind == 2 else members)
        if kind == 3:
            try:
                args[i] = ttlc.PreparedGroup(members)
            except TypeError:  # (a member that is no array)
                pass
        accepted += agree(module, "g", args)
    assert accepted > 40  # (members are drawn independently: many lists are invalid)


def test_groups_with_an_offset_take_marshal():
    """Lists for a group with an offset go through marshal; prepared groups do not."""
    module = ttlc.compile("func @o(%g: group<memref<f32x4>x?, offset: 2>) {}", target="cpu")
    quick = module._plan(module["o"].func).quick
    assert quick([[np.zeros(6, np.float32)]], []) is None
    assert quick([ttlc.PreparedGroup([np.zeros(6, np.float32)])], []) is not None
    module["o"]([np.zeros(6, np.float32)], grid=(1,))
    with pytest.raises(ValueError, match="does not fit"):
        module["o"]([np.zeros(5, np.float32)], grid=(1,))


SCALE = """
func @scale(%x: memref<f64x?>, %a: f64) {
    %c0 = constant 0 : index
    %n = size %x[0] : index
    foreach (%i) = (%c0), (%n) {
        %v = load %x[%i] : f64
        %p = mul %v, %a : f64
        store %p, %x[%i]
    }
}
"""


def _on_threads(work, count: int = 4) -> list:
    """Run work(0) ... work(count - 1) on threads at once; what they raised."""
    errors = []

    def run(t):
        try:
            work(t)
        except Exception as e:  # pragma: no cover - the caller reports it
            errors.append(e)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def test_launches_from_several_threads():
    """Each launch has its own argument buffer: concurrent launches do not mix."""
    k = ttlc.compile(SCALE, target="cpu")["scale"]
    arrays = [np.full(1000 + t, 1.0) for t in range(4)]

    def work(t):
        for _ in range(300):
            k(arrays[t], 2.0 ** (t + 1), grid=(1,))  # exact: any mix-up shows
            k(arrays[t], 2.0 ** -(t + 1), grid=(1,))

    assert not _on_threads(work)
    for t, x in enumerate(arrays):
        np.testing.assert_array_equal(x, np.ones(1000 + t))


CHAIN = """
func @chain(%A: memref<f64x{m}x{m}>, %B: memref<f64x{m}x{n}x?>, %D: memref<f64x{m}x{n}x?>) {{
    %i = group_id.x : index
    %b = subview %B[0:{m},0:{n},%i] : memref<f64x{m}x{n}>
    %d = subview %D[0:{m},0:{n},%i] : memref<f64x{m}x{n}>
    %tmp = alloca : memref<f64x{m}x{n},local>
    %one = constant 1.0 : f64
    %zero = constant 0.0 : f64
    gemm %one, %A, %b, %zero, %tmp
    gemm %one, %A, %tmp, %zero, %d
}}
"""


def test_local_memory_of_launches_on_several_threads(monkeypatch):
    """Launches of one chunk keep their thread's scratch memory for the next launch: each
    thread has its own, and it grows for a kernel needing more (D_i = A A B_i through a
    local temporary, checked against NumPy)."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "1")
    kernels = {m: ttlc.compile(CHAIN.format(m=m, n=3), target="cpu")["chain"] for m in (4, 24)}
    wrong = []

    def work(t):
        rng = np.random.default_rng(t)
        for r in range(20):
            m = (4, 24)[(r + t) % 2]
            A = np.asfortranarray(rng.integers(-3, 4, (m, m)).astype(np.float64))
            B = np.asfortranarray(rng.integers(-3, 4, (m, 3, 400)).astype(np.float64))
            D = np.zeros((m, 3, 400), order="F")
            kernels[m](A, B, D, grid=(400,))
            if not np.array_equal(D, np.einsum("ij,jk,kbg->ibg", A, A, B)):  # exact
                wrong.append((t, r, m))

    assert not _on_threads(work) and not wrong


def test_read_only_array_is_refused_on_the_quick_path():
    k = ttlc.compile(SCALE, target="cpu")["scale"]
    x = np.ones(8)
    x.flags.writeable = False
    with pytest.raises(KernelError, match="write to a read-only array"):
        k(x, 2.0, grid=(1,))
    assert (x == 1).all()


# ---- the launcher: layouts and grids remembered, every refusal marshal's -----------------------
WRITES = """
func @w(%x: memref<f64x?x4> {alignment=64}, %y: memref<f32x2x?,strided<1,?>> {stride_gcd=[1,2]},
        %z: memref<f64x?>) {
    %i = constant 0 : index
    %one = constant 1.0 : f64
    %two = constant 2.0 : f32
    store %one, %x[%i, %i]
    store %two, %y[%i, %i]
    store %one, %z[%i]
}
"""


def aligned(shape, dtype, alignment=64, offset=0):
    """A column-major array whose first element is `offset` bytes past an `alignment`."""
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(size + alignment + offset, np.uint8)
    start = (-raw.ctypes.data) % alignment + offset
    return raw[start:start + size].view(dtype).reshape(shape, order="F")


def general_error(kernel, args):
    """What the general path (``marshal``, then the writeability check) raises."""
    module = kernel.module
    plan = module._plan(kernel.func)
    with pytest.raises((TypeError, ValueError, KernelError)) as e:
        module._marshal_and_pack(module.infos[kernel.name], kernel.func, args, (1, 1, 1),
                                 plan.buffer())
    return e.value


def good_writes():
    return [aligned((3, 4), np.float64), np.zeros((4, 5), np.float32, order="F")[:2],
            np.zeros(3)]


def launch_writes(k, args):
    k(*args)
    assert args[0][0, 0] == 1 and args[1][0, 0] == 2 and args[2][0] == 1


def read_only(x):
    x = x.view()
    x.flags.writeable = False
    return x


def test_every_refusal_is_the_general_paths_error():
    """Each argument the quick path refuses -- after a launch of valid ones of the same
    layouts, which it remembers -- raises marshal's error, word for word."""
    k = ttlc.compile(WRITES, target="cpu")["w"]
    x, y, z = good_writes()
    bad = {
        "dtype": [x.astype(np.float32), y, z],
        "row-major": [np.zeros((3, 4)), y, z],
        "static size": [aligned((3, 5), np.float64), y, z],
        "alignment": [aligned((3, 4), np.float64, offset=8), y, z],
        "stride_gcd": [x, np.zeros((3, 5), np.float32, order="F")[:2], z],
        "order": [x, np.zeros(2, np.float32), z],
        "negative stride": [x, y[:, ::-1], z],
        "not an array": [x, y, [1.0, 2.0]],
        "read-only": [x, read_only(y), z],
        "read-only of a remembered layout": [x, y, read_only(z)],
        "too few": [x, y],
        "too many": [x, y, z, z],
    }
    for name, args in bad.items():
        launch_writes(k, good_writes())
        want = general_error(k, args)
        with pytest.raises(type(want)) as got:
            k(*args)
        assert str(got.value) == str(want), name
    assert x[0, 0] == 0 and y[0, 0] == 0 and z[0] == 0  # (no refused launch ran)


def test_an_array_changed_in_place_is_checked_again():
    """The quick path remembers layouts, not arrays: an array whose flags, dtype or
    shape changed since its last launch is checked as it is now."""
    k = ttlc.compile(WRITES, target="cpu")["w"]
    x, y, z = good_writes()
    launch_writes(k, [x, y, z])
    changes = [("flags", "writeable", False, True), ("dtype", None, np.int64, np.float64),
               ("shape", None, (1, 3), (3,))]
    for what, flag, wrong, right in changes:
        z[0] = 0
        if flag:
            setattr(z.flags, flag, wrong)
        else:
            setattr(z, what, wrong)
        want = general_error(k, [x, y, z])
        with pytest.raises(type(want), match="read-only|dtype|order") as got:
            k(x, y, z)
        assert str(got.value) == str(want) and z.reshape(-1)[0] == 0, what
        if flag:
            setattr(z.flags, flag, right)
        else:
            setattr(z, what, right)
        launch_writes(k, [x, y, z])


def test_many_layouts():
    """More layouts than a parameter remembers: each launch is still right."""
    strided = SCALE.replace("memref<f64x?>", "memref<f64x?,strided<?>>")
    k = ttlc.compile(strided, target="cpu")["scale"]
    from ttlc.runtime import args as runtime_args

    for n in list(range(1, 2 * runtime_args._LAYOUTS + 5)) + [3, 1, 3]:
        base = np.ones(3 * n)
        for x in (base[:n], base[::3]):  # two layouts of each size
            k(x, 2.0, grid=(1,))
            np.testing.assert_array_equal(x, np.full(n, 2.0))
            x[...] = 1


def test_grids(monkeypatch):
    """The launcher keeps the last grid with its check: a grid given again runs as many
    work-groups; a wrong grid raises check_grid's error, also after a good one."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "1")  # (every work-group scales all of x)
    k = ttlc.compile(SCALE, target="cpu")["scale"]
    x = np.ones(5)
    three = (3,)
    for grid, count in [(three, 3), (three, 3), ((1, 2), 2), ([2, 2], 4), (three, 3),
                        ((1, 1, 5), 5), (2, 2), ((1,), 1)]:
        x[...] = 1
        k(x, 2.0, grid=grid)
        np.testing.assert_array_equal(x, np.full(5, 2.0 ** count), err_msg=str(grid))
    x[...] = 1
    k(x, 2.0)  # the default grid
    np.testing.assert_array_equal(x, np.full(5, 2.0))
    for bad in [(0,), (2.0,), (three[0], 0), (), (1, 1, 1, 1), "3", (2 ** 31,)]:
        with pytest.raises((TypeError, ValueError)) as want:
            check_grid(bad)
        with pytest.raises(type(want.value)) as got:
            k(x, 2.0, grid=bad)
        assert str(got.value) == str(want.value)
        x[...] = 1
        k(x, 2.0, grid=three)
        np.testing.assert_array_equal(x, np.full(5, 8.0))


def test_grid_checked_at_the_first_call_and_lists_every_time(monkeypatch):
    """The grid remembered is only ever a tuple given before: an empty grid at a kernel's
    first call is refused, and a list changed in place between calls runs its new size."""
    monkeypatch.setenv("TTLC_NUM_THREADS", "1")
    k = ttlc.compile(SCALE, target="cpu")["scale"]
    x = np.ones(5)
    with pytest.raises(ValueError) as want:
        check_grid(())
    with pytest.raises(ValueError) as got:
        k(x, 2.0, grid=())
    assert str(got.value) == str(want.value)
    np.testing.assert_array_equal(x, np.ones(5))
    grid = [2]
    for count in (2, 3):
        grid[0] = count
        x[...] = 1
        k(x, 2.0, grid=grid)
        np.testing.assert_array_equal(x, np.full(5, 2.0 ** count))
