//! The service's counters, written as Prometheus text (`GET /metrics`): requests by route and
//! status, recommendations by ledger outcome, latency histograms, the ledger's commits.

use std::collections::BTreeMap;
use std::fmt::{Display, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::ledger::CommitStats;

use super::conn::ConnStats;

/// Upper bounds of the latency histograms' buckets, in seconds.
pub const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// A latency histogram (cumulative buckets, as Prometheus expects).
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Records one observation of `seconds`.
    pub fn observe(&self, seconds: f64) {
        if let Some(i) = BUCKETS.iter().position(|&b| seconds <= b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_nanos
            .fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }

    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        let sep = if labels.is_empty() { "" } else { "," };
        for (b, c) in BUCKETS.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{b}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}");
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 * 1e-9;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {count}");
    }
}

/// Every counter of one service.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    outcomes: Mutex<BTreeMap<&'static str, u64>>,
    /// Latency of `POST /v1/recommend` (arrival to response, the ledger's commit included).
    pub recommend_seconds: Histogram,
    /// Latency of `POST /v1/recommend/batch`.
    pub batch_seconds: Histogram,
    /// From handing a charge to the ledger until it is durable (queueing for a group included).
    pub ledger_wait_seconds: Histogram,
    /// History items the model does not know (ignored).
    pub unknown_items: AtomicU64,
    /// Requests waiting for the pool or the ledger now.
    pub pending: AtomicU64,
    /// Requests turned away with 503 because too many were pending.
    pub shed: AtomicU64,
    /// The connections: accepted, refused at the limit, failed accepts, timeouts.
    pub connections: std::sync::Arc<ConnStats>,
}

impl Metrics {
    /// Counts one answered HTTP request.
    pub fn request(&self, route: &'static str, status: u16) {
        let mut m = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((route, status)).or_default() += 1;
    }

    /// Counts one ledger outcome (`charged`, `replayed`, `refused`, `fallback`, `rejected`).
    pub fn outcome(&self, kind: &'static str) {
        let mut m = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(kind).or_default() += 1;
    }

    /// How many outcomes of `kind` so far.
    pub fn outcomes(&self, kind: &str) -> u64 {
        let m = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        m.get(kind).copied().unwrap_or(0)
    }

