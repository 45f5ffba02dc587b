"""Python side of benches/python_batch.sh: recsel.select_batch on the data of benches/batch.rs."""

import sys
import time

import numpy as np

import recsel

users, k = 10_000, 500
i = np.arange(users, dtype=np.uint64)[:, None]
j = np.arange(k, dtype=np.uint64)[None, :]
q = ((i * 7919 + j * 104_729) % 1_000_003).astype(np.float64) / 1_000_003.0
d = 0.5 + (np.arange(k) % 7) * 0.25
print(f"select_batch, {users} users x {k} candidates, eps = 1, seed 3 (median of 7 calls)")
for name in sys.argv[1:] or ["rnm", "gem", "mgem"]:
    times, s = [], 0
    for _ in range(7):
        t = time.perf_counter()
        picks = recsel.select_batch(name, q, d, 1.0, seed=3)
        times.append(time.perf_counter() - t)
        s = int(picks.sum())
    times.sort()
    print(f"python {name:<5} {times[len(times) // 2] * 1e3:>8.1f} ms  checksum {s}")
