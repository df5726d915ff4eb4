"""Replay of recorded REPL transcripts and Kimina proof outputs.

Sources under a fixtures root (``shared/fixtures``):

* ``repl/test/**`` (upstream, Lean 4.33.0-rc2) and
  ``repl/fork-augustepoiroux/test/**`` (the fork, 4.33.0-rc1);
* ``leaninteract/repl-tests/v<X>/test/**`` (the fork at Lean X);
* ``kimina/match/input/*.lean`` with ``output/*.json``.

Each transcript is run through :class:`repl.Repl` in *record* mode: the
requests are processed exactly as at run time, except that every lookup
answers with the recorded response, which is stored as a template under the
request's key (ids turned into offsets from the counters before the request).
Base tests run from their set root, ``test/Mathlib/**`` from ``test/Mathlib``;
``.olean`` files live in a virtual file system shared by a set's transcripts,
which are processed in ``LC_COLLATE=C`` order like upstream's ``test.sh``.
Any recorded response the record run cannot reproduce byte for byte is listed
in ``Index.problems``.

Several sets may hold the same key (the same request in the same state) with
version-dependent answers. At load time each key resolves to the set that best
matches the process: the nearest Lean version, then the same fork-ness, then
the newer version.

The parsed index is cached with marshal under ``$TMPDIR/leanrpc-standin-<uid>/``
(or ``$LEANRPC_STANDIN_CACHE_DIR``), keyed by the fixture files' names, sizes
and mtimes, the Python version and the stand-in's own source files, so a
worker start only loads it. A cache not owned by the current user is ignored.
"""

from __future__ import annotations

import json
import marshal
import os
import re
import sys

from ..core.leantext import find_block_comment_end
from . import elab
from .jsonfmt import pretty
from .repl import Fatal, Options, Repl
from .wire import read_request

__all__ = ["Index", "find_fixtures", "load_index", "build", "core_of", "version_number", "transcripts"]

FORMAT = 4  # bump when keys, lineages or templates change meaning

REPL_VERSION = "4.33.0-rc2"
FORK_VERSION = "4.33.0-rc1"


# --------------------------------------------------------------------------
# discovery


def find_fixtures(explicit: str | None = None) -> str | None:
    """The fixtures root: explicit, or ``shared/fixtures`` above the cwd or this package."""
    if explicit:
        return explicit if os.path.isdir(explicit) else None
    for start in (os.getcwd(), os.path.dirname(os.path.abspath(__file__))):
        d = os.path.abspath(start)
        while True:
            cand = os.path.join(d, "shared", "fixtures")
            if os.path.isdir(cand):
                return cand
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    return None


def version_number(v: str) -> float:
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:-rc(\d+))?", v or "")
    if not m:
        return 0.0
    major, minor, patch, rc = (int(x) if x else 0 for x in m.groups())
    value = major * 10000 + minor * 100 + patch
    if m.group(4):
        value -= 1 - rc / 100.0
    return float(value)


def fixture_sets(root: str) -> list[tuple[str, str, bool, str]]:
    """(name, lean version, fork, set root) for every transcript set present."""
    sets = []
    repl_root = os.path.join(root, "repl")
    if os.path.isdir(os.path.join(repl_root, "test")):
        sets.append(("repl", REPL_VERSION, False, repl_root))
    fork_root = os.path.join(repl_root, "fork-augustepoiroux")
    if os.path.isdir(os.path.join(fork_root, "test")):
        sets.append(("fork", FORK_VERSION, True, fork_root))
    li = os.path.join(root, "leaninteract", "repl-tests")
    if os.path.isdir(li):
        for v in sorted(os.listdir(li)):
            if os.path.isdir(os.path.join(li, v, "test")):
                sets.append(("leaninteract-" + v, v.lstrip("v"), True, os.path.join(li, v)))
    return sets


