#!/usr/bin/env bash
# recsel fit versus the Python reference (PyPI sansa 1.1.0 via ../shared/anchors/sansa_anchor.py),
# side by side on the same data, λ and density. Prints fit time, peak memory and Recall@20
# (LightGCN convention, hits/|T|) of both, and the ratios recsel / reference.
# Targets: fit time ratio <= 1/3, memory ratio <= 0.5, Recall@20 within 2% relative.
#
# Usage: CARGO_TARGET_DIR=... benches/sansa_compare.sh [--synthetic | --synthetic-only] [--exact-large]
#          [--before BIN]
#   DATA=../shared/data  VENV=/tmp/sansa-ref  CARGO_TARGET_DIR=...  override the defaults.
#   --before BIN also fits every row with another recsel binary (e.g. one built from an older
#   commit) in the same run, alternating with this one, and prints this build's time, memory and
#   Recall@20 relative to it. REPEAT=N (default 1) fits each row N times with both and keeps the
#   median time and memory (the machine may be shared).
#   --synthetic adds the ml20m- and netflix-shaped synthetic data: `recsel export` writes each
#   shape's split (seed 42, the one `recsel fit --dataset synthetic --shape S` uses) once as
#   LightGCN train.txt/test.txt into CACHE (default $OUT/data; delete a folder to write it again),
#   and both recsel and the reference fit and evaluate those same files with `exact` and `icf` at
#   the fig-13 pipelines' λ and density (ml20m 600, netflix 1200; 0.005). On LightGCN files both
#   fit every train.txt row (the training users and the test users' inputs) and score the test
#   users from their train.txt rows, so Recall@20 (hits/|T|) compares like with like.
#   --synthetic-only runs only those rows. SHAPES="netflix ml20m" (the default) chooses the shapes.
#   --exact-large adds `exact` on amazon-book-kgat and gowalla (the reference's CHOLMOD did not finish
#   in 220 s / 700 s there, docs/results.md, "SANSA against the Python reference"; stopped after REF_TIMEOUT seconds).
#   Every row also gives the CPU time (user + sys) of each whole command (loading, fit, evaluation)
#   and the 1-minute load average when the row started.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${DATA:-$ROOT/../shared/data}
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/sansa_anchor.py}
VENV=${VENV:-/tmp/sansa-ref}
OUT=${OUT:-/tmp/sansa-compare}
CACHE=${CACHE:-$OUT/data}
mkdir -p "$OUT"
SYNTHETIC=0; REAL=1; EXACT_LARGE=""; BEFORE=""; REPEAT=${REPEAT:-1}
while [ $# -gt 0 ]; do
  case "$1" in
    --synthetic) SYNTHETIC=1 ;;
    --synthetic-only) SYNTHETIC=1; REAL=0 ;;
    --exact-large) EXACT_LARGE=$'amazon-book-kgat exact 200 0.0005\ngowalla exact 200 0.0005' ;;
    --before) BEFORE=$2; shift; [ -x "$BEFORE" ] || { echo "--before: $BEFORE is not executable" >&2; exit 2; } ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if ! "$VENV/bin/python" -c "import sansa" 2>/dev/null; then
  echo "installing the Python reference into $VENV (docs/results.md, section 'SANSA against the Python reference') ..." >&2
  # CHOLMOD calls the system BLAS/LAPACK (libblas.so.3): OpenBLAS, not the netlib reference BLAS, which
  # alone made the reference's dense-ish supernodal factorisations several times slower here.
  apt-get install -y -qq libsuitesparse-dev libopenblas0-pthread >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "numpy<2" "scipy<1.14" "cython<3" setuptools wheel >&2
  "$VENV/bin/pip" install -q --no-build-isolation scikit-sparse==0.4.12 >&2
  "$VENV/bin/pip" install -q sansa==1.1.0 >&2
fi

(cd "$ROOT" && cargo build --release -j 2 >&2)
RECSEL="${CARGO_TARGET_DIR:-$ROOT/target}/release/recsel"

