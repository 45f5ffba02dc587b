"""A private seed, a public list: what picking one item privately and showing its neighbours is
worth (docs/results.md, "Lists", the goals).

The design: the server picks one seed item with the exponential mechanism over the P most
popular training items (a public pool), with a public prior (uniform, popularity or its square
root) and a utility in [0, 1] read from the user's history — so the pick is eps-DP with respect
to the whole history (any utility in [0, 1] changes by at most 1 between two histories; the
mechanism uses exp(eps * u / 2)). The list is public post-processing of the seed: the model's
scores for a history of that one item, blended with the best free ranking's public counts
(weight lam), the seed first; the device drops the items the user owns and shows the first K. So the list costs eps.

Everything chosen (lam, utility, prior) is chosen per eps on calibration users, by mean
Recall@K; the evaluated users give every number, against the best free list chosen on the same
calibration users (the popularity ranking or the held-out ranking, both filtered on the device).
The value of the mechanism is its exact expectation over the seed's law, not a draw. Two
diagnostics beside it: eps = 1000 (the seed chosen by the utility, not private), and the oracle
(the best seed for each user, reading the held-out items): the best any seed rule could do with
these lists.

    python docs/scripts/seed_lists.py ../shared/data/ml-1m-implicit exact 200 0.05
    python docs/scripts/seed_lists.py ../shared/data/gowalla icf 20 0.0005

Arguments: a LightGCN folder (train.txt, test.txt), the SANSA method, l2 and density. Users with
a held-out item are split with a fixed seed into 70% fitted on their train rows, 15% calibration
and 15% evaluated (at most 3,000 each). Needs numpy, scipy and the recsel Python package.
"""

import sys

import numpy as np
import scipy.sparse as sp

import recsel

K = 10  # list length
DEPTH = 150  # how far down a seed's list the device may have to go
POOL = 300  # seeds: the most popular training items (all of them when there are fewer)
EPSILONS = [1.0, 2.0, 8.0, 1000.0]
LAMS = [0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0]
CHUNK = 500


def read(path):
    rows = {}
    with open(path) as f:
        for line in f:
            t = line.split()
            if t:
                rows[int(t[0])] = [int(x) for x in t[1:]]
    return rows


def matrix(users, rows, n):
    r = np.repeat(np.arange(len(users)), [len(rows[u]) for u in users])
    c = np.array([i for u in users for i in rows[u]], dtype=np.int64)
    m = sp.csr_matrix((np.ones(len(c)), (r, c)), shape=(len(users), n))
    m.data[:] = 1.0
    return m


def shown_recall(owned, held, order, norm):
    """Recall@K of the first K items of `order` (..., DEPTH) a user does not own."""
    unowned = ~owned
    shown = unowned & (np.cumsum(unowned, axis=-1) <= K)
    return (held & shown).sum(-1) / norm


def seed_law(util, prior, eps):
    """The seed's law for each user (a row of `util`, values in [0, 1]): the exponential
    mechanism with a public prior, P(j) proportional to prior_j exp(eps u_j / 2). Any two rows of
    utilities in [0, 1] give laws within a factor e^eps of each other: eps-DP in the history."""
    logw = np.log(prior)[None, :] + eps * np.asarray(util) / 2.0
    w = np.exp(logw - logw.max(1, keepdims=True))
    return w / w.sum(1, keepdims=True)


