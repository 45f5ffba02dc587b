//! The HTTP side of the service: routes, the API key, readiness, metrics and graceful shutdown.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use crate::ledger::{Answer, CommitStats, Outcome, Rejection, Timestamp, Units};
use crate::recommend::ledgered::BatchRequest;

use super::api::{self, ApiError, RecommendRequest};
use super::guard::{self, error_response};
use super::metrics::Metrics;
use super::options::{LimitOptions, ServeOptions};
use super::service::Service;
use super::{conn, read_api_key, ServeError};

/// The state every handler shares.
struct AppState {
    opts: ServeOptions,
    limits: LimitOptions,
    api_key: Arc<Option<Vec<u8>>>,
    /// The host names a request may name (`None`: any).
    allowed_hosts: Arc<Option<Vec<String>>>,
    service: OnceLock<Arc<Service>>,
    /// Why the service is not ready (while loading, or once shutting down).
    status: Mutex<String>,
    stopping: AtomicBool,
    metrics: Arc<Metrics>,
}

/// What a service did, reported when it stops.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// Recommendations charged.
    pub charged: u64,
    /// Replays of charged request ids.
    pub replayed: u64,
    /// Refusals (budget exhausted, no fallback).
    pub refused: u64,
    /// Fallback answers.
    pub fallback: u64,
    /// The ledger's commits.
    pub commits: CommitStats,
}

type Shared = State<Arc<AppState>>;

fn json_response(status: u16, body: &Value) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(
        500,
        "internal",
        None,
        format!("{e}; nothing was charged or released"),
    )
}

impl AppState {
    fn ready(&self) -> Result<&Arc<Service>, ApiError> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(ApiError::new(
                503,
                "shutting_down",
                None,
                "the service is shutting down".into(),
            ));
        }
        self.service.get().ok_or_else(|| {
            ApiError::new(
                503,
                "not_ready",
                None,
                format!(
                    "not ready: {}",
                    self.status.lock().unwrap_or_else(|e| e.into_inner())
                ),
            )
        })
    }
}

/// The route name a path is counted under in the metrics.
fn route_of(path: &str) -> &'static str {
    match path {
        "/v1/recommend" => "/v1/recommend",
        "/v1/recommend/batch" => "/v1/recommend/batch",
        "/v1/model" => "/v1/model",
        "/v1/public-list" => "/v1/public-list",
        "/metrics" => "/metrics",
        "/healthz" => "/healthz",
        "/readyz" => "/readyz",
        p if p.starts_with("/v1/users/") && p.ends_with("/budget") => "/v1/users/{user}/budget",
        _ => "other",
    }
}

async fn count(State(st): Shared, req: Request, next: Next) -> Response {
    let route = route_of(req.uri().path());
    let r = next.run(req).await;
    st.metrics.request(route, r.status().as_u16());
    r
}

async fn healthz() -> Response {
    json_response(200, &json!({"status": "live"}))
}

async fn readyz(State(st): Shared) -> Response {
    match st.ready().map(|svc| svc.ledger_health()) {
        Ok(Ok(())) => json_response(200, &json!({"status": "ready"})),
        Ok(Err(reason)) => json_response(503, &json!({"status": "not ready", "reason": reason})),
        Err(e) => json_response(503, &json!({"status": "not ready", "reason": e.message})),
    }
}

async fn metrics(State(st): Shared) -> Response {
    let svc = st.service.get();
    let text = st.metrics.render(
        svc.is_some() && !st.stopping.load(Ordering::SeqCst),
        svc.map(|s| s.committer().stats()),
    );
    let mut r = Response::new(Body::from(text));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn model(State(st): Shared) -> Response {
    match st.ready() {
        Ok(s) => json_response(200, &s.describe()),
        Err(e) => error_response(&e),
    }
}

async fn public_list(State(st): Shared, req: Request) -> Response {
    let list = st.ready().and_then(|s| {
        let m = api::public_list_m(req.uri().query())?;
        s.public_list(m)
            .map_err(|e| ApiError::field("m", e.to_string()))
    });
    match list {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&e),
    }
}

