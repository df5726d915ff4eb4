"""Record mode: the recorded transcripts turned into the raw replay index.

Each transcript is run through :class:`repl.Repl` in *record* mode: the
requests are processed exactly as at run time, except that every lookup
answers with the recorded response, which is stored as a template under the
request's key (ids turned into offsets from the counters before the request).
``.olean`` files live in a virtual file system shared by a set's transcripts
(``Recorder.fs``). Any recorded response the record run cannot reproduce byte
for byte is listed in the index's ``problems``.

Owns: ``build(root)``, the cacheable raw index (templates per set, the Kimina
table, problems). Loading, caching and choosing among sets is ``replay.py``.
May import: the stand-in's ``repl``, ``fixtures``, ``kimina``, ``jsonfmt``,
``state``, ``wire`` and the standard library.
"""

from __future__ import annotations

import json
import os

from . import kimina
from .fixtures import fixture_sets, split_requests, split_responses, transcripts
from .jsonfmt import pretty
from .repl import Repl
from .state import Options
from .wire import Fatal

__all__ = ["Recorder", "build"]


class Recorder:
    """What a ``Repl`` in record mode asks instead of the index and the disk."""

    def __init__(self):
        self.cwd = "."  # the transcript's working directory (pickle paths are relative to it)
        self.fs: dict[str, str] = {}  # the set's virtual file system: path -> pickle payload
        self.current: dict | None = None  # the recorded response to the request being handled
        self.entries: dict[str, tuple] = {}
        self.problems: list[str] = []
        self.where = ""

    def take(self, repl: Repl, key: str):
        """Stores the recorded response as the template for `key` and returns it."""
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
            self.problems.append(
                f"{self.where}: ids in the recorded response are not fresh consecutive ids"
            )
        template = (tpl, [infos[k] for k in sorted(infos)], alloc_env)
        old = self.entries.get(key)
        if old is not None and old != template:
            self.problems.append(
                f"{self.where}: same request recorded with another response earlier in the set"
            )
        else:
            self.entries[key] = template
        return template


def record_set(name: str, version: str, fork: bool, set_root: str, problems: list) -> dict:
    """The templates of one transcript set, keyed by request key."""
    rec = Recorder()
    for in_path, cwd in transcripts(set_root):
        out_path = in_path[:-3] + ".expected.out"
        if not os.path.isfile(out_path):
            continue
        rel = os.path.relpath(in_path, os.path.dirname(os.path.dirname(set_root)))
        with open(in_path, "rb") as f:
            requests = [
                r for r in split_requests(f.read()) if not (r.startswith("#") or r.startswith("--"))
            ]
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


def build(root: str) -> dict:
    """Parses every source under ``root`` into the cacheable raw index."""
    problems: list[str] = []
    sets = fixture_sets(root)
    entries: dict[str, list] = {}
    for i, (name, version, fork, set_root) in enumerate(sets):
        for key, tpl in record_set(name, version, fork, set_root, problems).items():
            entries.setdefault(key, []).append((i, tpl))
    return {
        "sets": [(n, v, f) for n, v, f, _ in sets],
        "entries": entries,
        "kimina": kimina.record(root, problems),
        "problems": problems,
    }
