"""The scripted typo repair: 30 reference statements, one Mathlib name misspelled, through the repair loop.

Each case takes a miniF2F / ProofNet-Verified reference that uses a dotted
Mathlib name (`Real.sqrt`, `Nat.Prime`, `Finset.range`, …) and misspells that
name by one letter (a seeded delete, insert or substitution that is not itself a
Mathlib name). A scripted generator answers the misspelled reference first, and
in round r >= 2 substitutes System A's (r-1)-th "did you mean" suggestion from
the feedback (a model that takes the hints in order); the scripted verifier
answers as Lean would: `unknown identifier '<typo>'` while the typo is there, a
type mismatch for a wrong substitution, SORRY for the reference. The loop, the
feedback, the error categories and System A are the real ones
(FormalizeService + MathlibNames over the full 170k names); only the model and
Lean are scripted.

`--system-a before` replays System A without its character-level source
(retrieval._close_by_edits returns nothing: the word/IDF + difflib lookup as it
was before rapidfuzz); `after` is the current one. Both in one run by default.

    python benchmarks/studies/typo_repair.py [--cases 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import string
import sys

sys.path.insert(0, __file__.rsplit("/", 2)[0])  # benchmarks/ (formalize_eval)
from formalize_eval import _OracleStream, load_problems  # noqa: E402

from leanrpc.formalize import retrieval  # noqa: E402
from leanrpc.formalize.config import DEFAULT_MATHLIB_NAMES, FormalizeConfig  # noqa: E402
from leanrpc.formalize.metrics import RunRecord, summarize  # noqa: E402
from leanrpc.formalize.train.data import as_sorry  # noqa: E402
from leanrpc.formalize.types import Candidate, FormalizeRequest, Outcome  # noqa: E402
from leanrpc.formalize.wellformed import canonical_form  # noqa: E402
from leanrpc.results import Message, Position, Severity, Status, VerifyResult  # noqa: E402

_DOTTED = re.compile(r"(?<![\w.])([A-Z][A-Za-z]*\.[A-Za-z_][\w']*)")
_HINT = re.compile(r"- `([^`]+)`: did you mean (.+)\?")


def _misspell(name: str, rng: random.Random, names) -> str:
    head, last = name.rsplit(".", 1)
    for _ in range(100):
        i = rng.randrange(1, len(last)) if len(last) > 1 else 0
        op = rng.choice("dis")
        c = rng.choice(string.ascii_lowercase)
        if op == "d" and len(last) > 2:
            new = last[:i] + last[i + 1 :]
        elif op == "i":
            new = last[:i] + c + last[i:]
        else:
            new = last[:i] + c + last[i + 1 :]
        typo = f"{head}.{new}"
        if typo != name and typo not in names:
            return typo
    raise RuntimeError(f"no typo for {name}")


def build_cases(n: int, seed: int, names) -> list[dict]:
    rng = random.Random(seed)
    cases = []
    for dataset in ("minif2f", "proofnet-verified"):
        for p in load_problems(dataset, "all" if dataset == "minif2f" else "test", None):
            used = [m for m in _DOTTED.findall(p["reference"]) if m in names]
            if not used:
                continue
            name = used[0]
            typo = _misspell(name, rng, names)
            broken = re.sub(r"(?<![\w.])" + re.escape(name) + r"(?![\w'])", typo, p["reference"])
            cases.append({**p, "name_used": name, "typo": typo, "broken": broken})
            if len(cases) == n:
                return cases
    return cases


class ScriptedModel:
    def __init__(self, cases: list[dict]) -> None:
        self.by_informal = {c["informal"]: c for c in cases}

    def submit_chat(self, messages, assistant_prefix, params):
        case = next(c for inf, c in self.by_informal.items() if inf in messages[1]["content"])
        if len(messages) == 2:
            return _OracleStream(case["broken"])
        hints = {}
        for m in _HINT.finditer(messages[-1]["content"]):
            hints[m.group(1)] = re.findall(r"`([^`]+)`", m.group(2))
        tries = case.setdefault("tries", 0)
        case["tries"] = tries + 1
        options = hints.get(case["typo"], [])
        if tries < len(options):
            case["current"] = options[tries]
        text = case["broken"].replace(case["typo"], case.get("current", case["typo"]))
        return _OracleStream(text)


def _key(statement: str) -> str:
    return canonical_form(as_sorry(statement))


def scripted_lean(cases: list[dict]):
    refs = {_key(c["reference"]) for c in cases}
    typos = {c["typo"] for c in cases}

    async def verify(code: str) -> VerifyResult:
        body = code[code.rfind("theorem ") :]  # the header has no theorem
        if _key(body) in refs:
            return VerifyResult("", Status.SORRY)
        bad = next((t for t in typos if re.search(re.escape(t) + r"(?![\w'])", body)), None)
        text = f"unknown identifier '{bad}'" if bad else "type mismatch\n  x\nhas type ..."
        msg = Message(Severity.ERROR, Position(1, 8), None, text)
        return VerifyResult("", Status.INVALID, messages=[msg])

    return verify


async def run(cases: list[dict], names, max_iterations: int) -> dict:
    from leanrpc.services.formalize import FormalizeService

    for c in cases:
        c.pop("tries", None)
        c.pop("current", None)
    config = FormalizeConfig(
        mathlib_names_path=None, triviality_check=False, default_max_iterations=max_iterations
    )
    service = FormalizeService(ScriptedModel(cases), scripted_lean(cases), config, names=names)
    records = []
    for c in cases:
        cands, outcome = [], None
        req = FormalizeRequest(
            id=c["name"],
            informal_statement=c["informal"],
            header=c["header"],
            max_iterations=max_iterations,
        )
        async for ev in service.formalize(req):
            if isinstance(ev, Candidate):
                cands.append(ev)
            elif isinstance(ev, Outcome):
                outcome = ev
        records.append(RunRecord(c["name"], 0, outcome, cands))
    await service.close()
    refs = {c["name"]: c["reference"] for c in cases}
    s = summarize(records, refs, samples=1, max_iterations=max_iterations)
    failed = [
        {"typo": c["typo"], "name": c["name_used"], "hints": names.did_you_mean(c["typo"])}
        for c, r in zip(cases, records)
        if not r.solved
    ]
    keep = ("compile@1", "compile@2", "compile@3", "compile@5", "mean_iters_solved")
    return {**{k: s[k] for k in keep}, "error_breakdown": s["error_breakdown"], "failed": failed}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-iterations", type=int, default=5)
    p.add_argument("--system-a", choices=("before", "after", "both"), default="both")
    args = p.parse_args(argv)
    names = retrieval.load_names(DEFAULT_MATHLIB_NAMES)
    cases = build_cases(args.cases, args.seed, names)
    out = {"cases": len(cases), "typos": [(c["name_used"], c["typo"]) for c in cases]}
    modes = ("before", "after") if args.system_a == "both" else (args.system_a,)
    real = retrieval._close_by_edits
    for mode in modes:
        retrieval._close_by_edits = real if mode == "after" else (lambda low, lowered: {})
        out[mode] = asyncio.run(run(cases, names, args.max_iterations))
    retrieval._close_by_edits = real
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