async fn budget(State(st): Shared, user: Result<Path<String>, PathRejection>) -> Response {
    let result = async {
        let svc = Arc::clone(st.ready()?);
        let Path(user) = user.map_err(|e| {
            ApiError::field(
                "user",
                format!(
                    "the user id in the path could not be read: {}",
                    e.body_text()
                ),
            )
        })?;
        api::check_id(&user, "user", &st.limits)?;
        let b = tokio::task::spawn_blocking(move || {
            svc.balance(&user, Timestamp::now()).map(|b| (user, b))
        })
        .await
        .map_err(internal)?
        .map_err(internal)?;
        Ok::<_, ApiError>(b)
    }
    .await;
    match result {
        Ok((user, b)) => json_response(
            200,
            &json!({
                "user": user,
                "budget": b.budget.as_epsilon(),
                "spent": b.spent.as_epsilon(),
                "remaining": b.remaining.as_epsilon(),
                "period": st.ready().map(|s| s.ledger().settings().period.name()).ok(),
                "window_start": (b.window.start.0 != i64::MIN).then(|| b.window.start.to_string()),
                "window_end": b.window.end.map(|t| t.to_string()),
                "closed_by": b.closed_by.map(|t| t.to_string()),
            }),
        ),
        Err(e) => error_response(&e),
    }
}

/// A checked request with its history mapped to item columns.
struct Mapped {
    req: BatchRequest,
    unknown: usize,
    known: usize,
}

fn map_request(svc: &Service, r: RecommendRequest, prefix: &str) -> Result<Mapped, ApiError> {
    let field = format!("{prefix}history");
    let (cols, unknown) = svc.item_columns(&r.history);
    if cols.is_empty() {
        return Err(ApiError::new(
            422,
            "no_known_items",
            Some(&field),
            format!(
                "none of the history's {} items is an item of the model (GET /v1/model lists \
                 them); nothing was charged",
                r.history.len()
            ),
        ));
    }
    let k = r.k.unwrap_or_else(|| svc.default_k());
    // The answer of k is resolved before anything is drawn or charged: a tuned service
    // without a tuned list of k refuses the request.
    svc.recommender_for(k).map_err(|e| {
        ApiError::new(
            422,
            "no_tuned_list",
            Some(&format!("{prefix}k")),
            format!("{e}; nothing was charged"),
        )
    })?;
    let request_id = r
        .request_id
        .unwrap_or_else(|| format!("srv-{:032x}", rand::random::<u128>()));
    Ok(Mapped {
        known: cols.len(),
        unknown,
        req: BatchRequest {
            user: r.user,
            request_id,
            history: cols,
            k,
        },
    })
}

fn eps(u: Units) -> f64 {
    u.as_epsilon()
}

/// The released answer's fields: `item` (a list's first), and for a list `items`, in order.
fn put_answer(o: &mut Map<String, Value>, answer: &Answer) {
    o.insert("item".into(), json!(answer.item()));
    if let Answer::List(items) = answer {
        o.insert("items".into(), json!(items));
    }
}