# The reference in one process: a warm-up fit on tiny random data first (numba compiles on the first
# fit), then the anchor script itself. Runs longer than REF_TIMEOUT seconds (default 900) are stopped.
cat > "$OUT/reference.py" <<'PY'
import sys, runpy, numpy as np, scipy.sparse as sp
anchor, args = sys.argv[1], sys.argv[2:]
if len(args) < 5:
    from sansa import SANSA, SANSAConfig, ICFGramianFactorizerConfig, CHOLMODGramianFactorizerConfig, UMRUnitLowerTriangleInverterConfig
    X = sp.random(500, 200, density=0.05, format='csr', dtype=np.float32, random_state=0); X.data[:] = 1
    fc = ICFGramianFactorizerConfig() if args[1] == 'icf' else CHOLMODGramianFactorizerConfig()
    SANSA(SANSAConfig(l2=10.0, weight_matrix_density=0.1, gramian_factorizer_config=fc,
          lower_triangle_inverter_config=UMRUnitLowerTriangleInverterConfig(scans=3, finetune_steps=10))).fit(X)
sys.argv = [anchor] + args
runpy.run_path(anchor, run_name='__main__')
PY
# cpu_seconds FILE: user + sys seconds from `/usr/bin/time -f '%U %S' -o FILE` (last line; a failed
# command adds a line before it). The time of `timeout` includes the reference it waited for.
cpu_seconds() { tail -1 "$1" | awk '{print $1 + $2}'; }

run_reference() { # dir method l2 density [ease]; its log (SANSA's progress) goes to $OUT/ref.log
  local out
  out=$(/usr/bin/time -f '%U %S' -o "$OUT/ref.time" timeout "${REF_TIMEOUT:-900}" \
    "$VENV/bin/python" "$OUT/reference.py" "$ANCHOR" "$@" 2>"$OUT/ref.log") || out='{}'
  [ -n "$out" ] || out='{}'
  python3 -c 'import json, sys; a = json.loads(sys.argv[1]); a["cpu_s"] = float(sys.argv[2]); print(json.dumps(a))' \
    "$out" "$(cpu_seconds "$OUT/ref.time")"
}

run_recsel() { # binary dir method l2 density
  /usr/bin/time -f '%U %S' -o "$OUT/recsel.time" \
    "$1" fit --format lightgcn --path "$2" --method "$3" --l2 "$4" --density "$5" --json > "$OUT/recsel.json" 2>/dev/null
  python3 -c 'import json, sys; a = json.load(open(sys.argv[1])); a["cpu_s"] = float(sys.argv[2]); print(json.dumps(a))' \
    "$OUT/recsel.json" "$(cpu_seconds "$OUT/recsel.time")"
}

# synthetic_dir SHAPE: the LightGCN folder of the SHAPE-shaped synthetic data, written on first use.
synthetic_dir() {
  local dir=$CACHE/synthetic-$1
  if [ ! -s "$dir/export.json" ]; then
    echo "writing the $1-shaped synthetic data to $dir (once; later runs reuse it) ..." >&2
    mkdir -p "$dir"
    "$RECSEL" export --dataset synthetic --shape "$1" --split-seed 42 --out "$dir" --json > "$dir/export.json.tmp" 2>/dev/null
    mv "$dir/export.json.tmp" "$dir/export.json"
  fi
  echo "$dir"
}

# REPEAT fits with this build (and alternately with --before): one JSON object per line.
run_both() { # dir method l2 density
  : > "$OUT/now.jsonl"; : > "$OUT/before.jsonl"
  for _ in $(seq "$REPEAT"); do
    [ -n "$BEFORE" ] && run_recsel "$BEFORE" "$@" >> "$OUT/before.jsonl"
    run_recsel "$RECSEL" "$@" >> "$OUT/now.jsonl"
  done
}

REAL_ROWS=""
[ "$REAL" = 1 ] && REAL_ROWS=$'ml-1m-implicit exact 200 0.05\nml-1m-implicit icf 20 0.05\nml-1m-implicit ease 200 1\ngowalla icf 20 0.0005\namazon-book-kgat icf 20 0.0005'
[ "$REAL" = 1 ] || EXACT_LARGE=""
# The fig-13 pipelines' SANSA settings (pipelines/fig13_netflix.toml, fig13_ml20m.toml), icf with the
# same λ and density as exact; SHAPES="small" (λ = 200) checks the script in a minute.
SYNTHETIC_ROWS=""
if [ "$SYNTHETIC" = 1 ]; then
  for shape in ${SHAPES:-netflix ml20m}; do
    case "$shape" in
      netflix) l2=1200 ;;
      ml20m) l2=600 ;;
      small) l2=200 ;;
      *) echo "unknown shape $shape (netflix, ml20m, small)" >&2; exit 2 ;;
    esac
    SYNTHETIC_ROWS+="synthetic-$shape exact $l2 0.005"$'\n'"synthetic-$shape icf $l2 0.005"$'\n'
  done
