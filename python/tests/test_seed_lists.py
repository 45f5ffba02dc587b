"""docs/scripts/seed_lists.py: the seed's law is eps-DP in the history (any two utility rows in
[0, 1] give laws within e^eps), its two ends, and the script run end to end on a small LightGCN
folder."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from script_module import load_script

SEED = load_script("docs/scripts/seed_lists.py")
SCRIPT = Path(SEED.__file__)


def test_the_seed_law_is_eps_dp_for_every_pair_of_utilities():
    rng = np.random.default_rng(3)
    n = 6
    prior = rng.uniform(0.1, 5.0, n)
    # The extreme rows (0/1 vectors) and random ones.
    rows = [np.array([(m >> j) & 1 for j in range(n)], dtype=float) for m in range(2**n)]
    rows += list(rng.uniform(0, 1, (200, n)))
    u = np.array(rows)
    for eps in [0.1, 1.0, 2.0, 8.0]:
        law = SEED.seed_law(u, prior, eps)
        assert np.allclose(law.sum(1), 1.0)
        ratio = (law.max(0) / law.min(0)).max()
        assert ratio <= math.exp(eps) * (1 + 1e-9), (eps, ratio)
        # Not loose: a unit vector against its complement comes within the prior's share of
        # the bound (the ratio is e^(eps/2) (w_j + W e^(eps/2)) / (w_j e^(eps/2) + W)).
        assert ratio > math.exp(0.75 * eps), (eps, ratio)


def test_the_seed_law_is_the_prior_at_eps_0_and_the_best_utility_at_large_eps():
    prior = np.array([1.0, 2.0, 3.0, 4.0])
    u = np.array([[0.2, 0.9, 0.1, 0.5]])
    assert np.allclose(SEED.seed_law(u, prior, 0.0), prior / prior.sum())
    assert SEED.seed_law(u, prior, 500.0)[0].argmax() == 1


def test_the_script_runs_on_a_small_folder(tmp_path):
    rng = np.random.default_rng(5)
    items = 40
    with open(tmp_path / "train.txt", "w") as tr, open(tmp_path / "test.txt", "w") as te:
        for u in range(300):
            group = u % 4
            liked = [i for i in range(items) if i % 4 == group or rng.random() < 0.05]
            rng.shuffle(liked)
            cut = max(1, len(liked) // 5)
            te.write(" ".join(map(str, [u] + liked[:cut])) + "\n")
            tr.write(" ".join(map(str, [u] + liked[cut:])) + "\n")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "exact", "10", "0.5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "best free list" in lines[0]
    values = {}
    for line in lines:
        if line.strip().startswith("eps "):
            eps = float(line.split()[1])
            values[eps] = float(line.split("=")[1].split()[0])
    assert sorted(values) == [1.0, 2.0, 8.0, 1000.0], out.stdout
    # On four clean groups the seed chosen by the utility finds the user's group.
    assert values[1000.0] > 1.0, out.stdout
