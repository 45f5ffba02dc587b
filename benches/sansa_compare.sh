#!/usr/bin/env bash
# recsel fit versus the Python reference (PyPI sansa 1.1.0 via ../shared/anchors/sansa_anchor.py),
# side by side on the same data, λ and density. Prints fit time, peak memory and Recall@20
# (LightGCN convention, hits/|T|) of both, and the ratios recsel / reference.
# Goals (issue 4): fit time ratio <= 1/3, memory ratio <= 0.5, Recall@20 within 2% relative.
#
# Usage: CARGO_TARGET_DIR=... benches/sansa_compare.sh [--synthetic] [--exact-large]
#   DATA=../shared/data  VENV=/tmp/sansa-ref  CARGO_TARGET_DIR=...  override the defaults.
#   --synthetic also fits the ml20m- and netflix-shaped synthetic data with recsel (time, memory).
#   --exact-large adds `exact` on amazon-book-kgat and gowalla (the reference's CHOLMOD did not finish
#   in 220 s / 700 s there, ANCHORS.md; stopped after REF_TIMEOUT seconds).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DATA=${DATA:-$ROOT/../shared/data}
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/sansa_anchor.py}
VENV=${VENV:-/tmp/sansa-ref}
OUT=${OUT:-/tmp/sansa-compare}
mkdir -p "$OUT"
SYNTHETIC=0; EXACT_LARGE=""
for a in "$@"; do
  case "$a" in
    --synthetic) SYNTHETIC=1 ;;
    --exact-large) EXACT_LARGE=$'amazon-book-kgat exact 200 0.0005\ngowalla exact 200 0.0005' ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done

if ! "$VENV/bin/python" -c "import sansa" 2>/dev/null; then
  echo "installing the Python reference into $VENV (ANCHORS.md) ..." >&2
  apt-get install -y -qq libsuitesparse-dev >&2
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
run_reference() { # dir method l2 density [ease]
  timeout "${REF_TIMEOUT:-900}" "$VENV/bin/python" "$OUT/reference.py" "$ANCHOR" "$@" 2>/dev/null || echo '{}'
}

run_recsel() { # dir method l2 density
  "$RECSEL" fit --format lightgcn --path "$1" --method "$2" --l2 "$3" --density "$4" --json 2>/dev/null
}

printf '%-18s %-7s %6s %8s | %9s %9s %7s | %9s %9s %7s | %7s %7s %7s\n' \
  dataset method l2 density "recsel s" "ref s" "ratio" "recsel MB" "ref MB" "ratio" "R@20" "ref" "rel"
while read -r ds method l2 dens; do
  [ -z "$ds" ] && continue
  dir="$DATA/$ds"
  if [ "$method" = ease ]; then ref=$(run_reference "$dir" ease "$l2" "$dens" ease); else
    refm=$method; [ "$method" = exact ] && refm=cholmod
    ref=$(run_reference "$dir" "$refm" "$l2" "$dens")
  fi
  ours=$(run_recsel "$dir" "$method" "$l2" "$dens")
  echo "$ours" > "$OUT/recsel-$ds-$method.json"; echo "$ref" > "$OUT/ref-$ds-$method.json"
  python3 - "$ds" "$method" "$l2" "$dens" "$ours" "$ref" <<'PY'
import json, sys
ds, m, l2, d, a, b = sys.argv[1:]
a = json.loads(a); b = json.loads(b or '{}')
fa, ma, ra = a['fit_seconds'], a['peak_rss_mb'], a['recall20_lightgcn']
fb, mb, rb = b.get('fit_s'), b.get('peak_rss_mb'), b.get('recall20')
r = lambda x, y: f"{x / y:7.3f}" if y else "    n/a"
print(f"{ds:<18} {m:<7} {l2:>6} {d:>8} | {fa:9.2f} {fb if fb is not None else 'n/a':>9} {r(fa, fb)} | "
      f"{ma:9.0f} {mb if mb is not None else 'n/a':>9} {r(ma, mb)} | {ra:7.4f} {rb if rb is not None else 'n/a':>7} "
      f"{(f'{(ra - rb) / rb:+7.2%}' if rb else '    n/a')}")
PY
done <<CFG
ml-1m-implicit exact 200 0.05
ml-1m-implicit icf 20 0.05
ml-1m-implicit ease 200 1
gowalla icf 20 0.0005
amazon-book-kgat icf 20 0.0005
$EXACT_LARGE
CFG

if [ "$SYNTHETIC" = 1 ]; then
  echo
  printf '%-22s %-7s %6s %8s | %9s %9s %9s | %7s %7s\n' data method l2 density "fit s" "load s" "peak MB" "R@20" "N@100"
  for cfg in "ml20m exact 600 0.005" "ml20m icf 600 0.005" "netflix exact 1200 0.005"; do
    set -- $cfg
    "$RECSEL" fit --dataset synthetic --shape "$1" --method "$2" --l2 "$3" --density "$4" --json 2>/dev/null \
      | python3 -c "import json,sys; a=json.load(sys.stdin); print(f\"synthetic-$1 {'':<12}$2 $3 $4 | {a['fit_seconds']:9.2f} {a['load_seconds']:9.2f} {a['peak_rss_mb']:9.0f} | {a['recall20']:7.4f} {a['ndcg100']:7.4f}\")"
  done
fi