def transcripts(set_root: str) -> list[tuple[str, str]]:
    """(X.in path, working directory) in the order upstream runs them."""
    out = []
    base = os.path.join(set_root, "test")
    mathlib = os.path.join(base, "Mathlib", "test")
    for d, cwd in ((base, set_root), (mathlib, os.path.join(base, "Mathlib"))):
        if not os.path.isdir(d):
            continue
        names = sorted((n for n in os.listdir(d) if n.endswith(".in")), key=lambda n: n.encode())
        out.extend((os.path.join(d, n), cwd) for n in names)
    return out


def split_requests(data: bytes) -> list[str]:
    """The request texts of an ``.in`` file, exactly as the REPL reads them."""
    # lines end at b"\n" only, as for a stream's readline (not at a lone CR)
    pieces = data.split(b"\n")
    lines = [x + b"\n" for x in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    it = iter(lines)

    def readline():
        return next(it, b"")

    out = []
    while True:
        raw = read_request(readline)
        if not raw:
            return out
        out.append(raw.decode("utf-8", "replace"))


def split_responses(text: str) -> list[str]:
    parts = text.split("\n\n")
    if parts and parts[-1] == "":
        parts.pop()
    return parts


# --------------------------------------------------------------------------
# Kimina


_OPEN_OR_OPTION = re.compile(r"^(open|set_option)\b")
_TRAILING_IN = re.compile(r"\bin\s*$")


def core_of(text: str) -> tuple[str, int]:
    """(core text, 1-based line where it starts); see the module docstring of __main__."""
    lines = text.split("\n")
    n = len(lines)
    i = 0
    while i < n:
        s = lines[i].strip()
        if not s or s.startswith("--"):
            i += 1
            continue
        if s.startswith("/-"):
            j, rest = _block_comment_end(lines, i)
            if j is None or rest:
                break
            i = j + 1
            continue
        if s.startswith("import ") or s == "import":
            i += 1
            continue
        if _OPEN_OR_OPTION.match(s) and not _TRAILING_IN.search(s):
            i += 1
            continue
        break
    return "\n".join(lines[i:]).rstrip(), i + 1


def _block_comment_end(lines: list[str], i: int):
    """(line index where the comment opened on line i closes, the rest of
    that line stripped), or (None, "") if it never closes."""
    text = "\n".join(lines[i:])
    end = find_block_comment_end(text, text.find("/-"))
    if end < 0:
        return None, ""
    line_end = text.find("\n", end)
    return i + text.count("\n", 0, end), text[end : len(text) if line_end < 0 else line_end].strip()


def body_start_line(text: str) -> int:
    """Kimina's body start: the first non-blank line after the imports."""
    _, off = elab.split_header(text)
    m = re.compile(r"\S").search(text, off)
    if m is None:
        return text.count("\n") + 1
    return text.count("\n", 0, m.start()) + 1


def kimina_pairs(root: str) -> list[tuple[str, str]]:
    inp = os.path.join(root, "kimina", "match", "input")
    out = os.path.join(root, "kimina", "match", "output")
    if not os.path.isdir(inp):
        return []
    pairs = []
    for n in sorted(os.listdir(inp)):
        if n.endswith(".lean"):
            j = os.path.join(out, n[:-5] + ".json")
            if os.path.isfile(j):
                pairs.append((os.path.join(inp, n), j))
    return pairs


def kimina_response(path: str):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    results = data.get("results") or []
    if not results:
        return None
    return results[0].get("response")


# --------------------------------------------------------------------------
# record mode


class _Recorder:
    def __init__(self):
        self.cwd = "."
        self.fs: dict[str, str] = {}
        self.current: dict | None = None
        self.entries: dict[str, tuple] = {}
        self.problems: list[str] = []
        self.where = ""

    def take(self, repl: Repl, key: str):
        resp = self.current
        ps_before = len(repl.states)
        infos: dict[int, tuple] = {}
        tpl = dict(resp)
        ok = True

        def off(v):
            nonlocal ok
            if type(v) is not int or v < ps_before:
                ok = False
                return v
            return v - ps_before

        for field in ("sorries", "tactics"):
            items = tpl.get(field)
            if not items:
                continue
            new = []
            for e in items:
                if type(e.get("proofState")) is int:
                    k = off(e["proofState"])
                    if field == "sorries":
                        infos[k] = ([e.get("goal", "")], False)
                    else:
                        g = e.get("goals", "")
                        infos[k] = ([] if g == "no goals" else [g], False)
                    e = dict(e, proofState=k)
                new.append(e)
            tpl[field] = new
        if type(tpl.get("proofState")) is int:
            k = off(tpl["proofState"])
            goals = [g for g in tpl.get("goals") or [] if type(g) is str]
            infos[k] = (goals, tpl.get("proofStatus") == "Incomplete: contains sorry")
            tpl["proofState"] = k
        alloc_env = "env" in tpl and "message" not in tpl
        if alloc_env:
            if tpl["env"] != len(repl.envs):
                ok = False
            tpl["env"] = 0
        if sorted(infos) != list(range(len(infos))):
            ok = False
        if not ok:
            self.problems.append(f"{self.where}: ids in the recorded response are not fresh consecutive ids")
        template = (tpl, [infos[k] for k in sorted(infos)], alloc_env)
        old = self.entries.get(key)
        if old is not None and old != template:
            self.problems.append(f"{self.where}: same request recorded with another response earlier in the set")
        else:
            self.entries[key] = template
        return template


def _record_set(name: str, version: str, fork: bool, set_root: str, problems: list) -> dict:
    rec = _Recorder()
    for in_path, cwd in transcripts(set_root):
        out_path = in_path[:-3] + ".expected.out"
        if not os.path.isfile(out_path):
            continue
        rel = os.path.relpath(in_path, os.path.dirname(os.path.dirname(set_root)))
        with open(in_path, "rb") as f:
            requests = [r for r in split_requests(f.read()) if not (r.startswith("#") or r.startswith("--"))]
        with open(out_path, encoding="utf-8") as f:
            responses = split_responses(f.read())
        if len(requests) != len(responses):
            problems.append(f"{rel}: {len(requests)} requests but {len(responses)} responses")
            continue
        rec.cwd = cwd
        repl = Repl(Options(fork=fork, lean_version=version, replay=False), recorder=rec)
        for k, (text, expected) in enumerate(zip(requests, responses), 1):
            rec.where = f"{rel} #{k}"
            try:
                rec.current = json.loads(expected)
                out = repl.handle(text)
            except (Fatal, ValueError, KeyError) as e:
                problems.append(f"{rec.where}: cannot be recorded ({type(e).__name__}: {e})")
                break
            if out is None or pretty(out) != expected:
                problems.append(f"{rec.where}: the stand-in's answer differs from the recording")
    problems.extend(rec.problems)
    return rec.entries


def _record_kimina(root: str, problems: list) -> dict:
    table: dict[str, tuple] = {}
    for lean_path, json_path in kimina_pairs(root):
        name = os.path.basename(lean_path)[:-5]
        try:
            resp = kimina_response(json_path)
        except (OSError, ValueError):
            resp = None
        if not isinstance(resp, dict):
            problems.append(f"kimina/{name}: no recorded response (the server reported an error)")
            continue
        with open(lean_path, encoding="utf-8") as f:
            text = f.read()
        core, core_line = core_of(text)
        if not core:
            continue
        body_line = body_start_line(text)
        messages = [m for m in resp.get("messages") or [] if isinstance(m, dict)]
        cost = resp.get("time")
        entry = (messages, core_line - body_line + 1, float(cost) if isinstance(cost, (int, float)) else 0.0)
        if core in table and table[core][0] != messages:
            problems.append(f"kimina/{name}: same proof as an earlier input with other messages")
            continue
        table.setdefault(core, entry)
    return table


def build(root: str) -> dict:
    """Parses every source under ``root`` into the cacheable raw index."""
    problems: list[str] = []
    sets = fixture_sets(root)
    entries: dict[str, list] = {}
    for i, (name, version, fork, set_root) in enumerate(sets):
        for key, tpl in _record_set(name, version, fork, set_root, problems).items():
            entries.setdefault(key, []).append((i, tpl))
    return {
        "sets": [(n, v, f) for n, v, f, _ in sets],
        "entries": entries,
        "kimina": _record_kimina(root, problems),
        "problems": problems,
    }


# --------------------------------------------------------------------------
# the loaded index


class Index:
    def __init__(self, raw: dict, opts: Options):
        want = version_number(opts.lean_version)
        ranks = []
        for _, version, fork in raw["sets"]:
            v = version_number(version)
            ranks.append((abs(v - want), fork != opts.fork, -v))
        entries = {}
        for key, cands in raw["entries"].items():
            if len(cands) == 1:
                entries[key] = cands[0][1]
            else:
                entries[key] = min(cands, key=lambda c: ranks[c[0]])[1]
        self.entries: dict = entries
        self.kimina: dict = raw["kimina"]
        self.problems: list[str] = raw["problems"]
        self.sets = raw["sets"]

    def match_kimina(self, text: str):
        """(messages with user line numbers, recorded seconds) or None."""
        core, line = core_of(text)
        if not core:
            return None
        hit = self.kimina.get(core)
        if hit is None:
            return None
        messages, core_line, cost = hit
        shift = line - core_line
        if shift:
            messages = [_shift_message(m, shift) for m in messages]
        return messages, cost


def _shift_message(m: dict, shift: int) -> dict:
    m = dict(m)
    for k in ("pos", "endPos"):
        p = m.get(k)
        if isinstance(p, dict) and type(p.get("line")) is int:
            m[k] = dict(p, line=p["line"] + shift)
    return m


# --------------------------------------------------------------------------
# cache


_CODE_FILES = ("repl.py", "replay.py", "elab.py", "faults.py", "wire.py", "jsonfmt.py")


def _stamp(root: str) -> tuple:
    files = []
    for sub in ("repl", "leaninteract", os.path.join("kimina", "match")):
        top = os.path.join(root, sub)
        for d, dirs, names in os.walk(top):
            dirs.sort()
            for n in sorted(names):
                try:
                    st = os.stat(os.path.join(d, n))
                except OSError:
                    continue
                files.append((os.path.relpath(os.path.join(d, n), root), st.st_size, st.st_mtime_ns))
    here = os.path.dirname(os.path.abspath(__file__))
    code = []
    for n in _CODE_FILES:
        try:
            st = os.stat(os.path.join(here, n))
            code.append((n, st.st_size, st.st_mtime_ns))
        except OSError:
            code.append((n, 0, 0))
    return (FORMAT, sys.version, tuple(code), hash_files(files))


def hash_files(files: list) -> str:
    import hashlib

    return hashlib.blake2b(repr(files).encode(), digest_size=16).hexdigest()


def cache_path(root: str) -> str:
    import hashlib

    base = os.environ.get("LEANRPC_STANDIN_CACHE_DIR") or os.path.join(
        os.environ.get("TMPDIR") or "/tmp", f"leanrpc-standin-{os.getuid()}"
    )
    digest = hashlib.blake2b(os.path.realpath(root).encode(), digest_size=10).hexdigest()
    return os.path.join(base, f"index-{digest}.marshal")


def _owned(path: str) -> bool:
    # Only trust a cache this user wrote in a directory nobody else can write.
    try:
        st = os.stat(path)
        dst = os.stat(os.path.dirname(path))
    except OSError:
        return False
    uid = os.getuid()
    return st.st_uid == uid and dst.st_uid == uid and not (dst.st_mode & 0o022)


def load_raw(root: str) -> dict:
    stamp = _stamp(root)
    path = cache_path(root)
    if _owned(path):
        try:
            with open(path, "rb") as f:
                cached = marshal.load(f)
            if type(cached) is dict and cached.get("stamp") == stamp:
                return cached
        except Exception:  # noqa: BLE001 - any unreadable cache is rebuilt
            pass
    raw = build(root)
    raw["stamp"] = stamp
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            marshal.dump(raw, f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass
    return raw


def load_index(opts: Options) -> Index | None:
    root = find_fixtures(opts.fixtures)
    if root is None:
        return None
    return Index(load_raw(root), opts)
