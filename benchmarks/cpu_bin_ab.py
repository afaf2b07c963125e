"""One build, one factor: box vs exact binning (bin_tiles without / with conics and opacities) on
the benchmark scene (100k at 512²); the same raster forward and backward on each list. Alternating
rounds; medians of bin (incl. the depth sort), raster_fwd, raster_bwd; checks the images agree.

    python benchmarks/cpu_bin_ab.py [ROUNDS]
"""
import statistics
import sys
import time
from pathlib import Path

import torch

root = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, root)
from benchmarks.common import random_box_scene, render_scene  # noqa: E402
from gsrender import ops  # noqa: E402

sc = random_box_scene(100_000, 512)
with torch.no_grad():
    o = render_scene({k: sc[k] for k in ("means", "quats", "scales", "opacities", "sh")}, None, sc["viewmat"], sc["K"], 512, 512, "sorted", "auto", False)
m = o.meta
C, N = m["means2d"].shape[:2]
chans = torch.cat([torch.rand(C, N, 3), m["depths"][..., None]], -1).contiguous()
def run(exact):
    t0 = time.perf_counter()
    extra = (m["conics"], m["opacities"]) if exact else ()
    offs, ids = ops.bin_tiles(m["means2d"], m["radii"], m["depths"], 512, 512, 16, True, *extra)
    t1 = time.perf_counter()
    leaves = [x.detach().clone().requires_grad_(True) for x in (m["means2d"], m["conics"], m["opacities"], chans)]
    out = ops.rasterize(*leaves[:3], leaves[3], m["depths"], None, offs, ids, 512, 512, 16, ops.SORTED, [0.3, 1.5, 0.05], "auto")
    t2 = time.perf_counter()
    (out[0].sum() + out[1].sum()).backward()
    t3 = time.perf_counter()
    return ids.numel(), (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, out[0].detach()
res = {False: [], True: []}
run(False)
run(True)
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 6):
    for e in ((False, True) if r % 2 == 0 else (True, False)):
        res[e].append(run(e))
assert torch.allclose(res[False][0][4], res[True][0][4], rtol=1e-5, atol=1e-6)
for i, name in ((0, "pairs"), (1, "bin ms"), (2, "raster_fwd ms"), (3, "raster_bwd ms")):
    b, x = statistics.median(v[i] for v in res[False]), statistics.median(v[i] for v in res[True])
    print(f"{name}: box {b:.1f}  exact {x:.1f}  box/exact {b / x:.2f}")
