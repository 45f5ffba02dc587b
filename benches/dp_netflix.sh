#!/usr/bin/env bash
# DP training at the Netflix shape (docs/training-privacy.md; docs/results.md, "DP training"):
# `recsel fit --dataset synthetic --shape netflix` (463k training users, 17,769 items) fitted
# without DP and with DP at ε_T (default 1, δ = 1e-8, cap 20), SANSA exact (dense path, f32),
# λ = 1200, density 0.005, in one run. Every fit prints wall and CPU seconds (user + sys), peak
# resident memory (GNU time -v), Recall@20 (SANSA convention and LightGCN's), nDCG@20, hit@1, the
# λ used, and the 1-minute load average at its start and end; then the DP/non-DP ratios.
# Goals: Recall@20 ratio >= 0.9 at ε_T = 1; DP fit <= 2x the non-DP fit's time and <= 4 GiB.
#
# Usage: CARGO_TARGET_DIR=... benches/dp_netflix.sh      (EPS=1 DELTA=1e-8 CAP=20 SHAPE=netflix)
#   OUT=/tmp/recsel-dp-netflix  where logs go;  RECSEL=path  the binary (default: this build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/recsel-dp-netflix}
EPS=${EPS:-1}; DELTA=${DELTA:-1e-8}; CAP=${CAP:-20}; SHAPE=${SHAPE:-netflix}
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time" >&2; exit 2; }
if [ -z "${RECSEL:-}" ]; then
  (cd "$ROOT" && cargo build --release --locked >&2)
  RECSEL="${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel"
fi
mkdir -p "$OUT"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; shape $SHAPE; ε_T=$EPS δ=$DELTA cap=$CAP"
COMMON=(fit --dataset synthetic --shape "$SHAPE" --method exact --l2 1200 --density 0.005 --json)
run() {
  local tag=$1; shift
  local l0 l1
  l0=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -v -o "$OUT/$tag.time" "$RECSEL" "${COMMON[@]}" "$@" > "$OUT/$tag.json" 2> "$OUT/$tag.log" \
    || { echo "$tag failed; see $OUT/$tag.log" >&2; tail -5 "$OUT/$tag.log" >&2; return 1; }
  l1=$(cut -d' ' -f1 /proc/loadavg)
  echo "$l0 $l1" > "$OUT/$tag.load"
}
run public
run dp --dp-epsilon "$EPS" --dp-delta "$DELTA" --dp-cap "$CAP"
python3 - "$OUT" <<'PY'
import json, re, sys
out = sys.argv[1]
def row(tag):
    j = json.load(open(f"{out}/{tag}.json"))
    t = open(f"{out}/{tag}.time").read()
    f = lambda k: re.search(re.escape(k) + r":\s*(.+)", t).group(1).strip()
    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(f("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":"))))
    cpu = float(f("User time (seconds)")) + float(f("System time (seconds)"))
    rss = int(f("Maximum resident set size (kbytes)")) / 2**20
    l0, l1 = open(f"{out}/{tag}.load").read().split()
    return dict(tag=tag, wall=wall, cpu=cpu, rss=rss, fit=j["fit_seconds"], fitcpu=j["fit_cpu_seconds"],
                r20=j["recall20"], r20l=j["recall20_lightgcn"], ndcg=j["ndcg20"], hit1=j["hit1"],
                l2=j["l2_used"], load=f"{l0}->{l1}")
rows = [row("public"), row("dp")]
print(f"{'fit':<7} {'wall s':>8} {'cpu s':>8} {'fit s':>8} {'fit cpu':>8} {'peak GiB':>9} {'R@20':>7} {'R@20 lgcn':>9} {'nDCG@20':>8} {'hit@1':>7} {'λ used':>9}  load")
for r in rows:
    print(f"{r['tag']:<7} {r['wall']:8.1f} {r['cpu']:8.1f} {r['fit']:8.1f} {r['fitcpu']:8.1f} {r['rss']:9.2f} {r['r20']:7.4f} {r['r20l']:9.4f} {r['ndcg']:8.4f} {r['hit1']:7.4f} {r['l2']:9.1f}  {r['load']}")
p, d = rows
print(f"DP/non-DP: Recall@20 {d['r20']/p['r20']:.3f} (LightGCN {d['r20l']/p['r20l']:.3f}), nDCG@20 {d['ndcg']/p['ndcg']:.3f}, hit@1 {d['hit1']/p['hit1']:.3f}; fit wall {d['fit']/p['fit']:.2f}x, fit CPU {d['fitcpu']/p['fitcpu']:.2f}x, peak memory {d['rss']/p['rss']:.2f}x")
PY
