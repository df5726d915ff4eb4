"""Statements pinned to a reference (issue 25 item 2): text in, verdict out.

Owns: reading a reference (`parse_reference`: header plus declarations whose
proofs are `sorry`), the REPL commands that ask an env what it holds under a
name (`query_command`: ``set_option pp.all true in #check @NAME``,
``set_option pp.all true in #print NAME``, ``#print axioms NAME``), reading
their answers (`read_answers`) and comparing the snippet's answers with the
reference's (`compare`). Only standard commands that any faithful REPL
answers are used, and kernel terms are compared as Lean prints them with
``pp.all`` (every implicit argument, instance and universe shown), never the
user's source text. No I/O, no asyncio: the verify service runs the commands.
May import: errors, results, core. Never imports repl, pool or services.
"""

from .answers import DeclAnswer, compare, query_command, read_answers
from .parse import Reference, ReferenceDecl, parse_reference, pin_of

__all__ = [
    "DeclAnswer",
    "Reference",
    "ReferenceDecl",
    "compare",
    "parse_reference",
    "pin_of",
    "query_command",
    "read_answers",
]