fi
[ -x /usr/bin/time ] || { echo "needs GNU time at /usr/bin/time (apt-get install time)" >&2; exit 2; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(uptime)"
echo "BLAS of the reference's CHOLMOD: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)"
printf '%-18s %-7s %6s %8s | %9s %9s %7s | %9s %9s %7s | %7s %7s %7s | %10s %8s %7s | %5s\n' \
  dataset method l2 density "recsel s" "ref s" "ratio" "recsel MB" "ref MB" "ratio" "R@20" "ref" "rel" \
  "recsel cpu" "ref cpu" "ratio" "load"
[ -n "$BEFORE" ] && BEFORE_ROWS=$OUT/before-rows.txt && : > "$BEFORE_ROWS"
while read -r ds method l2 dens; do
  [ -z "$ds" ] && continue
  case "$ds" in
    synthetic-*) dir=$(synthetic_dir "${ds#synthetic-}") ;;
    *) dir="$DATA/$ds" ;;
  esac
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [ "$method" = ease ]; then ref=$(run_reference "$dir" ease "$l2" "$dens" ease); else
    refm=$method; [ "$method" = exact ] && refm=cholmod
    ref=$(run_reference "$dir" "$refm" "$l2" "$dens")
  fi
  run_both "$dir" "$method" "$l2" "$dens"
  cp "$OUT/now.jsonl" "$OUT/recsel-$ds-$method.jsonl"; echo "$ref" > "$OUT/ref-$ds-$method.json"
  cp "$OUT/ref.log" "$OUT/ref-$ds-$method.log"
  python3 - "$ds" "$method" "$l2" "$dens" "$OUT/now.jsonl" "$ref" "$OUT/before.jsonl" "${BEFORE_ROWS:-}" "$load" <<'PY'
import json, statistics, sys
ds, m, l2, d, now, b, before, before_rows, load = sys.argv[1:]
runs = lambda f: [json.loads(x) for x in open(f) if x.strip()]
def summary(rs):  # median time and memory over the repeats; recall is deterministic
    return (statistics.median(r['fit_seconds'] for r in rs), statistics.median(r['peak_rss_mb'] for r in rs),
            rs[0]['recall20_lightgcn'])
fa, ma, ra = summary(runs(now))
ca = statistics.median(r['cpu_s'] for r in runs(now))
b = json.loads(b or '{}')
fb, mb, rb, cb = b.get('fit_s'), b.get('peak_rss_mb'), b.get('recall20'), b.get('cpu_s')
r = lambda x, y: f"{x / y:7.3f}" if y else "    n/a"
# A reference stopped by REF_TIMEOUT has no fit time: its CPU time is then marked as a lower bound.
cref = f"{cb:8.1f}" if fb is not None else f">{cb:7.0f}"
print(f"{ds:<18} {m:<7} {l2:>6} {d:>8} | {fa:9.2f} {fb if fb is not None else 'n/a':>9} {r(fa, fb)} | "
      f"{ma:9.0f} {mb if mb is not None else 'n/a':>9} {r(ma, mb)} | {ra:7.4f} {rb if rb is not None else 'n/a':>7} "
      f"{(f'{(ra - rb) / rb:+7.2%}' if rb else '    n/a')} | {ca:10.1f} {cref} {r(ca, cb if fb is not None else None)} | {load:>5}")
if before_rows:
    fo, mo, ro = summary(runs(before))
    with open(before_rows, 'a') as f:
        f.write(f"{ds:<18} {m:<7} {l2:>6} {d:>8} | {fa:8.2f} {fo:8.2f} {fa / fo:7.3f} | {ma:8.0f} {mo:8.0f} "
                f"{ma / mo:7.3f} | {ra:7.4f} {ro:7.4f} {(ra - ro) / ro:+7.2%}\n")
PY
done <<CFG
$REAL_ROWS
$EXACT_LARGE
$SYNTHETIC_ROWS
CFG

if [ -n "$BEFORE" ]; then
  echo
  echo "this build versus --before $BEFORE (median of $REPEAT fit(s) each, alternating)"
  printf '%-18s %-7s %6s %8s | %8s %8s %7s | %8s %8s %7s | %7s %7s %7s\n' \
    dataset method l2 density "now s" "before s" "ratio" "now MB" "before" "ratio" "R@20" "before" "rel"
  cat "$BEFORE_ROWS"
fi
