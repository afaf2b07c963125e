"""`gsrender prepare`'s manifest, SCENE/prepare.json: every photo of the capture sorted by name (the
Mip-NeRF 360 hold-out counts every 8th of them, registered or not), the ones SfM registered and
the stages' statistics. Readers (the trainer's split, the runner) need only this module."""
from __future__ import annotations

import json
from pathlib import Path

MANIFEST = "prepare.json"


def read_manifest(scene: str | Path) -> dict | None:
    """scene/prepare.json, or None for a folder `prepare` did not make (e.g. a release download)."""
    path = Path(scene) / MANIFEST
    return json.loads(path.read_text()) if path.is_file() else None
