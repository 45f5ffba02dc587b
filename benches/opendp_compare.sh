#!/usr/bin/env bash
# Side by side: OpenDP's exact `make_noisy_max` (PyPI `opendp`, installed into a throwaway
# venv) versus recsel's secure `rnm` and `gem` and its float path, at k = 500 with N(0, 1) scores,
# one selection per call, in the same run on the same machine. Prints per-selection times and the
# target ratios (secure >= 10x faster than OpenDP; secure within 20x of float).
#
# Usage: benches/opendp_compare.sh            (VENV=/tmp/recsel-opendp-venv, OPENDP=0.16.0)
# Needs python3 with venv and network access to PyPI for the first run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VENV=${VENV:-/tmp/recsel-opendp-venv}
OPENDP=${OPENDP:-0.16.0}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/python" -c "import opendp" 2>/dev/null || "$VENV/bin/pip" install -q "opendp==$OPENDP"

# OpenDP: make_noisy_max with exponential noise (MaxDivergence), scale 2*Delta/eps for Delta = 2
# (the largest sensitivity of recsel's problem) and eps = 1, on fresh N(0, 1) score vectors.
opendp_us=$("$VENV/bin/python" - <<'PY'
import random, time
import opendp.prelude as dp
dp.enable_features("contrib")
k, calls = 500, 2000
rng = random.Random(1)
vectors = [[rng.gauss(0.0, 1.0) for _ in range(k)] for _ in range(50)]
space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
meas = dp.m.make_noisy_max(*space, output_measure=dp.max_divergence(), scale=2.0 * 2.0 / 1.0)
for v in vectors[:5]:
    meas(v)  # warm up
start = time.perf_counter()
for i in range(calls):
    meas(vectors[i % len(vectors)])
print((time.perf_counter() - start) / calls * 1e6)
PY
)

# recsel: the criterion benchmark of the secure and float paths (benches/secure.rs).
(cd "$ROOT" && cargo bench --locked --bench secure -- --noplot secure_k500 >&2)

python3 - "$TARGET/criterion" "$opendp_us" <<'PY'
import json, sys, os
root, opendp_us = sys.argv[1], float(sys.argv[2])
def us(mech, what):
    p = os.path.join(root, "secure_k500", what, mech, "new", "estimates.json")
    return json.load(open(p))["mean"]["point_estimate"] / 1000.0
print(f"k = 500, N(0,1) scores, eps = 1; one selection per call (mean time)")
print(f"OpenDP {os.environ.get('OPENDP', '0.16.0')} make_noisy_max (Python, exact): {opendp_us:9.2f} us")
print(f"{'mechanism':<6} {'secure select':>14} {'float select':>13} {'secure sample':>14} "
      f"{'float sample':>13} {'OpenDP/secure':>14} {'secure/float':>13} {'sample s/f':>11}")
for m in ["rnm", "gem", "mgem"]:
    ss, fs = us(m, "secure_select"), us(m, "float_select")
    sp, fp = us(m, "secure_sample"), us(m, "float_sample")
    print(f"{m:<6} {ss:11.3f} us {fs:10.3f} us {sp:11.3f} us {fp:10.3f} us "
          f"{opendp_us / ss:13.1f}x {ss / fs:12.2f}x {sp / fp:10.2f}x")
PY
