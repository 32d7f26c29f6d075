"""Target cuda (docs/cuda-tile.md, "Running kernels: target cuda"): Tile IR compiled by
tileiras, loaded and launched with the CUDA driver through cuda-python.

Without a GPU, the launch is checked against a fake driver (``FakeDriver``): a device
whose memory is host memory, which records every call and runs what ``cuLaunchKernel``
launches on the Tile IR interpreter with the parameter words it was given, so that a
kernel launched through target cuda must write what the reference interpreter writes.
The tests at the end need a GPU and skip with the reason when there is none.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import interp_testing
import ttlc
from ttlc.backends import BACKENDS

if (why := interp_testing.cannot_run("cuda")) is not None:
    pytest.skip(why, allow_module_level=True)

from ttlc.backends.cuda import driver, module as cuda_module  # noqa: E402
from cuda_testing import ERRORS, FakeDriver, install  # noqa: E402
from ttlc.backends.tile.abi import dtype  # noqa: E402
from ttlc.runtime.dlpack import _get_pointer, _Tensor  # noqa: E402
from ttlc.runtime.inputs import generated_inputs  # noqa: E402
from ttlc.testing.differential import compare_fault, compare_races  # noqa: E402
from test_tile_checked import FAULTS, PASSING, check_alike, passing_args  # noqa: E402
from test_tile_checked import FILE as FAULTS_FILE  # noqa: E402
from test_tile_races import LAUNCHES, assert_alike, outcome, source  # noqa: E402
from test_tile_races import FILE as RACES_FILE  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake(monkeypatch):
    """The fake driver in place of cuda-python's (cuda_testing.py)."""
    dev = FakeDriver()
    install(monkeypatch.setattr, dev)
    yield dev
    driver.find.cache_clear()


def compile_fake(fake: FakeDriver, text: str):
    module = ttlc.compile(text, target="cuda")
    fake.entries = {e.name: e for e in module.tile.entries}
    return module


class CudaArray:
    """A NumPy array that says through DLPack that it lies on CUDA device `ordinal` (the
    fake device's memory is the host's): what a PyTorch or CuPy array on the GPU gives."""

    def __init__(self, fake: FakeDriver, array: np.ndarray, ordinal: int = 0):
        self.array, self.ordinal, self.streams = array, ordinal, []
        fake.memory.add(array)

    def __dlpack_device__(self):
        return 2, self.ordinal

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        capsule = self.array.__dlpack__()
        tensor = _Tensor.from_address(_get_pointer(capsule, b"dltensor"))
        tensor.device.device_type, tensor.device.device_id = 2, self.ordinal
        return capsule


def test_registry_entry():
    backend = BACKENDS["cuda"]
    assert backend.executes and backend.machine == "nvidia"
    assert [s.name for s in backend.stages] == ["cubin"] and backend.stage().binary


# ---- (a) no driver, no device: a CompileError saying why -------------------------------------
SIMPLE = "func @k(%a: f32, %A: memref<f32x?>) {\n  axpby %a, %A, %a, %A\n}\n"


def test_this_machine_without_a_gpu_gives_a_compile_error_naming_the_reason():
    """Where no driver or device is present (as where these tests were written), compiling
    for target cuda is a CompileError naming the reason and what to install."""
    driver.find.cache_clear()
    dev, why = driver.find()
    if dev is not None:
        pytest.skip(f"a CUDA device is present ({dev.name})")
    with pytest.raises(ttlc.CompileError) as e:
        ttlc.compile(SIMPLE, target="cuda")
    assert "target cuda: the CUDA driver" in str(e.value) and "ttlc[cuda]" in str(e.value)


class _NoLibrary:
    def cuInit(self, flags):
        raise OSError("libcuda.so.1: cannot open shared object file")


