#!/usr/bin/env bash
# Scale benchmark: on the netflix- and ml20m-shaped synthetic data (docs/sansa.md,
# "Memory"; docs/results.md, "Scale and memory"), `recsel fit` with `exact` and `icf` and then the full fig-13 select
# grid (every mechanism of `--mech all` × the 11 ε × 50 trials, top 500, every test user) on the
# exact model, with the fig-13 pipeline's λ and γ of each shape (netflix λ = 1200, γ = 0.0008;
# ml20m λ = 600, γ = 0.008; density 0.005). Every stage prints: wall time, CPU time (user + sys:
# less sensitive to a shared machine than wall), peak resident memory (VmHWM, from
# /usr/bin/time -v), Recall@20 of the model (SANSA convention hits/min(20,|T|), and LightGCN's
# hits/|T|), the per-stage seconds recsel reports, and the 1-minute load average before and after
# (`uptime`).
# Goals: fit < 60 s and < 4 GiB each; the grid <= 4 min and <= 1.5 GiB, on a quiet 2-core machine.
#
# Usage: CARGO_TARGET_DIR=... benches/netflix_scale.sh [--before BIN] [--shapes "netflix ml20m"]
#        [--no-select] [--no-icf]
#   --before BIN  also runs every stage with another recsel binary (e.g. built from an older
#                 commit), right after this build's, and prints this/before ratios of wall, CPU and
#                 memory and the relative change in Recall@20.
#   OUT=/tmp/recsel-scale  where models, select outputs and logs go.
#   RECSEL=path            the binary to measure (default: this checkout's release build).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/recsel-scale}
BEFORE=""; SHAPES="netflix ml20m"; SELECT=1; ICF=1
while [ $# -gt 0 ]; do
  case "$1" in
    --before) BEFORE=$2; shift; [ -x "$BEFORE" ] || { echo "--before: $BEFORE is not executable" >&2; exit 2; } ;;
    --shapes) SHAPES=$2; shift ;;
    --no-select) SELECT=0 ;;
    --no-icf) ICF=0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
if [ -z "${RECSEL:-}" ]; then
  (cd "$ROOT" && cargo build --release --locked >&2)
  RECSEL="${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel"
fi
mkdir -p "$OUT"
ROWS=$OUT/rows.tsv; : > "$ROWS"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; binary $RECSEL${BEFORE:+; before $BEFORE}"

# measure TAG BIN ARGS...: runs one recsel command under /usr/bin/time -v, keeps its JSON and log,
# prints one row and appends it to $ROWS.
measure() {
  local tag=$1 bin=$2; shift 2
  local load0 load1
  load0=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -v -o "$OUT/$tag.time" "$bin" "$@" > "$OUT/$tag.json" 2> "$OUT/$tag.log" \
    || { echo "$tag failed; see $OUT/$tag.log" >&2; tail -5 "$OUT/$tag.log" >&2; return 1; }
  load1=$(cut -d' ' -f1 /proc/loadavg)
  python3 - "$tag" "$OUT/$tag.json" "$OUT/$tag.time" "$load0" "$load1" "${MODEL_JSON:-}" <<'PY' | tee -a "$ROWS"
import json, re, sys
tag, jf, tf, l0, l1, model_json = sys.argv[1:]
j = json.load(open(jf))
t = open(tf).read()
def field(name):
    return re.search(re.escape(name) + r":\s*(.+)", t).group(1).strip()
wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
cpu = float(field("User time (seconds)")) + float(field("System time (seconds)"))
rss = float(field("Maximum resident set size (kbytes)")) / 1024
if "fit_stage_seconds" in j:   # recsel fit
    rec = (j["recall20"], j["recall20_lightgcn"])
    stages = {"load": j["load_seconds"], **j["fit_stage_seconds"], "eval": j["eval_seconds"]}
else:                          # recsel select: the model's recall comes from its fit
    m = json.load(open(model_json)) if model_json else {}
    rec = (m.get("recall20", float("nan")), m.get("recall20_lightgcn", float("nan")))
    stages = {"sensitivities": j["sensitivity_seconds"], "selection": j["selection_seconds"],
              "analysis": j["diagnostics_seconds"]}
st = " ".join(f"{k}={v:.1f}" for k, v in stages.items())
print(f"{tag:<28}\t{wall:8.1f}\t{cpu:8.1f}\t{rss:8.0f}\t{rec[0]:.4f}\t{rec[1]:.4f}\tload {l0}->{l1}\t{st}")
PY
}

printf '%-28s\t%8s\t%8s\t%8s\t%-6s\t%-6s\t%s\t%s\n' stage "wall s" "cpu s" "peak MB" "R@20" "R@20lg" load "recsel's own stage seconds"
for shape in $SHAPES; do
  # The fig-13 pipelines' SANSA settings and γ (pipelines/fig13_netflix.toml, fig13_ml20m.toml).
  case "$shape" in
    netflix) l2=1200; gamma=0.0008 ;;
    ml20m) l2=600; gamma=0.008 ;;
    *) echo "unknown shape $shape (netflix, ml20m)" >&2; exit 2 ;;
  esac
  data=(--dataset synthetic --shape "$shape" --l2 "$l2" --density 0.005)
  bins=("now:$RECSEL"); [ -n "$BEFORE" ] && bins+=("before:$BEFORE")
  for nb in "${bins[@]}"; do
    name=${nb%%:*}; bin=${nb#*:}
    rm -rf "$OUT/$shape-$name-model"
    MODEL_JSON="" measure "$shape-fit-exact-$name" "$bin" fit "${data[@]}" --method exact --json \
      --out "$OUT/$shape-$name-model"
  done
  if [ "$ICF" = 1 ]; then
    for nb in "${bins[@]}"; do
      name=${nb%%:*}; bin=${nb#*:}
      MODEL_JSON="" measure "$shape-fit-icf-$name" "$bin" fit "${data[@]}" --method icf --json
    done
  fi
  if [ "$SELECT" = 1 ]; then
    for nb in "${bins[@]}"; do
      name=${nb%%:*}; bin=${nb#*:}
      # The saved exact model is reused (its fingerprint matches the same data and settings).
      MODEL_JSON="$OUT/$shape-fit-exact-$name.json" measure "$shape-select-grid-$name" "$bin" select \
        "${data[@]}" --method exact --model-dir "$OUT/$shape-$name-model" --mech all --trials 50 \
        --top 500 --gamma "$gamma" --seed 1 --force --out "$OUT/$shape-$name-select" --json
    done
  fi
done

if [ -n "$BEFORE" ]; then
  echo
  echo "this build / before (same run, each stage back to back): wall, CPU and peak-memory ratios; Recall@20 change"
  python3 - "$ROWS" <<'PY'
import sys
rows = {}
for line in open(sys.argv[1]):
    c = line.rstrip("\n").split("\t")
    rows[c[0].strip()] = c
for tag, now in rows.items():
    if not tag.endswith("-now"):
        continue
    b = rows.get(tag[:-4] + "-before")
    if not b:
        continue
    f = lambda i: float(now[i]) / float(b[i])
    rel = (float(now[4]) - float(b[4])) / float(b[4]) if float(b[4]) else float("nan")
    print(f"{tag[:-4]:<24} wall {f(1):6.3f}  cpu {f(2):6.3f}  peak {f(3):6.3f}  R@20 {float(now[4]):.4f} vs {float(b[4]):.4f} ({rel:+.2%})")
PY
fi