/// The answer to one decided request: a 200 body, or the error of a refusal or rejection.
async fn answer(
    svc: &Arc<Service>,
    m: &Mapped,
    outcome: Outcome,
    time: Timestamp,
) -> Result<Value, ApiError> {
    let mut o = Map::new();
    o.insert("request_id".into(), json!(m.req.request_id));
    o.insert("user".into(), json!(m.req.user));
    let settings = svc.ledger().settings();
    let window_end = settings.period.window(time).end.map(|t| t.to_string());
    match outcome {
        Outcome::Charged {
            answer,
            charged,
            spent,
            remaining,
        } => {
            put_answer(&mut o, &answer);
            o.insert("fallback".into(), json!(false));
            o.insert("replayed".into(), json!(false));
            o.insert("charged".into(), json!(eps(charged)));
            o.insert("spent".into(), json!(eps(spent)));
            o.insert("remaining".into(), json!(eps(remaining)));
        }
        Outcome::Replayed { event } => {
            let (s, user) = (Arc::clone(svc), m.req.user.clone());
            let b = tokio::task::spawn_blocking(move || s.balance(&user, time))
                .await
                .map_err(internal)?
                .map_err(internal)?;
            put_answer(&mut o, &event.answer);
            o.insert("fallback".into(), json!(event.answer.is_fallback()));
            o.insert("replayed".into(), json!(true));
            o.insert("charged".into(), json!(0.0));
            o.insert("spent".into(), json!(eps(b.spent)));
            o.insert("remaining".into(), json!(eps(b.remaining)));
            o.insert("first_answered".into(), json!(event.time.to_string()));
        }
        Outcome::Fallback {
            item,
            remaining,
            retry_after,
        } => {
            o.insert("item".into(), json!(item));
            o.insert("fallback".into(), json!(true));
            o.insert("replayed".into(), json!(false));
            o.insert("charged".into(), json!(0.0));
            o.insert(
                "spent".into(),
                json!(eps(settings.budget.saturating_sub(remaining))),
            );
            o.insert("remaining".into(), json!(eps(remaining)));
            o.insert(
                "retry_after".into(),
                json!(retry_after.map(|t| t.to_string())),
            );
        }
        Outcome::Refused {
            spent,
            remaining,
            retry_after,
        } => {
            let mut e = ApiError::new(
                429,
                "budget_exhausted",
                Some("user"),
                format!(
                    "user '{}' has spent {spent} of {} eps in this window and a recommendation \
                     costs {}; {}",
                    m.req.user,
                    settings.budget,
                    svc.charge_for(m.req.k).unwrap_or_else(|_| svc.charge()),
                    match retry_after {
                        Some(t) => format!("the next window starts at {t}"),
                        None => "this budget does not renew (period none)".into(),
                    }
                ),
            );
            e.extra.insert("request_id".into(), json!(m.req.request_id));
            e.extra.insert("spent".into(), json!(eps(spent)));
            e.extra.insert("remaining".into(), json!(eps(remaining)));
            if let Some(t) = retry_after {
                e.extra.insert("retry_after".into(), json!(t.to_string()));
                e.extra.insert(
                    "retry_after_seconds".into(),
                    json!(time.seconds_until(t).max(1)),
                );
            }
            return Err(e);
        }
        Outcome::Rejected { reason } => {
            return Err(match reason {
                Rejection::DifferentRequest => ApiError::new(
                    409,
                    "request_id_conflict",
                    Some("request_id"),
                    format!(
                        "request id '{}' was already used for a different request of user '{}' \
                         (another history, or another mechanism, epsilon or candidates); \
                         nothing was charged or released; use a new id per request",
                        m.req.request_id, m.req.user
                    ),
                ),
                Rejection::Invalid(msg) => ApiError::new(400, "rejected", None, msg),
            });
        }
    }
    // Every field of the answer is the answer of k's (`Recommender::for_k`), resolved before
    // the charge.
    let k = m.req.k;
    let rec = svc.recommender_for(k).map_err(internal)?;
    o.insert("mechanism".into(), json!(rec.mechanism().name()));
    if k > 1 {
        o.insert("k".into(), json!(k));
        o.insert("list_form".into(), json!(rec.list_form().to_string()));
        if rec.released_len(k).map_err(internal)? > k {
            // A tuned list of m > k items: the device shows the first k it does not own.
            o.insert("device_filter".into(), json!(k));
        }
    }
    o.insert(
        "epsilon".into(),
        json!(eps(svc.charge_for(k).map_err(internal)?)),
    );
    o.insert(
        "candidates".into(),
        json!(rec.candidate_policy().to_string()),
    );
    let guarantee = svc.guarantee_for(k).map_err(internal)?;
    o.insert("guarantee".into(), json!(guarantee));
    o.insert("budget".into(), json!(eps(settings.budget)));
    o.insert("period".into(), json!(settings.period.name()));
    o.insert("window_end".into(), json!(window_end));
    o.insert("history_items".into(), json!(m.known));
    o.insert("unknown_items".into(), json!(m.unknown));
    o.insert("noise".into(), json!(svc.noise()));
    if svc.seeded() {
        o.insert("insecure_test_seed".into(), json!(true));
    }
    Ok(Value::Object(o))
}

/// Takes a slot among the pending requests, or a 503 when there are too many.
struct Pending<'a>(&'a Metrics);

