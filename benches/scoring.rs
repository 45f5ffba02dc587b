//! SANSA scoring, one user at a time against blocks of `SCORE_LANES` users (docs/sansa.md,
//! "Scoring"): milliseconds per user on one thread for `Model::score_into` (the rows of `W_r` a
//! user touches, in ascending order) and `Model::score_block` (`W_r` read by columns once per
//! block), their ratio, and the wall milliseconds per user of blocks scored on every thread, as
//! `recsel fit` evaluates. The two paths give the same bits (`tests/model.rs`); this measures what
//! the block buys.
//! For reference it also times the one-user loop that walks the touched rows in the order they were
//! first touched (which sums in another order than `score_into`).
//!
//! Usage: `cargo bench --bench scoring [-- MODEL_DIR [USERS]]`. MODEL_DIR is a model saved by
//! `recsel fit --out` (for the netflix shape: `recsel fit --dataset synthetic --shape netflix
//! --l2 1200 --density 0.005 --out DIR`); without it a model is fitted on the small synthetic
//! data. Users are the test users' input rows of the model's data when it is the small data, else
//! rows of 123 random items (the netflix shape's mean), 2,000 by default.

mod common;

use std::path::Path;
use std::time::Instant;

use recsel::model::{Model, Scratch, SCORE_LANES};

fn main() {
    let args = common::positional_args();
    let n_users: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let (model, users): (Model, Vec<Vec<u32>>) = match args.first() {
        Some(dir) => {
            let (model, _) = recsel::model::io::load(Path::new(dir))
                .unwrap_or_else(|e| panic!("loading the model in {dir}: {e}"));
            let n = model.n_items() as u32;
            let users = common::random_histories(n, n_users);
            (model, users)
        }
        None => {
            let src = recsel::data::DataSource::Named {
                dataset: recsel::data::NamedDataset::Synthetic(
                    recsel::data::synthetic::SyntheticShape::Small,
                ),
                data_dir: "data".into(),
            };
            let data = recsel::data::load_dataset(&src, 42).expect("the small synthetic data");
            let params = recsel::model::ModelParams::new(recsel::model::Method::Exact, 200.0, 0.01)
                .expect("valid parameters");
            let (model, _) = recsel::model::fit(&data.train, &params, &|_| {}).expect("a fit");
            let input = &data.test_input;
            let users = (0..n_users)
                .map(|u| {
                    let r = u % input.rows();
                    input.indices()[input.indptr().outer_inds_sz(r)].to_vec()
                })
                .collect();
            (model, users)
        }
    };
    let n = model.n_items();
    let refs: Vec<&[u32]> = users.iter().map(|u| u.as_slice()).collect();
    let mut scratch = Scratch::new(n);
    let mut out = vec![0.0; SCORE_LANES * n];
    let mut sink = 0.0;
    // Warm up both paths (page in the weights), then time them.
    for g in refs.chunks(SCORE_LANES).take(4) {
        model.score_block(g, &mut out[..g.len() * n], &mut scratch);
        model.score_into(g[0], &mut out[..n], &mut scratch);
    }
    let t = Instant::now();
    for u in &refs {
        model.score_into(u, &mut out[..n], &mut scratch);
        sink += out[n / 2];
    }
    let one = t.elapsed().as_secs_f64() * 1e3 / refs.len() as f64;
    let t = Instant::now();
    for g in refs.chunks(SCORE_LANES) {
        model.score_block(g, &mut out[..g.len() * n], &mut scratch);
        sink += out[n / 2];
    }
    let block = t.elapsed().as_secs_f64() * 1e3 / refs.len() as f64;
    let t = Instant::now();
    let par: f64 = {
        use rayon::prelude::*;
        refs.par_chunks(SCORE_LANES)
            .map_init(
                || (Vec::new(), Scratch::new(n)),
                |(out, scratch): &mut (Vec<f64>, Scratch), g| {
                    out.resize(g.len() * n, 0.0);
                    model.score_block(g, out, scratch);
                    out[n / 2]
                },
            )
            .sum()
    };
    sink += par;
    let parallel = t.elapsed().as_secs_f64() * 1e3 / refs.len() as f64;
    let before = match &model {
        Model::Sansa(m) => {
            let rows = m.w_r().to_csr();
            let (mut h, mut touched) = (vec![0.0f64; n], Vec::<u32>::new());
            let t = Instant::now();
            for u in &refs {
                let out = &mut out[..n];
                out.fill(0.0);
                touched.clear();
                for &j in u.iter() {
                    if let Some(col) = m.w().outer_view(j as usize) {
                        for (r, &v) in col.iter() {
                            if h[r] == 0.0 {
                                touched.push(r as u32);
                            }
                            h[r] += v;
                        }
                    }
                }
                for &r in &touched {
                    let hr = std::mem::replace(&mut h[r as usize], 0.0);
                    if let Some(row) = rows.outer_view(r as usize) {
                        for (k, &v) in row.iter() {
                            out[k] += hr * v;
                        }
                    }
                }
                sink += out[n / 2];
            }
            Some(t.elapsed().as_secs_f64() * 1e3 / refs.len() as f64)
        }
        _ => None,
    };
    // What a block of k users costs per user (the service scores the requests waiting together,
    // so its blocks are often not full): k users per `score_block` call, one thread.
    let mut per_k = Vec::new();
    for k in [4usize, 8, 12, 16, 20, 24, 28, SCORE_LANES] {
        let t = Instant::now();
        let mut done = 0;
        for g in refs.chunks(k) {
            model.score_block(g, &mut out[..g.len() * n], &mut scratch);
            sink += out[n / 2];
            done += g.len();
        }
        per_k.push((k, t.elapsed().as_secs_f64() * 1e3 / done as f64));
    }
    std::hint::black_box(sink);
    println!(
        "{} users, {n} items, {} stored weights; one thread",
        refs.len(),
        model.weights_nnz()
    );
    println!("one user at a time (score_into): {one:.3} ms per user");
    println!("blocks of {SCORE_LANES} (score_block):     {block:.3} ms per user");
    println!("ratio block / one: {:.3}", block / one);
    for (k, ms) in &per_k {
        println!(
            "blocks of {k:>2} users:               {ms:.3} ms per user ({:.2} of one at a time)",
            ms / one
        );
    }
    println!(
        "blocks on {} threads:            {parallel:.3} ms of wall time per user",
        rayon::current_num_threads()
    );
    if let Some(before) = before {
        println!("touched order (one user):         {before:.3} ms per user");
    }
}
