"""leanrpc.standin: a protocol-faithful stand-in for the Lean 4 REPL (a test double, not Lean).

Run it as ``leanrpc-repl-standin`` or ``python -m leanrpc.standin``. It speaks
the leanprover-community/repl protocol on stdin/stdout (``--fork``: the
augustepoiroux fork LeanInteract uses) and imports only the standard library,
so a worker starts in well under 150 ms.

Answers come from, in order:

1. **replay** (``replay.py``): a request recorded in ``shared/fixtures`` in the
   same state (same command text and options on an env/proof state with the
   same history) gets the recorded answer, ids renumbered to this process's
   counters; Kimina proofs match on their "core" (see ``kimina.core_of``) and
   come back with their lines shifted to the command's lines;
2. **plausible mode** (``elab.py``): a deterministic imitation for everything
   else (sorries, warnings, ``#eval Lean.versionString``, ``#print axioms``,
   unknown identifiers, import rules, tactic mode, info trees ...).

Directive lines ``--@standin: NAME[=VALUE]`` (Lean line comments) inject
faults and costs; see ``faults.py`` and the ``--help`` text. The stand-in
never passes as Lean: ``#eval Lean.versionString`` answers
``"<lean-version> (leanrpc stand-in)"`` and ``--version`` prints
``leanrpc-repl-standin <version>``.

What it models, and only as far as tests need it (issue 42 item 5):

- the REPL's *protocol*, exactly: request and answer shapes, blank-line
  framing, env and proof-state numbering, pickling, the fork's options, its
  error texts (recorded from real Lean in ``shared/fixtures``);
- a *process's* costs and failures: CPU and memory charged per request,
  prefix reuse, crashes, hangs, floods, garbage, sandbox-escape probes;
- Lean's *surface* where a server rule reads it: command and declaration
  boundaries, ``sorry``, ``#print axioms``, unknown identifiers, import rules,
  tactic mode's goal list, so the server's policy, pinning and reuse logic
  meet the shapes Lean would give them.

What it must never try to model: Lean's elaborator, type checker, tactic
framework or Mathlib. It never decides whether a proof is *correct*: plausible
mode answers a deterministic imitation, and every answer says it comes from
the stand-in. A test that needs a verdict only real Lean can give belongs in
the real-Lean suite (docs/REAL-LEAN.md), or in a fixture recorded from real
Lean, never in a new rule here. A feature that needs more of Lean's
semantics than the list above gets a recorded fixture, not more imitation.

Module map: ``wire`` (line reader, JSON decoding, request shapes),
``jsonfmt`` (Lean's JSON printer), ``state`` (envs, proof states, lineages,
options), ``repl`` (numbering, handlers), ``costs`` (CPU and memory charged
per request), ``files`` (pickle files, real or virtual), ``fixtures``
(transcript sets on disk), ``record`` (record mode: transcripts to the raw
index), ``kimina`` (Kimina outputs and core matching), ``replay`` (the loaded
index and its cache), ``elab`` (plausible mode), ``faults`` (directives and
the faults they inject), ``escapes`` (the sandbox-escape probes),
``__main__`` (command line).

Owns: a REPL program for tests and benchmarks; it is a separate process, so
nothing in the server imports it (the pool launches it by command line).
May import: leanrpc.core and the standard library only (start-up time).
"""

from .. import __version__

__all__ = ["__version__"]
