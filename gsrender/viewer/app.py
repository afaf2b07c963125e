"""The viewer: a viser server (the browser client ships inside the viser wheel, so it works
offline), its GUI, the training cameras as frustums, and one render thread that keeps every
connected browser's picture up to date with gsrender.rasterize."""
from __future__ import annotations

import signal
import threading
import time
import traceback
from dataclasses import dataclass

import numpy as np
import torch

from gsrender.cameras import scene_orbit
from gsrender.io.cameras import Camera
from gsrender.scene import GaussianModel
from gsrender.viewer.camera import camera_from_viser, fit_size, viser_pose
from gsrender.viewer.frames import MODES, Frame, FrameRenderer
from gsrender.viewer.progressive import FULL, Progressive

UP_VECTORS = {"+x": (1, 0, 0), "-x": (-1, 0, 0), "+y": (0, 1, 0), "-y": (0, -1, 0), "+z": (0, 0, 1),
              "-z": (0, 0, -1)}
HELP = ("Drag to orbit, right-drag to pan, scroll to zoom; W/A/S/D and Q/E fly, arrow keys turn. "
        "Low resolution while moving, full when still.")


@dataclass
class Shown:
    """The latest frame sent to a client (tests and benchmarks read it)."""

    camera: Camera
    quality: str
    frame: Frame
    send_ms: float  # JPEG encoding + queueing for the websocket


class _Client:
    def __init__(self, handle, still_s: float):
        self.handle, self.progress = handle, Progressive(still_s)
        self.stats = handle.gui.add_markdown("waiting for the first frame ...", order=0)
        self.shown: Shown | None = None


