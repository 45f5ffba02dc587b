#!/usr/bin/env python3
"""Tables of the whole private pipeline against today's (docs/results.md, "Whole private
pipeline") from the files benches/private_pipeline.sh writes into OUT: per ε_T and serving ε, the
test hit@1 of the tuned row each release serves (`recsel evaluate --model`'s row "krr, tuned on
calibration users"), public against private, their ratio; the free baselines, the non-private
top-1 of each model and the limit; each registry mechanism's served row; and the privacy report
totals of every release (`recsel privacy --model --json`).

Standard errors are over the test users. The private pipeline's tuning is random: with several
selection seeds its hit@1 is the mean over seeds, ± the mean of their standard errors, and
[min, max] over seeds. The ratio's standard error is the delta method's with the two estimates
treated as independent; both are measured on the same test users and positively correlated, so
it overstates the ratio's noise.

Usage: python3 benches/private_pipeline_report.py OUT
"""
import json
import math
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def row(table, mechanism, tuned, prior=None):
    """The evaluate row of a mechanism: tuned or not, with or without a tuned prior."""
    rows = [r for r in table["rows"] if r["mechanism"] == mechanism and r["tuned"] == tuned
            and r["kind"] == "private" and (prior is None or r["prior"] == prior)]
    return rows[0] if rows else None


def baseline(table, mechanism):
    return next(r for r in table["rows"] if r["mechanism"] == mechanism)


def ratio(q, sq, p, sp):
    if p <= 0:
        return float("nan"), float("nan")
    r = q / p
    rel = math.sqrt((sq / q) ** 2 + (sp / p) ** 2) if q > 0 else sp / p
    return r, r * rel


def fmt(h, s):
    return f"{h:.4f} ± {s:.4f}"


def served(cell):
    return cell["config"] or "-"


