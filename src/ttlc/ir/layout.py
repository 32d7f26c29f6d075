"""Which work-item holds which element of a tile: one layout object for every target.

A cooperative matrix is distributed over the work-items of a subgroup.  Every part of
ttlc that needs to know where an element lives (the verifier's per-work-item length,
the interpreter's extract/insert/apply, ``lower-coopmatrix``, each back end) asks a
``MatrixLayout`` instead of computing it.

The description is IREE's ``#iree_vector_ext.nested_layout`` (see the IREE VectorExt
dialect): per mode of the tile, the number of subgroup, batch, outer, thread and
element tiles, and the strides that turn the per-mode thread (and subgroup) coordinates
into a lane (and subgroup) id.  Along mode d an element index is

    index_d = (((subgroup_d * B_d + batch_d) * O_d + outer_d) * T_d + thread_d) * E_d + element_d

its lane is ``sum_d thread_d * thread_strides[d]`` and its register (the position in the
work-item's vector) is the row-major position of ``(batch_d * O_d + outer_d) * E_d +
element_d`` over the modes, i.e. IREE's distributed vector shape ``B_d * O_d * E_d``.

The canonical layout of a coopmatrix (what extract and insert see on every target) is
the language's distribution: subgroup size S, an M x N matrix, I = min(M, S), K = M / I,
J = ceil(I N / S) S / I.  Element (r, c) with r = i + k I has linear index L = i + I c +
I J k and lives in lane L mod S at register floor(L / S).  As a nested layout over the
M x J matrix (columns N..J-1 are padding, read as zero): batch [K, J I / S], thread
[I, S / I], thread strides [1, I], every other tile 1.

Who keeps which layout: SIMT targets keep a coopmatrix distributed as
``Target.storage_layout`` says (the language's layout, also for Intel's DPAS, which
computes the transposed product to keep it; or the matrix unit's: NVIDIA mma
fragments), and ``lower-coopmatrix`` places entries by it.  The CPU does not
distribute a coopmatrix over lanes: a subgroup holds the whole matrix in registers
(column-major, one vector per subgroup), so the only lane question it has is the one
extract, insert and apply ask, which it answers with ``MatrixLayout.tables``/``owners``.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence, Tuple

if TYPE_CHECKING:
    import numpy as np

    from .types import CoopMatrixType

Tiles = Tuple[int, ...]


@dataclass(frozen=True)
class NestedLayout:
    """IREE's nested layout: how a vector of ``shape`` is spread over subgroups, lanes
    and the registers of each lane."""

    subgroup_tile: Tiles
    batch_tile: Tiles
    outer_tile: Tiles
    thread_tile: Tiles
    element_tile: Tiles
    subgroup_strides: Tiles
    thread_strides: Tiles

    def __post_init__(self):
        rank = len(self.batch_tile)
        fields = (self.subgroup_tile, self.outer_tile, self.thread_tile, self.element_tile,
                  self.subgroup_strides, self.thread_strides)
        if any(len(f) != rank for f in fields):
            raise ValueError(f"nested layout: every tile and stride list needs {rank} entries")
        if any(x < 1 for f in fields[:4] + (self.batch_tile,) for x in f):
            raise ValueError("nested layout: tile counts must be positive")
        if any(x < 0 for f in (self.subgroup_strides, self.thread_strides) for x in f):
            raise ValueError("nested layout: strides must not be negative")

    @property
    def rank(self) -> int:
        return len(self.batch_tile)

    @property
    def shape(self) -> Tiles:
        """The shape of the vector the layout distributes."""
        return tuple(s * b * o * t * e for s, b, o, t, e in zip(
            self.subgroup_tile, self.batch_tile, self.outer_tile, self.thread_tile,
            self.element_tile))

    @property
    def distributed_shape(self) -> Tiles:
        """The shape of one lane's part (batch x outer x element per mode)."""
        return tuple(b * o * e for b, o, e in zip(self.batch_tile, self.outer_tile,
                                                   self.element_tile))

    @property
    def lanes(self) -> int:
        """Lanes (threads) of one subgroup the layout uses."""
        return math.prod(self.thread_tile)

    @property
    def registers(self) -> int:
        """Elements each lane holds."""
        return math.prod(self.distributed_shape)

    def locate(self, index: Sequence) -> Tuple:
        """(lane, register) of the element at ``index`` (integers or NumPy arrays)."""
        lane, register = 0, 0
        for d, x in enumerate(index):
            e = x % self.element_tile[d]
            x = x // self.element_tile[d]
            t = x % self.thread_tile[d]
            x = x // self.thread_tile[d]
            o = x % self.outer_tile[d]
            b = (x // self.outer_tile[d]) % self.batch_tile[d]
            lane = lane + t * self.thread_strides[d]
            register = register * self.distributed_shape[d] + (
                (b * self.outer_tile[d] + o) * self.element_tile[d] + e)
        return lane % self.lanes, register

    def element(self, lane, register) -> Tuple:
        """The index (one entry per mode) held by ``lane`` at ``register``; the inverse
        of ``locate`` for the subgroup's part (integers or NumPy arrays)."""
        index = []
        rest = register
        coords = []
        for d in reversed(range(self.rank)):
            coords.append(rest % self.distributed_shape[d])
            rest = rest // self.distributed_shape[d]
        coords.reverse()
        for d, part in enumerate(coords):
            e = part % self.element_tile[d]
            o = (part // self.element_tile[d]) % self.outer_tile[d]
            b = part // (self.element_tile[d] * self.outer_tile[d])
            t = (lane // self.thread_strides[d]) % self.thread_tile[d] if self.thread_strides[d] else 0
            index.append(((b * self.outer_tile[d] + o) * self.thread_tile[d] + t)
                         * self.element_tile[d] + e)
        return tuple(index)

    def lane_terms(self, register: int) -> Tuple[Tuple[int, int, int, int], ...]:
        """The index held at ``register`` as a function of the lane, for code that
        computes it at run time: per mode ``(offset, divisor, tile, scale)``, the index of
        lane p being ``offset + ((p // divisor) % tile) * scale`` (no lane term where
        divisor is 0)."""
        lane0 = self.element(0, register)
        return tuple((lane0[d], self.thread_strides[d], self.thread_tile[d], self.element_tile[d])
                     for d in range(self.rank))

    def check_shape(self, shape: Sequence[int]) -> None:
        """ValueError unless the layout distributes a vector of exactly ``shape``: per
        mode, the product of the five tiles is the vector's size (what IREE verifies of
        a ``to_layout``)."""
        if len(shape) != self.rank or tuple(shape) != self.shape:
            raise ValueError(f"nested layout of shape {'x'.join(map(str, self.shape))} does not "
                             f"distribute a vector of shape {'x'.join(map(str, shape))} (per "
                             "mode, subgroup * batch * outer * thread * element tiles must "
                             "equal the vector's size)")

    @classmethod
    def from_iree(cls, text: str) -> "NestedLayout":
        """The layout an ``#iree_vector_ext.nested_layout<...>`` attribute describes, in
        the form IREE prints and parses (every field, in IREE's order; the prefix may be
        left out); ValueError saying what is wrong otherwise."""
        s = text.strip()
        head = "#iree_vector_ext.nested_layout"
        if s.startswith(head):
            s = s[len(head):].lstrip()
        if not (s.startswith("<") and s.endswith(">")):
            raise ValueError(f"nested layout: expected '{head}<...>', got {text.strip()!r}")
        body, pos, values = s[1:-1], 0, {}

        def fail(what: str) -> ValueError:
            return ValueError(f"nested layout: expected {what} at "
                              f"{body[pos:pos + 30].strip() or '>'!r} in {text.strip()!r}")

        for i, name in enumerate(_FIELDS):
            m = _FIELD.match(body, pos)
            if m is None or m.group(1) != name:
                raise fail(f"'{name} = [integers, ...]'")
            ints = m.group(2)
            values[name] = tuple(int(x) for x in ints.split(",")) if ints.strip() else ()
            pos = m.end()
            sep = "," if i + 1 < len(_FIELDS) else ""
            if body[pos:pos + len(sep)] != sep or (not sep and pos != len(body)):
                raise fail(repr(sep or ">"))
            pos += len(sep)
        return cls(**values)

    def to_iree(self) -> str:
        """The ``#iree_vector_ext.nested_layout<...>`` attribute (``from_iree`` reads it)."""
        fields = ", ".join(f"{name} = [{', '.join(map(str, getattr(self, name)))}]"
                           for name in _FIELDS)
        return f"#iree_vector_ext.nested_layout<{fields}>"


#: the attribute's fields in IREE's order (the dataclass fields of the same names)
_FIELDS = ("subgroup_tile", "batch_tile", "outer_tile", "thread_tile", "element_tile",
           "subgroup_strides", "thread_strides")
_FIELD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*\[\s*((?:-?\d+\s*(?:,\s*-?\d+\s*)*)?)\]\s*")


@dataclass(frozen=True)
class MatrixLayout:
    """Where the components of a ``rows x cols`` cooperative matrix live in a subgroup:
    a nested layout over the matrix padded to whole tiles (padding reads as zero)."""

    rows: int
    cols: int
    subgroup_size: int
    nested: NestedLayout

    @property
    def registers(self) -> int:
        """Components (padding included) each work-item holds."""
        return self.nested.registers

    @property
    def padded_cols(self) -> int:
        return self.nested.shape[1]

    def padded(self, register: int) -> bool:
        """Whether some lane holds padding (a column >= cols) at ``register``."""
        offset, divisor, tile, scale = self.nested.lane_terms(register)[1]
        return offset + (tile - 1 if divisor else 0) * scale >= self.cols

    def locate(self, r, c) -> Tuple:
        """(lane, register) of component (r, c)."""
        return self.nested.locate((r, c))

    def element(self, lane, register) -> Tuple:
        """(row, column) held by ``lane`` at ``register``; column >= cols is padding."""
        return self.nested.element(lane, register)

    @functools.cached_property
    def tables(self) -> Tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
        """``row[p, v]``, ``col[p, v]``, ``valid[p, v]`` for every lane p and register v
        (read-only; the column of padding is clamped into the matrix so that it can be
        used as an index)."""
        import numpy as np  # here: the verifier uses layouts and imports no NumPy
        p = np.arange(self.subgroup_size)[:, None]
        v = np.arange(self.registers)[None, :]
        r, c = self.element(p % self.nested.lanes, v)
        r, c = np.broadcast_to(r, (len(p), self.registers)), np.broadcast_to(c, (len(p), self.registers))
        valid = c < self.cols
        out = (np.array(r), np.minimum(c, self.cols - 1), np.array(valid))
        for a in out:
            a.setflags(write=False)
        return out

    @functools.cached_property
    def owners(self) -> "np.ndarray":
        """The lane holding each component (a rows x cols array, read-only)."""
        import numpy as np
        r = np.arange(self.rows)[:, None]
        c = np.arange(self.cols)[None, :]
        lane, _ = self.locate(r, c)
        lane = np.array(np.broadcast_to(lane, (self.rows, self.cols)))
        lane.setflags(write=False)
        return lane


@functools.lru_cache(maxsize=None)
def matrix_layout(rows: int, cols: int, subgroup_size: int) -> MatrixLayout:
    """The language's layout of a ``rows x cols`` coopmatrix in a subgroup: what extract,
    insert and apply see on every target.  (A target's matrix unit may keep operands in
    a layout of its own inside a kernel: ``ttlc.target.Target.storage_layout``.)"""
    S = subgroup_size
    if rows < 1 or cols < 1 or rows & (rows - 1) or S < 1 or S & (S - 1):
        raise ValueError(f"no distribution of a {rows} x {cols} matrix over a subgroup of {S} "
                         "(rows and the subgroup size must be powers of two)")
    I = min(rows, S)
    K = rows // I
    J = -(-I * cols // S) * S // I
    nested = NestedLayout(subgroup_tile=(1, 1), batch_tile=(K, J * I // S), outer_tile=(1, 1),
                          thread_tile=(I, S // I), element_tile=(1, 1),
                          subgroup_strides=(0, 0), thread_strides=(1, I))
    return MatrixLayout(rows, cols, S, nested)


def layout_of(t: "CoopMatrixType", subgroup_size: int) -> MatrixLayout:
    """The language's layout of a coopmatrix type (``matrix_layout``)."""
    return matrix_layout(t.rows, t.cols, subgroup_size)
