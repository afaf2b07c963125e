"""gsrender.io: PLY / .splat / COLMAP / Mip-NeRF 360 / camera JSON readers and writers."""
from __future__ import annotations

import dataclasses
import json
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from gsrender.cameras import load_cameras_json, save_cameras_json
from gsrender.io import (
    Camera,
    load_colmap_cameras,
    load_colmap_points,
    load_mipnerf360_scene,
    load_ply,
    load_splat,
    paths,
    read_colmap_model,
    save_ply,
    save_splat,
    stack_cameras,
    write_colmap_binary,
    write_colmap_text,
)
from gsrender.io.colmap import rotmat_to_qvec
from gsrender.scene import GaussianModel

DATA = paths.data_dir()
PLANT = Path(__file__).resolve().parents[2] / "data" / "plant" / "plant.splat"  # bundled
SNOW = DATA / "snowmiku_small"


def random_model(n=50, deg=0, d_feat=0, ids=False, seed=0) -> GaussianModel:
    g = torch.Generator().manual_seed(seed)
    return GaussianModel(
        means=torch.randn(n, 3, generator=g),
        quats=torch.randn(n, 4, generator=g),
        scales=torch.rand(n, 3, generator=g) * 0.1 + 1e-3,
        opacities=torch.rand(n, generator=g) * 0.98 + 0.01,
        sh=torch.randn(n, (deg + 1) ** 2, 3, generator=g),
        features=torch.randn(n, d_feat, generator=g) if d_feat else None,
        object_ids=torch.randint(-1, 20, (n,), generator=g) if ids else None,
    )


def random_rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def random_cameras(n=5, seed=0) -> list[Camera]:
    rng = np.random.default_rng(seed)
    cams = []
    for i in range(n):
        vm = np.eye(4)
        vm[:3, :3] = random_rotation(rng)
        vm[:3, 3] = rng.normal(size=3)
        w, h, f = (64, 48, 50.0) if i % 2 else (80, 60, 70.0)
        K = [[f, 0, w / 2 + 0.25], [0, f * 1.01, h / 2 - 0.5], [0, 0, 1]]
        cams.append(Camera(f"img_{i:03d}.png", w, h, torch.tensor(K), torch.from_numpy(vm).float()))
    return cams


def write_ply_header(path: Path, props: list[str], count: int, fmt="binary_little_endian") -> None:
    lines = ["ply", f"format {fmt} 1.0", f"element vertex {count}"]
    lines += [f"property float {p}" for p in props] + ["end_header"]
    path.write_bytes(("\n".join(lines) + "\n").encode())


INRIA_PROPS = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity"]
               + [f"scale_{i}" for i in range(3)] + [f"rot_{i}" for i in range(4)])


# --------------------------------------------------------------------------------------- PLY


