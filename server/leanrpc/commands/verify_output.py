"""`leanrpc verify`'s output: result lines in input order, and the summary.

Owns: the text and `--json` forms of each entry (one schema for files the
CLI refuses and for the server's results), printing them in input order as
they arrive, and the summary table on stderr. May import: the client.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time


class Printer:
    """Prints each entry in output order as soon as all before it are in
    (results arrive in any order on the client's loop thread)."""

    def __init__(
        self, order: list[str], problems: list[tuple[str, str]], snippets, as_json: bool
    ) -> None:
        self._lock = threading.Lock()
        self._json = as_json
        self._slots: list = [None] * len(order)
        self._next = 0
        self._stopped = False
        self.printed_results = 0
        position: dict[str, list[int]] = {}
        for n, path in enumerate(order):
            position.setdefault(path, []).append(n)
        for path, reason in problems:
            self._slots[position[path].pop(0)] = ("problem", path, reason)
        self._snippet_at = [position[path].pop(0) for path, _text in snippets]
        self._flush()

    def on_result(self, index: int, result) -> None:
        with self._lock:
            if not self._stopped:
                self._slots[self._snippet_at[index]] = ("result", result)
                self._flush()

    def stop(self) -> int:
        """Stop printing new arrivals; print those already in (any gaps skipped). Returns results printed."""
        with self._lock:
            self._stopped = True
            while self._next < len(self._slots):
                self._emit(self._slots[self._next])
                self._next += 1
            return self.printed_results

    def _flush(self) -> None:
        while self._next < len(self._slots) and self._slots[self._next] is not None:
            self._emit(self._slots[self._next])
            self._next += 1

    def _emit(self, slot) -> None:
        if slot is None:
            return
        if slot[0] == "problem":
            _print_problem(slot[1], slot[2], self._json)
        else:
            self.printed_results += 1
            _print_result(slot[1], self._json)
        sys.stdout.flush()


def summary(args, results, problems, started: float) -> None:
    """The table at the end (stderr): count per outcome, elapsed, snippets per second."""
    if args.quiet:
        return
    elapsed = time.monotonic() - started
    counts = collections.Counter(r.status for r in results)
    if problems:
        counts["REJECTED (not sent)"] += len(problems)
    lines = [
        f"  {status:<20} {count:>7}"
        for status, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    rate = len(results) / elapsed if elapsed > 0 else 0.0
    lines.append(f"  {'total':<20} {len(results) + len(problems):>7}")
    lines.append(f"  elapsed {elapsed:.2f} s, {rate:.1f} snippets/s")
    print("summary:\n" + "\n".join(lines), file=sys.stderr)


def refused_result(path: str, reason: str):
    """A file the CLI refuses before sending, as a result of the client's own
    shape, so `--json` lines have one schema (`messages` etc. always there)."""
    from ..client import Result

    return Result(
        id=path,
        status="REJECTED",
        messages=[],
        sorries=[],
        error=reason,
        time_total_s=0.0,
        time_queue_s=0.0,
        time_header_s=0.0,
        time_body_s=0.0,
        time_boot_s=0.0,
        warm_header=False,
        reused_prefix_chars=0,
        attempts=0,
        verifier="",
        verifier_description="",
    )


# Times in --json lines are rounded to 0.1 ms: every such number (0, or 0.0001
# and up) is written by json in fixed notation, never as `8.929e-05`, which
# tools that read the lines as text (jq, awk, spreadsheets) treat differently.
TIME_DECIMALS = 4


def json_record(result) -> dict:
    """The result as a --json record, its `time_*_s` fields in fixed notation."""
    record = result.to_dict()
    for key, value in record.items():
        if key.startswith("time_") and key.endswith("_s") and isinstance(value, float):
            record[key] = round(value, TIME_DECIMALS)
    return record


def _print_problem(path: str, reason: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(json_record(refused_result(path, reason)), ensure_ascii=False))
    else:
        print(f"{'REJECTED':<14} {path}  ({reason})")


def _print_result(result, as_json: bool) -> None:
    if as_json:
        print(json.dumps(json_record(result), ensure_ascii=False), flush=True)
        return
    if not result.verifier:
        # Refused by the server before any REPL ran (a timeout over its limit,
        # a file too long, ...): the reason goes where the verifier would.
        reason = " ".join(result.error.split()) or "refused by the server"
        print(f"{result.status:<14} {result.id}  ({reason})")
        return
    print(f"{result.status:<14} {result.id}  ({result.verifier})")
    for message in result.messages:
        if message.severity == "ERROR" or result.status != "VALID":
            print(
                f"    {result.id}:{message.line}:{message.column}: {message.severity.lower()}: {message.text}"
            )
    if result.error:
        print(f"    {result.error.splitlines()[0]}")
    if result.reference is not None and not result.reference.passed:
        print(f"    reference: {result.reference.reason} {result.reference.declaration}")
        for line in result.reference.detail.splitlines():  # both sides of a mismatch
            print(f"      {line}")
