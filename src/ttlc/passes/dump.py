"""dump-ir and dump-def-use: print the program, or every value with its uses."""
from ..ir.printer import Printer
from ..ir.rewrite import uses


def dump_ir(program, ctx):
    """Print the program as it is at this point of the pipeline."""
    ctx.out.write(str(program))


def dump_def_use(program, ctx):
    """For every instruction of every function: the values it defines and their users."""
    for func in program.functions:
        printer = Printer()
        printer.headers = {}
        printer.function(func)
        users = uses(func.body)
        ctx.out.write(f"Def-use in @{func.name}\n")
        for arg in func.args:
            _values(ctx.out, printer, [arg.value], users, "")
        for inst in func.body.walk():
            ctx.out.write(f"> {printer.headers[inst]}\n")
            defined = list(inst.results) + [a for r in inst.regions for a in r.args]
            _values(ctx.out, printer, defined, users, "  ")


def _values(out, printer, values, users, indent):
    for v in values:
        out.write(f"{indent}def {printer.value(v)}\n")
        for user in users.get(v, []):
            out.write(f"{indent}  > {printer.headers[user]}\n")