@pytest.mark.parametrize("api, reason", [
    (_NoLibrary(), "the CUDA driver cannot be used (OSError: libcuda.so.1: cannot open"),
    (FakeDriver(init_error=100), "cuInit failed with CUDA_ERROR_NO_DEVICE"),
    (FakeDriver(devices=0), "the CUDA driver sees no device"),
])
def test_no_driver_or_no_device_is_a_compile_error(monkeypatch, api, reason):
    monkeypatch.setattr(driver, "API", api)
    driver.find.cache_clear()
    try:
        with pytest.raises(ttlc.CompileError, match="target cuda: ") as e:
            ttlc.compile(SIMPLE, target="cuda")
        assert reason in str(e.value) and "pip install 'ttlc[cuda]'" in str(e.value)
    finally:
        driver.find.cache_clear()


# ---- checked mode: the error record, read back after the launch -------------------------------
@pytest.mark.parametrize("name", FAULTS)
def test_checked_launch_reports_what_the_interpreter_reports(fake, name):
    """Each faulty launch of test_tile_checked.py, launched checked through the driver: the
    interpreter's kind of finding at its line, nothing written past any argument."""
    fault = FAULTS[name]
    module = ttlc.compile(fault.text, target="cuda", checked=True, filename=FAULTS_FILE)
    args = fault.args()
    with pytest.raises(ttlc.KernelError) as e:
        module["g"](*args, grid=fault.grid)
    check_alike(name, fault, str(e.value), args)


@pytest.mark.parametrize("name", PASSING)
def test_checked_launches_keeping_the_rules_report_nothing(fake, name):
    """The kernels of test_tile_checked.py that keep the rules tests there get wrong
    (uniform among the running work-items only, padding subgroups, an alloca per trip):
    launched checked, nothing is found, and they write what the interpreter writes."""
    want = passing_args(name)
    ttlc.compile(PASSING[name], target="interp", checked=True)["g"](*want)
    got = passing_args(name)
    ttlc.compile(PASSING[name], target="cuda", checked=True)["g"](*got)
    assert fake.launches
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_checked_launch_passes_a_zeroed_record_and_reads_it_back(fake):
    """The entry's last parameter is a device allocation of the record's 16 words, copied
    in as zeros and back after the kernel; a launch without a finding returns."""
    module = ttlc.compile(SIMPLE, target="cuda", checked=True)
    a = np.arange(4, dtype=np.float32)
    module["k"](np.float32(2), a)
    np.testing.assert_array_equal(a, 4 * np.arange(4))  # 2 a + 2 a
    words = fake.launches[-1][5]
    assert len(words) == len(module.tile.entries[0].args) == 4  # a, A's pointer and size, record
    record = words[-1]
    copies = [c for c in fake.calls if c[0] in ("cuMemcpyHtoD", "cuMemcpyDtoH") and record in c[1]]
    assert [(c[0], c[1][2]) for c in copies] == [("cuMemcpyHtoD", 128), ("cuMemcpyDtoH", 128)]


@pytest.mark.parametrize("seed", range(3))
def test_faulty_generated_launches_are_found_as_the_interpreter_finds_them(fake, seed):
    """compare_fault (test_differential.py) with target cuda: generated programs launched on
    work-groups past their inputs."""
    outcome = compare_fault(seed, target="cuda")
    assert outcome.ok, outcome.report()


@pytest.mark.parametrize("name", LAUNCHES)
def test_checked_launch_finds_races_and_barriers_as_the_interpreter_does(fake, name):
    """Each launch of test_tile_races.py through the driver: the interpreter's finding word
    for word (the record's details read back from the device), or none and its results."""
    launch = LAUNCHES[name]
    module = ttlc.compile(source(launch), target="cuda", checked=True, filename=RACES_FILE)
    assert_alike(launch, outcome(lambda args: module[launch.kernel](*args, grid=launch.grid), launch))


