"""`leanrpc verify`: send .lean files to a running server, print the verdicts.

Owns: turning paths into snippets (a file that cannot be read is reported,
the others are still verified), the address rule (`HOST` means port 50051),
text and `--json` output, and the exit status. May import: the client,
reference (to check a --reference before sending), commands.argtypes.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import threading
import time
from pathlib import Path

from . import argtypes
from .exits import EXIT_INTERRUPTED, EXIT_NOT_VALID, EXIT_OK, EXIT_USAGE, UserError

DEFAULT_PORT = 50051


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "verify",
        help="verify .lean files through a running server",
        description="Verify .lean files (folders are searched recursively) on a running `leanrpc serve`.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".lean files or folders")
    parser.add_argument(
        "--server",
        default=f"127.0.0.1:{DEFAULT_PORT}",
        metavar="HOST[:PORT]",
        type=_address_arg,
        help=f"server address; without a port, {DEFAULT_PORT} (default: 127.0.0.1:{DEFAULT_PORT})",
    )
    parser.add_argument(
        "--token",
        type=argtypes.nonempty,
        help="bearer token, when the server requires one (default: none)",
    )
    parser.add_argument(
        "--timeout",
        type=argtypes.seconds,
        default=0.0,
        metavar="SECONDS",
        help="per-file time limit in seconds, 0 = the server's default (default: 0)",
    )
    parser.add_argument(
        "--retries",
        type=argtypes.count,
        default=3,
        metavar="N",
        help="retries when the server is unavailable or overloaded (default: 3)",
    )
    parser.add_argument(
        "--json", action="store_true", help="one JSON result per line (default: text)"
    )
    pin = parser.add_mutually_exclusive_group()
    pin.add_argument(
        "--reference",
        metavar="REF.lean",
        type=argtypes.existing_file,
        help="pin every file to this statement (header + declarations proved by `sorry`) (default: none)",
    )
    pin.add_argument(
        "--reference-dir",
        metavar="DIR",
        type=argtypes.existing_folder,
        help="pin each file to DIR/<its file name>; a file without one is REJECTED (default: none)",
    )
    parser.add_argument(
        "--no-check-axioms",
        dest="check_axioms",
        action="store_false",
        default=None,
        help="turn off the server's `#print axioms` check for these files "
        "(default: the server's [axioms] check, on)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no summary table on stderr at the end (default: print it)",
    )
    return parser


def references_for(
    snippets: list[tuple[str, str]], args
) -> tuple[list[str] | None, list[tuple[str, str]]]:
    """One reference per snippet (None: not pinned), and files refused for a missing one."""
    if getattr(args, "reference", None):
        try:
            text = Path(args.reference).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--reference {args.reference}: cannot read it ({exc})") from None
        problem = _reference_problem(text)
        if problem:
            raise UserError(f"--reference {args.reference}: {problem}")
        return [text] * len(snippets), []
    folder = getattr(args, "reference_dir", None)
    if not folder:
        return None, []
    if not Path(folder).is_dir():
        raise UserError(f"--reference-dir {folder}: no such folder")
    refs, missing = [], []
    for path, _text in snippets:
        candidate = Path(folder) / Path(path).name
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            refs.append("")
            missing.append((path, f"no reference {candidate} for it in --reference-dir"))
            continue
        problem = _reference_problem(text)
        refs.append(text)
        if problem:
            missing.append((path, f"reference {candidate}: {problem}"))
    return refs, missing


def _reference_problem(text: str) -> str:
    """Why a reference cannot pin anything ("" when it can), before anything is sent."""
    from ..errors import RequestError
    from ..reference import parse_reference

    try:
        parse_reference(text)
    except RequestError as exc:
        return exc.message
    return ""


def _address_arg(text: str) -> str:
    try:
        return server_address(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--server ")) from None


def server_address(text: str) -> str:
    """HOST, HOST:PORT, [V6] or [V6]:PORT; a missing port is 50051 (never 443)."""
    text = text.strip()
    for scheme in ("grpc://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
    if not text:
        raise UserError("--server is empty; give HOST or HOST:PORT")
    if text.startswith("["):
        if "]:" not in text:
            return f"{text}:{DEFAULT_PORT}"
        _check_port(text, text.rpartition("]:")[2])
        return text
    if text.count(":") > 1:  # a bare IPv6 address
        return f"[{text}]:{DEFAULT_PORT}"
    host, sep, port = text.partition(":")
    if sep:
        _check_port(text, port)
    if not host:
        raise UserError(f"--server {text!r}: the host is missing; give HOST or HOST:PORT")
    return text if sep else f"{host}:{DEFAULT_PORT}"


def _check_port(text: str, port: str) -> None:
    if not port.isdigit():
        raise UserError(f"--server {text!r}: the port must be a number")
    if not 1 <= int(port) <= 65535:
        raise UserError(f"--server {text!r}: the port must be between 1 and 65535")


def _natural(path: Path) -> list:
    """Sort key: `l2` before `l10` (digit runs compare as numbers)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def collect(paths: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """(snippets to send as (path, text), problems as (path, reason), every
    entry's path in output order: argument order, folders in natural order)."""
    snippets: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    order: list[str] = []

    def problem(path: str, reason: str) -> None:
        problems.append((path, reason))
        order.append(path)

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(
                (p for p in path.rglob("*.lean") if p.is_file() or p.is_symlink()), key=_natural
            )
            if not found:
                problem(raw, f"folder {raw} has no .lean files")
            files = found
        elif path.exists():
            files = [path]
        elif path.is_symlink():
            files = [path]
        else:
            problem(raw, f"{raw}: no such file or folder")
            continue
        for file in files:
            if file.is_symlink() and not file.exists():
                problem(str(file), f"{file}: broken symbolic link (to {os.readlink(file)})")
                continue
            try:
                text = file.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                problem(
                    str(file),
                    f"{file}: not UTF-8 text (byte 0x{file.read_bytes()[exc.start]:02x} at offset {exc.start})",
                )
                continue
            except OSError as exc:
                problem(str(file), f"{file}: cannot read: {exc.strerror}")
                continue
            if not text.strip():
                problem(str(file), f"{file}: the file is empty")
                continue
            snippets.append((str(file), text))
            order.append(str(file))
    return snippets, problems, order


class _Printer:
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


def run(args) -> int:
    from ..client import Client, ClientError

    address = args.server
    snippets, problems, order = collect(args.paths)
    started = time.monotonic()
    references, missing = references_for(snippets, args) if snippets else (None, [])
    if missing:
        # Never verify a file unpinned when pinning was asked for.
        refused = {path for path, _reason in missing}
        problems = problems + missing
        kept = [n for n, (path, _t) in enumerate(snippets) if path not in refused]
        snippets, references = [snippets[n] for n in kept], [references[n] for n in kept]
    printer = _Printer(order, problems, snippets, args.json)
    if not snippets:
        printer.stop()
        if not args.json:
            print(f"0 of {len(problems)} valid")
        _summary(args, [], problems, started)
        return EXIT_NOT_VALID
    progress = sys.stderr.isatty() and not args.json
    try:
        if args.token:
            _say_if_token_unchecked(address, Client, ClientError)
        with Client(address, token=args.token, max_retries=args.retries) as client:
            results = client.verify(
                snippets,
                timeout_s=args.timeout,
                progress=progress,
                on_result=printer.on_result,
                references=references,
                check_axioms=args.check_axioms,
            )
    except KeyboardInterrupt:  # the client's Interrupted, or Ctrl-C before the batch started
        printed = printer.stop()
        print(f"interrupted: {printed} of {len(snippets)} answered", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except ClientError as exc:
        printer.stop()
        got = (
            f" ({len(exc.partial)} of {len(snippets)} results arrived before it)"
            if exc.partial
            else ""
        )
        print(f"leanrpc verify: error: {_describe_failure(exc, address)}{got}", file=sys.stderr)
        return EXIT_USAGE
    printer.stop()
    bad = sum(not r.valid for r in results) + len(problems)
    if not args.json:
        print(
            f"{len(results) - sum(not r.valid for r in results)} of {len(results) + len(problems)} valid"
        )
    _summary(args, results, problems, started)
    return EXIT_NOT_VALID if bad else EXIT_OK


def _say_if_token_unchecked(address: str, client_type, client_error) -> None:
    """--token against a server that checks no tokens: one line, not silence.
    (A tokenless GetServerInfo succeeds only there; it is guarded otherwise.)"""
    try:
        with client_type(address, max_retries=0) as probe:
            probe.server_info()
    except client_error:
        return  # tokens are checked (UNAUTHENTICATED), or the verify call says what is wrong
    print(
        f"leanrpc verify: warning: the server at {address} checks no tokens; --token is not used",
        file=sys.stderr,
    )


def _summary(args, results, problems, started: float) -> None:
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


def _describe_failure(exc, address: str) -> str:
    if exc.reason == "NOT_SERVING" and "no REPL worker can start" in exc.details:
        return (
            f"UNAVAILABLE: the server at {address} cannot start a REPL worker "
            f"({' '.join(exc.details.split())}); check its --repl-cmd or [repl] command "
            "(`leanrpc doctor --config FILE` tries it)"
        )
    if exc.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return (
            f"cannot reach a leanrpc server at {address} ({exc.code.name}: {exc.details}); "
            "start one with `leanrpc serve`, or pass --server HOST:PORT"
        )
    if exc.code.name == "UNAUTHENTICATED":
        return f"the server at {address} wants a token ({exc.details}); pass --token"
    return f"{exc.code.name} from {address}: {exc.details}"


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


def _print_problem(path: str, reason: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps(refused_result(path, reason).to_dict(), ensure_ascii=False))
    else:
        print(f"{'REJECTED':<14} {path}  ({reason})")


def _print_result(result, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False), flush=True)
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