def main():
    out = sys.argv[1]
    run = load(os.path.join(out, "run.json"))
    pub = load(os.path.join(out, "public-eval.out"))
    eps = pub["epsilons"]
    seeds = run["private_seeds"]
    dp = {}
    for e in run["eps_t"]:
        evals = []
        for s in seeds:
            p = os.path.join(out, f"dp-{e}-eval-{s}.out")
            if os.path.exists(p) and os.path.getsize(p) > 0:
                evals.append((s, load(p)))
        if evals:
            dp[e] = evals
    print(f"## {run['dataset']}: the whole private pipeline against today's\n")
    print(f"data options `{run['data_options']}`; model `{run['fit_model']}` for both fits; DP fit "
          f"`--dp-epsilon ε_T --dp-delta {run['delta_t']:g}"
          + (f" {run['fit_dp_flags']}" if run["fit_dp_flags"] else "") + "`; "
          f"{pub['users']} test users, {pub['calibration_users']} calibration users; "
          f"private tuning seeds {', '.join(seeds)}.\n")

    # The served (tuned) row: public against private.
    print("### The tuned row each release serves (`recommend --model DIR --eps ε`), test hit@1\n")
    exact = {}
    for e in dp:
        p = os.path.join(out, f"dp-{e}-exact-eval.out")
        if os.path.exists(p) and os.path.getsize(p) > 0:
            exact[e] = load(p)
    attr = " | DP model, exact tuning: hit@1 (ratio) |" if exact else " |"
    print("| ε_T | serving ε | public pipeline: serves | hit@1 | private pipeline: serves | hit@1 "
          "[min, max over seeds] | private / public" + attr)
    print("|---|---|---|---|---|---|---|" + ("---|" if exact else ""))
    pk = row(pub, "krr", True)
    for e, evals in dp.items():
        for i, x in enumerate(eps):
            extra = ""
            if exact:
                if e in exact:
                    c = row(exact[e], "krr", True)["cells"][i]
                    r, _ = ratio(c["hit"], c["se"], pk["cells"][i]["hit"], pk["cells"][i]["se"])
                    extra = f" {fmt(c['hit'], c['se'])} ({r:.3f}) |"
                else:
                    extra = " - |"
            pc = pk["cells"][i]
            cells = [row(t, "krr", True)["cells"][i] for _, t in evals]
            hs = [c["hit"] for c in cells]
            h = sum(hs) / len(hs)
            se = sum(c["se"] for c in cells) / len(cells)
            r, rs = ratio(h, se, pc["hit"], pc["se"])
            confs = " / ".join(dict.fromkeys(served(c) for c in cells))
            spread = f" [{min(hs):.4f}, {max(hs):.4f}]" if len(hs) > 1 else ""
            print(f"| {e} | {x:g} | {served(pc)} | {fmt(pc['hit'], pc['se'])} | {confs} | "
                  f"{fmt(h, se)}{spread} | {r:.3f} ± {rs:.3f} |{extra}")

    # Free baselines, the non-private top-1 (the model's limit) and the limit.
    print("\n### Free baselines, the non-private top-1 and the limit, test hit@1\n")
    print("| release | popular (0-DP) | popular-sampled (0-DP) | best fixed item (0-DP) | "
          "non-private top-1 (NOT private) |")
    print("|---|---|---|---|---|")

    def base_line(name, t):
        cells = [baseline(t, m)["cells"][0] for m in ("popular", "popular-sampled", "best-fixed", "top-1")]
        print(f"| {name} | " + " | ".join(fmt(c["hit"], c["se"]) for c in cells) + " |")

    base_line("public", pub)
    for e, evals in dp.items():
        base_line(f"private, ε_T = {e}", evals[0][1])
    print("\nlimit min(1, e^ε × best fixed item in-sample "
          f"{pub['best_fixed_in_sample']:.4f}): "
          + ", ".join(f"ε = {x:g}: {l:.4f}" for x, l in zip(eps, pub["limit"])))

    # Registry mechanisms: what `recommend --mech M --eps ε` serves in each release.
    mechs = []
    for r in pub["rows"]:
        if r["kind"] == "private" and r["mechanism"] not in ("krr", "random") and r["mechanism"] not in mechs:
            mechs.append(r["mechanism"])
    if mechs and dp:
        print("\n### `recommend --mech M`: each release's served configuration, test hit@1\n")
        print("Public: M's tuned row of tuning.json (pool, clip range and prior tuned on the "
              "calibration users; evaluate's row \"M, tuned pool, clip range and popularity "
              "prior\"). Private: `tune --private` tunes no registry mechanism, so the release "
              "serves M over every item with its own clip range.\n")
        head = "| M | serving ε | public | " + " | ".join(f"private ε_T = {e} (ratio)" for e in dp) + " |"
        print(head)
        print("|" + "---|" * (3 + len(dp)))
        for m in mechs:
            pr = row(pub, m, True, True) or row(pub, m, True, False)
            for i, x in enumerate(eps):
                pc = pr["cells"][i]
                parts = []
                for e, evals in dp.items():
                    u = row(evals[0][1], m, False)
                    if u is None:
                        parts.append("-")
                        continue
                    c = u["cells"][i]
                    r, rs = ratio(c["hit"], c["se"], pc["hit"], pc["se"])
                    parts.append(f"{fmt(c['hit'], c['se'])} ({r:.3f})")
                print(f"| {m} | {x:g} | {fmt(pc['hit'], pc['se'])} [{served(pc)}] | " + " | ".join(parts) + " |")

    # Privacy report totals of every release.
    print("\n### Privacy report totals (`recsel privacy --model DIR`)\n")
    print("| release | training users | calibration users | served users |")
    print("|---|---|---|---|")

    def total(rep, pop):
        for t in rep["totals"]:
            if t["population"] == pop:
                if t.get("epsilon") is None:
                    return "NOT DP (" + t.get("composition", "") + ")"
                if t["delta"]:
                    return f"({t['epsilon']:.4g}, {t['delta']:g})-DP"
                return f"{t['epsilon']:.4g}-DP"
        return "-"

    def not_private(rep):
        return "; ".join(f"{n['part']} ({n['population']})" if isinstance(n, dict) else str(n)
                         for n in rep.get("not_private", []))

    served_eps = f"ε per recommendation ({', '.join(f'{x:g}' for x in eps)}); no ledger"
    rep = load(os.path.join(out, "public-privacy.out"))
    print(f"| public | {total(rep, 'training users')} | {total(rep, 'calibration users')} | {served_eps} |")
    notes = [("public", not_private(rep))]
    for e in dp:
        rep = load(os.path.join(out, f"dp-{e}-privacy-{seeds[0]}.out"))
        print(f"| private, ε_T = {e} | {total(rep, 'training users')} | "
              f"{total(rep, 'calibration users')} | {served_eps} |")
        notes.append((f"private, ε_T = {e}", not_private(rep)))
    for name, n in notes:
        print(f"\nnot DP in {name}: {n or 'nothing'}")


if __name__ == "__main__":
    main()