@pytest.mark.parametrize("seed", range(int(os.environ.get("TTLC_CUDA_RACE_SEEDS", "12"))))
def test_generated_races_are_found_as_the_interpreter_finds_them(fake, seed):
    """compare_races (test_differential.py) with target cuda: generated kernels sharing
    local memory, with and without races and barriers."""
    found = compare_races(seed, target="cuda")
    assert found.ok, found.report()


def test_without_a_device_the_cubin_stage_asks_for_an_architecture(monkeypatch):
    monkeypatch.setattr(driver, "API", FakeDriver(devices=0))
    monkeypatch.delenv(cuda_module.ARCH_VARIABLE, raising=False)
    driver.find.cache_clear()
    try:
        with pytest.raises(ttlc.CompileError, match="set TTLC_CUDA_ARCH"):
            BACKENDS["cuda"].emit(ttlc.check(SIMPLE))
    finally:
        driver.find.cache_clear()


def test_cubin_stage_compiles_for_the_chosen_architecture(monkeypatch):
    from ttlc.backends.tile.tools import tool

    if tool("tileiras") is None:
        pytest.skip("NVIDIA's tileiras is not installed (pip install 'ttlc[cuda]')")
    monkeypatch.setenv(cuda_module.ARCH_VARIABLE, "sm_100")
    code = BACKENDS["cuda"].emit(ttlc.check(SIMPLE))
    assert code[:4] == b"\x7fELF"
    e_flags = int.from_bytes(code[48:52], "little")  # the cubin's architecture, 100
    assert 100 in (e_flags & 0xFF, (e_flags >> 8) & 0xFF)


def _kernel_parameter_sizes(cubin: bytes) -> list:
    """The sizes of the kernel parameters a cubin declares, in order: the KPARAM_INFO
    attributes (0x17) of its ``.nv.info.<kernel>`` section, each ``index u32, ordinal u16,
    offset u16, flags u32`` with the size in bits 18-31 of the flags."""
    import struct

    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names = sections[shstrndx][4]
    sizes = {}
    for name, _, _, _, offset, size in sections:
        if cubin[names + name:].startswith(b".nv.info."):
            data, i = cubin[offset:offset + size], 0
            while i < len(data):
                fmt, attr = data[i], data[i + 1]
                n = struct.unpack_from("<H", data, i + 2)[0] if fmt == 4 else 0
                if attr == 0x17:
                    _, ordinal, _, flags = struct.unpack_from("<IHHI", data, i + 4)
                    sizes[ordinal] = flags >> 18
                i += 4 + n
    return [sizes[k] for k in sorted(sizes)]


def test_tileiras_declares_the_parameters_the_entry_abi_packs(monkeypatch):
    """The cubin of a kernel with numbers of every size, a complex number, a memref with
    a dynamic size and stride and a group with dynamic sizes, size and offset declares
    one parameter per entry parameter, each of the size of its type (what
    ``abi.words`` puts first in each word): 4, 1, 1, 4, 4, 2, 8, 2, 2, then seven 8s."""
    from ttlc.backends.tile.backend import translate
    from ttlc.backends.tile.tools import tool

    if tool("tileiras") is None:
        pytest.skip("NVIDIA's tileiras is not installed (pip install 'ttlc[cuda]')")
    text = PACKED.replace("%h: bf16,", "%h: bf16, %d: f64, %s: i16, %e: f16,")
    monkeypatch.setenv(cuda_module.ARCH_VARIABLE, "sm_90")
    sizes = _kernel_parameter_sizes(BACKENDS["cuda"].emit(ttlc.check(text)))
    assert sizes == [4, 1, 1, 4, 4, 2, 8, 2, 2] + [8] * 7
    entry, = translate(ttlc.check(text)).entries
    assert sizes == [dtype(a.type).itemsize for a in entry.args]