@pytest.mark.parametrize("deg", [0, 1, 2, 3])
def test_ply_roundtrip(tmp_path, deg):
    m = random_model(deg=deg, d_feat=5, ids=True, seed=deg)
    save_ply(tmp_path / "a.ply", m)
    r = load_ply(tmp_path / "a.ply")
    assert r.sh_degree == deg and r.sh.shape == m.sh.shape
    for name in ("means", "quats", "sh", "features"):
        torch.testing.assert_close(getattr(r, name), getattr(m, name))
    torch.testing.assert_close(r.scales, m.scales, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(r.opacities, m.opacities, rtol=1e-5, atol=1e-6)
    assert r.object_ids.dtype == torch.int64 and torch.equal(r.object_ids, m.object_ids)


def test_ply_inria_layout(tmp_path):
    """A plain model is written with exactly the INRIA property list; f_rest is channel-major."""
    plyfile = pytest.importorskip("plyfile")
    m = random_model(n=4, deg=1)
    save_ply(tmp_path / "a.ply", m)
    el = plyfile.PlyData.read(str(tmp_path / "a.ply"))["vertex"]
    rest = [f"f_rest_{i}" for i in range(9)]
    assert [p.name for p in el.properties] == INRIA_PROPS[:9] + rest + INRIA_PROPS[9:]
    # f_rest_{c*3 + k-1} = sh[:, k, c]
    np.testing.assert_allclose(el["f_rest_4"], m.sh[:, 2, 1].numpy())
    np.testing.assert_allclose(el["opacity"], torch.logit(m.opacities).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(el["scale_2"], m.scales[:, 2].log().numpy(), rtol=1e-5)


def test_ply_ascii_loads(tmp_path):
    plyfile = pytest.importorskip("plyfile")
    m = random_model(n=7, deg=1, d_feat=2, ids=True)
    save_ply(tmp_path / "b.ply", m)
    data = plyfile.PlyData.read(str(tmp_path / "b.ply"))
    plyfile.PlyData(data.elements, text=True).write(str(tmp_path / "a.ply"))
    assert (tmp_path / "a.ply").read_bytes()[:40].find(b"format ascii") > 0
    r = load_ply(tmp_path / "a.ply")
    torch.testing.assert_close(r.sh, m.sh)
    torch.testing.assert_close(r.features, m.features)
    assert torch.equal(r.object_ids, m.object_ids)


def test_ply_truncated(tmp_path):
    save_ply(tmp_path / "a.ply", random_model(n=20, deg=2))
    data = (tmp_path / "a.ply").read_bytes()
    (tmp_path / "t.ply").write_bytes(data[:-10])
    with pytest.raises(ValueError, match="truncated"):
        load_ply(tmp_path / "t.ply")
    (tmp_path / "h.ply").write_bytes(data[:30])  # cut inside the header
    with pytest.raises(ValueError, match="h.ply"):
        load_ply(tmp_path / "h.ply")


def _refused_without_allocating(path: Path, match: str) -> None:
    """load_ply(path) raises ValueError matching `match`, having allocated under 8 MB."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            load_ply(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_ply_huge_count_no_allocation(tmp_path):
    p = tmp_path / "huge.ply"
    write_ply_header(p, INRIA_PROPS, count=10**12)
    with open(p, "ab") as f:
        f.write(b"\0" * 1000)
    _refused_without_allocating(p, r"huge\.ply.*1000000000000 vertices")


def test_ply_huge_count_in_another_element_no_allocation(tmp_path):
    """Every element's declared rows are checked before plyfile allocates any: a face element
    after the vertices declaring 10**12 lists (a byte each at least) is refused."""
    p = tmp_path / "faces.ply"
    lines = ["ply", "format binary_little_endian 1.0", "element vertex 1"]
    lines += [f"property float {c}" for c in INRIA_PROPS]
    lines += ["element face 1000000000000", "property list uchar int vertex_indices", "end_header"]
    p.write_bytes(("\n".join(lines) + "\n").encode() + np.zeros(len(INRIA_PROPS), "<f4").tobytes() + b"\0" * 100)
    _refused_without_allocating(p, r"faces\.ply.*truncated or corrupt.*1000000000000 'face' rows")


def test_ply_ascii_truncated_and_negative_counts(tmp_path):
    write_ply_header(tmp_path / "a.ply", INRIA_PROPS, count=3, fmt="ascii")
    with open(tmp_path / "a.ply", "a") as f:
        f.write(" ".join(["0.5"] * len(INRIA_PROPS)) + "\n")  # one row of the three declared
    with pytest.raises(ValueError, match=r"a\.ply.*(truncated|corrupt)"):
        load_ply(tmp_path / "a.ply")
    write_ply_header(tmp_path / "x.ply", INRIA_PROPS, count=1, fmt="ascii")
    with open(tmp_path / "x.ply", "a") as f:
        f.write(" ".join(["nope"] * len(INRIA_PROPS)) + "\n")
    with pytest.raises(ValueError, match=r"x\.ply: corrupt PLY data"):
        load_ply(tmp_path / "x.ply")
    write_ply_header(tmp_path / "n.ply", INRIA_PROPS, count=-5)
    with pytest.raises(ValueError, match=r"n\.ply.*-5 rows"):
        load_ply(tmp_path / "n.ply")


def test_ply_foreign(tmp_path):
    p = tmp_path / "cloud.ply"
    lines = ["ply", "format binary_little_endian 1.0", "element vertex 2"]
    lines += [f"property float {c}" for c in "xyz"]
    lines += [f"property uchar {c}" for c in ("red", "green", "blue")]
    p.write_bytes(("\n".join(lines + ["end_header"]) + "\n").encode() + b"\0" * 30)
    with pytest.raises(ValueError, match=r"missing .*f_dc_0.*opacity.*scale_0.*rot_0"):
        load_ply(p)
    (tmp_path / "x.ply").write_bytes(b"not a ply at all")
    with pytest.raises(ValueError, match="not a PLY"):
        load_ply(tmp_path / "x.ply")


def test_ply_bad_values(tmp_path):
    m = random_model(n=5)
    m.means[2, 1] = float("nan")
    # save_ply refuses non-finite input; a non-finite file is written by hand below.
    with pytest.raises(ValueError, match="means"):
        save_ply(tmp_path / "a.ply", m)
    write_ply_header(tmp_path / "n.ply", INRIA_PROPS, count=1)
    vals = np.zeros(len(INRIA_PROPS), "<f4")
    vals[INRIA_PROPS.index("scale_1")] = np.inf
    with open(tmp_path / "n.ply", "ab") as f:
        f.write(vals.tobytes())
    with pytest.raises(ValueError, match="non-finite.*scale_1"):
        load_ply(tmp_path / "n.ply")
    # 6 f_rest columns is no SH degree
    write_ply_header(tmp_path / "r.ply", INRIA_PROPS + [f"f_rest_{i}" for i in range(6)], count=1)
    with open(tmp_path / "r.ply", "ab") as f:
        f.write(np.zeros(len(INRIA_PROPS) + 6, "<f4").tobytes())
    with pytest.raises(ValueError, match="f_rest"):
        load_ply(tmp_path / "r.ply")


def test_ply_extreme_activations_stay_valid(tmp_path):
    write_ply_header(tmp_path / "e.ply", INRIA_PROPS, count=2)
    vals = np.zeros((2, len(INRIA_PROPS)), "<f4")
    vals[:, INRIA_PROPS.index("opacity")] = [40.0, -40.0]
    vals[:, INRIA_PROPS.index("scale_0")] = [-200.0, 0.0]
    with open(tmp_path / "e.ply", "ab") as f:
        f.write(vals.tobytes())
    r = load_ply(tmp_path / "e.ply")
    assert ((r.opacities > 0) & (r.opacities < 1)).all() and (r.scales > 0).all()


# ------------------------------------------------------------------------------------- .splat


def test_splat_roundtrip(tmp_path):
    m = random_model(n=100)
    m.sh = m.sh.clamp(-1.7, 1.7)  # colours inside [0, 1] so 8-bit quantisation is the only loss
    save_splat(tmp_path / "a.splat", m)
    assert (tmp_path / "a.splat").stat().st_size == 100 * 32
    r = load_splat(tmp_path / "a.splat")
    torch.testing.assert_close(r.means, m.means)
    torch.testing.assert_close(r.scales, m.scales)
    torch.testing.assert_close(r.opacities, m.opacities, atol=0.5 / 255 + 1e-6, rtol=0)
    rgb = lambda s: s[:, 0] * 0.28209479177387814 + 0.5
    torch.testing.assert_close(rgb(r.sh), rgb(m.sh).clamp(0, 1), atol=0.5 / 255 + 1e-6, rtol=0)
    q = m.quats / m.quats.norm(dim=1, keepdim=True)
    cos = (r.quats * q).sum(1).abs()  # q and -q are the same rotation
    assert (cos > 0.99).all()
    torch.testing.assert_close(r.quats.norm(dim=1), torch.ones(100))


def test_splat_bad_length(tmp_path):
    (tmp_path / "e.splat").write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        load_splat(tmp_path / "e.splat")
    (tmp_path / "b.splat").write_bytes(b"\0" * 33)
    with pytest.raises(ValueError, match="multiple of 32"):
        load_splat(tmp_path / "b.splat")


def test_plant_splat_loads():
    m = load_splat(PLANT)
    assert m.num_gaussians == 113648 and m.sh.shape == (113648, 1, 3)
    for t in (m.means, m.quats, m.scales, m.opacities, m.sh):
        assert torch.isfinite(t).all()
    assert ((m.opacities > 0) & (m.opacities < 1)).all() and (m.scales > 0).all()
    torch.testing.assert_close(m.quats.norm(dim=1), torch.ones(113648))


# ------------------------------------------------------------------------------------- COLMAP


def assert_same_cameras(a: list[Camera], b: list[Camera], atol=1e-5):
    assert [c.name for c in a] == [c.name for c in b]
    for x, y in zip(a, b):
        assert (x.width, x.height) == (y.width, y.height)
        torch.testing.assert_close(x.K, y.K, atol=atol, rtol=1e-6)
        torch.testing.assert_close(x.viewmat, y.viewmat, atol=atol, rtol=0)


@pytest.mark.parametrize("writer", [write_colmap_text, write_colmap_binary])
def test_colmap_roundtrip(tmp_path, writer):
    cams = random_cameras(6)
    rng = np.random.default_rng(1)
    xyz, rgb = rng.normal(size=(30, 3)), rng.integers(0, 256, (30, 3)).astype(np.uint8)
    writer(tmp_path, cams[::-1], points=(xyz, rgb))  # written out of order: the loader sorts by name
    ext = ".txt" if writer is write_colmap_text else ".bin"
    assert (tmp_path / f"images{ext}").is_file()
    intr, images = read_colmap_model(tmp_path)
    assert len(intr) == 2 and len(images) == 6
    assert_same_cameras(load_colmap_cameras(tmp_path), cams)
    p, c = load_colmap_points(tmp_path)
    assert p.dtype == np.float32 and c.dtype == np.uint8
    np.testing.assert_allclose(p, xyz, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(c, rgb)
    # images_2: intrinsics and size halve
    half = load_colmap_cameras(tmp_path, downscale=2)
    torch.testing.assert_close(half[0].K[:2], cams[0].K[:2] / 2)
    assert (half[0].width, half[0].height) == (40, 30)


def test_rotmat_to_qvec_all_branches():
    rng = np.random.default_rng(0)
    from gsrender.io.colmap import qvec_to_rotmat
    mats = [random_rotation(rng) for _ in range(50)]
    mats += [np.diag([1.0, -1, -1]), np.diag([-1.0, 1, -1]), np.diag([-1.0, -1, 1])]
    for R in mats:
        np.testing.assert_allclose(qvec_to_rotmat(rotmat_to_qvec(R)), R, atol=1e-12)


def test_colmap_images_txt_variants(tmp_path):
    (tmp_path / "cameras.txt").write_text("1 SIMPLE_PINHOLE 100 80 90 50 40\n")
    (tmp_path / "images.txt").write_text(
        "# comment\n"
        "1 1 0 0 0 0 0 1 1 b.png\n"
        "10.5 20.5 -1 11 12 3\n"     # observations
        "2 1 0 0 0 0 0 2 1 a.png\n"  # no observation line at all
        "3 1 0 0 0 0 0 3 1 c c.png\n"
        "\n")
    cams = load_colmap_cameras(tmp_path)
    assert [c.name for c in cams] == ["a.png", "b.png", "c c.png"]
    assert float(cams[0].viewmat[2, 3]) == 2.0
    torch.testing.assert_close(cams[0].K, torch.tensor([[90.0, 0, 50], [0, 90, 40], [0, 0, 1]]))


@pytest.mark.parametrize("writer", [write_colmap_text, write_colmap_binary])
def test_colmap_fisheye_roundtrip(tmp_path, writer):
    """A fisheye Camera is written as OPENCV_FISHEYE (zero distortion) and loads back as one."""
    cams = [dataclasses.replace(c, model="fisheye") for c in random_cameras(4)]
    writer(tmp_path, cams)
    intr, _ = read_colmap_model(tmp_path)
    assert {c.model for c in intr.values()} == {"OPENCV_FISHEYE"}
    back = load_colmap_cameras(tmp_path)
    assert_same_cameras(back, cams)
    assert {c.model for c in back} == {"fisheye"}


@pytest.mark.parametrize(("line", "lens"), [
    ("1 OPENCV_FISHEYE 100 80 60 61 50 40 0 0 0 0", "fisheye"),
    ("1 SIMPLE_RADIAL 100 80 60 50 40 0", "pinhole"),
    ("1 RADIAL 100 80 60 50 40 0 0", "pinhole"),
    ("1 OPENCV 100 80 60 61 50 40 0 0 0 0", "pinhole"),
    ("1 FULL_OPENCV 100 80 60 61 50 40 0 0 0 0 0 0 0 0", "pinhole"),
])
def test_colmap_undistorted_models_load(tmp_path, line, lens):
    (tmp_path / "cameras.txt").write_text(line + "\n")
    (tmp_path / "images.txt").write_text("1 1 0 0 0 0 0 1 1 a.png\n\n")
    (cam,) = load_colmap_cameras(tmp_path)
    assert cam.model == lens
    fy = 61.0 if "OPENCV" in line else 60.0
    torch.testing.assert_close(cam.K, torch.tensor([[60.0, 0, 50], [0, fy, 40], [0, 0, 1]]))


@pytest.mark.parametrize("line", ["1 FOV 100 80 60 61 50 40 0.9",
                                  "1 THIN_PRISM_FISHEYE 100 80 60 61 50 40 0 0 0 0 0 0 0 0"])
def test_colmap_unknown_lenses_rejected(tmp_path, line):
    (tmp_path / "cameras.txt").write_text(line + "\n")
    (tmp_path / "images.txt").write_text("")
    with pytest.raises(ValueError, match=line.split()[1] + ".*image_undistorter"):
        read_colmap_model(tmp_path)


def test_camera_json_carries_the_lens_model(tmp_path):
    cams = [dataclasses.replace(c, model="fisheye") for c in random_cameras(3)[::2]]
    save_cameras_json(tmp_path / "c.json", cams)
    assert all(e["camera_model"] == "fisheye" for e in json.loads((tmp_path / "c.json").read_text()))
    back = load_cameras_json(tmp_path / "c.json")
    assert [c.model for c in back] == ["fisheye", "fisheye"]
    assert_same_cameras(back, cams)
    plain = random_cameras(3)[::2]
    save_cameras_json(tmp_path / "p.json", plain)
    assert "camera_model" not in (tmp_path / "p.json").read_text()
    assert [c.model for c in load_cameras_json(tmp_path / "p.json")] == ["pinhole", "pinhole"]
    bad = json.loads((tmp_path / "c.json").read_text())
    bad[0]["camera_model"] = "ftheta"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="camera_model"):
        load_cameras_json(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="lens models differ"):
        save_cameras_json(tmp_path / "mixed.json", [cams[0], plain[1]])


def test_colmap_bin_corrupt(tmp_path):
    write_colmap_binary(tmp_path, random_cameras(3))
    images = (tmp_path / "images.bin").read_bytes()
    (tmp_path / "images.bin").write_bytes(images[:-5])
    with pytest.raises(ValueError, match="images.bin"):
        read_colmap_model(tmp_path)
    (tmp_path / "images.bin").write_bytes(struct.pack("<Q", 2**60) + images[8:])
    with pytest.raises(ValueError, match="1152921504606846976 images"):
        read_colmap_model(tmp_path)
    (tmp_path / "points3D.bin").write_bytes(struct.pack("<Q", 10**9))
    with pytest.raises(ValueError, match="points3D"):
        load_colmap_points(tmp_path)


@pytest.mark.skipif(not SNOW.is_dir(), reason="shared data absent")
def test_snowmiku_colmap_matches_json():
    col = load_colmap_cameras(SNOW / "sparse" / "0", images_dir=SNOW / "images")
    js = {c.name: c for c in load_cameras_json(SNOW / "cameras_small.json")}
    assert len(col) == 13 and set(js) == {c.name for c in col}
    for c in col:
        j = js[c.name]
        assert (c.width, c.height) == (j.width, j.height) == (494, 371)
        torch.testing.assert_close(c.K, j.K, atol=1e-4, rtol=0)
        torch.testing.assert_close(c.viewmat, j.viewmat, atol=1e-4, rtol=0)
        assert c.image_path.is_file() and j.image_path.is_file()
    xyz, rgb = load_colmap_points(SNOW / "sparse" / "0")
    assert xyz.shape == (25784, 3) and rgb.shape == (25784, 3) and np.isfinite(xyz).all()
    viewmats, Ks, w, h = stack_cameras(col)
    assert viewmats.shape == (13, 4, 4) and Ks.shape == (13, 3, 3) and (w, h) == (494, 371)


def test_stack_cameras_sizes_differ():
    with pytest.raises(ValueError, match="sizes differ"):
        stack_cameras(random_cameras(2))
    with pytest.raises(ValueError):
        stack_cameras([])


# ------------------------------------------------------------------------------- path escapes


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "a/../../x.png", "..\\..\\x.png"])
def test_path_escape(tmp_path, name):
    sparse = tmp_path / "sparse" / "0"
    sparse.mkdir(parents=True)
    (sparse / "cameras.txt").write_text("1 PINHOLE 64 48 50 50 32 24\n")
    (sparse / "images.txt").write_text(f"1 1 0 0 0 0 0 1 1 {name}\n\n")
    with pytest.raises(ValueError, match="escape|absolute|outside"):
        load_colmap_cameras(sparse, images_dir=tmp_path / "images")
    with pytest.raises(ValueError, match="escape|absolute|outside"):
        load_mipnerf360_scene(tmp_path, images="images", split="all")
    js = tmp_path / "cams.json"
    frame = {"file": name, "width": 4, "height": 3, "K": [[1, 0, 2], [0, 1, 1.5], [0, 0, 1]],
             "viewmat_w2c_opencv": np.eye(4).tolist()}
    js.write_text(json.dumps({"frames": [frame]}))
    with pytest.raises(ValueError, match="escape|absolute|outside"):
        load_cameras_json(js)


def test_path_escape_via_symlink(tmp_path):
    (tmp_path / "outside.png").write_bytes(b"")
    images = tmp_path / "ds" / "images"
    images.mkdir(parents=True)
    (images / "link.png").symlink_to(tmp_path / "outside.png")
    sparse = tmp_path / "ds" / "sparse"
    write_colmap_text(sparse, [Camera("link.png", 4, 3, torch.eye(3), torch.eye(4))])
    with pytest.raises(ValueError, match="outside"):
        load_colmap_cameras(sparse, images_dir=images)


# --------------------------------------------------------------------------------- Mip-NeRF 360


def test_mipnerf360_synthetic(tmp_path):
    iio = pytest.importorskip("imageio.v3")
    cams = [Camera(f"{i:05d}.png", 64, 48, torch.tensor([[60.0, 0, 32], [0, 60, 24], [0, 0, 1]]),
                   torch.eye(4)) for i in range(16)]
    for i, c in enumerate(cams):
        c.viewmat[0, 3] = float(i)
    write_colmap_text(tmp_path / "sparse" / "0", cams[::-1])
    (tmp_path / "images_2").mkdir()
    for c in cams:
        iio.imwrite(tmp_path / "images_2" / c.name, np.full((24, 32, 3), 7, np.uint8))
    for it, n in ((7000, 3), (30000, 5)):
        d = tmp_path / "point_cloud" / f"iteration_{it}"
        d.mkdir(parents=True)
        save_ply(d / "point_cloud.ply", random_model(n=n))

    test = load_mipnerf360_scene(tmp_path, images="images_2", split="test")
    assert [c.name for c in test["cameras"]] == ["00000.png", "00008.png"]
    assert test["image_paths"] == [tmp_path / "images_2" / "00000.png", tmp_path / "images_2" / "00008.png"]
    assert test["model"].num_gaussians == 5  # iteration_30000, not the lexically larger 7000
    c8 = test["cameras"][1]
    assert (c8.width, c8.height) == (32, 24) and float(c8.viewmat[0, 3]) == 8.0
    torch.testing.assert_close(c8.K, torch.tensor([[30.0, 0, 16], [0, 30, 12], [0, 0, 1]]))
    train = load_mipnerf360_scene(tmp_path, images="images_2", split="train")
    assert len(train["cameras"]) == 14 and "00008.png" not in [c.name for c in train["cameras"]]
    assert len(load_mipnerf360_scene(tmp_path, images="images_2", split="all")["cameras"]) == 16

    # an images_N folder whose files were rounded differently: K follows the actual size
    (tmp_path / "images_3").mkdir()
    for c in cams:
        iio.imwrite(tmp_path / "images_3" / c.name, np.zeros((16, 22, 3), np.uint8))
    c0 = load_mipnerf360_scene(tmp_path, images="images_3")["cameras"][0]
    assert (c0.width, c0.height) == (22, 16)
    torch.testing.assert_close(c0.K[0, 0], torch.tensor(60.0 * 22 / 64))  # 3DGS: same field of view

    with pytest.raises(ValueError, match="images"):
        load_mipnerf360_scene(tmp_path, images="imgs")
    with pytest.raises(ValueError, match="split"):
        load_mipnerf360_scene(tmp_path, images="images_2", split="val")
    # without images or trained model: nominal sizes, model None
    bare = load_mipnerf360_scene(tmp_path, images="images_8", split="all")
    assert bare["cameras"][0].width == 8
    (tmp_path / "point_cloud" / "iteration_7000" / "point_cloud.ply").unlink()
    (tmp_path / "point_cloud" / "iteration_30000" / "point_cloud.ply").unlink()
    assert load_mipnerf360_scene(tmp_path, images="images_8")["model"] is None
