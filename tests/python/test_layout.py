"""The cooperative-matrix layout object (ttlc.ir.layout) against the language's
distribution, written out here independently from its definition: subgroup size S, an
M x N matrix, I = min(M, S), K = M / I, J = ceil(I N / S) S / I; element (r, c) with
r = i + k I has linear index L = i + I c + I J k and lives in work-item L mod S at
vector index floor(L / S).
"""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttlc.ir.layout import NestedLayout, matrix_layout


def reference(S: int, M: int, N: int):
    I = min(M, S)
    J = -(-I * N // S) * S // I
    where = {}
    for r, c in itertools.product(range(M), range(N)):
        i, k = r % I, r // I
        L = i + I * c + I * J * k
        where[(r, c)] = (L % S, L // S)
    return where, (M // I) * I * J // S


SIZES = [(S, M, N) for S in (1, 2, 4, 8, 16, 32, 64) for M in (1, 2, 4, 8, 16, 32, 64)
         for N in (1, 2, 3, 5, 8, 15, 16, 17, 33)]


@pytest.mark.parametrize("S,M,N", SIZES)
def test_locate_and_element_follow_the_distribution(S, M, N):
    lay = matrix_layout(M, N, S)
    where, V = reference(S, M, N)
    assert lay.registers == V
    seen = set()
    for (r, c), (p, v) in where.items():
        assert tuple(int(x) for x in lay.locate(r, c)) == (p, v)
        assert tuple(int(x) for x in lay.element(p, v)) == (r, c)
        seen.add((p, v))
    # every other (lane, register) is padding: a column at or past N
    for p, v in itertools.product(range(S), range(V)):
        if (p, v) not in seen:
            assert lay.element(p, v)[1] >= N
    row, col, valid = lay.tables
    assert row.shape == col.shape == valid.shape == (S, V)
    assert int(valid.sum()) == M * N
    assert (lay.owners == np.array([[where[(r, c)][0] for c in range(N)] for r in range(M)])).all()


def test_the_worked_example():
    """4 x 15 with S = 16: work-item 0 holds (0,0),(0,4),(0,8),(0,12); work-item 15 holds
    (3,3),(3,7),(3,11) and one pad."""
    lay = matrix_layout(4, 15, 16)
    assert lay.registers == 4
    assert [lay.element(0, v) for v in range(4)] == [(0, 0), (0, 4), (0, 8), (0, 12)]
    held = [lay.element(15, v) for v in range(4)]
    assert held[:3] == [(3, 3), (3, 7), (3, 11)]
    assert held[3][1] >= 15


def test_the_nested_layout_of_the_distribution():
    lay = matrix_layout(64, 9, 16)  # I = 16, K = 4, J = 9
    n = lay.nested
    assert n.batch_tile == (4, 9) and n.thread_tile == (16, 1) and n.thread_strides == (1, 16)
    assert n.shape == (64, 9)
    assert n.to_iree() == (
        "#iree_vector_ext.nested_layout<subgroup_tile = [1, 1], batch_tile = [4, 9], "
        "outer_tile = [1, 1], thread_tile = [16, 1], element_tile = [1, 1], "
        "subgroup_strides = [0, 0], thread_strides = [1, 16]>")


def test_iree_documentation_example():
    """The full example of the nested_layout documentation: vector<64x64xf16> with
    batch [2, 4], thread [16, 4], element [1, 4], thread strides [1, 16] gives each
    thread a vector<2x16>; thread 1 holds row 1, thread 16 starts at column 4."""
    n = NestedLayout(subgroup_tile=(2, 1), batch_tile=(2, 4), outer_tile=(1, 1),
                     thread_tile=(16, 4), element_tile=(1, 4), subgroup_strides=(1, 0),
                     thread_strides=(1, 16))
    assert n.shape == (64, 64)
    assert n.distributed_shape == (2, 16)
    assert n.locate((1, 0)) == (1, 0)
    assert n.locate((0, 4)) == (16, 0)
    assert n.locate((0, 1)) == (0, 1)  # elements of a thread are contiguous in mode 1
    assert n.element(16, 0) == (0, 4)


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError, match="entries"):
        NestedLayout((1,), (1, 1), (1, 1), (1, 1), (1, 1), (0, 0), (1, 1))
    with pytest.raises(ValueError, match="positive"):
        NestedLayout((1, 1), (0, 1), (1, 1), (1, 1), (1, 1), (0, 0), (1, 1))


# ---- the attribute's text (IREE's printer and parser) --------------------------------------
IREE_EXAMPLE = """#iree_vector_ext.nested_layout<
  subgroup_tile = [2, 1],
  batch_tile = [2, 4],
  outer_tile = [1, 1],
  thread_tile = [16, 4],
  element_tile = [1, 4],
  subgroup_strides = [1, 0],
  thread_strides = [1, 16]
>"""


def test_the_documentation_example_parses():
    """The full example of IREE's nested_layout documentation, spread over lines."""
    n = NestedLayout.from_iree(IREE_EXAMPLE)
    assert n == NestedLayout(subgroup_tile=(2, 1), batch_tile=(2, 4), outer_tile=(1, 1),
                             thread_tile=(16, 4), element_tile=(1, 4),
                             subgroup_strides=(1, 0), thread_strides=(1, 16))
    assert n.shape == (64, 64)


def test_what_iree_opt_prints_parses():
    """iree-opt 3.13's print of an attribute (copied from its output by hand)."""
    text = ("#iree_vector_ext.nested_layout<subgroup_tile = [1, 1], batch_tile = [1, 4], "
            "outer_tile = [1, 1], thread_tile = [4, 4], element_tile = [1, 1], "
            "subgroup_strides = [0, 0], thread_strides = [1, 4]>")
    n = NestedLayout.from_iree(text)
    assert n == matrix_layout(4, 15, 16).nested
    assert n.to_iree() == text
    assert NestedLayout.from_iree(text[len("#iree_vector_ext.nested_layout"):]) == n



@settings(max_examples=200, deadline=None)
@given(st.data())
def test_print_parse_round_trip(data):
    rank = data.draw(st.integers(1, 4))
    field = lambda lo: tuple(data.draw(st.lists(st.integers(lo, 99), min_size=rank,
                                                max_size=rank)))
    n = NestedLayout(field(1), field(1), field(1), field(1), field(1), field(0), field(0))
    assert NestedLayout.from_iree(n.to_iree()) == n
    assert NestedLayout.from_iree(n.to_iree().replace(", ", ",\n   ")) == n


GOOD = matrix_layout(4, 15, 16).nested.to_iree()


@pytest.mark.parametrize("text,message", [
    ("", "expected '#iree_vector_ext.nested_layout<...>'"),
    ("#iree_vector_ext.nested_layout", "expected '#iree_vector_ext.nested_layout<...>'"),
    ("#iree_vector_ext.nested_layout<>", "expected 'subgroup_tile = "),
    ("<subgroup_tile = [1, 1]>", "expected ',' at '>'"),
    # IREE reads the fields in its order only
    (GOOD.replace("subgroup_tile = [1, 1], batch_tile = [1, 4]",
                  "batch_tile = [1, 4], subgroup_tile = [1, 1]"), "expected 'subgroup_tile"),
    (GOOD.replace("outer_tile", "outer_tiles"), "expected 'outer_tile = "),
    (GOOD.replace("[1, 4], outer", "[1, 4,], outer"), "expected 'batch_tile = "),
    (GOOD.replace("[1, 4], outer", "[1, x], outer"), "expected 'batch_tile = "),
    (GOOD.replace("], outer", "] outer"), "expected ','"),
    (GOOD[:-1] + ", extra = [1]>", "expected '>'"),
    (GOOD[:-1] + ",>", "expected '>'"),
    (GOOD.replace("thread_strides = [1, 4]", "thread_strides = [1]"), "2 entries"),
    (GOOD.replace("thread_tile = [4, 4]", "thread_tile = [4, 0]"), "positive"),
    (GOOD.replace("subgroup_strides = [0, 0]", "subgroup_strides = [0, -1]"), "negative"),
])
def test_malformed_text_is_refused(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        NestedLayout.from_iree(text)


def test_check_shape():
    n = matrix_layout(4, 15, 16).nested  # 4 x 16: one column of padding
    n.check_shape((4, 16))
    for shape in ((4, 15), (16, 4), (4, 16, 1), (4,)):
        with pytest.raises(ValueError, match="does not distribute a vector of shape"):
            n.check_shape(shape)
