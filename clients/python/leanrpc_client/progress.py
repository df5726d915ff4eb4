"""The progress bar of one `verify`: shown at once, or once a batch outlasts PROGRESS_AFTER_S on a terminal.

Split from aio.py (the channel, calls and VerifyStream): this room only draws.
tqdm is optional (the server package ships it; a bare client install draws
nothing). May import: asyncio, sys; tqdm when a bar is drawn.
"""

from __future__ import annotations

import asyncio
import sys

# With progress=None, a bar appears once a batch has taken this long on a
# terminal: the time, not the count, says whether a user is left waiting.
PROGRESS_AFTER_S = 2.0


def _progress_bar(total: int):
    """A tqdm bar on stderr, or None when tqdm is not installed."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="snippet", desc="verify")


class Progress:
    """The bar of one `verify`: shown at once (progress=True), or after
    PROGRESS_AFTER_S on a terminal (progress=None), counting what came before."""

    def __init__(self, total: int, progress: bool | None) -> None:
        self._total = total
        self._done = 0
        self._bar = None
        self._timer = None
        if progress:
            self._start()
        elif progress is None and sys.stderr.isatty():
            self._timer = asyncio.get_running_loop().call_later(PROGRESS_AFTER_S, self._start)

    def _start(self) -> None:
        if self._bar is None and self._done < self._total:
            self._bar = _progress_bar(self._total)
            if self._bar is not None and self._done:
                self._bar.update(self._done)

    def update(self, n: int) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._bar is not None:
            self._bar.close()
