"""Compares a driver's result cases with the stored CPU outputs:
``python -m gsrender.testing.check OUT_DIR [--expected CASES_DIR]``.

OUT_DIR holds result cases (tools/kernel_driver, or gsrender.testing.echo): each has an
``outputs`` section and, in its meta, the status the driver reported ("ok", "skipped: why" or
"error: why"). The expected arrays and comparison rules come from the case of the same name in
CASES_DIR (default: the ``source`` folder the result names). Prints one line per case and a
summary; exit code 1 when any case fails (an error, a missing output or a rule not met) or no
case was found. A skipped case (e.g. a Tensor Core case on a GPU older than sm_80) fails unless
``--allow-skip`` is given. With ``--expected`` the results must cover that whole set, and the set
fails when its longest tile list fits in two chunks (tile_lists.MIN_CHUNKS).

Rules (per expected array; gsrender.testing.make_cases sets them per precision):
  value  err = max |out − exp| / max |exp| (per channel, the last axis, with per_channel) must
         be ≤ tol; with ``outliers`` (a fraction), that many elements may exceed tol as long as
         all stay within tol_max (the 3DGS early stop, or one Gaussian's α crossing the 1/255
         cut, flipping on a pixel); the verdict counts them.
  grad   cosine(out, exp) ≥ cos and | ‖out‖ / ‖exp‖ − 1 | ≤ norm; an all-zero expectation needs
         an all-zero output (≤ 1e-12). ``channels`` (bars {cos, norm}): the same per channel
         (the last axis); ``groups``: the same per group of Gaussians by list position
         (tile_lists.gaussian_groups over the case's tile_offsets / flatten_ids; the rows of a
         [C, N, ...] array), and exactly 0 for a Gaussian in no list.
  exact  integer arrays equal, up to a fraction max_mismatch of the elements.
Every rule first requires the shape and dtype of the expected array and finite values (the
driver pre-fills every output a kernel must write with NaN bits, so an unwritten one fails).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gsrender.testing.case import list_cases, read_case
from gsrender.testing.tile_lists import CHUNK, GROUP_NAMES, MIN_CHUNKS, UNLISTED, gaussian_groups, list_stats

LIST_INPUTS = ("means2d", "tile_offsets", "flatten_ids")


@dataclass
class Verdict:
    ok: bool
    detail: str  # the worst metric, e.g. "render err 3.1e-04 <= 3e-03"
    cos: float = 1.0  # a gradient rule's cosine (picks the worst of several)


def _norm_err(out: np.ndarray, exp: np.ndarray, per_channel: bool) -> np.ndarray:
    """|out − exp| / max |exp| elementwise (the scale per last-axis channel with per_channel)."""
    diff = np.abs(out - exp)
    if per_channel and exp.ndim >= 1 and exp.size:
        scale = np.abs(exp).reshape(-1, exp.shape[-1]).max(0)
    else:
        scale = np.abs(exp).max() if exp.size else 1.0
    scale = np.where(scale > 0, scale, 1.0)
    return diff / scale


def _grad_verdict(name: str, o: np.ndarray, e: np.ndarray, cos_min: float,
                  norm_tol: float) -> Verdict:
    """cosine(o, e) ≥ cos_min and | ‖o‖ / ‖e‖ − 1 | ≤ norm_tol; an all-zero expectation needs an
    all-zero output (≤ 1e-12)."""
    ne, no = float(np.linalg.norm(e)), float(np.linalg.norm(o))
    if ne == 0.0:
        worst = float(np.abs(o).max()) if o.size else 0.0
        return Verdict(worst <= 1e-12, f"{name} expected 0, max |out| {worst:.1e}")
    cos = float(np.dot(o.ravel(), e.ravel()) / (ne * no)) if no > 0 else 0.0
    ratio = no / ne - 1.0
    ok = cos >= cos_min and abs(ratio) <= norm_tol
    return Verdict(ok, f"{name} cos {cos:.6f} (>= {cos_min}), norm {ratio:+.1e}", cos)


def _worst(verdicts) -> Verdict:
    """The first failing verdict, else the one with the lowest cosine."""
    verdicts = list(verdicts)
    failed = [v for v in verdicts if not v.ok]
    return failed[0] if failed else min(verdicts, key=lambda v: v.cos)


def compare_array(name: str, out: np.ndarray, exp: np.ndarray, rule: dict,
                  groups: np.ndarray | None = None) -> Verdict:
    if out.shape != exp.shape:
        return Verdict(False, f"{name} shape {list(out.shape)} != expected {list(exp.shape)}")
    if out.dtype != exp.dtype:
        return Verdict(False, f"{name} dtype {out.dtype} != expected {exp.dtype}")
    kind = rule["kind"]
    if kind == "exact":
        bad = int(np.count_nonzero(out != exp))
        frac = bad / max(out.size, 1)
        ok = frac <= rule.get("max_mismatch", 0.0)
        return Verdict(ok, f"{name} {bad}/{out.size} differ")
    o, e = out.astype(np.float64), exp.astype(np.float64)
    if not np.isfinite(o).all():
        return Verdict(False, f"{name} has {int(np.count_nonzero(~np.isfinite(o)))} non-finite")
    if kind == "value":
        err = _norm_err(o, e, rule.get("per_channel", False))
        worst = float(err.max()) if err.size else 0.0
        tol = rule["tol"]
        if "outliers" in rule:
            over = int(np.count_nonzero(err > tol))
            ok = over <= rule["outliers"] * err.size and worst <= rule["tol_max"]
            return Verdict(ok, f"{name} err {worst:.1e} ({over} > {tol:.0e}, "
                               f"max {rule['tol_max']:.0e})")
        return Verdict(worst <= tol, f"{name} err {worst:.1e} (tol {tol:.0e})")
    if kind == "grad":
        verdicts = [_grad_verdict(name, o, e, rule["cos"], rule["norm"])]
        if "channels" in rule:  # per channel (the last axis)
            bars = rule["channels"]
            verdicts.append(_worst(_grad_verdict(f"{name}[..., {d}]", o[..., d], e[..., d],
                                                 bars["cos"], bars["norm"])
                                   for d in range(e.shape[-1])))
        if "groups" in rule and groups is not None:  # per group of Gaussians (rows)
            bars = rule["groups"]
            rows_o, rows_e = o.reshape(groups.size, -1), e.reshape(groups.size, -1)
            verdicts += [_grad_verdict(f"{name}[{label}]", rows_o[groups == g],
                                       rows_e[groups == g], bars["cos"], bars["norm"])
                         for g, label in GROUP_NAMES.items() if np.any(groups == g)]
            unlisted = rows_o[groups == UNLISTED]
            worst = float(np.abs(unlisted).max()) if unlisted.size else 0.0
            verdicts.append(Verdict(worst == 0.0, f"{name}[unlisted] max |out| {worst:.1e}"))
        worst = _worst(verdicts[1:]) if len(verdicts) > 1 else verdicts[0]
        if not verdicts[0].ok or worst is verdicts[0]:
            return verdicts[0]
        return Verdict(worst.ok, f"{verdicts[0].detail}; worst part {worst.detail}", worst.cos)
    raise ValueError(f"{name}: unknown rule kind {kind!r}")


def _groups(src: Path) -> np.ndarray | None:
    """The case's Gaussians grouped by list position (tile_lists.gaussian_groups), when its
    inputs hold binning's arrays."""
    lists = read_case(src, sections=("inputs",), names=LIST_INPUTS).arrays["inputs"]
    if set(lists) != set(LIST_INPUTS):
        return None
    C, N = lists["means2d"].shape[:2]
    return gaussian_groups(lists["tile_offsets"], lists["flatten_ids"], C * N)


