"""The largest mean hit@1 of ANY user-level eps-DP recommender on a population (docs/utility.md, P9).

Any eps-DP recommender has, for every item o, a floor a_o = min_h P_h(o) with P_h(o) in
[a_o, e^eps a_o] for every history h. Given a, the best a user u can get -- even knowing its
held-out set T_u -- is min(e^eps a(T_u), 1 - A + a(T_u)) with A = sum(a) in [e^-eps, 1]. So

    max mean_u t_u  s.t.  t_u <= e^eps a(T_u),  t_u <= 1 - A + a(T_u),  e^-eps <= A <= 1,  a >= 0

is the limit: tighter than e^eps x (best fixed item), which ignores that the probabilities sum to
one. It is a bound computed in-sample on the evaluated users (with the oracle knowledge of T_u),
not a result.

Input: one or more folders written by `recsel export` with the evaluation's data options; each
folder's test.txt holds the evaluated users' held-out items (one population per folder, e.g. one
cross-fitting fold each). The limit over several folders is their user-weighted mean (each fold
may use its own recommender).

    recsel export --format lightgcn --path ../shared/data/gowalla --validation-users auto --out ev
    python docs/scripts/lp_limit.py 0.1,0.5,1,2,4,8 ev

Needs numpy and scipy (HiGHS).
"""

import sys

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog


def read_heldout(path):
    """Rows of test.txt ('user item item ...') as a users x items 0/1 CSR matrix."""
    rows = []
    with open(path) as f:
        for line in f:
            t = line.split()
            if len(t) > 1:
                rows.append(sorted({int(x) for x in t[1:]}))
    n_items = 1 + max(max(r) for r in rows)
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.concatenate([np.array(r, dtype=np.int64) for r in rows])
    return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(rows), n_items))


def lp_limit(T, eps):
    """The LP above for the held-out matrix T (users x items)."""
    held = np.flatnonzero(np.asarray(T.sum(0)).ravel())
    T = T[:, held].tocsr()
    U, N = T.shape
    e = np.exp(eps)
    # variables: a (N), t (U), A; maximise mean t
    c = np.concatenate([np.zeros(N), -np.ones(U) / U, [0.0]])
    eye = sp.identity(U, format="csr")
    col = sp.csr_matrix(np.ones((U, 1)))
    A_ub = sp.vstack([sp.hstack([-e * T, eye, 0 * col]), sp.hstack([-T, eye, col])]).tocsr()
    b_ub = np.concatenate([np.zeros(U), np.ones(U)])
    A_eq = sp.csr_matrix(np.concatenate([np.ones(N), np.zeros(U), [-1.0]])[None, :])
    bounds = [(0, None)] * (N + U) + [(np.exp(-eps), 1.0)]
    r = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[0.0], bounds=bounds, method="highs")
    if r.status != 0:
        raise SystemExit(f"the LP did not solve: {r.message}")
    return -r.fun


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    eps = [float(x) for x in sys.argv[1].split(",")]
    parts = [read_heldout(f"{d}/test.txt") for d in sys.argv[2:]]
    users = sum(T.shape[0] for T in parts)
    for e in eps:
        limit = sum(lp_limit(T, e) * T.shape[0] for T in parts) / users
        print(f"eps {e}: LP limit {limit:.4f} ({users} users)", flush=True)


if __name__ == "__main__":
    main()
