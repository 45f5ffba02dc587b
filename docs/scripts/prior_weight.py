"""Choose a prior's weight W on calibration users and measure it on evaluation users.

Reads the per-user rows (chunks/users-*.csv) of `recsel select` runs that differ only in
`--prior popularity:W` (one folder per W, `none` for no prior), splits the test users at random
(seed 0) into two halves — calibration and evaluation — and for each (mechanism, eps) picks the W
with the highest mean hit@1 on the calibration half. It prints, on the evaluation half only: hit@1
without a prior, the chosen W, hit@1 with it, and the paired difference, each with its standard
error (over users), and the baselines given with --baseline NAME=FOLDER (a run whose hit@1 column
is read the same way; the tuned prior is also compared, paired, with the first of them).

    python docs/scripts/prior_weight.py --run none=out/prior-none --run 0.5=out/prior-0.5 ... \
        --baseline "most popular (0-DP)"=out/popular-1
"""

import argparse
import glob
import math
import os

import numpy as np
import polars as pl


def rows(folder):
    files = sorted(glob.glob(os.path.join(folder, "chunks", "users-*.csv")))
    frames = [pl.read_csv(f, infer_schema_length=None) for f in files]
    frames = [f.with_columns(pl.exclude("user").cast(pl.Float64)) for f in frames]
    return pl.concat(frames).sort("user")


def mean_se(x):
    return float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(len(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", action="append", required=True, help="W=FOLDER (W 'none': no prior)")
    ap.add_argument("--baseline", action="append", default=[], help="NAME=FOLDER")
    a = ap.parse_args()
    runs = {}
    for r in a.run:
        w, folder = r.split("=", 1)
        runs[w] = rows(folder)
    users = runs["none"]["user"].to_numpy()
    for w, t in runs.items():
        assert (t["user"].to_numpy() == users).all(), f"run {w} has other users"
    perm = np.random.default_rng(0).permutation(len(users))
    cal = np.zeros(len(users), bool)
    cal[perm[: len(users) // 2]] = True
    ev = ~cal
    cols = [c for c in runs["none"].columns if c.startswith("hit_")]
    baselines = []
    for b in a.baseline:
        name, folder = b.split("=", 1)
        t = rows(folder)
        assert (t["user"].to_numpy() == users).all(), f"baseline {name} has other users"
        c = [c for c in t.columns if c.startswith("hit_")][0]
        baselines.append((name, t[c].to_numpy()))
    print(f"{len(users)} users: {cal.sum()} calibration, {ev.sum()} evaluation")
    vs = f" | with prior − {baselines[0][0]}" if baselines else ""
    print(f"| mechanism | eps | no prior | W (calibration) | with prior | difference{vs} |")
    print("|---|---:|---:|---:|---:|---:|" + ("---:|" if baselines else ""))
    for c in cols:
        _, mech, eps = c.split("_")
        eps = eps.removeprefix("eps")
        best = max(runs, key=lambda w: runs[w][c].to_numpy()[cal].mean())
        base = runs["none"][c].to_numpy()[ev]
        tuned = runs[best][c].to_numpy()[ev]
        m0, s0 = mean_se(base)
        m1, s1 = mean_se(tuned)
        md, sd = mean_se(tuned - base)
        cell = ""
        if baselines:
            mb, sb = mean_se(tuned - baselines[0][1][ev])
            cell = f" {mb:+.4f} ± {sb:.4f} |"
        print(f"| {mech} | {eps} | {m0:.4f} ± {s0:.4f} | {best} | {m1:.4f} ± {s1:.4f} "
              f"| {md:+.4f} ± {sd:.4f} |{cell}")
    print()
    print("Every W on the evaluation users (hit@1):")
    print("| mechanism | eps | " + " | ".join(f"W = {w}" for w in runs) + " |")
    print("|---|---:|" + "---:|" * len(runs))
    for c in cols:
        _, mech, eps = c.split("_")
        cells = [f"{runs[w][c].to_numpy()[ev].mean():.4f}" for w in runs]
        print(f"| {mech} | {eps.removeprefix('eps')} | " + " | ".join(cells) + " |")
    for name, hit in baselines:
        m, s = mean_se(hit[ev])
        print(f"baseline {name}: hit@1 {m:.4f} ± {s:.4f} (evaluation users)")


if __name__ == "__main__":
    main()
