"""The stand-in's REPL: numbering, replay lookup and request handlers.

Every env and proof state carries a *lineage*: a digest of the request that
made it and of the lineages it was built on. A request's replay key is built
from its normalised content and the lineages of what it refers to, so a
recorded answer is only replayed in the same situation it was recorded in,
whatever ids the current process happens to use. The fixture index is built
by running this very class over the recorded transcripts (``replay.py``),
which keeps keys and lineages consistent by construction.

The state types (envs, proof states, lineages, options) are in ``state.py``.

Ids follow §6 of the protocol: one env counter and one proof-state counter;
in a command response sorries, then root goals, then tactics, then the env.
"""

from __future__ import annotations

import bisect
import json
import os

from . import elab, faults
from .state import PICKLE_FORMAT, Env, Options, ProofState, io_error_text, lineage, map_lines
from .wire import Fatal, classify, decode

__all__ = ["Options", "Repl", "Env", "ProofState", "lineage"]

_INFOTREE = frozenset(["full", "tactics", "original", "substantive"])


class Repl:
    def __init__(self, opts: Options, index_loader=None, recorder=None):
        self.o = opts
        self.envs: list[Env] = []
        self.states: list[ProofState] = []
        self._loader = index_loader
        self._index = None
        self._index_loaded = False
        self.rec = recorder
        self.partial = False  # set by the `partial` directive for the current response
        self._mathlib_loaded = False
        self._headers: set[str] = set()
        self._incr: dict[str, list[str]] = {}

    # ------------------------------------------------------------------ entry

    def handle(self, text: str):
        """Answers one request text; None for a skipped comment block."""
        if text.startswith("#") or text.startswith("--"):
            return None
        obj = decode(text)
        kind = classify(obj, self.o.fork)
        self.partial = False
        if kind == "command":
            return self._command(obj, obj["cmd"])
        if kind == "tactic":
            return self._tactic(obj)
        if kind == "file":
            path = obj["path"]
            try:
                with open(self._path(path), encoding="utf-8", errors="replace", newline="") as f:
                    content = f.read()
            except OSError as e:
                return {"message": io_error_text(e, path)}
            return self._command(obj, content)
        if kind == "pickle_env":
            return self._pickle_env(obj)
        if kind == "unpickle_env":
            return self._unpickle_env(obj)
        if kind == "pickle_ps":
            return self._pickle_ps(obj)
        return self._unpickle_ps(obj)

    # --------------------------------------------------------------- replay

    def index(self):
        if not self._index_loaded:
            self._index_loaded = True
            if self._loader is not None and self.o.replay:
                try:
                    self._index = self._loader()
                except Exception:  # noqa: BLE001 - unusable fixtures switch replay off, never kill a worker
                    self._index = None
        return self._index

    def _lookup(self, key: str):
        if self.rec is not None:
            return self.rec.take(self, key)
        idx = self.index()
        if idx is None:
            return None
        return idx.entries.get(key)

    def _instantiate(self, tpl, line_map):
        resp, infos, alloc_env = tpl
        base = len(self.states)
        out = dict(resp)
        ps = out.get("proofState")
        if type(ps) is int:
            out["proofState"] = ps + base
        for field in ("sorries", "tactics"):
            items = out.get(field)
            if items:
                out[field] = [
                    dict(e, proofState=e["proofState"] + base) if type(e.get("proofState")) is int else e
                    for e in items
                ]
        if alloc_env:
            out["env"] = len(self.envs)
        if line_map is not None:
            out = map_lines(out, line_map)
        return out, infos, alloc_env

    # ------------------------------------------------------------ directives

    def _pre(self, d: faults.Directives | None) -> None:
        if d is None or self.rec is not None:
            return
        n = d.get("stderr")
        if n is not None:
            faults.flood_stderr(int(faults.parse_seconds(n, 65536)))
        if d.get("panic") is not None:
            faults.panic()
        g = d.get("garbage")
        if g is not None:
            faults.garbage(g or None, self.stdout)
        g = d.get("grow")
        if g is not None:
            faults.grow(faults.parse_seconds(g, 0))
        b = d.get("burn")
        if b is not None:
            faults.burn(faults.parse_seconds(b, 0))
        c = d.get("crash")
        if c is not None:
            faults.crash(c, self.stdout)
        h = d.get("hang")
        if h is not None:
            faults.hang(h or None)
        if d.get("partial") is not None:
            self.partial = True

    stdout = None  # set by the server loop (needed by garbage/crash)

    @staticmethod
    def _escape_messages(d: faults.Directives | None, tactic_mode: bool) -> list[dict]:
        if d is None:
            return []
        vals = d.all("escape")
        if not vals:
            return []
        texts = faults.escapes(vals)
        line, text = next(((no, t) for no, t in d.lines if "escape" in t), (0, ""))
        if tactic_mode:
            pos = end = {"line": 0, "column": 0}
        else:
            pos = {"line": line, "column": 0}
            end = {"line": line, "column": len(text)}
        return [{"severity": "info", "pos": pos, "endPos": end, "data": t} for t in texts]

    # ----------------------------------------------------------------- costs

    def _charge_header(self, mods: list[str]) -> None:
        if self.rec is not None or not any(elab.is_mathlib(m) for m in mods):
            return
        key = "\n".join(mods)
        if not self._mathlib_loaded:
            self._mathlib_loaded = True
            self._headers.add(key)
            faults.grow(self.o.base_memory_mb)
            faults.burn(self.o.import_cost)
        elif self.o.fork and key in self._headers:
            return
        else:
            # A second header in the same process: the .olean files are mapped
            # and shared, but its env is built again (time and memory; upstream
            # even for a header it loaded before, the fork only for new ones).
            self._headers.add(key)
            faults.grow(self.o.header_memory_mb)
            faults.burn(self.o.reimport_cost)

    def _charge_body(self, base: str, text: str, body_chars: int, incremental: bool) -> None:
        if self.rec is not None:
            return
        cost = self.o.cost_per_kchar
        if self.o.fork:
            texts = self._incr.setdefault(base, [])
            if incremental and cost > 0 and texts:
                reuse = 0
                k = bisect.bisect_left(texts, text)
                for j in (k - 1, k):
                    if 0 <= j < len(texts):
                        p = len(os.path.commonprefix([texts[j], text]))
                        reuse = max(reuse, p)
                if reuse < len(text):
                    reuse = text.rfind("\n", 0, reuse) + 1
                body_chars = min(body_chars, len(text) - reuse)
            k = bisect.bisect_left(texts, text)
            if k >= len(texts) or texts[k] != text:
                texts.insert(k, text)
        if cost > 0 and body_chars > 0:
            faults.burn(cost * body_chars / 1000.0)

    # -------------------------------------------------------------- handlers

    def _lookup_env(self, number):
        """(the env numbered `number`, or None for a fresh one; the REPL's error if unknown)."""
        if number is None:
            return None, None
        if number >= len(self.envs):
            return None, {"message": "Unknown environment."}
        return self.envs[number], None

    def _command(self, req: dict, text: str):
        env, unknown = self._lookup_env(req.get("env"))
        if unknown:
            return unknown
        directives, stripped, line_map = faults.scan(text)
        self._pre(directives)
        infotree = req.get("infotree")
        if infotree not in _INFOTREE:
            infotree = None
        all_tactics = bool(req.get("allTactics"))
        root_goals = bool(req.get("rootGoals"))
        opt_key = f"{all_tactics}|{root_goals}|{infotree}"
        declarations = False
        if self.o.fork:
            set_options = req.get("setOptions")
            declarations = bool(req.get("declarations"))
            if set_options:
                opt_key += "|set:" + json.dumps(set_options, ensure_ascii=False, separators=(",", ":"))
            if declarations:
                opt_key += "|decls"
        base = env.lineage if env is not None else "-"
        key = lineage("cmd", stripped, opt_key, base)

        if env is None:
            mods, body_start = elab.split_header(text)
            broken = any(not elab.module_known(m) for m in mods)
            mathlib = any(elab.is_mathlib(m) for m in mods)
            self._charge_header(mods)
        else:
            mods, body_start = [], 0
            broken, mathlib = env.broken, env.mathlib
        body_chars = len(text) - body_start
        # the fork keeps one prefix trie per env *id* (or one for fresh headers)
        base = req.get("env")
        self._charge_body("-" if base is None else str(base), stripped, body_chars, bool(req.get("incrementality")))

        tpl = self._lookup(key)
        if tpl is not None:
            resp, infos, alloc_env = self._instantiate(tpl, line_map)
        else:
            resp, infos = self._plausible(
                text, stripped, line_map, env, broken, body_start, all_tactics, root_goals, infotree, declarations
            )
            alloc_env = True
        if not alloc_env:
            return resp
        if env is None:
            cut = body_start if line_map is None else elab.split_header(stripped)[1]
            env_text = stripped[cut:]
        else:
            env_text = stripped
        new_env = Env(lineage(key, "env"), env, env_text, broken, mathlib)
        self._register(key, infos, new_env)
        self.envs.append(new_env)
        extra = self._escape_messages(directives, False)
        if extra:
            resp = dict(resp)
            resp["messages"] = list(resp.get("messages") or []) + extra
        return resp

    def _plausible(self, text, stripped, line_map, env, broken, body_start, all_tactics, root_goals, infotree,
                   declarations):
        kimina = None
        if not broken:
            idx = self.index()
            if idx is not None and idx.kimina:
                kimina = idx.match_kimina(stripped)
        el = elab.elaborate(
            text,
            lookup=env.lookup if env is not None else (lambda name: None),
            variables=env.variables() if env is not None else [],
            broken=broken,
            body_start=body_start,
            lean_version=self.o.lean_version,
            sorry_style=self.o.sorry_style,
            all_tactics=all_tactics,
            root_goals=root_goals,
            infotree=infotree,
            declarations=declarations,
        )
        base = len(self.states)
        infos: list = []
        sorries = []
        for entry, goals in el.sorries + el.root_goals:
            e = {"proofState": base + len(infos)}
            e.update(entry)
            sorries.append(e)
            infos.append((goals, False))
        tactics = []
        for entry, goals in el.tactics:
            e = dict(entry)
            e["proofState"] = base + len(infos)
            tactics.append(e)
            infos.append((goals, False))
        resp: dict = {}
        if tactics:
            resp["tactics"] = tactics
        if sorries:
            resp["sorries"] = sorries
        messages = el.messages
        if kimina is not None:
            messages, cost = kimina
            if line_map is not None:
                messages = map_lines(messages, line_map)
            if cost > 0 and self.o.replay_time_scale > 0:
                faults.burn(cost * self.o.replay_time_scale)
        if messages:
            resp["messages"] = messages
        if el.infotree:
            resp["infotree"] = el.infotree
        resp["env"] = len(self.envs)
        if el.declarations is not None:
            resp["declarations"] = el.declarations
        return resp, infos

    def _register(self, key: str, infos, env) -> None:
        states = self.states
        for k, (goals, sorry) in enumerate(infos):
            states.append(ProofState(lineage(key, "ps", str(k)), goals, env, sorry))

    def _tactic(self, req: dict):
        n = req["proofState"]
        if n >= len(self.states):
            return {"message": "Unknown proof state."}
        ps = self.states[n]
        directives, stripped, _ = faults.scan(req["tactic"])
        self._pre(directives)
        if self.rec is None and self.o.cost_per_kchar > 0:
            faults.burn(self.o.cost_per_kchar * len(stripped) / 1000.0)
        key = lineage("tac", stripped, ps.lineage)
        tpl = self._lookup(key)
        if tpl is not None:
            resp, infos, _ = self._instantiate(tpl, None)
        else:
            r = elab.run_tactic(stripped, ps.goals, ps.sorry)
            if r.error is not None:
                resp, infos = {"message": r.error}, []
            else:
                base = len(self.states)
                resp = {}
                if r.nested:
                    resp["sorries"] = [{"proofState": base + i, "goal": g} for i, g in enumerate(r.nested)]
                resp["proofStatus"] = elab.status(r.goals, r.sorry)
                resp["proofState"] = base + len(r.nested)
                if r.messages:
                    resp["messages"] = r.messages
                resp["goals"] = r.goals
                infos = [([g], False) for g in r.nested] + [(r.goals, r.sorry)]
        self._register(key, infos, ps.env)
        resp = self._versioned(resp, stripped)
        extra = self._escape_messages(directives, True)
        if extra and "message" not in resp:
            resp = dict(resp)
            resp["messages"] = list(resp.get("messages") or []) + extra
        return resp

    # -------------------------------------------------------------- pickling

    def _path(self, p: str) -> str:
        if self.rec is not None:
            return os.path.normpath(os.path.join(self.rec.cwd, p))
        return p

    def _write_pickle(self, p: str, data: dict) -> None:
        payload = json.dumps(data, ensure_ascii=False, sort_keys=True)
        if self.rec is not None:
            self.rec.fs[self._path(p)] = payload
            return
        try:
            with open(p, "w", encoding="utf-8") as f:
                f.write(payload)
        except OSError as e:
            raise Fatal(io_error_text(e, p)) from None

    def _read_pickle(self, p: str, kind: str) -> dict:
        if self.rec is not None:
            payload = self.rec.fs.get(self._path(p))
            if payload is None:
                raise Fatal(f"no such file or directory (error code: 2)\n  file: {p}")
        else:
            try:
                with open(p, encoding="utf-8") as f:
                    payload = f.read()
            except OSError as e:
                raise Fatal(io_error_text(e, p)) from None
            except UnicodeDecodeError:
                payload = ""
        try:
            data = json.loads(payload)
        except ValueError:
            data = None
        if type(data) is not dict or data.get("format") != PICKLE_FORMAT or data.get("kind") != kind:
            raise Fatal(f"failed to read file '{p}', invalid header")
        return data

    def _pickle_env(self, req: dict):
        env, unknown = self._lookup_env(req["env"])
        if unknown:
            return unknown
        data = {"format": PICKLE_FORMAT, "kind": "env", "note": "leanrpc stand-in pickle, not a Lean .olean"}
        data.update(env.dump())
        self._write_pickle(req["pickleTo"], data)
        return {"env": req["env"]}

    def _unpickle_env(self, req: dict):
        data = self._read_pickle(req["unpickleEnvFrom"], "env")
        key = lineage("unpickle-env", data["lineage"])
        tpl = self._lookup(key)
        if tpl is not None:
            resp, infos, alloc_env = self._instantiate(tpl, None)
            if not alloc_env:
                return resp
        else:
            resp, infos = {"env": len(self.envs)}, []
        restored = Env.load(data)
        new_env = Env(lineage(key, "env"), restored, "", restored.broken, restored.mathlib)
        self._register(key, infos, new_env)
        self.envs.append(new_env)
        return resp

    def _ps_response(self, goals: list[str], sorry: bool) -> dict:
        return self._versioned(
            {"proofStatus": elab.status(goals, sorry), "proofState": len(self.states), "goals": list(goals)})

    def _versioned(self, resp: dict, tactic: str = "") -> dict:
        """A tactic-style answer as the claimed REPL version writes it: no
        `proofStatus` before v4.19.0 (the fork backports it to every tag);
        from v4.19.0 the kernel check's refusal for `leanrpc_kernel_reject`."""
        if "proofStatus" not in resp:
            return resp
        if not self.o.fork and not elab.sends_proof_status(self.o.lean_version):
            return {k: v for k, v in resp.items() if k != "proofStatus"}
        if elab.KERNEL_REJECT in tactic and resp["proofStatus"] == "Completed":
            resp = dict(resp)
            resp["proofStatus"] = ("Error: kernel type check failed: (kernel) declaration type mismatch "
                                   "(stand-in: leanrpc_kernel_reject)")
        return resp

    def _pickle_ps(self, req: dict):
        n = req["proofState"]
        if n >= len(self.states):
            return {"message": "Unknown proof State."}
        ps = self.states[n]
        data = {
            "format": PICKLE_FORMAT, "kind": "proofState", "note": "leanrpc stand-in pickle, not a Lean .olean",
            "lineage": ps.lineage, "goals": ps.goals, "sorry": ps.sorry,
            "env": ps.env.dump() if ps.env is not None else None,
        }
        self._write_pickle(req["pickleTo"], data)
        key = lineage("pickle-ps", ps.lineage)
        tpl = self._lookup(key)
        if tpl is not None:
            resp, infos, _ = self._instantiate(tpl, None)
        else:
            resp, infos = self._ps_response(ps.goals, ps.sorry), [(ps.goals, ps.sorry)]
        self._register(key, infos, ps.env)
        return resp

    def _unpickle_ps(self, req: dict):
        env, unknown = self._lookup_env(req.get("env"))
        if unknown:
            return unknown
        data = self._read_pickle(req["unpickleProofStateFrom"], "proofState")
        key = lineage("unpickle-ps", str(data.get("lineage")), env.lineage if env is not None else "-")
        goals = [g for g in data.get("goals") or [] if type(g) is str]
        sorry = bool(data.get("sorry"))
        if env is None and data.get("env"):
            env = Env.load(data["env"])
        tpl = self._lookup(key)
        if tpl is not None:
            resp, infos, _ = self._instantiate(tpl, None)
        else:
            resp, infos = self._ps_response(goals, sorry), [(goals, sorry)]
        self._register(key, infos, env)
        return resp