impl<'a> Pending<'a> {
    fn take(st: &'a AppState) -> Result<Self, ApiError> {
        let limit = st.limits.max_pending();
        let now = st.metrics.pending.fetch_add(1, Ordering::SeqCst) + 1;
        if now > limit as u64 {
            st.metrics.pending.fetch_sub(1, Ordering::SeqCst);
            st.metrics.shed.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::new(
                503,
                "overloaded",
                None,
                format!("{limit} requests are already waiting; retry in a second"),
            )
            .with_limit(limit));
        }
        Ok(Pending(&st.metrics))
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

fn count_outcome(st: &AppState, o: &Outcome) {
    st.metrics.outcome(o.kind());
}

/// Waits until `min` has passed since `t` (the answer's pad, `min_response_ms`).
async fn pad(t: Instant, min: Duration) {
    if !min.is_zero() {
        tokio::time::sleep_until((t + min).into()).await;
    }
}

/// The body of a POST within the body limits, parsed as JSON (the errors name what is wrong).
async fn read_json(st: &AppState, headers: &HeaderMap, body: Body) -> Result<Value, ApiError> {
    let l = &st.limits;
    let bytes =
        guard::read_body(headers, body, l.max_body_bytes(), l.body_timeout_duration()).await?;
    api::parse_json(&bytes)
}

async fn recommend(State(st): Shared, headers: HeaderMap, body: Body) -> Response {
    let t = Instant::now();
    let result = async {
        let svc = Arc::clone(st.ready()?);
        let v = read_json(&st, &headers, body).await?;
        let r = api::recommend_request(&v, "", &st.limits)?;
        let m = map_request(&svc, r, "")?;
        st.metrics
            .unknown_items
            .fetch_add(m.unknown as u64, Ordering::Relaxed);
        let _slot = Pending::take(&st)?;
        let time = Timestamp::now();
        let outcome = svc
            .recommend(vec![m.req.clone()], time)
            .await
            .map_err(internal)?
            .pop()
            .ok_or_else(|| internal("the ledger returned no outcome"))?;
        count_outcome(&st, &outcome);
        answer(&svc, &m, outcome, time).await
    }
    .await;
    pad(t, st.limits.min_response()).await;
    st.metrics
        .recommend_seconds
        .observe(t.elapsed().as_secs_f64());
    match result {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&e),
    }
}

async fn recommend_batch(State(st): Shared, headers: HeaderMap, body: Body) -> Response {
    let t = Instant::now();
    let result = async {
        let svc = Arc::clone(st.ready()?);
        let v = read_json(&st, &headers, body).await?;
        let checked = api::batch_requests(&v, &st.limits)?;
        let mut slots: Vec<Result<Mapped, ApiError>> = Vec::with_capacity(checked.len());
        for (i, r) in checked.into_iter().enumerate() {
            slots.push(r.and_then(|r| map_request(&svc, r, &format!("requests[{i}]."))));
        }
        let todo: Vec<BatchRequest> = slots
            .iter()
            .filter_map(|s| s.as_ref().ok().map(|m| m.req.clone()))
            .collect();
        for m in slots.iter().flatten() {
            st.metrics
                .unknown_items
                .fetch_add(m.unknown as u64, Ordering::Relaxed);
        }
        let _slot = Pending::take(&st)?;
        let time = Timestamp::now();
        let mut outcomes = svc
            .recommend(todo, time)
            .await
            .map_err(internal)?
            .into_iter();
        let mut out = Vec::with_capacity(slots.len());
        for s in slots {
            let item = match s {
                Err(e) => Err(e),
                Ok(m) => {
                    let o = outcomes
                        .next()
                        .ok_or_else(|| internal("the ledger returned too few outcomes"))?;
                    count_outcome(&st, &o);
                    answer(&svc, &m, o, time).await
                }
            };
            out.push(match item {
                Ok(mut v) => {
                    v["status"] = json!(200);
                    v
                }
                Err(e) => json!({"status": e.status, "error": e}),
            });
        }
        Ok::<_, ApiError>(json!({ "responses": out }))
    }
    .await;
    pad(t, st.limits.min_response()).await;
    st.metrics.batch_seconds.observe(t.elapsed().as_secs_f64());
    match result {
        Ok(v) => json_response(200, &v),
        Err(e) => error_response(&e),
    }
}

