"""`leanrpc verify`: send .lean files to a running server, print the verdicts.

Owns: turning paths into snippets (a file that cannot be read is reported,
the others are still verified), the address rule (`HOST` means port 50051),
text and `--json` output, and the exit status. May import: the client.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .exits import EXIT_NOT_VALID, EXIT_OK, EXIT_USAGE, UserError

DEFAULT_PORT = 50051


def add_parser(sub) -> argparse.ArgumentParser:
    parser = sub.add_parser(
        "verify",
        help="verify .lean files through a running server",
        description="Verify .lean files (folders are searched recursively) on a running `leanrpc serve`.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".lean files or folders")
    parser.add_argument("--server", default=f"127.0.0.1:{DEFAULT_PORT}", metavar="HOST[:PORT]",
                        help=f"server address; without a port, {DEFAULT_PORT} (default: 127.0.0.1:{DEFAULT_PORT})")
    parser.add_argument("--token", help="bearer token, when the server requires one (default: none)")
    parser.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                        help="per-file time limit in seconds, 0 = the server's default (default: 0)")
    parser.add_argument("--retries", type=int, default=3, metavar="N",
                        help="retries when the server is unavailable or overloaded (default: 3)")
    parser.add_argument("--json", action="store_true", help="one JSON result per line (default: text)")
    pin = parser.add_mutually_exclusive_group()
    pin.add_argument("--reference", metavar="REF.lean",
                     help="pin every file to this statement (header + declarations proved by `sorry`)")
    pin.add_argument("--reference-dir", metavar="DIR",
                     help="pin each file to DIR/<its file name>; a file without one is REJECTED")
    return parser


def references_for(snippets: list[tuple[str, str]], args) -> tuple[list[str] | None, list[tuple[str, str]]]:
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


def server_address(text: str) -> str:
    """HOST, HOST:PORT, [V6] or [V6]:PORT; a missing port is 50051 (never 443)."""
    text = text.strip()
    for scheme in ("grpc://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme):]
    if not text:
        raise UserError("--server is empty; give HOST or HOST:PORT")
    if text.startswith("["):
        return text if "]:" in text else f"{text}:{DEFAULT_PORT}"
    if text.count(":") > 1:  # a bare IPv6 address
        return f"[{text}]:{DEFAULT_PORT}"
    host, sep, port = text.partition(":")
    if sep and not port.isdigit():
        raise UserError(f"--server {text!r}: the port must be a number")
    return text if sep else f"{host}:{DEFAULT_PORT}"


def collect(paths: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(snippets to send as (path, text), problems as (path, reason)), in argument order."""
    snippets: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.lean") if p.is_file())
            if not files:
                problems.append((raw, f"folder {raw} has no .lean files"))
        elif path.exists():
            files = [path]
        else:
            problems.append((raw, f"{raw}: no such file or folder"))
            continue
        for file in files:
            try:
                snippets.append((str(file), file.read_bytes().decode("utf-8")))
            except UnicodeDecodeError as exc:
                problems.append((str(file), f"{file}: not UTF-8 text (byte 0x{file.read_bytes()[exc.start]:02x} at offset {exc.start})"))
            except OSError as exc:
                problems.append((str(file), f"{file}: cannot read: {exc.strerror}"))
    return snippets, problems


def run(args) -> int:
    from ..client import Client, ClientError

    address = server_address(args.server)
    snippets, problems = collect(args.paths)
    for path, reason in problems:
        _print_problem(path, reason, args.json)
    if not snippets:
        print("leanrpc verify: error: no .lean file to verify in the paths given", file=sys.stderr)
        return EXIT_USAGE
    references, missing = references_for(snippets, args)
    if missing:
        # Never verify a file unpinned when pinning was asked for.
        refused = {path for path, _reason in missing}
        for path, reason in missing:
            _print_problem(path, reason, args.json)
        problems = problems + missing
        kept = [n for n, (path, _t) in enumerate(snippets) if path not in refused]
        snippets, references = [snippets[n] for n in kept], [references[n] for n in kept]
        if not snippets:
            return EXIT_NOT_VALID
    progress = sys.stderr.isatty() and not args.json
    try:
        with Client(address, token=args.token, max_retries=args.retries) as client:
            results = client.verify(snippets, timeout_s=args.timeout, progress=progress, references=references)
    except ClientError as exc:
        for result in exc.partial:
            _print_result(result, args.json)
        got = f" ({len(exc.partial)} of {len(snippets)} results arrived before it)" if exc.partial else ""
        print(f"leanrpc verify: error: {_describe_failure(exc, address)}{got}", file=sys.stderr)
        return EXIT_USAGE
    for result in results:
        _print_result(result, args.json)
    bad = sum(not r.valid for r in results) + len(problems)
    if not args.json:
        print(f"{len(results) - sum(not r.valid for r in results)} of {len(results) + len(problems)} valid")
    return EXIT_NOT_VALID if bad else EXIT_OK


def _describe_failure(exc, address: str) -> str:
    if exc.code.name in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
        return (f"cannot reach a leanrpc server at {address} ({exc.code.name}: {exc.details}); "
                "start one with `leanrpc serve`, or pass --server HOST:PORT")
    if exc.code.name == "UNAUTHENTICATED":
        return f"the server at {address} wants a token ({exc.details}); pass --token"
    return f"{exc.code.name} from {address}: {exc.details}"


def _print_problem(path: str, reason: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"id": path, "status": "REJECTED", "error": reason, "verifier": ""}, ensure_ascii=False))
    else:
        print(f"{'REJECTED':<14} {path}  ({reason})")


def _print_result(result, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False), flush=True)
        return
    print(f"{result.status:<14} {result.id}  ({result.verifier})")
    for message in result.messages:
        if message.severity == "ERROR" or result.status != "VALID":
            print(f"    {result.id}:{message.line}:{message.column}: {message.severity.lower()}: {message.text}")
    if result.error:
        print(f"    {result.error.splitlines()[0]}")
    if result.reference is not None and not result.reference.passed:
        print(f"    reference: {result.reference.reason} {result.reference.declaration}")
