"""VODA as its description reads, one factor at a time, on the trained-model scenes of
studies/voda/trained.py (same scenes, protocol and paired streams), with the oracle, the removal
error on surfaces a training view saw, the multi-view agreement readout and the diagnostics.

    python studies/voda/faithful.py --quick --out out/voda_faithful_quick       # CI size
    python studies/voda/faithful.py --size small --out out/voda_faithful_tune 0 1
    python studies/voda/faithful.py --size full --splits isolated occluding --out DIR SEEDS...
    python studies/voda/faithful.py --out DIR --resume A/results.partial.json B/... SEEDS...

Rows (each a one-factor change from the row it is paired with):
  oracle              the true (derived) object set removed: the reference the gate needs (not
                      a strict floor: some derived members are better left in)
  gg, grouping, vote  the baselines (studies/voda/trained.py)
  gg+voda             VODA with the frozen defaults (FROZEN: ray-depth clustering)
  gg+voda[before]     VODA as it was before the freeze (chained mean-depth gaps)
  gg+voda[TAG]        one factor of VODA changed (trained.VARIANTS): rendered, α-floor, scaled,
                      obj-edges; [faithful] all five of the description's choices; the tuning
                      rows the freeze was decided on (TUNING_ROWS) stay runnable
  X[agree]            every row above read out with the multi-view agreement rule
                      (gsrender.voda.agreement): a separate readout, not part of any method
Columns: nRDE and RDE as today, and nRDE-seen / RDE-seen on the held-out pixels whose exposed
surface a training view saw (gsrender.voda.seen). Diagnostics: where each baseline's missed
Gaussians sit (training-view contribution quartile of the true set, hidden share), and the
share of each +VODA row's added Gaussians its target reached past the renderer's stop.

Seeds: the defaults were frozen on TUNING_SEEDS (isolated and occluding) before any of
EVAL_SEEDS ran; the evaluation runs EVAL_METHODS:

    python studies/voda/faithful.py --size headroom --splits isolated occluding \
        --methods oracle gg gg+voda "gg+voda[before]" grouping grouping+voda vote \
        --out out/voda_faithful 3000 3001 3002 3003 3004
Writes DIR/results.json and DIR/results.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gsrender.bench.measure import env_block, fmt_ci, mean_ci95
from gsrender.io import atomic
from gsrender.voda import metrics as M
from gsrender.voda.agreement import label_shares
from gsrender.voda.baselines import OracleBaseline
from gsrender.voda.diagnostics import added_past_stop, missed_profile
from gsrender.voda.evaluate import evaluate, selections
from gsrender.voda.loss import VodaConfig
from gsrender.voda.seen import seen_surface
from studies import scenes as T
from studies.voda.trained import PROTOCOL, QUICK, Scene, base_name, scene_row

TUNING_SEEDS = (0, 1)
EVAL_SEEDS = (3000, 3001, 3002, 3003, 3004)  # disjoint from trained.py's, never run before
# the defaults frozen on the tuning rows (studies/voda/REPORT.md, "The freeze")
FROZEN = {"clustering": "ray"}
# one-factor rows against gg+voda (VODA with the frozen defaults): VODA as it was before the
# freeze, the switches not frozen, and all five of the description's choices
VODA_ROWS = tuple(f"gg+voda[{t}]" for t in ("before", "rendered", "α-floor", "scaled", "obj-edges",
                                            "faithful"))
# the rows the freeze was decided on (the tuning file): under the frozen defaults some of them run
# the same VODA as gg+voda
TUNING_ROWS = tuple(f"gg+voda[{t}]" for t in ("rendered", "ray", "rendered+ray", "α-floor",
                                              "scaled", "obj-edges", "faithful"))
METHODS = ("oracle", "gg", "gg+voda", *VODA_ROWS, "grouping", "grouping+voda", "vote")
# the evaluation seeds' rows: VODA as frozen and as before, over both baselines (the other
# one-factor rows are the tuning file's; the shared 2-core machine fits these)
EVAL_METHODS = ("oracle", "gg", "gg+voda", "gg+voda[before]", "grouping", "grouping+voda", "vote")
QUICK_METHODS = ("oracle", "gg", "gg+voda", *VODA_ROWS)
KNOWN = tuple(dict.fromkeys((*METHODS, *TUNING_ROWS)))
AGREE = "[agree]"
METRICS = ("nrde", "nrde_seen", "rde_raw", "rde_seen", "gaussian_iou", "recall_q1", "miou")
HEADERS = ("nRDE", "nRDE-seen", "RDE", "RDE-seen", "G-IoU*", "rec-Q1*", "mIoU")
MISSED = ("missed", "missed_q1", "missed_q2", "missed_q3", "missed_q4", "missed_hidden")
ADDED = ("added", "added_past_stop", "added_past_stop_only")


def pairs(methods) -> list[tuple[str, str]]:
    """(row, the row it differs from by one factor)."""
    out = []
    for m in methods:
        if "+voda[" in m:
            out.append((m, "gg+voda"))
        elif "+voda" in m:
            out.append((m, base_name(m)))
    out += [(m + AGREE, m) for m in methods]
    if "oracle" in methods:
        out += [(m, "oracle") for m in ("gg", "grouping") if m in methods]
    return out


def _mean(rows: list[dict]) -> dict:
    return {k: sum(r[k] for r in rows) / len(rows) for k in rows[0]}


def scene_methods(ts: T.TrainedScene, p: dict, methods, keep: dict | None = None) -> dict:
    """Every row of one scene: metrics, its [agree] readout, and the diagnostics. keep: a dict to
    receive each row's selection per object (method -> [bool [N] per object 1..n])."""
    sc = Scene(ts, VodaConfig(**p["voda"]))
    te, tr, n = ts.test, ts.train, ts.n_objects
    sc.ev.seen = {k: seen_surface(*sc.ev.expected[k], te.viewmats, te.Ks, tr.viewmats, tr.Ks,
                                  tr.depth, tr.alpha) for k in range(1, n + 1)}
    shares, truncated = label_shares(sc.views, n + 1)
    contrib = M.contributions(ts.model, tr.viewmats, tr.Ks, ts.width, ts.height)
    hidden = M.hidden_mask(contrib)
    objects = list(range(1, n + 1))
    out, sel, members = {}, {}, {}
    for m in methods:
        t0 = time.perf_counter()
        if m == "oracle":
            b, res = OracleBaseline(ts.model.object_ids, n + 1), None
        else:
            b, res = sc.train(m, p)
        out[m] = {**evaluate(ts.model, b, sc.ev), "iter_ms": res["iter_ms"] if res else 0.0}
        out[m + AGREE] = evaluate(ts.model, b, sc.ev, readout=shares)
        sel[m] = selections(b, objects)
        if res is not None and "members" in res:
            members[m] = res["members"]
        elif m != "oracle":
            out[m].update(_mean([missed_profile(s, ts.model.object_ids == k, contrib, hidden)
                                 for k, s in zip(objects, sel[m])]))
        print(f"  {m}: {time.perf_counter() - t0:.0f} s", flush=True)
    if keep is not None:
        keep.update(sel)
    for m, mem in members.items():
        b = base_name(m)
        if b in sel:
            out[m].update(_mean([added_past_stop(sb, sv, mem)
                                 for sb, sv in zip(sel[b], sel[m])]))
    return {"methods": out, "readout_truncated_pixels": truncated,
            "hidden_share": {k: float(hidden[ts.model.object_ids == k].float().mean()) for k in objects},
            "seen_share": _mean([{"s": float(sc.ev.seen[k][te.labels == k].float().mean())}
                                 for k in objects])["s"]}


