"""The external judge (issue 25 item 5): the last tier of a pinned verdict.

Owns: running the `[judge]` command (comparator, SafeVerify, `lake env
leanchecker` behind a small wrapper; docs/REAL-LEAN.md) on a VALID result
that carried a reference, on its own bounded pool (an asyncio semaphore of
`max_concurrent`, apart from the REPL workers), with its own timeout, through
the workers' launcher (their sandbox and rlimits) unless `sandboxed = false`.
The judge reads ``{"reference": ..., "submission": ..., "theorems": [...],
"definitions": [...]}`` as JSON on stdin: the two texts, the reference's
theorem/lemma names and its def/abbrev names whose body is `sorry` (holes),
fully qualified as leanrpc read them (comparator's `theorem_names` and
`definition_names`). A sandbox gives it a private scratch, so no files are
shared; exit 0
accepts, any other exit refuses; past the timeout its process group is
killed. May import: config, results, worker.launcher.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import time

from ..config import Config
from ..results import JudgeCheck, JudgeLevel
from ..worker.launcher import Launcher, LaunchSpec, kill_process_group, rlimits_from_config

__all__ = ["JudgeService"]

TAIL_CHARS = 2000


class JudgeService:
    def __init__(self, config: Config, launcher: Launcher | None) -> None:
        judge = config.judge
        self.argv = (
            shlex.split(judge.command) if isinstance(judge.command, str) else list(judge.command)
        )
        self.name = judge.name or (os.path.basename(self.argv[0]) if self.argv else "")
        self.timeout_s = judge.timeout_s
        self.launcher = launcher if (judge.sandboxed and launcher is not None) else Launcher()
        self.rlimits = rlimits_from_config(config.limits)
        self.slots = asyncio.Semaphore(judge.max_concurrent)
        self.runs = 0
        self.active = self.peak = 0  # judges running now, and the most at once

    @property
    def enabled(self) -> bool:
        return bool(self.argv)

    async def judge(
        self, reference: str, submission: str, theorems: list[str] = (), definitions: list[str] = ()
    ) -> JudgeCheck:
        """What the judge says about `submission` against `reference`."""
        async with self.slots:
            self.runs += 1
            self.active += 1
            self.peak = max(self.peak, self.active)
            started = time.monotonic()
            try:
                check = await self._run(
                    json.dumps(
                        {
                            "reference": reference,
                            "submission": submission,
                            "theorems": list(theorems),
                            "definitions": list(definitions),
                        }
                    ).encode()
                )
            finally:
                self.active -= 1
            check.elapsed_s = time.monotonic() - started
            return check

    async def _run(self, payload: bytes) -> JudgeCheck:
        spec = LaunchSpec(argv=list(self.argv), env={"LEANRPC_JUDGE": "1"}, rlimits=self.rlimits)
        try:
            process = await self.launcher.launch(spec)
        except OSError as exc:
            return JudgeCheck(JudgeLevel.FAILED, self.name, f"the judge could not start: {exc}")
        try:
            out, err = await asyncio.wait_for(process.communicate(payload), self.timeout_s)
        except asyncio.TimeoutError:
            _kill(process)
            await process.wait()
            return JudgeCheck(
                JudgeLevel.TIMEOUT,
                self.name,
                f"the judge ran past {self.timeout_s:g} s and was killed",
            )
        except BaseException:
            _kill(process)
            raise
        tail = (out + err).decode("utf-8", "replace")[-TAIL_CHARS:]
        if process.returncode == 0:
            return JudgeCheck(JudgeLevel.ACCEPTED, self.name, tail)
        if process.returncode < 0:
            return JudgeCheck(
                JudgeLevel.FAILED, self.name, f"killed by signal {-process.returncode}: {tail}"
            )
        return JudgeCheck(JudgeLevel.REFUSED, self.name, f"exit {process.returncode}: {tail}")


def _kill(process: asyncio.subprocess.Process) -> None:
    try:
        kill_process_group(process.pid)
    except (ProcessLookupError, PermissionError):
        pass
