"""The table of benches/dp_shift.sh: per data set, the non-DP fit, the default (K = 3 at
ε_T = 1) and the private choice (ε_fit + ε_sel = 1), each run's chosen K, the chosen model's
Recall@20 against the non-DP fit's and against the best K of the same noisy matrix chosen
non-privately on the test users, with means and standard errors over the runs.

Usage: python3 benches/dp_shift_report.py OUT_DIR
"""
import glob
import json
import math
import os
import sys


def mean_se(xs):
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    v = sum((x - m) ** 2 for x in xs) / (n - 1)
    return m, math.sqrt(v / n)


out = sys.argv[1]
for ds in ("ml-1m-implicit", "ml-1m-implicit-catalogue", "netflix"):
    pub = os.path.join(out, f"{ds}-public.json")
    if not os.path.exists(pub):
        continue
    p = json.load(open(pub))["recall20"]
    grid = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"{ds}-grid-*.json")))]
    dflt = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, f"{ds}-default-*.json")))]
    print(f"## {ds}: non-DP Recall@20 {p:.4f}")
    print("| run | chosen K | λ used | Recall@20 (chosen) | ratio to non-DP | best K on test users | its Recall@20 | chosen / best | K=3 of the same matrix | eps_T |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for k, j in enumerate(grid, 1):
        ev = j["grid_test_evaluation"]
        best = max(ev, key=lambda e: e["recall20"])
        k3 = next((e["recall20"] for e in ev if e["shift"] == 3.0), float("nan"))
        rows.append((j["recall20"], best["recall20"], k3))
        print(f"| {k} | {j['dp_shift_chosen']:g} | {j['l2_used']:,.0f} | {j['recall20']:.4f} ± {j['recall20_se']:.4f} | "
              f"{j['recall20'] / p:.3f} | {best['shift']:g} | {best['recall20']:.4f} | {j['recall20'] / best['recall20']:.3f} | "
              f"{k3:.4f} | {j['fit_total_epsilon']:.4f} |")
    if rows:
        c, b, k3 = (mean_se([r[i] for r in rows]) for i in range(3))
        print(f"| mean ± s.e. over {len(rows)} runs | | | {c[0]:.4f} ± {c[1]:.4f} | {c[0] / p:.3f} ± {c[1] / p:.3f} | | "
              f"{b[0]:.4f} ± {b[1]:.4f} | {c[0] / b[0]:.3f} | {k3[0]:.4f} ± {k3[1]:.4f} | |")
    if dflt:
        d = mean_se([j["recall20"] for j in dflt])
        print(f"\nthe default (--dp-epsilon 1, K = 3), {len(dflt)} runs: Recall@20 "
              + ", ".join(f"{j['recall20']:.4f}" for j in dflt)
              + f"; mean {d[0]:.4f} ± {d[1]:.4f} (ratio {d[0] / p:.3f})")
    print()
