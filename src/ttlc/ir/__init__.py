"""The IR: types, values, instructions, the instruction table, printer and builder."""