def check_case(result_dir: Path, expected_root: Path | None) -> tuple[str, str]:
    """-> (status PASS / FAIL / SKIP, detail) for one result case."""
    res = read_case(result_dir, sections=("outputs",))
    status = res.meta.get("status", "ok")
    if status.startswith("skipped"):
        return "SKIP", status
    if status != "ok":
        return "FAIL", status
    src = expected_root / res.name if expected_root else Path(res.meta.get("source", ""))
    try:
        exp = read_case(src, sections=("expected",))
        groups = _groups(src) if any("groups" in r for r in exp.compare.values()) else None
    except (FileNotFoundError, ValueError) as e:
        return "FAIL", f"expected case: {e}"
    if exp.kernel != res.kernel:
        return "FAIL", f"kernel {res.kernel!r} != expected case's {exp.kernel!r}"
    verdicts = []
    for name, rule in exp.compare.items():
        if name not in res.arrays["outputs"]:
            verdicts.append(Verdict(False, f"{name} missing"))
            continue
        verdicts.append(compare_array(name, res.arrays["outputs"][name],
                                      exp.arrays["expected"][name], rule, groups))
    for flag, value in res.meta.get("checks", {}).items():  # e.g. deterministic repeat
        verdicts.append(Verdict(bool(value), f"{flag} {value}"))
    if not verdicts:
        return "FAIL", "nothing compared"
    failed = [v for v in verdicts if not v.ok]
    shown = failed if failed else verdicts
    return ("FAIL" if failed else "PASS"), "; ".join(v.detail for v in shown[:3])


