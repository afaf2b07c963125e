"""Progressive quality for one client: frames at a low resolution while the camera moves (so
the view follows the mouse), one at full resolution once it has been still for a moment."""
from __future__ import annotations

import threading
import time

LOW, FULL = "low", "full"


class Progressive:
    """Tracks what a client has on screen against what it should see. `moved` (camera) and
    `changed` (mode, model, resolution) bump a version; `next` says which frame to render now,
    `shown` records a frame that was rendered for a version."""

    def __init__(self, still_s: float = 0.25, clock=time.monotonic):
        if not still_s >= 0:
            raise ValueError(f"still_s: must be >= 0, got {still_s}")
        self.still_s, self._clock = still_s, clock
        self._lock = threading.Lock()
        self._version, self._last_move = 0, -float("inf")
        self._shown: tuple[int, str] | None = None

    def moved(self) -> None:
        with self._lock:
            self._version += 1
            self._last_move = self._clock()

    def changed(self) -> None:
        with self._lock:
            self._version += 1

    def next(self) -> tuple[int, str] | None:
        """(version, LOW | FULL) to render now, or None when the screen is up to date (or shows
        a low frame of the current view while the camera may still move)."""
        with self._lock:
            still = self._clock() - self._last_move >= self.still_s
            if self._shown == (self._version, FULL):
                return None
            if self._shown is not None and self._shown[0] == self._version and not still:
                return None  # a low frame of this view is up; wait until the camera rests
            return self._version, FULL if still else LOW

    def shown(self, version: int, quality: str) -> None:
        with self._lock:
            self._shown = (version, quality)

    def seconds_to_still(self) -> float:
        with self._lock:
            return max(0.0, self.still_s - (self._clock() - self._last_move))
