"""The files a request reads or writes: the disk, or the recorder's virtual one.

``{"path": ...}`` commands read a Lean file; ``pickleTo``/``unpickle...From``
write and read the stand-in's pickles (JSON with a format header, never a
Lean ``.olean``). In record mode (``record.py``) paths are relative to the
transcript's working directory and pickles live in the recorder's ``fs``, so
a set's transcripts share them as upstream's test run does.

Owns: ``Files`` (path resolution, pickle write and read with Lean's error texts).
May import: the stand-in's ``state`` and ``wire`` and the standard library.
"""

from __future__ import annotations

import json
import os

from .state import PICKLE_FORMAT, io_error_text
from .wire import Fatal

__all__ = ["Files"]


class Files:
    def __init__(self, recorder=None):
        self.rec = recorder

    def path(self, p: str) -> str:
        if self.rec is not None:
            return os.path.normpath(os.path.join(self.rec.cwd, p))
        return p

    def write_pickle(self, p: str, data: dict) -> None:
        payload = json.dumps(data, ensure_ascii=False, sort_keys=True)
        if self.rec is not None:
            self.rec.fs[self.path(p)] = payload
            return
        try:
            with open(p, "w", encoding="utf-8") as f:
                f.write(payload)
        except OSError as e:
            raise Fatal(io_error_text(e, p)) from None

    def read_pickle(self, p: str, kind: str) -> dict:
        """The pickle's data; Fatal (Lean's text) if missing, unreadable or of another kind."""
        if self.rec is not None:
            payload = self.rec.fs.get(self.path(p))
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
        if (
            type(data) is not dict
            or data.get("format") != PICKLE_FORMAT
            or data.get("kind") != kind
        ):
            raise Fatal(f"failed to read file '{p}', invalid header")
        return data
