#!/usr/bin/env python3
"""Table and plot of DP training's utility (docs/results.md, "DP training") from the JSON lines
that benches/dp_utility.sh writes: per data set, Recall@20 (LightGCN convention), nDCG@20 and
hit@1 of the DP model at each ε_T and of the non-DP model, and the DP/non-DP ratios. The plot
(an SVG, no plotting library needed) shows Recall@20 relative to the non-DP model against ε_T.

Usage: python3 benches/dp_utility_report.py ROWS.jsonl [--svg docs/img/dp_utility.svg]
"""
import json
import sys


def main():
    args = sys.argv[1:]
    svg = None
    if "--svg" in args:
        i = args.index("--svg")
        svg = args[i + 1]
        del args[i : i + 2]
    rows = [json.loads(l) for l in open(args[0]) if l.strip()]
    # A series: one data set with one DP configuration (an item set `--dp-items K`, extra
    # `DP_ARGS`); its non-DP reference is the data set's row without DP (from any run).
    label = lambda r: r["data"] + (f", K = {r['dp_items']}" if r.get("dp_items") else "") + (
        f" ({r['dp_args']})" if r.get("dp_args") else "")
    public = {r["data"]: r for r in rows if r["eps_t"] is None}
    series = []
    for r in rows:
        if r["eps_t"] is not None and label(r) not in series:
            series.append(label(r))
    curves = {}
    for name in series:
        dp = sorted([r for r in rows if r["eps_t"] is not None and label(r) == name],
                    key=lambda r: r["eps_t"])
        p = public.get(dp[0]["data"])
        if p is None:
            print(f"\n{name}: no non-DP row for {dp[0]['data']}, skipped")
            continue
        print(f"\n{name} ({p['method']}, {p['train_users']} training users, {p['items']} items; "
              f"δ_T = {dp[0]['delta_t']}, cap {dp[0]['cap']})\n")
        print("| ε_T | Recall@20 | nDCG@20 | hit@1 | Recall@20 ratio | nDCG@20 ratio | hit@1 ratio | λ used | fit s |")
        print("|---|---|---|---|---|---|---|---|---|")
        line = lambda e, r: print(
            f"| {e} | {r['recall20_lightgcn']:.4f} ± {r['recall20_lightgcn_se']:.4f} | "
            f"{r['ndcg20']:.4f} | {r['hit1']:.4f} | {r['recall20_lightgcn'] / p['recall20_lightgcn']:.3f} | "
            f"{r['ndcg20'] / p['ndcg20']:.3f} | {r['hit1'] / p['hit1']:.3f} | {r['l2_used']:.0f} | "
            f"{r['fit_seconds']:.1f} |")
        for r in dp:
            line(f"{r['eps_t']:g}", r)
        line("no DP", p)
        if "popular" in p:
            print(f"\nmost popular: Recall@20 {p['popular']['recall20_lightgcn']:.4f}")
        curves[name] = [(r["eps_t"], r["recall20_lightgcn"] / p["recall20_lightgcn"]) for r in dp]
    if svg:
        write_svg(svg, curves)


def write_svg(path, curves):
    import math
    w, h, l, b, t, rgt = 640, 340, 60, 40, 20, 240
    xs = [e for c in curves.values() for e, _ in c] or [1, 8]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs))
    x1 = x1 if x1 > x0 else x0 + 1
    X = lambda e: l + (math.log2(e) - x0) / (x1 - x0) * (w - l - rgt)
    Y = lambda v: t + (1 - v) * (h - t - b)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>']
    for v in [0, 0.25, 0.5, 0.75, 1.0]:
        out.append(f'<line x1="{l}" x2="{w - rgt}" y1="{Y(v)}" y2="{Y(v)}" stroke="#ddd"/>')
        out.append(f'<text x="{l - 6}" y="{Y(v) + 4}" text-anchor="end">{v:g}</text>')
    for e in sorted(set(xs)):
        out.append(f'<text x="{X(e)}" y="{h - b + 16}" text-anchor="middle">{e:g}</text>')
    out.append(f'<text x="{(l + w - rgt) / 2}" y="{h - 6}" text-anchor="middle">ε_T (training users, log scale)</text>')
    out.append(f'<text transform="translate(14,{(t + h - b) / 2}) rotate(-90)" text-anchor="middle">Recall@20, DP / non-DP</text>')
    out.append(f'<line x1="{l}" x2="{w - rgt}" y1="{h - b}" y2="{h - b}" stroke="black"/>')
    out.append(f'<line x1="{l}" x2="{l}" y1="{t}" y2="{h - b}" stroke="black"/>')
    for k, (ds, c) in enumerate(curves.items()):
        col = colours[k % len(colours)]
        pts = " ".join(f"{X(e):.1f},{Y(v):.1f}" for e, v in c)
        out.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="2"/>')
        for e, v in c:
            out.append(f'<circle cx="{X(e):.1f}" cy="{Y(v):.1f}" r="3" fill="{col}"/>')
        out.append(f'<text x="{w - rgt + 10}" y="{t + 16 + 18 * k}" fill="{col}">{ds}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