def summarise(rows: list[dict], methods) -> dict:
    """Means ± 95 % intervals over the scenes that ran each row (runs combined with --resume may
    hold different rows); a paired difference over the scenes that ran both of its rows."""
    names = [x for m in methods for x in (m, m + AGREE)]
    ci = lambda xs: list(mean_ci95(xs))
    has = lambda *ms: [r for r in rows if all(m in r["methods"] for m in ms)]
    out = {"n": len(rows), "methods": {}, "delta": {}, "diagnostics": {}, "scenes": {}}
    for m in names:
        rs = has(m)
        if not rs:
            continue
        out["scenes"][m] = len(rs)
        out["methods"][m] = {k: ci([r["methods"][m][k] for r in rs]) for k in METRICS}
        keys = [k for k in (*MISSED, *ADDED) if k in rs[0]["methods"][m]]
        if keys:
            out["diagnostics"][m] = {k: ci([r["methods"][m][k] for r in rs]) for k in keys}
    for a, b in pairs(methods):
        rs = has(a, b)
        if rs:
            out["scenes"][f"{a} − {b}"] = len(rs)
            out["delta"][f"{a} − {b}"] = {
                k: ci([r["methods"][a][k] - r["methods"][b][k] for r in rs]) for k in METRICS}
    out["seen_share"] = ci([r["seen_share"] for r in rows])
    # the premise: the share of the object Gaussians hidden from every training view (mean over
    # a scene's objects), and the baselines' recall of the lowest-contribution quartile (rec-Q1)
    hid = [[v["hidden_share"] for k, v in r["scene"]["trained"].items() if k.startswith("object_")]
           for r in rows]
    if all(hid):
        out["hidden_share_objects"] = ci([sum(h) / len(h) for h in hid])
    splits = sorted({r["scene"]["split"] for r in rows})
    if len(splits) > 1:  # nRDE per split: the headroom may differ between them
        out["by_split"] = {sp: {m: ci([r["methods"][m]["nrde"] for r in rs])
                                for m in methods if (rs := [r for r in has(m)
                                                          if r["scene"]["split"] == sp])}
                           for sp in splits}
    return out