def test_the_device_architecture_reaches_tileiras_and_the_cubin_is_loaded(fake, monkeypatch):
    monkeypatch.delenv(cuda_module.ARCH_VARIABLE, raising=False)
    fake.attrs["COMPUTE_CAPABILITY_MAJOR"], fake.attrs["COMPUTE_CAPABILITY_MINOR"] = 10, 0
    module = compile_fake(fake, SIMPLE)
    assert module.arch == "sm_100"
    assert ("cuLibraryLoadData", (b"cubin sm_100",)) in fake.calls


# ---- (b) the packing of the parameters -------------------------------------------------------
PACKED = """func @k(%a: f32, %b: i8, %c: bool, %z: c32, %h: bf16,
                    %A: memref<f64x?x4, strided<1,?>>, %G: group<memref<f32x?>x?, offset: ?>) {
}
"""


def _f32(x: float) -> int:
    return int(np.float32(x).view(np.uint32))


def test_parameters_are_packed_as_the_entry_abi_says(fake):
    """Each parameter in a word of its own, in the order of docs/cuda-tile.md: numbers in
    their type's bits, a complex number's parts, a memref's device address and dynamic
    size and stride, a group's table of member addresses (without the offset), its
    table of dynamic sizes, its size and offset.  Expected values written by hand."""
    module = compile_fake(fake, PACKED)
    A = np.asfortranarray(np.zeros((7, 4)))[:5]  # size 5, stride 7 in mode 1
    g0, g1 = np.zeros(5, np.float32), np.zeros(6, np.float32)
    module["k"](1.5, -3, True, 2 + 3j, 1.0, A, ttlc.Group([g0, g1], offset=2, shapes=[(3,), (4,)]),
                grid=(3, 2))
    (f, grid, block, shared, stream, words), = fake.launches
    assert (f, grid, block, shared, stream) == ("k", (3, 2, 1), (1, 1, 1), 0, 0)
    copied = {args[1]: args[0] for name, args in fake.calls if name == "cuMemcpyHtoD"}
    a_dev, g0_dev, g1_dev = (copied[x.ctypes.data] for x in (A, g0, g1))
    assert words[:9] == [_f32(1.5), 0xFD, 1, _f32(2.0), _f32(3.0), 0x3F80, a_dev, 5, 7]
    assert list(fake.read(words[9], np.int64, 2)) == [g0_dev, g1_dev]
    assert list(fake.read(words[10], np.int64, 2)) == [3, 4]
    assert words[11:] == [2, 2]
    assert not fake.allocations  # every device allocation of the launch was freed


def _example(name: str) -> str:
    return (ROOT / "examples" / name).read_text()


@pytest.mark.parametrize("text, name, grid", [
    (_example("gemm_batched.ir"), "gemm_batched", (3, 1, 1)),
    (_example("gemm_batched.ir"), "gemm_batched_group", (3, 1, 1)),
    (PACKED.replace("{\n}", "{\n    %m = re %z : f32\n    %i = constant 2 : index\n"
                            "    %g = load %G[%i] : memref<f32x?>\n    %f = constant 0 : index\n"
                            "    %o = mul %m, %a : f32\n    store %o, %g[%f]\n}").replace(
        "x?, offset", "x3, offset"), "k", (1, 1, 1)),
], ids=["gemm_batched", "gemm_batched_group", "numbers_and_group"])
def test_a_launch_writes_what_the_reference_interpreter_writes(fake, text, name, grid):
    """The parameters target cuda passes, run by the Tile IR interpreter as the fake
    device's kernel, write what the reference interpreter writes."""
    func = ttlc.parse(text).functions[[f.name for f in ttlc.parse(text).functions].index(name)]
    dim = 37 if grid == (1, 1, 1) else 64
    expected_args, expected = generated_inputs(func, dim=dim, group_size=3, seed=5)
    ttlc.compile(text, target="interp")[name](*expected_args, grid=grid)
    args, got = generated_inputs(func, dim=dim, group_size=3, seed=5)
    compile_fake(fake, text)[name](*args, grid=grid)
    assert fake.launches and fake.launches[-1][1] == grid
    for e, g in zip(expected, got):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def _tile_tests():
    import test_tile_backend

    return test_tile_backend


