"""Checks that ride in a body's own command: their lines appended, their answers cut back out.

Owns: `append` (the command text: the body, a line break, then the check lines),
`starts` (the line each check starts on) and `split` (the answer to that command, cut
by position into the body's answer and each check's). May import: repl.protocol and msgspec.

Why one command: a body checked with `#print axioms` as a command of its own costs the
REPL a second exchange and a second env (kept for the process's life), and the server
a second frame to write, read, account and match, and often a second wakeup: about a
tenth of the server's CPU per snippet in groups of 16 (benchmarks/RESULTS.md). Lean
elaborates a command text's commands in order, each on the env the ones before it left,
so the checks see exactly what they saw as a command of their own on the body's env:
the body's declarations, options and open scopes (which a separate command on that env
sees too, since the REPL keeps the command state).

Why the cut is sound (docs/SECURITY.md, "Checks in the body's command"): Lean places
each message at the syntax it is about, and the checks' lines come after every
character of the body, so only the checks (or body syntax that reaches into their
lines, which the body's lexer-checked text can do only through the parser: a dangling
`#print`, an `in`) can be placed there. Every message placed at or after the checks'
first line is the checks': an error there fails the check (REJECTED); an answer there
is matched to the name it names (repl.check_axiom_answers), and a constant the checks'
own name did not resolve to is another name, so missing. A message placed before it,
or placed nowhere, stays the body's: a forged answer in the body's text is never read
as the check's, and an error stays the body's error. Sorries stay the body's, wherever
they are placed (a check asks for none): a sorry never leaves the body's verdict.
"""

from __future__ import annotations

import msgspec

from .protocol import Pos, ReplMessage, Response

__all__ = ["append", "split", "starts"]


def append(body: str, checks: list[str]) -> str:
    """The command text: `body`, a line break where it does not end with one, then
    each check on its own lines."""
    text = body if not body or body.endswith("\n") else body + "\n"
    return text + "\n".join(checks)


def starts(body: str, checks: list[str]) -> list[int]:
    """The line (1-based, as Lean counts: `\\n` ends a line) each check starts on in
    `append(body, checks)`."""
    line = body.count("\n") + (1 if not body or body.endswith("\n") else 2)
    out = []
    for check in checks:
        out.append(line)
        line += check.count("\n") + 1
    return out


def split(response: Response, starts) -> tuple[Response, list[Response]]:
    """(the body's answer, each check's answer) of a command built by `append`, its
    checks starting on the lines `starts` gave.

    A message placed on a check's lines (the last check's: on or after its first
    line) is that check's, its position renumbered as if the check were a command of
    its own (its first line is line 1); every other message, and every sorry, is the
    body's. Every answer names the command's env (a check declares nothing)."""
    if not starts:
        return response, []
    first = starts[0]
    body_messages = []
    checks: list[list[ReplMessage]] = [[] for _ in starts]
    for message in response.messages:
        pos = message.pos
        if pos is None or pos.line < first:
            body_messages.append(message)
            continue
        index = len(starts) - 1
        while starts[index] > pos.line:
            index -= 1
        checks[index].append(_moved(message, starts[index] - 1))
    body = msgspec.structs.replace(response, messages=body_messages)
    return body, [Response(env=response.env, messages=messages) for messages in checks]


def _moved(message: ReplMessage, lines: int) -> ReplMessage:
    """`message` placed `lines` lines earlier."""
    end = message.end_pos
    return ReplMessage(
        severity=message.severity,
        pos=Pos(message.pos.line - lines, message.pos.column),
        end_pos=None if end is None else Pos(max(1, end.line - lines), end.column),
        data=message.data,
    )