    /// The Prometheus text exposition of every counter; `ready` and `commits` from the service.
    pub fn render(&self, ready: bool, commits: Option<CommitStats>) -> String {
        let mut out = String::new();
        let head = |out: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        // A metric of one unlabelled value: its head and the value.
        let scalar = |out: &mut String, name: &str, kind: &str, help: &str, value: &dyn Display| {
            head(out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        };
        scalar(
            &mut out,
            "recsel_ready",
            "gauge",
            "1 when the model and the ledger are loaded.",
            &u8::from(ready),
        );
        head(
            &mut out,
            "recsel_http_requests_total",
            "counter",
            "HTTP requests answered, by route and status.",
        );
        for ((route, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "recsel_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        head(
            &mut out,
            "recsel_recommendations_total",
            "counter",
            "Recommendation requests decided by the ledger, by outcome.",
        );
        let outcomes = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        for kind in ["charged", "replayed", "refused", "fallback", "rejected"] {
            let n = outcomes.get(kind).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "recsel_recommendations_total{{outcome=\"{kind}\"}} {n}"
            );
        }
        scalar(
            &mut out,
            "recsel_budget_refusals_total",
            "counter",
            "Requests refused because the user's budget was exhausted (no fallback).",
            &outcomes.get("refused").copied().unwrap_or(0),
        );
        drop(outcomes);
        head(
            &mut out,
            "recsel_request_duration_seconds",
            "histogram",
            "Latency of recommendation requests, arrival to response (durable charge included).",
        );
        self.recommend_seconds.write(
            &mut out,
            "recsel_request_duration_seconds",
            "route=\"/v1/recommend\"",
        );
        self.batch_seconds.write(
            &mut out,
            "recsel_request_duration_seconds",
            "route=\"/v1/recommend/batch\"",
        );
        head(
            &mut out,
            "recsel_ledger_wait_seconds",
            "histogram",
            "From handing charges to the ledger until their group commit is durable.",
        );
        self.ledger_wait_seconds
            .write(&mut out, "recsel_ledger_wait_seconds", "");
        let c = commits.unwrap_or_default();
        scalar(
            &mut out,
            "recsel_ledger_commits_total",
            "counter",
            "Durable ledger commits (one fsync each; a group of requests per commit).",
            &c.groups,
        );
        scalar(
            &mut out,
            "recsel_ledger_committed_requests_total",
            "counter",
            "Requests decided in those commits.",
            &c.requests,
        );
        scalar(
            &mut out,
            "recsel_ledger_commit_seconds_total",
            "counter",
            "Wall time spent in ledger commits.",
            &c.commit_seconds,
        );
        scalar(
            &mut out,
            "recsel_ledger_largest_group",
            "gauge",
            "Most requests in one commit so far.",
            &c.largest_group,
        );
        scalar(
            &mut out,
            "recsel_unknown_items_total",
            "counter",
            "History items the model does not know (ignored).",
            &self.unknown_items.load(Ordering::Relaxed),
        );
        scalar(
            &mut out,
            "recsel_pending_requests",
            "gauge",
            "Requests waiting for the worker pool or the ledger.",
            &self.pending.load(Ordering::Relaxed),
        );
        scalar(
            &mut out,
            "recsel_shed_requests_total",
            "counter",
            "Requests answered 503 because too many were pending.",
            &self.shed.load(Ordering::Relaxed),
        );
        let c = &self.connections;
        for (name, help, v) in [
            (
                "recsel_connections_accepted_total",
                "Connections accepted.",
                &c.accepted,
            ),
            (
                "recsel_connections_refused_total",
                "Connections refused (503, closed) because max_connections were open.",
                &c.refused,
            ),
            (
                "recsel_accept_errors_total",
                "Failed accepts (e.g. no file descriptor left).",
                &c.accept_errors,
            ),
            (
                "recsel_connections_timed_out_total",
                "Connections closed because a request head or a response took too long.",
                &c.timed_out,
            ),
        ] {
            scalar(&mut out, name, "counter", help, &v.load(Ordering::Relaxed));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_has_cumulative_buckets_and_every_family_typed() {
        let m = Metrics::default();
        m.request("/v1/recommend", 200);
        m.request("/v1/recommend", 200);
        m.request("/v1/recommend", 429);
        m.outcome("charged");
        m.outcome("refused");
        for s in [0.0007, 0.003, 0.003, 20.0] {
            m.recommend_seconds.observe(s);
        }
        let text = m.render(true, None);
        assert!(
            text.contains("recsel_http_requests_total{route=\"/v1/recommend\",status=\"200\"} 2")
        );
        assert!(text.contains("recsel_recommendations_total{outcome=\"refused\"} 1"));
        assert!(text.contains("recsel_budget_refusals_total 1"));
        let r = "route=\"/v1/recommend\"";
        assert!(text.contains(&format!(
            "recsel_request_duration_seconds_bucket{{{r},le=\"0.0005\"}} 0"
        )));
        assert!(text.contains(&format!(
            "recsel_request_duration_seconds_bucket{{{r},le=\"0.001\"}} 1"
        )));
        assert!(text.contains(&format!(
            "recsel_request_duration_seconds_bucket{{{r},le=\"0.005\"}} 3"
        )));
        assert!(text.contains(&format!(
            "recsel_request_duration_seconds_bucket{{{r},le=\"+Inf\"}} 4"
        )));
        assert!(text.contains(&format!("recsel_request_duration_seconds_count{{{r}}} 4")));
        // Every sample line belongs to a family declared with # TYPE.
        let typed: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                typed
                    .iter()
                    .any(|t| name == *t || name.starts_with(&format!("{t}_"))),
                "{line}"
            );
        }
    }
}