def gate(summary: dict) -> str | None:
    """The claim's precondition: the oracle beats gg by more than the interval (ΔnRDE gg −
    oracle > 0 with its 95 % interval), else no removal method has room to beat gg."""
    d = summary["delta"].get("gg − oracle")
    if d is None:
        return None
    m, c = d["nrde"]
    ok = c == c and m - c > 0  # one scene (nan interval) cannot pass
    return (f"Gate (oracle beats gg beyond the interval): ΔnRDE gg − oracle {fmt_ci(d['nrde'])}: "
            f"{'passes' if ok else 'does not pass'}.")


def markdown(res: dict) -> str:
    s = res["summary"]
    lines = [f"# VODA, one factor at a time ({res['size']}, {s['n']} scenes: splits "
             f"{', '.join(res['splits'])}, seeds {', '.join(map(str, res['seeds']))})", "",
             "Mean ± 95 % interval over scenes. -seen: on the held-out pixels whose exposed "
             f"surface a training view saw ({fmt_ci(s['seen_share'])} of the objects' pixels). "
             "*: against the derived ids. [agree]: the multi-view agreement readout."
             + (f" Object Gaussians hidden from every training view: "
                f"{fmt_ci(s['hidden_share_objects'])} (share, mean over a scene's objects)."
                if "hidden_share_objects" in s else ""), "",
             *([gate(s), ""] if gate(s) else []),
             "| row | " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * len(HEADERS)]
    name = lambda m: m if s.get("scenes", {}).get(m, s["n"]) == s["n"] else (
        f"{m} ({s['scenes'][m]} scenes)")
    for m, v in s["methods"].items():
        lines.append(f"| {name(m)} | " + " | ".join(fmt_ci(v[k]) for k in METRICS) + " |")
    lines += ["", "| paired difference | " + " | ".join(f"Δ{h}" for h in HEADERS) + " |",
              "|---|" + "---:|" * len(HEADERS)]
    for d, v in s["delta"].items():
        lines.append(f"| {name(d)} | " + " | ".join(fmt_ci(v[k]) for k in METRICS) + " |")
    if "by_split" in s:
        sp = list(s["by_split"])
        lines += ["", "nRDE by split:", "", "| row | " + " | ".join(sp) + " |",
                  "|---|" + "---:|" * len(sp)]
        lines += [f"| {m} | " + " | ".join(fmt_ci(s["by_split"][x][m]) if m in s["by_split"][x]
                                           else "–" for x in sp) + " |"
                  for m in dict.fromkeys(m for x in sp for m in s["by_split"][x])]
    for title, keys in (("Missed Gaussians of the true set: count per object, shares by "
                         "training-view contribution quartile (q1 lowest) and hidden", MISSED),
                        ("Gaussians VODA adds to its baseline's selection (per object) and the "
                         "share its target reached past the renderer's stop (only there)", ADDED)):
        rows = {m: v for m, v in s["diagnostics"].items() if keys[0] in v}
        if rows:
            lines += ["", title + ":", "", "| row | " + " | ".join(keys) + " |",
                      "|---|" + "---:|" * len(keys)]
            lines += [f"| {m} | " + " | ".join(fmt_ci(v[k]) for k in keys) + " |"
                      for m, v in rows.items()]
    lines += ["", "| scene | hidden share (objects) | PSNR test |", "|---|---|---:|"]
    for r in res["rows"]:
        sc = r["scene"]
        hid = ", ".join(f"{v['hidden_share']:.3f} ({v['gaussians']})"
                        for k, v in sc["trained"].items() if k.startswith("object_"))
        lines.append(f"| {sc['split']} {sc['seed']} | {hid} | {sc['psnr_test']:.2f} |")
    return "\n".join(lines) + "\n"


