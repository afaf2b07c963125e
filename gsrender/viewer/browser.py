"""Headless Chromium driving a viewer page, for the browser test and the screenshot script:
Debian's `chromium` + `chromium-driver` packages through selenium (no browser download)."""
from __future__ import annotations

import io
import shutil
import socket

import numpy as np

# the page's largest canvas is viser's 3D view; everything drawn over it (GUI panel,
# notifications, the axes gizmo) is hidden, so a screenshot shows only the rendered scene
_CANVAS_ONLY = """
const cs = [...document.querySelectorAll('canvas')];
const c = cs.reduce((a, b) => a.width * a.height >= b.width * b.height ? a : b);
for (const el of document.body.querySelectorAll('*'))
  if (el !== c && !el.contains(c)) el.style.visibility = arguments[0] ? 'hidden' : '';
const r = c.getBoundingClientRect();
return [r.x, r.y, r.width, r.height, window.devicePixelRatio];
"""


def find_chromium() -> tuple[str, str] | None:
    """(browser, driver) paths, or None when either is missing (or selenium is)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """A headless Chromium window of width x height CSS pixels (device pixel ratio 1)."""

    def __init__(self, width: int = 800, height: int = 600):
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        found = find_chromium()
        if found is None:
            raise RuntimeError("headless Chromium needs selenium and the chromium + chromedriver programs")
        opts = Options()
        opts.binary_location = found[0]
        # WebGL without a GPU: SwiftShader, which new Chromium only enables when asked
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--use-angle=swiftshader",
                  "--enable-unsafe-swiftshader", "--force-device-scale-factor=1",
                  f"--window-size={width},{height}"):
            opts.add_argument(a)
        self.driver = webdriver.Chrome(service=Service(found[1]), options=opts)

    def open(self, url: str) -> None:
        self.driver.get(url)

    def text(self) -> str:
        return self.driver.execute_script("return document.body.innerText")

    def screenshot(self) -> np.ndarray:
        """The window as uint8 [H, W, 3]."""
        import imageio.v3 as iio

        png = self.driver.get_screenshot_as_png()
        return np.asarray(iio.imread(io.BytesIO(png)))[..., :3]

    def canvas(self) -> np.ndarray:
        """Only the 3D canvas, overlays hidden (shown again afterwards): uint8 [h, w, 3]."""
        x, y, w, h, dpr = self.driver.execute_script(_CANVAS_ONLY, True)
        try:
            shot = self.screenshot()
        finally:
            self.driver.execute_script(_CANVAS_ONLY, False)
        x0, y0 = round(x * dpr), round(y * dpr)
        return shot[y0:y0 + round(h * dpr), x0:x0 + round(w * dpr)]

    def close(self) -> None:
        self.driver.quit()


def open_page(browser: Browser, viewer, timeout: float = 90.0) -> tuple[int, int]:
    """Loads viewer's page and waits for its client to report a camera: the canvas (w, h)."""
    import time

    browser.open(viewer.url + "/")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for c in viewer.clients().values():
            return c.handle.camera.image_width, c.handle.camera.image_height
        time.sleep(0.1)
    raise TimeoutError(f"the page at {viewer.url} sent no camera within {timeout} s")


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR in dB of two uint8 images of one shape."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float(10 * np.log10(255.0 ** 2 / max(mse, 1e-12)))


def drawn_canvas(browser: Browser, expected: np.ndarray, bar_db: float,
                 timeout: float = 45.0) -> tuple[np.ndarray, float]:
    """(canvas, its PSNR against expected) once the canvas shows expected to within bar_db, or
    the last one after timeout: the browser (software WebGL on a busy CPU) draws a frame some
    time after it arrives."""
    import time

    end, best = time.monotonic() + timeout, -1.0
    while True:
        shot = browser.canvas()
        best = psnr(shot, expected) if shot.shape == expected.shape else -1.0
        if best > bar_db or time.monotonic() > end:
            return shot, best
        time.sleep(0.5)


def hide_notifications(browser: Browser) -> None:
    """Closes viser's notifications (headless Chromium gets 'software WebGL' ones)."""
    browser.driver.execute_script(
        "document.querySelectorAll('.mantine-Notification-root').forEach(e => e.remove())")