async fn not_found(req: Request) -> Response {
    error_response(&ApiError::new(
        404,
        "not_found",
        None,
        format!(
            "no route {} {}; the routes are POST /v1/recommend, POST /v1/recommend/batch, GET \
             /v1/users/{{user}}/budget, GET /v1/model, GET /v1/public-list, GET /metrics, GET \
             /healthz, GET /readyz",
            req.method(),
            req.uri().path()
        ),
    ))
}

async fn method_not_allowed(req: Request) -> Response {
    error_response(&ApiError::new(
        405,
        "method_not_allowed",
        None,
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    ))
}

fn router(st: Arc<AppState>) -> Router {
    let guarded = Router::new()
        .route("/v1/recommend", post(recommend))
        .route("/v1/recommend/batch", post(recommend_batch))
        .route("/v1/users/{user}/budget", get(budget))
        .route("/v1/model", get(model))
        .route("/v1/public-list", get(public_list))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&st.api_key),
            guard::auth,
        ));
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(guarded)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&st.allowed_hosts),
            guard::host,
        ))
        .layer(middleware::from_fn(guard::json_errors))
        .layer(middleware::from_fn_with_state(Arc::clone(&st), count))
        .with_state(st)
}

/// A future that resolves on SIGTERM or SIGINT; the handlers are installed when this is called,
/// so a signal that arrives while the model loads is not lost.
fn stop_signal() -> Result<impl std::future::Future<Output = ()>, ServeError> {
    use tokio::signal::unix::{signal, SignalKind};
    let io = |source| ServeError::Io {
        context: "installing the SIGTERM/SIGINT handlers".into(),
        source,
    };
    let mut term = signal(SignalKind::terminate()).map_err(io)?;
    let mut int = signal(SignalKind::interrupt()).map_err(io)?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => eprintln!("recsel serve: SIGTERM: finishing requests in flight"),
            _ = int.recv() => eprintln!("recsel serve: SIGINT: finishing requests in flight"),
        }
    })
}

/// The host names requests may name: `--allowed-hosts` if given; else, without an API key, the
/// listen address and localhost (and the loopback addresses when listening on every
/// interface); else any (`None`).
fn allowed_hosts(opts: &ServeOptions, bound: SocketAddr, keyed: bool) -> Option<Vec<String>> {
    if let Some(list) = &opts.allowed_hosts {
        return Some(
            list.split(',')
                .map(guard::host_name)
                .filter(|h| !h.is_empty())
                .collect(),
        );
    }
    if keyed {
        return None;
    }
    let ip = bound.ip();
    let mut hosts = vec!["localhost".to_string(), ip.to_string()];
    if ip.is_unspecified() || ip.is_loopback() {
        hosts.extend(["127.0.0.1".to_string(), "::1".to_string()]);
    }
    hosts.dedup();
    Some(hosts)
}

