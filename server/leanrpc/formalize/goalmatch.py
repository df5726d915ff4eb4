"""goal_exact_match: does the generated statement elaborate to the reference's goal?

Job: build one Lean snippet that declares both statements under fixed names and
asks Lean to print each elaborated type with `pp.all`, then compare the two
printed types. Only commands a real REPL answers are used:

    <header>
    theorem leanrpc_goal_gen <binders> : <type> := by sorry
    theorem leanrpc_goal_ref <binders> : <type> := by sorry
    set_option pp.all true in
    #check @leanrpc_goal_gen
    set_option pp.all true in
    #check @leanrpc_goal_ref

`#check @c` (not `#check c`, which prints the signature form with binders
before the colon) goes through the term path and prints `@c : <type>`, where
the type is the full `∀ (x : T) (h : P), Q` with every implicit argument,
coercion and instance shown (pp.all). Binder names are bound variables, so
both types are alpha-normalised (each binder name replaced by its position)
before comparing: `(h₀ : …)` and `(hx : …)` do not make a difference, a
different type, argument order, coercion or instance does.

`compare_goals(gen, ref, header, verify)` takes the verify port (code ->
VerifyResult); the result is None when Lean did not print both types (a
stand-in, an error in either statement, a refused snippet).

Imports: leanrpc.results, formalize.wellformed.
"""

from __future__ import annotations

import re
from typing import Awaitable, Callable

from ..results import Severity, VerifyResult
from .wellformed import signature_parts

GEN, REF = "leanrpc_goal_gen", "leanrpc_goal_ref"
_BINDER = re.compile(
    r"(?:∀|fun|λ|Π|∃|[(\[{⦃])\s*([^\s():\[\]{}⦃⦄,]+(?:\s+[^\s():\[\]{}⦃⦄,]+)*)\s*:"
)


def _renamed(statement: str, name: str) -> str | None:
    parts = signature_parts(statement)
    if parts is None:
        return None
    binders, type_ = parts[1], parts[2]
    return f"theorem {name} {binders} : {type_} := by sorry".replace("  ", " ")


def snippet(generated: str, reference: str, header: str) -> str | None:
    gen, ref = _renamed(generated, GEN), _renamed(reference, REF)
    if gen is None or ref is None:
        return None
    checks = "\n".join(f"set_option pp.all true in\n#check @{n}" for n in (GEN, REF))
    return f"{header.strip()}\n\n{gen}\n\n{ref}\n\n{checks}\n"


def alpha_normal(printed: str) -> str:
    """Replaces every binder name by `_b<i>` in order of appearance (bound names are not content)."""
    names: dict[str, str] = {}
    for m in _BINDER.finditer(printed):
        for name in m.group(1).split():
            names.setdefault(name, f"_b{len(names)}")
    if not names:
        return " ".join(printed.split())
    pattern = re.compile(
        r"(?<![\w.'])("
        + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        + r")(?![\w'])"
    )
    return " ".join(pattern.sub(lambda m: names[m.group(1)], printed).split())


def printed_types(result: VerifyResult) -> dict[str, str]:
    """`{name: type}` from the REPL's info messages `@name : type`."""
    out: dict[str, str] = {}
    for msg in result.messages:
        if msg.severity != Severity.INFO:
            continue
        for name in (GEN, REF):
            m = re.match(r"\s*@?" + name + r"\s*:\s*", msg.text)
            if m:
                out[name] = msg.text[m.end() :]
    return out


async def compare_goals(
    generated: str,
    reference: str,
    header: str,
    verify: Callable[[str], Awaitable[VerifyResult]],
) -> bool | None:
    code = snippet(generated, reference, header)
    if code is None:
        return None
    result = await verify(code)
    if any(m.severity == Severity.ERROR for m in result.messages):
        return None
    types = printed_types(result)
    if GEN not in types or REF not in types:
        return None
    return alpha_normal(types[GEN]) == alpha_normal(types[REF])
