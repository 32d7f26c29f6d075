"""analysis.uniformity.same_in_every_group: which values are provably the same in every
work-group (the language reference's execution model: each work-group runs the function
body with its own group_id; its parameters are the launch's arguments)."""
from __future__ import annotations

import ttlc
from ttlc.analysis.uniformity import same_in_every_group

SOURCE = """
func @k(%A: memref<f64x8x8x?>, %n: index, %s: memref<index>) {
    %zero = constant 0 : index
    %g = group_id.x : index
    %groups = num_groups.x : index
    %fixed = subview %A[0:8,0:8,%zero] : memref<f64x8x8>
    %last = sub %groups, %n : index
    %by_size = subview %A[0:8,0:8,%last] : memref<f64x8x8>
    %loaded = load %s[] : index
    %by_load = subview %A[0:8,0:8,%loaded] : memref<f64x8x8>
    %next = add %g, %n : index
    %member = subview %A[0:8,0:8,%next] : memref<f64x8x8>
    %one = constant 1 : index
    for %i = %zero, %n, %one {
        %in_loop = subview %A[0:8,0:8,%i] : memref<f64x8x8>
        %x = load %in_loop[%zero,%zero] : f64
    }
    %positive = less_than %zero, %n : bool
    %chosen = if %positive -> (index) {
        yield (%n)
    } else {
        yield (%zero)
    }
    %by_if = subview %A[0:8,0:8,%chosen] : memref<f64x8x8>
}
"""


def values():
    func = ttlc.check(SOURCE).functions[0]
    found = {a.value.name: a.value for a in func.args}
    for inst in func.body.walk():
        for r in inst.results:
            found[r.name] = r
        for region in inst.regions:
            for a in region.args:
                found[a.name] = a
    return func, found


def test_parameters_constants_and_what_they_compute_are_the_same_everywhere():
    func, v = values()
    params = [a.value for a in func.args]
    for name in ("A", "n", "zero", "groups", "fixed", "last", "by_size", "loaded", "by_load",
                 "positive"):
        assert same_in_every_group(v[name], params), name


def test_group_ids_loop_variables_and_branch_results_are_not():
    func, v = values()
    params = [a.value for a in func.args]
    for name in ("g", "next", "member", "i", "in_loop", "chosen", "by_if"):
        assert not same_in_every_group(v[name], params), name
    assert not same_in_every_group(v["A"], []), "a parameter only where it is one"