def longest_list(cases_dir: Path) -> tuple[int, str]:
    """The longest tile list over the raster cases of a set (entries, case name)."""
    best = (0, "")
    for p in list_cases(cases_dir):
        lists = read_case(p, sections=("inputs",), names=LIST_INPUTS).arrays["inputs"]
        if "tile_offsets" in lists:
            best = max(best, (list_stats(lists["tile_offsets"],
                                         lists["flatten_ids"].size).longest, p.name))
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gsrender.testing.check",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", help="folder of result cases")
    ap.add_argument("--expected", default=None, help="folder of the input cases, a whole set "
                    "(default: each result's recorded source)")
    ap.add_argument("--allow-skip", action="store_true", help="a case the driver skipped "
                    "(e.g. Tensor Core cases before sm_80) does not fail")
    ap.add_argument("--quiet", action="store_true", help="print failing cases and the summary")
    args = ap.parse_args(argv)
    results = list_cases(args.out_dir)
    expected_root = Path(args.expected) if args.expected else None
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    if expected_root is not None:  # an input case without a result is a failure too
        names = {p.name for p in results}
        for p in list_cases(expected_root):
            if p.name not in names:
                counts["FAIL"] += 1
                print(f"FAIL {p.name}: no result")
    for r in results:
        try:
            status, detail = check_case(r, expected_root)
        except (ValueError, KeyError, OSError) as e:
            status, detail = "FAIL", f"unreadable result: {e}"
        if status == "SKIP" and not args.allow_skip:
            status, detail = "FAIL", f"{detail} (a skip fails without --allow-skip)"
        counts[status] += 1
        if not args.quiet or status == "FAIL":
            print(f"{status} {r.name}: {detail}")
    total = sum(counts.values())
    set_ok = True
    if expected_root is not None:  # a whole set must reach past the kernels' second chunk
        longest, where = longest_list(expected_root)
        set_ok = longest > (MIN_CHUNKS - 1) * CHUNK
        print(f"{'set' if set_ok else 'FAIL set'}: longest tile list {longest} entries "
              f"({where or 'no raster case'}; needs > {(MIN_CHUNKS - 1) * CHUNK})")
    print(f"summary: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
          f"of {total}")
    return 0 if counts["FAIL"] == 0 and total > 0 and set_ok else 1


if __name__ == "__main__":
    sys.exit(main())
