"""``ttlc layout`` (README, "Using ttlc"): the nested_layout attribute, the table of which
lane and register hold each element, and the PNG picture, checked against the
distribution written out independently (``test_layout.reference``) and, for the Xe DPAS
accumulator, against its layout by hand (lane = column, register = row)."""
from __future__ import annotations

import struct
import zlib

import pytest

from test_cli import ttlc
from test_layout import reference
from ttlc.ir.layout import NestedLayout


def _table(out: str):
    """(attribute, {(r, c): (lane, register)}, padding columns) from the output."""
    lines = [x for x in out.splitlines() if not x.startswith("//")]
    attr, head, rows = lines[0], lines[1].split(), lines[2:]
    cells = {}
    for r, line in enumerate(rows):
        label, *entries = line.split()
        assert label == f"r{r}"
        for c, e in enumerate(entries):
            p, v = e.split(":")
            cells[(r, c)] = (int(p), int(v))
    return attr, cells, {c for c, h in enumerate(head) if h.endswith("*")}


@pytest.mark.parametrize("S,M,N", [(16, 4, 15), (8, 16, 3), (32, 8, 8), (4, 2, 5), (1, 2, 3)])
def test_the_table_is_the_language_distribution(S, M, N):
    code, out, err = ttlc("layout", f"coopmatrix<f32x{M}x{N},matrix_a>", "--subgroup-size",
                          str(S))
    assert code == 0, err
    attr, cells, pad = _table(out)
    where, V = reference(S, M, N)
    for rc, pv in where.items():
        assert cells[rc] == pv
    J = max(c for _, c in cells) + 1
    assert pad == set(range(N, J))
    assert NestedLayout.from_iree(attr).shape == (M, J)
    assert f"{NestedLayout.from_iree(attr).lanes} lanes x {V} registers" in out


def test_the_dpas_accumulator_on_pvc_is_the_language_layout():
    """pvc's DPAS computes the transposed product: row r of a 16-row accumulator is on
    lane r, column c in register c."""
    code, out, err = ttlc("layout", "coopmatrix<f32x16x8,matrix_acc>", "--target", "pvc")
    assert code == 0, err
    _, cells, pad = _table(out)
    assert not pad and cells == {(r, c): (r, c) for r in range(16) for c in range(8)}
    assert "the language's layout" in out


def test_cpu_keeps_the_language_layout():
    code, out, _ = ttlc("layout", "coopmatrix<f32x8x16,matrix_acc>", "-d", "cpu")
    assert code == 0 and "the language's layout" in out
    _, cells, _ = _table(out)
    where, _ = reference(16, 8, 16)
    assert cells == where


def _pixels(data: bytes):
    """Width, height and RGB rows of a PNG as this writer makes it (8-bit RGB, filter 0)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = chunks.get(kind, b"") + body
        pos += 12 + n
    w, h, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2) and b"IEND" in chunks
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = 1 + 3 * w
    rows = [raw[y * stride + 1:(y + 1) * stride] for y in range(h)]
    assert all(raw[y * stride] == 0 for y in range(h))
    return w, h, rows


def test_png_has_a_colour_per_lane(tmp_path):
    out = tmp_path / "layout.png"
    S, M, N = 16, 4, 15
    code, _, err = ttlc("layout", f"coopmatrix<f32x{M}x{N},matrix_acc>", "--png", str(out))
    assert code == 0, err
    w, h, rows = _pixels(out.read_bytes())
    cell = 12
    assert (w, h) == (16 * (cell + 1) + 1, M * (cell + 1) + 1)
    where, _ = reference(S, M, N)
    colour = {}
    for (r, c), (p, _) in where.items():
        x, y = 1 + c * (cell + 1) + cell - 2, 1 + r * (cell + 1) + 1  # off the diagonal
        colour.setdefault(p, set()).add(bytes(rows[y][3 * x:3 * x + 3]))
    assert all(len(v) == 1 for v in colour.values())  # one colour per lane
    assert len({next(iter(v)) for v in colour.values()}) == S  # and lanes differ


@pytest.mark.parametrize("args,message", [
    (["f32"], "takes a coopmatrix type, not f32"),
    (["coopmatrix<f32x4>"], "error: unexpected '>'"),
    (["coopmatrix<f32x3x4,matrix_a>"], "rows and the subgroup size must be powers of two"),
    (["coopmatrix<f32x4x4,matrix_a>", "-d", "pvc", "-S", "8"], "target pvc has subgroups of 16, 32"),
    (["coopmatrix<f32x4x4,matrix_a>", "-d", "gpu"], "unknown target description 'gpu'"),
    (["coopmatrix<f32x4x4,matrix_a>", "--png", "/nonexistent/x.png"], "cannot write"),
])
def test_errors(args, message):
    code, _, err = ttlc("layout", *args)
    assert code == 1 and message in err
