"""The rewriting API: the one way passes change IR.

Passes find instructions by walking regions, build new instructions with the Builder
into a scratch ``Region``, and use these functions to splice them in, redirect uses
and erase what is dead.  Keeping mutation here means the invariants (results know
their instruction, regions own their instructions) are kept in one place.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from .core import Argument, Function, Instruction, Program, Region, Value


def map_values(x: Any, fn: Callable[[Value], Value]) -> Any:
    """Apply fn to every Value inside an operand slot (Value, list, or tuple)."""
    if isinstance(x, Value):
        return fn(x)
    if isinstance(x, list):
        return [map_values(y, fn) for y in x]
    if isinstance(x, tuple):
        return tuple(map_values(y, fn) for y in x)
    return x


def walk_with_parent(region: Region) -> Iterator[Tuple[Region, Instruction]]:
    """Every instruction (pre-order) with the region that holds it."""
    for inst in list(region.instructions):
        yield region, inst
        for r in inst.regions:
            yield from walk_with_parent(r)


def uses(root: Region) -> Dict[Value, List[Instruction]]:
    """For every value used in root (and nested regions), the instructions using it."""
    out: Dict[Value, List[Instruction]] = {}
    for inst in root.walk():
        for v in inst.operands:
            out.setdefault(v, []).append(inst)
    return out


def replace_all_uses(root: Region, old: Value, new: Value) -> int:
    """Make every use of ``old`` in root use ``new``; returns how many slots changed."""
    count = 0

    def swap(v: Value) -> Value:
        nonlocal count
        if v is old:
            count += 1
            return new
        return v

    for inst in root.walk():
        for slot, x in list(inst.slots.items()):
            inst.slots[slot] = map_values(x, swap)
    return count


def replace_uses(root: Region, mapping: Dict[Value, Value]) -> None:
    """Replace many values at once (old -> new)."""
    if not mapping:
        return
    for inst in root.walk():
        for slot, x in list(inst.slots.items()):
            inst.slots[slot] = map_values(x, lambda v: mapping.get(v, v))


def insert_before(region: Region, anchor: Optional[Instruction], new: Sequence[Instruction]) -> None:
    """Insert instructions before anchor (at the end when anchor is None)."""
    index = len(region.instructions) if anchor is None else _index(region, anchor)
    region.instructions[index:index] = list(new)


def insert_after(region: Region, anchor: Instruction, new: Sequence[Instruction]) -> None:
    index = _index(region, anchor) + 1
    region.instructions[index:index] = list(new)


def replace(region: Region, old: Instruction, new: Sequence[Instruction]) -> None:
    """Put new instructions where old was (old's results must be redirected first)."""
    index = _index(region, old)
    region.instructions[index:index + 1] = list(new)


def erase(region: Region, inst: Instruction) -> None:
    region.instructions.pop(_index(region, inst))


def insert_before_each(region: Region, new: Dict[Instruction, Sequence[Instruction]]) -> None:
    """Insert, for every anchor of region in ``new``, its instructions before it: many
    insertions in one pass over the region (a fold that adds constants everywhere)."""
    if not new:
        return
    out: List[Instruction] = []
    for inst in region.instructions:
        out.extend(new.get(inst, ()))
        out.append(inst)
    region.instructions[:] = out


def insert_after_each(region: Region, new: Dict[Instruction, Sequence[Instruction]]) -> None:
    """Insert, for every anchor of region in ``new``, its instructions after it."""
    if not new:
        return
    out: List[Instruction] = []
    for inst in region.instructions:
        out.append(inst)
        out.extend(new.get(inst, ()))
    region.instructions[:] = out


def replace_each(region: Region, new: Dict[Instruction, Sequence[Instruction]]) -> None:
    """Put, for every instruction of region in ``new``, its instructions where it was (an
    empty list erases it): many replacements in one pass (results redirected first)."""
    if not new:
        return
    out: List[Instruction] = []
    for inst in region.instructions:
        if inst in new:
            out.extend(new[inst])
        else:
            out.append(inst)
    region.instructions[:] = out


def erase_each(region: Region, dead: Iterable[Instruction]) -> None:
    """Erase many instructions of region at once (identity, not equality, decides)."""
    dead_ids = {id(i) for i in dead}
    if dead_ids:
        region.instructions[:] = [i for i in region.instructions if id(i) not in dead_ids]


def resolve(mapping: Dict[Value, Value]) -> Dict[Value, Value]:
    """A replacement map with chains followed (a -> b, b -> c gives a -> c, b -> c), for
    ``replace_uses`` when replacements were recorded one after the other."""
    out: Dict[Value, Value] = {}
    for old in mapping:
        new, seen = mapping[old], {old}
        while new in mapping and new not in seen:
            seen.add(new)
            new = mapping[new]
        out[old] = new
    return out


def _index(region: Region, inst: Instruction) -> int:
    for i, x in enumerate(region.instructions):
        if x is inst:
            return i
    raise ValueError(f"{inst!r} is not in this region")


def clone_instruction(inst: Instruction, mapping: Dict[Value, Value]) -> Instruction:
    """A deep copy of inst with operands remapped; new results and region arguments are
    added to mapping so that later clones refer to them."""
    regions = [clone_region(r, mapping) for r in inst.regions]
    results = [_clone_value(r, mapping) for r in inst.results]
    slots = {k: map_values(v, lambda x: mapping.get(x, x)) for k, v in inst.slots.items()}
    attrs = {k: _copy_attr(v) for k, v in inst.attrs.items()}
    return Instruction(inst.opcode, slots, results, regions, dict(inst.modifiers), attrs, inst.loc)


def clone_region(region: Region, mapping: Dict[Value, Value]) -> Region:
    args = [_clone_value(a, mapping) for a in region.args]
    insts = [clone_instruction(i, mapping) for i in region.instructions]
    return Region(insts, args, region.loc)


def clone_instructions(insts: Iterable[Instruction], mapping: Dict[Value, Value]) -> List[Instruction]:
    return [clone_instruction(i, mapping) for i in insts]


def _clone_value(v: Value, mapping: Dict[Value, Value]) -> Value:
    new = Value(v.type, v.name, v.loc)
    mapping[v] = new
    return new


def _copy_attr(x: Any) -> Any:
    if isinstance(x, list):
        return [_copy_attr(y) for y in x]
    if isinstance(x, dict):
        return {k: _copy_attr(v) for k, v in x.items()}
    return x


def functions_regions(func: Function) -> Iterator[Region]:
    """The body and every nested region of a function."""
    yield func.body
    for inst in func.body.walk():
        yield from inst.regions


def set_function_attributes(func: Function, attrs: Dict[str, Any], first: Sequence[str] = ()) -> None:
    """Set function attributes (``subgroup_size``, ``work_group_size``, ...); the names in
    ``first`` are put at the front of the dictionary in that order (the printed order)."""
    merged = dict(func.attrs)
    merged.update(attrs)
    ordered = {k: merged[k] for k in first if k in merged}
    ordered.update((k, v) for k, v in merged.items() if k not in ordered)
    func.attrs = ordered


def set_attribute(inst: Instruction, name: str, value: Any) -> None:
    """Attach an analysis result to an instruction (e.g. ``stack_ptr`` of alloca).  Only
    names of syntax elements are printed, so such attributes stay out of the text."""
    inst.attrs[name] = value


def clone_program(program: Program) -> Program:
    """A copy of a program that passes may change (locations and source kept); back ends
    lower copies, so a program compiles for several targets."""
    functions = []
    for f in program.functions:
        mapping: Dict[Value, Value] = {}
        args = []
        for a in f.args:
            v = Value(a.value.type, a.value.name, a.value.loc)
            mapping[a.value] = v
            args.append(Argument(v, _copy_attr(a.attrs), a.attrs_loc))
        body = clone_region(f.body, mapping)
        functions.append(Function(f.name, args, body, _copy_attr(f.attrs), f.loc, f.attrs_loc))
    return Program(functions, program.source, program.filename)