/// Runs the service of `opts` until SIGTERM or SIGINT: binds the address first (health answers
/// at once; readiness once the model and the ledger are loaded), then serves. On the signal it
/// stops accepting, finishes the requests in flight (closing the connections still open after
/// `shutdown_timeout`), lets the ledger commit what is queued, and returns what it served. Blocking; prints its banner and its address on stderr.
pub fn run(opts: ServeOptions) -> Result<Served, ServeError> {
    let config = opts.config()?;
    let api_key = opts.api_key_file.as_deref().map(read_api_key).transpose()?;
    let listen = opts.listen();
    let addr: SocketAddr = listen.parse().map_err(|_| {
        ServeError::Options(format!(
            "listen '{listen}' is not an address such as 127.0.0.1:8080"
        ))
    })?;
    let io = |context: String| move |source| ServeError::Io { context, source };
    let std_listener =
        std::net::TcpListener::bind(addr).map_err(io(format!("listening on {addr}")))?;
    std_listener
        .set_nonblocking(true)
        .map_err(io("configuring the socket".into()))?;
    let bound = std_listener
        .local_addr()
        .map_err(io("reading the bound address".into()))?;
    if let Some(seed) = opts.insecure_test_seed {
        eprintln!(
            "recsel serve: WARNING: INSECURE TEST SEED {seed}: the noise of every request follows \
             from the seed and its request id, so anyone who knows the seed can undo the \
             privacy; for tests only, never for real users"
        );
    }
    if api_key.is_none() && !bound.ip().is_loopback() {
        eprintln!(
            "recsel serve: warning: listening on {bound} without an API key: anyone who can \
             reach this address can spend users' budgets (--api-key-file)"
        );
    }
    let allowed_hosts = allowed_hosts(&opts, bound, api_key.is_some());
    if let Some(hosts) = &allowed_hosts {
        eprintln!(
            "recsel serve: answering requests whose Host is {} (--allowed-hosts; /healthz and \
             /readyz answer any)",
            hosts.join(", ")
        );
    }
    let metrics = Arc::new(Metrics::default());
    let st = Arc::new(AppState {
        limits: opts.limits,
        opts,
        api_key: Arc::new(api_key),
        allowed_hosts: Arc::new(allowed_hosts),
        service: OnceLock::new(),
        status: Mutex::new("loading the model and the ledger".into()),
        stopping: AtomicBool::new(false),
        metrics: Arc::clone(&metrics),
    });
    let io_threads = std::thread::available_parallelism()
        .map(|n| n.get().min(4))
        .unwrap_or(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(io_threads)
        .thread_name("serve-io")
        .enable_all()
        .build()
        .map_err(io("starting the async runtime".into()))?;
    let result = rt.block_on(async {
        let listener =
            tokio::net::TcpListener::from_std(std_listener).map_err(io("the socket".into()))?;
        let stop = stop_signal()?;
        // Health answers from now on; "listening on" waits until requests can be answered.
        eprintln!(
            "recsel serve: bound to http://{bound}; loading the model and the ledger (/readyz \
             answers 503 until ready)"
        );
        let (fail_tx, fail_rx) = tokio::sync::oneshot::channel::<ServeError>();
        let loader = {
            let st = Arc::clone(&st);
            tokio::task::spawn_blocking(move || {
                let t = Instant::now();
                match Service::load(&st.opts, &config, Arc::clone(&st.metrics)) {
                    Ok(svc) => {
                        for line in svc.startup_lines() {
                            eprintln!("{line}");
                        }
                        let _ = st.service.set(Arc::new(svc));
                        eprintln!("recsel serve: ready in {:.2} s", t.elapsed().as_secs_f64());
                        eprintln!("recsel serve: listening on http://{bound}");
                    }
                    Err(e) => {
                        *st.status.lock().unwrap_or_else(|e| e.into_inner()) =
                            format!("failed to load: {e}");
                        let _ = fail_tx.send(e);
                    }
                }
            })
        };
        let failed = Arc::new(Mutex::new(None));
        let shutdown = {
            let st = Arc::clone(&st);
            let failed = Arc::clone(&failed);
            async move {
                // Resolves only when loading failed (the sender is dropped once loading worked).
                let load_failed = async {
                    match fail_rx.await {
                        Ok(e) => e,
                        Err(_) => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = stop => {}
                    e = load_failed => {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                    }
                }
                st.stopping.store(true, Ordering::SeqCst);
                *st.status.lock().unwrap_or_else(|e| e.into_inner()) = "shutting down".into();
            }
        };
        let conns = Arc::clone(&st.metrics.connections);
        conn::serve(
            listener,
            router(Arc::clone(&st)),
            st.limits,
            conns,
            shutdown,
        )
        .await;
        let _ = loader.await;
        if let Some(e) = failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
            return Err(e);
        }
        Ok(())
    });
    // Every connection is closed; wait for work handed to the pool by clients that went away,
    // then drop the service: its committer commits what is queued and stops.
    let svc = st.service.get().cloned();
    rt.shutdown_timeout(st.limits.shutdown_timeout_duration());
    let mut served = Served {
        charged: metrics.outcomes("charged"),
        replayed: metrics.outcomes("replayed"),
        refused: metrics.outcomes("refused"),
        fallback: metrics.outcomes("fallback"),
        commits: CommitStats::default(),
    };
    if let Some(svc) = svc {
        let deadline = Instant::now() + st.limits.shutdown_timeout_duration();
        // Two references remain: `st`'s and this one.
        while Arc::strong_count(&svc) > 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Commit what is queued and stop the commit thread before reporting.
        svc.committer().shutdown();
        served.commits = svc.committer().stats();
    }
    drop(st);
    result.map(|()| served)
}
