"""Layouts shown to people: which lane and register hold each element of a tile, as a
text table and as a PNG picture (``ttlc layout``).

Both read the layout object (``ttlc.ir.layout.MatrixLayout``) element by element
through ``locate``; nothing here knows a distribution formula.  The picture is written
without third-party packages (``zlib`` and the PNG chunk format): one square per
element, one colour per lane, padding columns paler and crossed out.
"""
from __future__ import annotations

import colorsys
import struct
import zlib
from typing import List, Tuple

from .layout import MatrixLayout


def ownership(lay: MatrixLayout) -> List[List[Tuple[int, int]]]:
    """``(lane, register)`` of every element of the padded matrix, row by row."""
    rows, cols = lay.nested.shape
    return [[tuple(int(x) for x in lay.locate(r, c)) for c in range(cols)] for r in range(rows)]


def table(lay: MatrixLayout) -> str:
    """The padded matrix with ``lane:register`` in each cell; padding columns (>= cols)
    are marked with ``*`` in the header."""
    owners = ownership(lay)
    cells = [[f"{p}:{v}" for p, v in row] for row in owners]
    heads = [f"c{c}" + ("*" if c >= lay.cols else "") for c in range(lay.padded_cols)]
    width = max(len(x) for x in heads + [c for row in cells for c in row])
    label = len(f"r{lay.rows - 1}")
    lines = [" " * label + "".join(f" {h:>{width}}" for h in heads)]
    for r, row in enumerate(cells):
        lines.append(f"{f'r{r}':<{label}}" + "".join(f" {x:>{width}}" for x in row))
    return "\n".join(lines) + "\n"


def lane_colour(lane: int, lanes: int, pale: bool = False) -> Tuple[int, int, int]:
    """A colour per lane: hues around the circle, alternating in brightness so that
    neighbouring lanes differ."""
    h = (lane * 0.618034) % 1.0 if lanes > 12 else lane / max(lanes, 1)
    s, v = (0.25, 1.0) if pale else (0.75, 0.95 if lane % 2 else 0.75)
    return tuple(int(round(255 * x)) for x in colorsys.hsv_to_rgb(h, s, v))


def png(lay: MatrixLayout, cell: int = 12) -> bytes:
    """A PNG picture of the padded matrix: element (r, c) is the square at row r and
    column c, in the colour of its lane; padding is pale with a diagonal line."""
    owners = ownership(lay)
    rows, cols = lay.nested.shape
    step = cell + 1  # one pixel of grid line between squares
    width, height = cols * step + 1, rows * step + 1
    grid = (96, 96, 96)
    pixels = [[grid] * width for _ in range(height)]
    for r in range(rows):
        for c in range(cols):
            lane, _ = owners[r][c]
            pad = c >= lay.cols
            colour = lane_colour(lane, lay.nested.lanes, pale=pad)
            for y in range(cell):
                line = pixels[1 + r * step + y]
                for x in range(cell):
                    line[1 + c * step + x] = grid if pad and x == y else colour
    raw = b"".join(b"\x00" + bytes(v for px in line for v in px) for line in pixels)
    return (b"\x89PNG\r\n\x1a\n"
            + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