def command(res: dict) -> str:
    """The command line that wrote `res` (the rows of --resume runs included)."""
    methods = res.get("methods") or [m for m in res["summary"]["methods"] if not m.endswith(AGREE)]
    quote = lambda m: f'"{m}"' if "[" in m else m
    return (f"python studies/voda/faithful.py --size {res['size']} --splits {' '.join(res['splits'])}"
            f" --methods {' '.join(map(quote, methods))} --out DIR -- {' '.join(map(str, res['seeds']))}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("seeds", nargs="*", type=int, help=f"scene seeds (default {TUNING_SEEDS})")
    ap.add_argument("--quick", action="store_true", help="CI: quick size, seed 0, few rows")
    ap.add_argument("--size", choices=tuple(T.SIZES), default="small")
    ap.add_argument("--splits", nargs="+", default=["isolated"])
    ap.add_argument("--methods", nargs="+", default=None,
                    help="rows: METHODS (default), EVAL_METHODS or TUNING_ROWS")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--scenes", type=Path, default=Path("out/trained_scenes"))
    ap.add_argument("--resume", type=Path, nargs="+", default=(), metavar="PARTIAL",
                    help="reuse the scenes of earlier runs' results.partial.json files (same "
                         "methods): separate processes per scene, one summary")
    args = ap.parse_args(argv)
    p = QUICK if args.quick else PROTOCOL
    size = "quick" if args.quick else args.size
    seeds = args.seeds or ([TUNING_SEEDS[0]] if args.quick else list(TUNING_SEEDS))
    methods = tuple(args.methods or (QUICK_METHODS if args.quick else METHODS))
    bad = [m for m in methods if m not in KNOWN]
    if bad:
        raise SystemExit(f"--methods: unknown {bad}; choose from {KNOWN}")
    args.out.mkdir(parents=True, exist_ok=True)
    done = {(r["scene"]["split"], r["scene"]["seed"]): r
            for path in args.resume for r in json.loads(path.read_text())["rows"]}
    rows, t0 = [], time.perf_counter()
    for split in args.splits:
        for seed in seeds:
            if (split, seed) in done:
                rows.append(done[(split, seed)])
                continue
            print(f"{split} {seed}", flush=True)
            t1 = time.perf_counter()
            ts = T.load_or_train(size, seed, split, root=args.scenes, progress=False)
            print(f"  scene: {time.perf_counter() - t1:.0f} s", flush=True)
            rows.append({"scene": scene_row(ts), **scene_methods(ts, p, methods)})
            atomic.write_text(args.out / "results.partial.json",
                              json.dumps({"rows": rows}, default=float))
    res = {"size": size, "splits": args.splits, "seeds": seeds, "methods": methods, "protocol": p,
           "voda_config": asdict(VodaConfig(**p["voda"])), "tuning_seeds": TUNING_SEEDS,
           "eval_seeds": EVAL_SEEDS, "env": env_block(), "seconds": time.perf_counter() - t0,
           "rows": rows, "summary": summarise(rows, methods)}
    # the runs combined here: their wall time and machine load (beside results.partial.json)
    parts = [json.loads(q.read_text()) for q in (r.parent / "results.json" for r in args.resume)
             if q.is_file()]
    if parts:
        res["parts"] = [{"seeds": r["seeds"], "splits": r["splits"], "seconds": r["seconds"],
                         "env": r["env"]} for r in parts]
    atomic.write_text(args.out / "results.json", json.dumps(res, indent=1, default=float))
    (args.out / "results.md").write_text(markdown(res))
    print(markdown(res))
    print(f"total {res['seconds']:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