@pytest.mark.parametrize("name", sorted(_tile_tests().FIRST_CLASS))
def test_every_kind_of_kernel_launched_writes_what_the_reference_interpreter_writes(fake, name):
    """The first class of target cuda-tile (one kernel of each kind), launched through
    target cuda on the fake device, against the reference interpreter."""
    tile = _tile_tests()
    tile._compare_meaning(tile.FIRST_CLASS[name], "k", run=lambda text, kernel, args, grid:
                          compile_fake(fake, text)[kernel](*args, grid=grid))
    assert fake.launches


def test_arrays_on_the_device_are_passed_where_they_lie(fake):
    """A DLPack array on the CUDA device is neither copied there nor back: its address
    is the parameter, the kernel writes it in place, and the producer was asked to order
    its work before the legacy default stream (DLPack's stream 1)."""
    module = compile_fake(fake, SIMPLE)
    data = np.arange(1, 6, dtype=np.float32)
    A = CudaArray(fake, data)
    module["k"](2.0, A)
    (_, _, _, _, _, words), = fake.launches
    assert words[1] == data.ctypes.data and words[2] == 5
    assert not [c for c in fake.calls if c[0].startswith("cuMemcpy")]
    np.testing.assert_array_equal(data, 4 * np.arange(1, 6, dtype=np.float32))
    assert A.streams == [cuda_module.LEGACY_STREAM]


def test_numpy_arrays_are_copied_and_only_written_ones_copied_back(fake):
    module = compile_fake(fake, "func @k(%A: memref<f32x4>, %B: memref<f32x4>) {\n"
                                "  %one = constant 1.0 : f32\n  axpby %one, %A, %one, %B\n}\n")
    A, B = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    A.flags.writeable = False  # only read: passed, never written back
    module["k"](A, B)
    np.testing.assert_array_equal(B, 1 + np.arange(4))
    back = [args for name, args in fake.calls if name == "cuMemcpyDtoH"]
    assert [(dst, n) for dst, _, n in back] == [(B.ctypes.data, 16)]
    with pytest.raises(ttlc.KernelError, match="read-only array"):
        module["k"](B, A)


def test_a_group_of_device_arrays_and_views_of_one_numpy_array(fake):
    """Group members on the device pass as they lie; two overlapping views of one NumPy
    array are one copy, copied back whole."""
    text = ("func @k(%G: group<memref<f32x4>x2>, %A: memref<f32x4>, %B: memref<f32x4>) {\n"
            "  %one = constant 1.0 : f32\n  %i = constant 1 : index\n"
            "  %g = load %G[%i] : memref<f32x4>\n  axpby %one, %A, %one, %g\n"
            "  axpby %one, %g, %one, %B\n}\n")
    module = compile_fake(fake, text)
    members = [np.zeros(4, np.float32), np.full(4, 10, np.float32)]
    host = np.arange(8, dtype=np.float32)
    module["k"]([CudaArray(fake, m) for m in members], host[:4], host[2:6])
    np.testing.assert_array_equal(members[1], [10, 11, 12, 13])  # 10 + host[:4]
    np.testing.assert_array_equal(host, [0, 1, 12, 14, 16, 18, 6, 7])  # host[2:6] + members[1]
    back = [args for name, args in fake.calls if name == "cuMemcpyDtoH"]
    assert [(dst, n) for dst, _, n in back] == [(host.ctypes.data, 24)]
    sources = {args[1] for name, args in fake.calls if name == "cuMemcpyHtoD"}
    assert host.ctypes.data in sources and not sources & {m.ctypes.data for m in members}