class Viewer:
    """Serves `model` at http://host:port (viser picks the next free port when port is busy;
    `url` says which). Thread-safe `set_model` swaps the scene (live training)."""

    def __init__(self, model: GaussianModel, *, device: torch.device | str = "cpu",
                 host: str = "127.0.0.1", port: int = 8080, cameras: list[Camera] | None = None,
                 up: str = "+z", raster_mode: str = "sorted", max_side: int = 1024,
                 moving_side: int = 256, still_s: float = 0.25, title: str = "gsrender"):
        import viser

        if up not in UP_VECTORS:
            raise ValueError(f"up: expected one of {list(UP_VECTORS)}, got {up!r}")
        for name, v in (("max_side", max_side), ("moving_side", moving_side)):
            if int(v) != v or v < 16:
                raise ValueError(f"{name}: must be an integer >= 16, got {v}")
        self.device = torch.device(device)
        self.frames = FrameRenderer(model, self.device, raster_mode)
        self.still_s = still_s
        self._clients: dict[int, _Client] = {}
        self._lock = threading.Lock()
        self._wake, self._stop = threading.Event(), threading.Event()
        self.status = ""
        self.frustums: list = []

        self.server = viser.ViserServer(host=host, port=port, label=title, verbose=False)
        # no share button: it would tunnel the scene to a public relay
        self.server.gui.configure_theme(show_share_button=False)
        self.server.scene.set_up_direction(UP_VECTORS[up])
        self._initial_camera(model, up)
        self._build_gui(max_side, moving_side)
        if cameras:
            self._add_frustums(cameras, model)
        self.server.on_client_connect(self._connect)
        self.server.on_client_disconnect(self._disconnect)
        self._thread = threading.Thread(target=self._loop, name="gsrender-viewer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ setup

    @property
    def url(self) -> str:
        return f"http://{self.server.get_host()}:{self.server.get_port()}"

    def _initial_camera(self, model: GaussianModel, up: str) -> None:
        """Looking at the scene from an orbit camera's place (the one `gsrender render` uses)."""
        cam = scene_orbit(model.means, 1, 640, 480, 60.0, up)[0]
        _, eye, fov_y, _ = viser_pose(cam)
        self._centre = model.means.detach().cpu().double().median(dim=0).values.numpy()
        ic = self.server.initial_camera
        ic.position = eye
        ic.look_at = self._centre
        ic.up = UP_VECTORS[up]
        ic.fov = fov_y

    def _build_gui(self, max_side: int, moving_side: int) -> None:
        gui = self.server.gui
        labels = [MODES[m] for m in self.frames.modes]
        self._mode = gui.add_dropdown("render mode", labels, initial_value=labels[0])
        self._max_side = gui.add_slider("max resolution", 64, 4096, 16, max_side,
                                        hint="longer image side when the camera is still")
        self._moving_side = gui.add_slider("moving resolution", 32, 1024, 16, moving_side,
                                           hint="longer image side while the camera moves")
        gui.add_markdown(HELP)
        self._status = gui.add_markdown("", visible=False)
        for h in (self._mode, self._max_side, self._moving_side):
            h.on_update(lambda _: self._invalidate())

    def _add_frustums(self, cameras: list[Camera], model: GaussianModel) -> None:
        """Training cameras as frustums sized to the scene; clicking one jumps to its view."""
        pts = model.means.detach().cpu().double()
        lo, hi = (torch.quantile(pts[:: max(1, pts.shape[0] // 100_000)], q, dim=0) for q in (0.02, 0.98))
        scale = 0.05 * float((hi - lo).norm())
        show = self.server.gui.add_checkbox("show training cameras", True)
        handles = []
        for i, cam in enumerate(cameras):
            wxyz, pos, fov_y, aspect = viser_pose(cam)
            h = self.server.scene.add_camera_frustum(
                f"/cameras/{i:04d}", fov=fov_y, aspect=aspect, scale=scale, thickness=2.0,
                thickness_units="screen", color=(230, 120, 20), wxyz=wxyz, position=pos)
            h.on_click(lambda ev, w=wxyz, p=pos: self._jump(ev.client, w, p))
            handles.append(h)

        self.frustums = handles

        @show.on_update
        def _(_):
            for h in handles:
                h.visible = show.value

    @staticmethod
    def _jump(client, wxyz, position) -> None:
        if client is not None:
            with client.atomic():
                client.camera.wxyz = wxyz
                client.camera.position = position

    # ------------------------------------------------------------------ clients

    def _connect(self, handle) -> None:
        c = _Client(handle, self.still_s)

        @handle.camera.on_update
        def _(_):
            with self._lock:
                self._clients.setdefault(handle.client_id, c)
            c.progress.moved()
            self._wake.set()

    def _disconnect(self, handle) -> None:
        with self._lock:
            self._clients.pop(handle.client_id, None)

    def clients(self) -> dict[int, _Client]:
        with self._lock:
            return dict(self._clients)

    def _invalidate(self) -> None:
        for c in self.clients().values():
            c.progress.changed()
        self._wake.set()

    # ------------------------------------------------------------------ the public hooks

    def set_model(self, model: GaussianModel, status: str | None = None) -> None:
        """Show another model (e.g. the current training state) on every client."""
        self.frames.set_model(model)
        if status is not None:
            self.set_status(status)
        self._invalidate()

    def set_status(self, text: str) -> None:
        self.status = text
        self._status.content = text
        self._status.visible = bool(text)

    def set_camera(self, cam: Camera, look_at=None) -> None:
        """Moves every client's camera to cam's pose and vertical field of view, orbiting about
        look_at (default: the point of cam's optical axis nearest the scene centre)."""
        vm = cam.viewmat.double().numpy()
        _, eye, fov_y, _ = viser_pose(cam)
        fwd, up = vm[2, :3], -vm[1, :3]  # camera z and -y in world coordinates
        if look_at is None:
            d = float(fwd @ (self._centre - eye))
            look_at = eye + fwd * max(d, 1e-3)
        for c in self.clients().values():
            h = c.handle.camera
            with c.handle.atomic():
                h.fov = fov_y
                h.up_direction = up
                h.position = eye
                h.look_at = np.asarray(look_at, np.float64)

    def wait_frame(self, timeout: float = 60.0, like: Camera | None = None, atol: float = 1e-3) -> Shown:
        """Blocks until a client shows a full-resolution frame (of a camera whose viewmat is
        within atol of like's and whose focal length matches, when given); for scripts and tests."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for c in self.clients().values():
                s = c.shown
                if s is None or s.quality != FULL:
                    continue
                if like is None or (torch.allclose(s.camera.viewmat, like.viewmat, atol=atol) and
                                    abs(s.camera.K[1, 1] / s.camera.height - like.K[1, 1] / like.height)
                                    < atol * like.K[1, 1] / like.height):
                    return s
            time.sleep(0.05)
        raise TimeoutError(f"no full-resolution frame{' of that camera' if like else ''} within {timeout} s")

    def add_checkbox(self, label: str, initial: bool = False):
        return self.server.gui.add_checkbox(label, initial)

    def wait(self) -> None:
        """Blocks until Ctrl+C, then closes. SIGINT is re-armed first: a shell starts background
        jobs with SIGINT ignored, and Python would then never raise KeyboardInterrupt."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            while not self._stop.is_set():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.close()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)
        self.server.stop()

    # ------------------------------------------------------------------ rendering

    def _mode_key(self) -> str:
        return next(k for k, v in MODES.items() if v == self._mode.value)

    def _loop(self) -> None:
        while not self._stop.is_set():
            busy = False
            for c in self.clients().values():
                job = c.progress.next()
                if job is None:
                    continue
                busy = True
                try:
                    self._render(c, *job)
                except Exception:  # noqa: BLE001 - one bad frame must not end the viewer; say why
                    c.progress.shown(*job)
                    c.stats.content = "**render failed**, see the terminal"
                    traceback.print_exc()
            if not busy:
                waits = [c.progress.seconds_to_still() for c in self.clients().values()]
                self._wake.wait(timeout=min([w for w in waits if w > 0] + [0.5]))
                self._wake.clear()

    def _render(self, c: _Client, version: int, quality: str) -> None:
        cam_h = c.handle.camera
        side = self._max_side.value if quality == FULL else min(self._moving_side.value,
                                                                 self._max_side.value)
        w, h = fit_size(cam_h.image_width, cam_h.image_height, int(side))
        cam = camera_from_viser(cam_h.wxyz, cam_h.position, cam_h.fov, w, h)
        frame = self.frames.render(cam, self._mode_key())
        if c.handle.client_id not in self.clients():
            return  # its tab closed while the frame rendered: a send now would only warn
        t0 = time.perf_counter()
        c.handle.scene.set_background_image(frame.image, format="jpeg",
                                            jpeg_quality=90 if quality == FULL else 70,
                                            depth=frame.depth)
        send_ms = (time.perf_counter() - t0) * 1e3
        c.progress.shown(version, quality)
        c.shown = Shown(cam, quality, frame, send_ms)
        total = frame.ms + send_ms
        c.stats.content = (f"**{self.frames.model.num_gaussians:,} Gaussians** · {w}×{h} ({quality})  \n"
                           f"{total:.0f} ms/frame · **{1e3 / max(total, 1e-3):.1f} FPS** · "
                           f"{self.device.type}")
