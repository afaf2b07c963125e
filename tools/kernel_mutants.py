#!/usr/bin/env python3
"""Mutation score of the CUDA kernels' checks on the CPU (docs/cuda.md, "Mutation score").

Each mutant is a one-line fault in a copy of the kernel sources (never the working tree): the
copy is rebuilt with the SIMT runtime (tools/kernel_driver/build.sh --simt; ccache keeps the
unchanged translation units cheap), the mutant's cases run through the driver and the checker
(python -m gsrender.testing.check), a synchronisation fault also runs under the race check
(build.sh --simt --racecheck) and a memory fault under AddressSanitizer + UBSan (--asan). A
mutant is killed when a case fails, the driver reports an error (an aborted launch, a deadlock)
or a sanitizer reports; it survives otherwise.

Usage: python tools/kernel_mutants.py [--cases build/kernel_cases] [--only NAME] [--list] [--json FILE]
Exit code 0 when every mutant run was killed (and the unmutated sources pass), 1 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPIED = ("csrc/cuda", "csrc/include", "tools/simt", "tools/kernel_driver")


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository root
    before: str  # occurs exactly once in the file (tests/cuda/test_kernel_mutants.py)
    after: str
    only: tuple[str, ...]  # the cases it runs: names containing any of these
    race: bool = False  # a synchronisation fault: also run the race check
    asan: bool = False  # a memory fault: also run the ASan + UBSan build


MMA_FWD = "csrc/cuda/rasterize_mma_fwd_kernel.cu"
MMA_BWD = "csrc/cuda/rasterize_mma_bwd_kernel.cu"
MMA_TILE = "csrc/cuda/mma_tile.cuh"
# Each mutant runs the cases that can see it (the whole set is many times slower): per kernel,
# every precision and both modes, lists of several chunks (crowd, deep), wide masked tails
# (D = 13, 40, 64, 130) and the narrow f16 forward (D ≤ 8).
MMA_FWD_CASES = ("rasterize_fwd_crowd_sorted_D13_f16", "rasterize_fwd_crowd_weighted_D3_bf16",
                 "rasterize_fwd_crowd_sorted_D3_tf32", "rasterize_fwd_deep_sorted_D64_f16",
                 "rasterize_fwd_deep_weighted_D64_tf32", "rasterize_fwd_small_weighted_D4_f16",
                 "rasterize_fwd_tiny_sorted_D130_", "rasterize_fwd_tiny_weighted_D40_")
MMA_BWD_CASES = ("rasterize_bwd_crowd_sorted_D13_bf16", "rasterize_bwd_crowd_weighted_D13_f16",
                 "rasterize_bwd_deep_sorted_D64_bf16", "rasterize_bwd_small_weighted_D4_bf16",
                 "rasterize_bwd_tiny_sorted_D130_bf16", "rasterize_bwd_tiny_weighted_D40_f16")
FWD_CASES = ("rasterize_fwd_crowd_sorted_D3_f32", "rasterize_fwd_crowd_weighted_D13_f32",
             "rasterize_fwd_deep_sorted_D64_f32", "rasterize_fwd_tiny64_sorted_D40_f64")
BWD_CASES = ("rasterize_bwd_crowd_sorted_D13_f32", "rasterize_bwd_crowd_weighted_D1_f32",
             "rasterize_bwd_crowd_sorted_D1_det", "rasterize_bwd_deep_sorted_D64_f32")
RACE_FWD = ("rasterize_fwd_crowd_sorted_D13_f16", "rasterize_fwd_tiny_weighted_D130_bf16",
            "rasterize_fwd_crowd_sorted_D3_tf32")
RACE_BWD = ("rasterize_bwd_crowd_sorted_D13_bf16", "rasterize_bwd_tiny_weighted_D40_f16")
RACE_SCALAR = ("rasterize_fwd_crowd_sorted_D3_f32", "rasterize_bwd_crowd_sorted_D13_f32",
               "rasterize_bwd_crowd_weighted_D1_det")

MUTANTS: tuple[Mutant, ...] = (
    # ---- Tensor Core forward
    Mutant("mma_fwd_first_chunk_only", MMA_FWD,
           "for (int32_t chunk0 = run.start; chunk0 < run.end; chunk0 += kMmaThreads) {",
           "for (int32_t chunk0 = run.start; chunk0 < min(run.end, run.start + kMmaThreads); "
           "chunk0 += kMmaThreads) {", MMA_FWD_CASES),
    Mutant("mma_fwd_no_syncwarp_after_reads", MMA_FWD,
           "      __syncwarp();  // every lane is done reading buf[cur] before it is refilled\n",
           "\n", RACE_FWD, race=True),
    Mutant("mma_fwd_no_syncwarp_after_wait", MMA_FWD,
           "ptx::cp_async_wait_group<1>();  // this group's rows have landed\n      __syncwarp();",
           "ptx::cp_async_wait_group<1>();  // this group's rows have landed\n", RACE_FWD,
           race=True),
    Mutant("mma_fwd_no_cp_async_wait", MMA_FWD,
           "ptx::cp_async_wait_group<1>();  // this group's rows have landed",
           "// (no wait)", MMA_FWD_CASES, race=True),
    Mutant("mma_fwd_no_syncthreads_before_stats", MMA_FWD,
           "  __syncthreads();  // every warp's counts are in\n", "\n", RACE_FWD, race=True),
    Mutant("mma_fwd_partial_channel_batch_dropped", MMA_FWD,
           "static_cast<unsigned>((p.CH + KT::kChannels - 1) / KT::kChannels));",
           "static_cast<unsigned>(p.CH / KT::kChannels));", MMA_FWD_CASES),
    Mutant("mma_fwd_feature_segment_shifted", MMA_FWD,
           "const int64_t ch = c0 + seg * kPer16;", "const int64_t ch = c0 + (seg + 1) * kPer16;",
           MMA_FWD_CASES),
    # ---- the MMA kernels' shared tile walk and fragments
    Mutant("mma_padding_column_mask_off_by_one", MMA_TILE,
           "const bool ok = k < count;", "const bool ok = k <= count;",
           MMA_FWD_CASES + MMA_BWD_CASES),
    Mutant("mma_list_position_off_by_one", MMA_TILE,
           "pos1[j] = ok ? chunk0 + e + 1 : 0;", "pos1[j] = ok ? e + 1 : 0;",
           MMA_FWD_CASES + MMA_BWD_CASES),
    Mutant("mma_weighted_depth_weight_ignored", MMA_TILE,
           "phi[j] = cs.s.phi[e];", "phi[j] = 1.0f;", MMA_FWD_CASES + MMA_BWD_CASES),
    Mutant("mma_no_syncthreads_after_staging", MMA_TILE,
           "  __syncthreads();\n  return min(kMmaThreads, end - chunk0);",
           "  return min(kMmaThreads, end - chunk0);", RACE_FWD + RACE_BWD, race=True),
    Mutant("mma_no_syncwarp_after_packing", MMA_TILE,
           "  __syncwarp();\n  return count;", "  return count;", RACE_FWD + RACE_BWD, race=True),
    Mutant("mma_a_fragment_registers_swapped", "csrc/include/gsrender/mma_fragments.h",
           "const float lo = w[r & 1][2 * (r >> 1)], hi = w[r & 1][2 * (r >> 1) + 1];",
           "const float lo = w[r >> 1][2 * (r & 1)], hi = w[r >> 1][2 * (r & 1) + 1];",
           MMA_FWD_CASES + MMA_BWD_CASES),
    Mutant("mma_tf32_a_registers_swapped", "csrc/cuda/mma_traits.cuh",
           "r[m][1] = ptx::to_tf32(w[1][2 * m]);", "r[m][1] = ptx::to_tf32(w[0][2 * m + 1]);",
           MMA_FWD_CASES),
    Mutant("operands_padding_channel_from_neighbour", "csrc/cuda/mma_operands.cuh",
           ": to_operand<T>(0.0f);",
           ": to_operand<T>(__fdiv_rn(src.at(r, src.CH - 1), col_div ? col_div[src.CH - 1] "
           ": *all_div));", MMA_FWD_CASES + MMA_BWD_CASES),
    # ---- Tensor Core backward
    Mutant("mma_bwd_first_chunk_only", MMA_BWD,
           "for (int32_t chunk0 = run.start; chunk0 < run.end; chunk0 += kMmaThreads) {",
           "for (int32_t chunk0 = run.start; chunk0 < min(run.end, run.start + kMmaThreads); "
           "chunk0 += kMmaThreads) {", MMA_BWD_CASES),
    Mutant("mma_bwd_last_channel_batch_dropped", MMA_BWD,
           "for (int64_t c0 = 0; c0 < ba.CHp; c0 += kCB) {",
           "for (int64_t c0 = 0; c0 + kCB < ba.CHp; c0 += kCB) {", MMA_BWD_CASES),
    Mutant("mma_bwd_no_syncwarp_before_batch", MMA_BWD,
           "__syncwarp();  // the previous batch's (and the W staging's) readers are done",
           "// (no __syncwarp)", RACE_BWD, race=True),
    Mutant("mma_bwd_no_cp_async_wait", MMA_BWD,
           "        ptx::cp_async_wait_group<0>();\n        __syncwarp();\n        uint32_t bf[4];",
           "        __syncwarp();\n        uint32_t bf[4];", MMA_BWD_CASES, race=True),
    Mutant("mma_bwd_opacity_or_depth_atomic_dropped", MMA_BWD,
           "for (int q = 0; q < (kSorted ? 6 : 7); ++q)",
           "for (int q = 0; q < (kSorted ? 5 : 6); ++q)", MMA_BWD_CASES),
    Mutant("mma_bwd_color_atomic_channel_off_by_one", MMA_BWD,
           "if (k < count && ch < p.CH && df[e] != 0.0f)",
           "if (k < count && ch + 1 < p.CH && df[e] != 0.0f)", MMA_BWD_CASES),
    # ---- scalar rasterizers (forward, backward, deterministic backward) and weight_stats
    Mutant("scalar_fwd_first_batch_only", "csrc/cuda/rasterize_fwd_kernel.cu",
           "for (int32_t b0 = run.start; b0 < run.end; b0 += nthreads) {",
           "for (int32_t b0 = run.start; b0 < min(run.end, run.start + nthreads); "
           "b0 += nthreads) {", FWD_CASES),
    Mutant("scalar_no_syncthreads_after_staging", "csrc/cuda/raster_common.cuh",
           "  __syncthreads();\n  return min(nthreads, run.end - b0);",
           "  return min(nthreads, run.end - b0);", RACE_SCALAR, race=True),
    Mutant("scalar_staging_reads_past_list_end", "csrc/cuda/raster_common.cuh",
           "if (i < run.end) stage_gaussian(s, threadIdx.x, p, p.flatten_ids[i]);",
           "if (i <= run.end) stage_gaussian(s, threadIdx.x, p, p.flatten_ids[i]);",
           RACE_SCALAR, asan=True),
    Mutant("scalar_bwd_no_syncthreads_before_staging", "csrc/cuda/rasterize_bwd_kernel.cu",
           "__syncthreads();  // the previous batch is fully read", "// (no barrier)",
           RACE_SCALAR, race=True),
    Mutant("scalar_bwd_warp_atomic_from_lane_1", "csrc/cuda/raster_common.cuh",
           "if ((threadIdx.x & 31) == 0 && v != T(0)) atomicAdd(dst, v);",
           "if ((threadIdx.x & 31) == 1 && v != T(0)) atomicAdd(dst, v);", BWD_CASES),
    Mutant("det_bwd_no_syncthreads_after_row_sums", "csrc/cuda/rasterize_bwd_kernel.cu",
           "__syncthreads();  // red is free again", "// (no barrier)",
           ("rasterize_bwd_tiny_sorted_D40_det", "rasterize_bwd_tiny_weighted_D40_det"),
           race=True),
    Mutant("weight_stats_max_atomic_dropped", "csrc/cuda/weight_stats_kernel.cu",
           "atomic_max_nonneg(o.wmax + gid, w);", "(void)0;", ("weight_stats_crowd_K4", "weight_stats_small_K4")),
    # ---- binning, projection, SH, contributors
    Mutant("binning_device_loop_last_column_skipped", "csrc/include/gsrender/support_ellipse.h",
           "for (int tx = r[0]; tx <= r[2]; ++tx) {\n      CentreSpan<double> x;",
           "for (int tx = r[0]; tx < r[2]; ++tx) {\n      CentreSpan<double> x;",
           ("bin_tiles_crowd_", "bin_tiles_small_")),
    Mutant("projection_bwd_no_syncthreads_before_reuse", "csrc/cuda/projection_kernel.cu",
           "__syncthreads();  // partial is free for the next call", "// (no barrier)",
           ("project_bwd_small",), race=True),
    Mutant("projection_bwd_last_warp_partial_dropped", "csrc/cuda/projection_kernel.cu",
           "T v = lane < kWarps ? partial[lane][e] : T(0);",
           "T v = lane < kWarps - 1 ? partial[lane][e] : T(0);", ("project_bwd_small",)),
    Mutant("sh_bwd_first_camera_only", "csrc/cuda/sh_kernel.cu",
           "for (int64_t c = 0; c < C; ++c) {\n    const int64_t idx = c * N + n;",
           "for (int64_t c = 0; c < 1; ++c) {\n    const int64_t idx = c * N + n;", ("sh_bwd_small_deg3",)),
    Mutant("contributors_pixel_x_from_y", "csrc/cuda/contributors_kernel.cu",
           "const int x = pix ? pix[2 * i] : static_cast<int>(q % a.width);",
           "const int x = pix ? pix[2 * i + 1] : static_cast<int>(q % a.width);",
           ("contributors_",)),
)


def apply(text: str, m: Mutant) -> str:
    n = text.count(m.before)
    if n != 1:
        raise ValueError(f"{m.name}: its 'before' text occurs {n} times in {m.path}")
    return text.replace(m.before, m.after)


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[int, str]:
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
                       text=True)
    return p.returncode, p.stdout


class Bench:
    """The sources' copy, its builds and the case runs."""

    def __init__(self, work: Path, cases: Path, python: str):
        self.work, self.cases, self.python = work, cases, python
        self.src = work / "src"
        for rel in COPIED:
            shutil.copytree(ROOT / rel, self.src / rel, dirs_exist_ok=True)
        self.env = dict(os.environ, KDRIVER_JOBS=os.environ.get("KDRIVER_JOBS", "2"),
                        CCACHE_BASEDIR=str(self.src))
        if "CXX" not in self.env and Path("/usr/lib/ccache/g++").exists():
            self.env["CXX"] = "/usr/lib/ccache/g++"

    def build(self, kind: str) -> Path:
        """kind: plain, race or asan (build.sh --simt [--racecheck | --asan])."""
        out = self.work / kind
        flag = {"plain": [], "race": ["--racecheck"], "asan": ["--asan"]}[kind]
        rc, log = run(["bash", str(self.src / "tools/kernel_driver/build.sh"), "--simt", *flag,
                       str(out)], env=self.env, cwd=self.src)
        if rc != 0:
            raise RuntimeError(f"build failed:\n{log[-3000:]}")
        return out / "kernel_driver"

    def run_cases(self, driver: Path, only: tuple[str, ...], tag: str) -> tuple[bool, str]:
        """-> (all passed, why not): the driver over the selected cases, then the checker."""
        out = self.work / f"out_{tag}"
        shutil.rmtree(out, ignore_errors=True)
        errors = []
        for sub in only:
            rc, log = run([str(driver), str(self.cases), str(out), "--only", sub],
                          env=dict(os.environ, ASAN_OPTIONS="detect_leaks=0"))
            if rc != 0:
                bad = [ln for ln in log.splitlines()
                       if "error" in ln.lower() or "racecheck" in ln or "runtime error" in ln]
                errors.append((bad or [f"driver exit {rc}"])[0][:1200])
        if errors:
            return False, errors[0]
        rc, log = run([self.python, "-m", "gsrender.testing.check", str(out), "--quiet"],
                      env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if rc == 0:
            return True, ""
        fails = [ln for ln in log.splitlines() if ln.startswith("FAIL")]
        summary = log.strip().splitlines()[-1] if log.strip() else f"checker exit {rc}"
        return False, f"{summary}; first: {fails[0][:300] if fails else '?'}"

    def mutate(self, m: Mutant | None) -> None:
        """Restores every copied source, then applies m (None: the unmutated sources)."""
        for rel in {mm.path for mm in MUTANTS}:
            shutil.copyfile(ROOT / rel, self.src / rel)
        if m is not None:
            f = self.src / m.path
            f.write_text(apply(f.read_text(), m))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=str(ROOT / "build/kernel_cases"),
                    help="the standard case set (python -m gsrender.testing.make_cases DIR)")
    ap.add_argument("--work", default=str(ROOT / "build/kernel_mutants"))
    ap.add_argument("--only", default="", help="only mutants whose name matches this regex")
    ap.add_argument("--list", action="store_true", help="print the mutants and exit")
    ap.add_argument("--json", default=None, help="also write the verdicts to this JSON file")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if re.search(args.only, m.name)]
    if args.list:
        for m in chosen:
            extra = "  (+ race check)" if m.race else "  (+ ASan)" if m.asan else ""
            print(f"{m.name:45s} {m.path}{extra}")
        return 0
    for m in MUTANTS:  # a stale list fails before any build
        apply((ROOT / m.path).read_text(), m)
    cases = Path(args.cases)
    if not cases.is_dir():
        print(f"kernel_mutants: no case set at {cases}", file=sys.stderr)
        return 2
    bench = Bench(Path(args.work).resolve(), cases.resolve(), sys.executable)
    t0 = time.time()
    # the unmutated sources must pass every subset the mutants use (else a kill means nothing)
    bench.mutate(None)
    kinds = ["plain"] + [k for k in ("race", "asan") if any(getattr(m, k) for m in chosen)]
    for kind in kinds:
        subsets = tuple(sorted({s for m in chosen if kind == "plain" or getattr(m, kind)
                                for s in m.only}))
        ok, why = bench.run_cases(bench.build(kind), subsets, f"base_{kind}")
        if not ok:
            print(f"kernel_mutants: the unmutated kernels fail ({kind} build): {why}",
                  file=sys.stderr)
            return 1
    print(f"baseline: the unmutated sources pass ({', '.join(kinds)}; "
          f"{time.time() - t0:.0f} s)", flush=True)
    baseline_s = time.time() - t0
    survivors, verdicts = [], []
    for m in chosen:
        t1 = time.time()
        bench.mutate(m)
        killed_by = []
        for kind in ["plain"] + [k for k in ("race", "asan") if getattr(m, k)]:
            ok, why = bench.run_cases(bench.build(kind), m.only, f"mutant_{kind}")
            if not ok:
                killed_by.append(f"{kind} build: {why}")
        verdict = "KILLED  " if killed_by else "SURVIVED"
        if not killed_by:
            survivors.append(m.name)
        verdicts.append({"name": m.name, "path": m.path, "killed_by": killed_by,
                         "seconds": round(time.time() - t1, 1)})
        print(f"{verdict} {m.name} ({time.time() - t1:.0f} s)", flush=True)
        for k in killed_by:
            print(f"         {k}", flush=True)
    bench.mutate(None)
    n = len(chosen)
    print(f"mutation score: {n - len(survivors)}/{n} killed"
          + (f"; survivors: {', '.join(survivors)}" if survivors else "")
          + f" ({time.time() - t0:.0f} s)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "cases": str(cases), "n_cases": len([d for d in cases.iterdir() if d.is_dir()]),
            "baseline_s": round(baseline_s, 1), "total_s": round(time.time() - t0, 1),
            "killed": n - len(survivors), "mutants": verdicts}, indent=1) + "\n")
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
