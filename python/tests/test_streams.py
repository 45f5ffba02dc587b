"""`select_batch` draws from the streams of `recsel select`: with one trial, the score a user's
selection earns in the command line's per-user table is the score of the candidate
`select_batch` picks for that user."""

import numpy as np

import recsel
from recsel import _native


def test_select_batch_reproduces_recsel_select(run_cli, tmp_path):
    out, model_dir = tmp_path / "cli", tmp_path / "model"
    mechs, eps, top = ["gem", "rnm"], [0.5, 4.0], 40
    run_cli("select", "--dataset", "synthetic", "--shape", "small", "--mech", ",".join(mechs),
            "--eps", ",".join(map(str, eps)), "--trials", 1, "--top", top, "--seed", 11,
            "--clip", "--out", out, "--model-dir", model_dir)
    job = _native.SelectJob(dataset="synthetic", shape="small", model_dir=str(model_dir),
                            out=str(tmp_path / "job"), seed=11)
    model = recsel.Model(job.model)
    users = job.users
    s = recsel.sensitivities(model, users)
    scores = model.score(users)
    indptr, indices, _ = users.arrays()
    n = users.n_users
    q = np.empty((n, top))
    d = np.empty((n, top))
    for u in range(n):
        row = scores[u].copy()
        row[indices[indptr[u] : indptr[u + 1]]] = -np.inf  # items the user has
        # The top candidates, best first, ties by item index (scoring::top_candidates).
        items = np.lexsort((np.arange(row.size), -row))[:top]
        q[u] = np.clip(scores[u, items], s["lower"][items], s["upper"][items])
        d[u] = s["delta"][items]
    table = recsel.read_table(out, "users")  # the Parquet copy: exact floats
    assert table.num_rows == n
    ids = np.arange(n, dtype=np.uint64)
    for m in mechs:
        for e_index, e in enumerate(eps):
            picks = recsel.select_batch(m, q, d, e, seed=11, user_ids=ids, eps_index=e_index)
            earned = q[np.arange(n), picks]
            cli = table.column(f"mean_{m}_eps{e:g}").to_numpy()
            assert np.array_equal(earned, cli), (m, e)
            # Power: the neighbouring trial's stream picks other candidates for some users.
            other = recsel.select_batch(m, q, d, e, seed=11, user_ids=ids, eps_index=e_index,
                                        trial=1)
            assert not np.array_equal(q[np.arange(n), other], cli)