def test_an_array_on_another_device_is_a_value_error(fake):
    module = compile_fake(fake, SIMPLE)
    with pytest.raises(ValueError, match=r"argument 1 \(%A\) of @k: the array is on CUDA "
                                         r"device 1, the module on CUDA device 0: Fake GPU"):
        module["k"](1.0, CudaArray(fake, np.zeros(4, np.float32), ordinal=1))


@pytest.mark.parametrize("grid, limit", [((2**24,), 2**24 - 1), ((1, 65536), 65535),
                                         ((0,), 2**24 - 1), ((1, 1, 0), 65535),
                                         (2**63, 2**24 - 1), ((2**62, 4), 2**24 - 1),
                                         ((2**32, 2**32), 2**24 - 1)])
def test_grids_past_the_limits_are_a_value_error_naming_grid_and_limit(fake, grid, limit):
    """Tile IR's 2**24 - 1 tile blocks per mode, and the device's own limits; a size of 0
    is refused too (sizes must be positive)."""
    module = compile_fake(fake, SIMPLE)
    with pytest.raises(ValueError, match=rf"grid.*(positive|{limit}).*{limit}"):
        module["k"](1.0, np.zeros(4, np.float32), grid=grid)
    assert not fake.launches


@pytest.mark.parametrize("failing, call, error", [
    ("launch_error", "cuLaunchKernel", 719), ("alloc_error", "cuMemAlloc", 2)])
def test_a_failed_launch_is_a_kernel_error_naming_the_driver_error(fake, failing, call, error):
    """The driver's error named; what the launch allocated freed."""
    setattr(fake, failing, error)
    module = compile_fake(fake, "func @k(%A: memref<f32x4>, %B: memref<f32x4>) {\n}\n")
    with pytest.raises(ttlc.KernelError, match=rf"@k on CUDA device 0: Fake GPU: {call} "
                                               rf"failed with {ERRORS[error].decode()}"):
        module["k"](np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert not fake.allocations


# ---- (c) on a GPU ----------------------------------------------------------------------------
def _no_gpu() -> str:
    driver.find.cache_clear()
    dev, why = driver.find()
    return "" if dev is not None else f"no CUDA GPU: {why}"


NO_GPU = _no_gpu()
needs_gpu = pytest.mark.skipif(bool(NO_GPU), reason=NO_GPU)


def _on_gpu(library: str):
    if library == "numpy":
        return lambda x: x, lambda x: x
    if library == "torch":
        torch = pytest.importorskip("torch")
        # .cuda() keeps the column-major strides of the dense arrays generated_inputs makes
        return lambda x: torch.from_dlpack(x).cuda(), lambda x: x.cpu().numpy()
    cupy = pytest.importorskip("cupy")
    return lambda x: cupy.array(x, order="K"), cupy.asnumpy


@needs_gpu
@pytest.mark.parametrize("library", ["numpy", "torch", "cupy"])
@pytest.mark.parametrize("name", ["gemm_batched", "gemm_batched_group"])
def test_on_the_gpu_a_launch_writes_what_the_reference_interpreter_writes(library, name):
    to_device, to_host = _on_gpu(library)
    text = _example("gemm_batched.ir")
    func = [f for f in ttlc.parse(text).functions if f.name == name][0]
    expected_args, _ = generated_inputs(func, dim=8, group_size=3, seed=3)
    ttlc.compile(text, target="interp")[name](*expected_args, grid=(3,))
    args, _ = generated_inputs(func, dim=8, group_size=3, seed=3)
    moved = [[to_device(m) for m in x] if isinstance(x, list) else
             to_device(x) if isinstance(x, np.ndarray) else x for x in args]
    ttlc.compile(text, target="cuda")[name](*moved, grid=(3,))
    for e, g in zip(expected_args, moved):
        for em, gm in (zip(e, g) if isinstance(e, list) else [(e, g)]):
            if isinstance(em, np.ndarray):
                np.testing.assert_allclose(to_host(gm), em, rtol=1e-5, atol=1e-5)
