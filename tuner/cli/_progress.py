"""Progress for every command that runs longer than 2 s on a terminal.

Commands with their own bar (``OWN_PROGRESS``) draw it themselves; every other command gets an
elapsed-time line on stderr (``netsim simulate: 12 s``) that appears after ``DELAY_S`` and is
wiped as soon as the command prints anything, so it never mixes with the output. Nothing is
drawn when stderr is not a terminal (pipes, CI, tests).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

DELAY_S = 2.0
TICK_S = 0.5
#: Subcommands that draw their own tqdm bar.
OWN_PROGRESS = frozenset({"predict", "recommend", "calibrate"})


class _Ticker:
    def __init__(self, desc: str, stream) -> None:
        self.desc, self.stream = desc, stream
        self.start = time.monotonic()
        self.shown = False
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop.wait(TICK_S):
            elapsed = time.monotonic() - self.start
            if elapsed >= DELAY_S:
                with self.lock:
                    if self.stop.is_set():
                        return
                    self.stream.write(f"\r{self.desc}: {elapsed:.0f} s")
                    self.stream.flush()
                    self.shown = True

    def clear(self) -> None:
        """Stop ticking and wipe the line (idempotent)."""
        with self.lock:
            self.stop.set()
            if self.shown:
                self.stream.write("\r" + " " * (len(self.desc) + 12) + "\r")
                self.stream.flush()
                self.shown = False


class _ClearOnWrite:
    """Proxy of a text stream that stops the ticker before the first write."""

    def __init__(self, stream, ticker: _Ticker) -> None:
        self._stream, self._ticker = stream, ticker

    def write(self, text: str) -> int:
        self._ticker.clear()
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def ticker(command: str, enabled: bool | None = None):
    """Show ``netsim COMMAND: N s`` on a terminal while the body runs longer than 2 s."""
    if enabled is None:
        enabled = command not in OWN_PROGRESS and sys.stderr.isatty()
    if not enabled:
        yield
        return
    t = _Ticker(f"netsim {command}", sys.stderr)
    out = sys.stdout
    sys.stdout = _ClearOnWrite(out, t)
    t.thread.start()
    try:
        yield
    finally:
        t.clear()
        sys.stdout = out
