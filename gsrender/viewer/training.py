"""`gsrender train --view`: the viewer follows the model being trained."""
from __future__ import annotations

import importlib.util
import time

from gsrender.cli.view import VIEW_EXTRA, open_viewer
from gsrender.io.cameras import Camera
from gsrender.viewer.camera import up_from_cameras


class TrainingView:
    """The trainer's per-step hook. On the first step it opens the viewer (training cameras as
    frustums); then, at most every refresh_s seconds, it hands the viewer the current
    parameters; its "pause training" box holds the loop between steps."""

    def __init__(self, views, *, host: str = "127.0.0.1", port: int = 8080, refresh_s: float = 1.0):
        if importlib.util.find_spec("viser") is None:  # say so before training, not after a step
            raise ValueError(f"--view: the viewer needs viser; {VIEW_EXTRA}")
        self.cameras = [Camera(name=v.name, width=v.width, height=v.height, K=v.K.cpu(),
                               viewmat=v.viewmat.cpu()) for v in views]
        self.host, self.port, self.refresh_s = host, port, refresh_s
        self.viewer, self._pause, self._last = None, None, -float("inf")

    def _open(self, trainer) -> None:
        self.viewer = open_viewer(trainer.model(), up=up_from_cameras(self.cameras),
                                  device=trainer.device, host=self.host, port=self.port,
                                  cameras=self.cameras, title="gsrender train")
        self._pause = self.viewer.add_checkbox("pause training", False)
        print(f"training viewer: open {self.viewer.url} in a browser", flush=True)

    def __call__(self, trainer, result: dict) -> None:
        if self.viewer is None:
            self._open(trainer)
        now = time.monotonic()
        if now - self._last >= self.refresh_s or trainer.done():
            total = trainer.sched.steps if trainer.sched.steps is not None else "?"
            self.viewer.set_model(trainer.model(), status=(
                f"training: step {trainer.step_count}/{total} · PSNR {result['psnr']:.2f} dB "
                f"(this view) · {result['n']:,} Gaussians"))
            self._last = now
        while self._pause.value and not trainer.done():
            time.sleep(0.1)

    def wait(self) -> None:
        """After training: keep serving the final model until Ctrl+C."""
        if self.viewer is not None:
            print(f"training done; the viewer stays at {self.viewer.url} (Ctrl+C to stop)", flush=True)
            self.viewer.wait()
