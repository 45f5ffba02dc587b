"""The largest mean Recall@K of ANY user-level eps-DP list of K on a population (docs/utility.md, P9).

Recall@K = |list & T_u| / min(K, |T_u|), T_u the user's held-out items; with K = 1 it is hit@1.
Let a mechanism release m distinct items (m = K: the list shown as released) and let
q_h(o) = P(o is released for history h). eps-DP on the event {o released}, any two histories
being neighbours, gives a floor a_o = min_h q_h(o) with q_h(o) in [a_o, min(1, e^eps a_o)] for
every h, and sum_o q_h(o) = m, so A = sum(a) lies in [m e^-eps, m]. The expected number of T_u's
items released is at most min(sum over T_u of min(1, e^eps a_o), m - A + a(T_u)), so

    max mean_u t_u / min(K, |T_u|)
    s.t. t_u <= c(T_u),  c_o <= min(1, e^eps a_o),  t_u <= m - A + a(T_u),  t_u <= min(K, |T_u|),
         A = sum(a),  m e^-eps <= A <= m,  a, c >= 0

is the limit (with K = m = 1: tighter than e^eps x the best fixed item, which ignores that the
probabilities sum to one). It is a bound computed in-sample on the evaluated users (with the
oracle knowledge of T_u), not a result. Items no evaluated user holds out are left out: moving
their floor onto a held-out item keeps every constraint and never lowers a t_u. The solver splits
a_o = b_o + d_o with 0 <= b_o <= e^-eps and uses c_o = e^eps b_o: any split has e^eps b_o <=
min(1, e^eps a_o), and b_o = min(a_o, e^-eps) reaches it, so the optimum is the same.

--released M (M >= K) bounds lists of M released and filtered on the device to the first K the
user does not own: E|shown & T_u| <= E min(K, |released & T_u|) <= min(K, E|released & T_u|),
the LP above with m = M. The shown items depend on the history on the device, so for M > K the
LP for lists of K shown as released (m = K) does not bound them.

Input: one or more folders written by `recsel export` with the evaluation's data options; each
folder's test.txt holds the evaluated users' held-out items (one population per folder, e.g. one
cross-fitting fold each). The limit over several folders is their user-weighted mean (each fold
may use its own recommender).

    recsel export --format lightgcn --path ../shared/data/gowalla --validation-users auto --out ev
    python docs/scripts/lp_limit.py 0.1,0.5,1,2,4,8 ev
    python docs/scripts/lp_limit.py --k 10 0.5,1,2,4,8 ev
    python docs/scripts/lp_limit.py --k 10 --released 20 2 ev

Needs numpy and scipy (HiGHS).
"""

import argparse

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


def lp_limit(T, eps, k=1, released=None):
    """The LP above for the held-out matrix T (users x items), lists of k, `released` items."""
    m = k if released is None else released
    if m < k:
        raise ValueError(f"released ({m}) must be at least k ({k})")
    held = np.flatnonzero(np.asarray(T.sum(0)).ravel())
    T = T[:, held].tocsr()
    U, N = T.shape
    e = np.exp(eps)
    cap = np.minimum(k, np.asarray(T.sum(1)).ravel())  # min(K, |T_u|): Recall's denominator
    # a_o = b_o + d_o with b_o <= e^-eps; c_o = e^eps b_o (docstring).
    # variables: b (N), d (N), t (U), A; maximise mean t / cap
    obj = np.concatenate([np.zeros(2 * N), -1.0 / (U * cap), [0.0]])
    eye = sp.identity(U, format="csr")
    A_ub = sp.vstack(
        [
            sp.hstack([-e * T, sp.csr_matrix((U, N)), eye, sp.csr_matrix((U, 1))]),  # t_u <= e^eps b(T_u)
            sp.hstack([-T, -T, eye, sp.csr_matrix(np.ones((U, 1)))]),  # t_u <= m - A + a(T_u)
        ]
    ).tocsr()
    b_ub = np.concatenate([np.zeros(U), np.full(U, float(m))])
    A_eq = sp.csr_matrix(np.concatenate([np.ones(2 * N), np.zeros(U), [-1.0]])[None, :])
    bounds = [(0, 1 / e)] * N + [(0, None)] * N + [(0, c) for c in cap] + [(m / e, m)]
    r = linprog(obj, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[0.0], bounds=bounds, method="highs")
    if r.status != 0:
        raise SystemExit(f"the LP did not solve: {r.message}")
    return -r.fun


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("eps", help="comma-separated eps values")
    p.add_argument("folders", nargs="+", help="folders written by `recsel export` (test.txt)")
    p.add_argument("--k", type=int, default=1, help="list length K (default 1: hit@1)")
    p.add_argument("--released", type=int, default=None,
                   help="items released before the device keeps K (default K)")
    args = p.parse_args()
    eps = [float(x) for x in args.eps.split(",")]
    parts = [read_heldout(f"{d}/test.txt") for d in args.folders]
    users = sum(T.shape[0] for T in parts)
    what = "LP limit" if args.k == 1 else f"LP limit of Recall@{args.k}"
    if args.released not in (None, args.k):
        what += f", {args.released} released and filtered on the device,"
    for e in eps:
        limit = sum(lp_limit(T, e, args.k, args.released) * T.shape[0] for T in parts) / users
        print(f"eps {e}: {what} {limit:.4f} ({users} users)", flush=True)


if __name__ == "__main__":
    main()