def main():
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    folder, method, l2, density = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    train, test = read(f"{folder}/train.txt"), read(f"{folder}/test.txt")
    users = sorted(u for u in train if test.get(u))
    n = 1 + max(max(v) for rows in (train, test) for v in rows.values() if v)
    perm = np.random.default_rng(7).permutation(users)
    a, b = int(0.7 * len(perm)), int(0.85 * len(perm))
    fit_users, cal_users, eval_users = perm[:a], perm[a:b][:3000], perm[b:][:3000]
    x = matrix(fit_users, train, n)
    model = recsel.Model.fit(x, method=method, l2=l2, density=density)
    pop = np.asarray(x.sum(0)).ravel()
    held_pop = np.asarray(matrix(fit_users, test, n).sum(0)).ravel()
    seeds = np.argsort(-pop, kind="stable")[:POOL]
    p = len(seeds)
    rows = model.score(sp.csr_matrix((np.ones(p), (np.arange(p), seeds)), shape=(p, n)))
    rows[np.arange(p), seeds] = 0.0
    scale = np.abs(rows).max(1, keepdims=True)
    rows = rows / np.where(scale > 0, scale, 1.0)
    rows[np.arange(p), seeds] = np.inf  # the seed first
    free_counts = {"popular": pop, "held-out": held_pop}
    free_orders = {f: np.argsort(-c, kind="stable")[:DEPTH] for f, c in free_counts.items()}
    priors = {"uniform": np.ones(p), "popularity": pop[seeds], "sqrt": np.sqrt(pop[seeds])}

    # A seed's list: its model scores blended with a free ranking's counts (the one chosen on the
    # calibration users below), one order per free ranking and blend weight.
    orders = {
        (f, lam): np.argsort(-(rows + lam * c[None, :] / c.max()), axis=1, kind="stable")[
            :, :DEPTH
        ]
        for f, c in free_counts.items()
        for lam in LAMS
    }

    def measure(group):
        """Per user: Recall@K of every seed's list per (free ranking, lam), of the free lists, and
        the utilities — each group's users scored once."""
        out = {"seed": {key: [] for key in orders}, "free": {f: [] for f in free_orders}, "u": []}
        for s in range(0, len(group), CHUNK):
            us = group[s : s + CHUNK]
            h, t = matrix(us, train, n), matrix(us, test, n)
            owned, held = h.toarray() > 0, t.toarray() > 0
            norm = np.minimum(K, held.sum(1)).astype(float)
            for key, o in orders.items():
                out["seed"][key].append(shown_recall(owned[:, o], held[:, o], o, norm[:, None]))
            for f, o in free_orders.items():
                out["free"][f].append(shown_recall(owned[:, o], held[:, o], o, norm))
            score = np.maximum(model.score(h)[:, seeds], 0.0)
            top = score.max(1, keepdims=True)
            out["u"].append(score / np.where(top > 0, top, 1.0))
        return (
            {key: np.vstack(v) for key, v in out["seed"].items()},
            {f: np.concatenate(v) for f, v in out["free"].items()},
            np.vstack(out["u"]),
        )

    def utilities(u):
        rank = np.argsort(np.argsort(-u, axis=1, kind="stable"), axis=1)
        return {"score": u, "top-1": (rank < 1) * 1.0, "top-5": (rank < 5) * 1.0}

    def value(recall, util, prior, eps):
        """Exact expected Recall@K of each user under the seed's law."""
        return (seed_law(util, prior, eps) * recall).sum(1)

    cal, ev = measure(cal_users), measure(eval_users)
    free_name = max(free_orders, key=lambda f: cal[1][f].mean())
    cal_seed = {lam: cal[0][(free_name, lam)] for lam in LAMS}
    ev_seed = {lam: ev[0][(free_name, lam)] for lam in LAMS}
    free = ev[1][free_name]
    print(
        f"{folder}: {len(fit_users)} fitted, {len(cal_users)} calibration, {len(eval_users)} "
        f"evaluated users; best free list (chosen on calibration users): {free_name}, "
        f"device-filtered, Recall@{K} {free.mean():.4f}"
    )
    for lam in LAMS:
        oracle = ev_seed[lam].max(1)
        print(
            f"  oracle seed (reads the held-out items), lam {lam}: {oracle.mean() / free.mean():.2f}x"
        )
    cu, eu = utilities(cal[2]), utilities(ev[2])
    for eps in EPSILONS:
        best = max(
            ((lam, un, pn) for lam in LAMS for un in cu for pn in priors),
            key=lambda c: value(cal_seed[c[0]], cu[c[1]], priors[c[2]], eps).mean(),
        )
        v = value(ev_seed[best[0]], eu[best[1]], priors[best[2]], eps)
        r = v.mean() / free.mean()
        se = np.std(v - r * free, ddof=1) / np.sqrt(len(v)) / free.mean()
        what = "not private" if eps >= 1000 else f"{eps:g}-DP"
        print(
            f"  eps {eps:g} ({what}): Recall@{K} {v.mean():.4f} = {r:.3f} +- {se:.3f} x the free "
            f"list (lam {best[0]}, utility {best[1]}, prior {best[2]}, chosen on calibration users)",
            flush=True,
        )


if __name__ == "__main__":
    main()
