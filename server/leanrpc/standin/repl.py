"""The stand-in's REPL: numbering, replay lookup and request handlers.

Every env and proof state carries a *lineage*: a digest of the request that
made it and of the lineages it was built on. A request's replay key is built
from its normalised content and the lineages of what it refers to, so a
recorded answer is only replayed in the same situation it was recorded in,
whatever ids the current process happens to use. The fixture index is built
by running this very class over the recorded transcripts (``record.py``),
which keeps keys and lineages consistent by construction.

The state types (envs, proof states, lineages, options) are in ``state.py``;
what a request costs in ``costs.py``; pickle files in ``files.py``; the faults
directives inject in ``faults.py``.

Ids follow §6 of the protocol: one env counter and one proof-state counter;
in a command response sorries, then root goals, then tactics, then the env.

Owns: ``Repl``, the numbering of envs and proof states, replay lookup and the
request handlers. With a ``recorder`` (``record.py``) lookups answer from the
recording, files are virtual and nothing is charged.
May import: the stand-in's ``elab``, ``faults``, ``costs``, ``files``,
``state``, ``wire`` and the standard library.
"""

from __future__ import annotations

import json

from . import elab, escapes, faults
from .costs import Costs
from .files import Files
from .kimina import replayed
from .state import PICKLE_FORMAT, Env, Options, ProofState, io_error_text, lineage, map_lines
from .wire import classify, decode

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
        self.costs = Costs(opts, enabled=recorder is None)
        self.files = Files(recorder)

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
                with open(
                    self.files.path(path), encoding="utf-8", errors="replace", newline=""
                ) as f:
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
                    dict(e, proofState=e["proofState"] + base)
                    if type(e.get("proofState")) is int
                    else e
                    for e in items
                ]
        if alloc_env:
            out["env"] = len(self.envs)
        if line_map is not None:
            out = map_lines(out, line_map)
        return out, infos, alloc_env

    # ------------------------------------------------------------ directives

    stdout = None  # set by the server loop (needed by garbage/crash)

    def _pre(self, d: faults.Directives | None) -> None:
        if d is not None and self.rec is None:
            self.partial = faults.apply(d, self.stdout)

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
                opt_key += "|set:" + json.dumps(
                    set_options, ensure_ascii=False, separators=(",", ":")
                )
            if declarations:
                opt_key += "|decls"
        base = env.lineage if env is not None else "-"
        key = lineage("cmd", stripped, opt_key, base)

        if env is None:
            mods, body_start = elab.split_header(text)
            broken = any(not elab.module_known(m) for m in mods)
            mathlib = any(elab.is_mathlib(m) for m in mods)
            self.costs.header(mods)
        else:
            mods, body_start = [], 0
            broken, mathlib = env.broken, env.mathlib
        body_chars = len(text) - body_start
        # the fork keeps one prefix trie per env *id* (or one for fresh headers)
        base = req.get("env")
        self.costs.body(
            "-" if base is None else str(base),
            stripped,
            body_chars,
            bool(req.get("incrementality")),
        )

        tpl = self._lookup(key)
        if tpl is not None:
            resp, infos, alloc_env = self._instantiate(tpl, line_map)
        else:
            resp, infos = self._plausible(
                text,
                stripped,
                line_map,
                env,
                broken,
                body_start,
                all_tactics,
                root_goals,
                infotree,
                declarations,
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
        extra = escapes.escape_messages(directives, False)
        if extra:
            resp = dict(resp)
            resp["messages"] = list(resp.get("messages") or []) + extra
        return resp

    def _plausible(
        self,
        text,
        stripped,
        line_map,
        env,
        broken,
        body_start,
        all_tactics,
        root_goals,
        infotree,
        declarations,
    ):
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
            messages, cost = replayed(kimina, el.messages, line_map)
            self.costs.replayed(cost)
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
        self.costs.tactic(stripped)
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
                    resp["sorries"] = [
                        {"proofState": base + i, "goal": g} for i, g in enumerate(r.nested)
                    ]
                resp["proofStatus"] = elab.status(r.goals, r.sorry)
                resp["proofState"] = base + len(r.nested)
                if r.messages:
                    resp["messages"] = r.messages
                resp["goals"] = r.goals
                infos = [([g], False) for g in r.nested] + [(r.goals, r.sorry)]
        self._register(key, infos, ps.env)
        resp = self._versioned(resp, stripped)
        extra = escapes.escape_messages(directives, True)
        if extra and "message" not in resp:
            resp = dict(resp)
            resp["messages"] = list(resp.get("messages") or []) + extra
        return resp

    # -------------------------------------------------------------- pickling

    def _pickle_env(self, req: dict):
        env, unknown = self._lookup_env(req["env"])
        if unknown:
            return unknown
        data = {
            "format": PICKLE_FORMAT,
            "kind": "env",
            "note": "leanrpc stand-in pickle, not a Lean .olean",
        }
        data.update(env.dump())
        self.files.write_pickle(req["pickleTo"], data)
        return {"env": req["env"]}

    def _unpickle_env(self, req: dict):
        data = self.files.read_pickle(req["unpickleEnvFrom"], "env")
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
            {
                "proofStatus": elab.status(goals, sorry),
                "proofState": len(self.states),
                "goals": list(goals),
            }
        )

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
            resp["proofStatus"] = (
                "Error: kernel type check failed: (kernel) declaration type mismatch "
                "(stand-in: leanrpc_kernel_reject)"
            )
        return resp

    def _pickle_ps(self, req: dict):
        n = req["proofState"]
        if n >= len(self.states):
            return {"message": "Unknown proof State."}
        ps = self.states[n]
        data = {
            "format": PICKLE_FORMAT,
            "kind": "proofState",
            "note": "leanrpc stand-in pickle, not a Lean .olean",
            "lineage": ps.lineage,
            "goals": ps.goals,
            "sorry": ps.sorry,
            "env": ps.env.dump() if ps.env is not None else None,
        }
        self.files.write_pickle(req["pickleTo"], data)
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
        data = self.files.read_pickle(req["unpickleProofStateFrom"], "proofState")
        key = lineage(
            "unpickle-ps", str(data.get("lineage")), env.lineage if env is not None else "-"
        )
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
