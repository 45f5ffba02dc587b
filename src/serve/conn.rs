//! The service's connections: the accept loop with its connection limit and its log of accept
//! errors, the timeouts of one connection, and the shutdown deadline.
//!
//! A connection passes through three phases, shared by its socket and its service:
//!
//! * **idle** — waiting for a request: hyper closes it after `idle_timeout` without a complete
//!   head (its header timer starts when it begins to wait);
//! * **head** — the first byte of a request has arrived: the head must be complete within
//!   `header_timeout` of it, or the socket's next read fails and the connection closes;
//! * **busy** — the head is parsed and a handler runs: the handler reads the body within
//!   `body_timeout` (`guard::read_body`), and a write the client does not take for
//!   `body_timeout` fails and closes the connection.
//!
//! On the stop signal the loop stops accepting, asks every connection to finish its request and
//! close, and after `shutdown_timeout` drops those still open. A charge is durable before its
//! answer is written, so a dropped connection loses only the bytes of an answer that the same
//! request id gets back.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Sleep;

use super::api::ApiError;
use super::options::LimitOptions;

const IDLE: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;

/// Counters of the connections, shown by `/metrics`.
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Connections accepted and served.
    pub accepted: AtomicU64,
    /// Connections refused at the limit (503, closed).
    pub refused: AtomicU64,
    /// Failed accepts (e.g. no file descriptor left).
    pub accept_errors: AtomicU64,
    /// Connections closed by a header or response timeout.
    pub timed_out: AtomicU64,
    /// Connections dropped at the shutdown deadline.
    pub dropped_at_shutdown: AtomicU64,
}

/// A socket that fails a read once a request head is not complete `head` after its first byte,
/// and a write that the client has not taken for `write`.
struct Timed {
    io: TcpStream,
    phase: Arc<AtomicU8>,
    stats: Arc<ConnStats>,
    head: Duration,
    write: Duration,
    head_deadline: Option<Pin<Box<Sleep>>>,
    write_deadline: Option<Pin<Box<Sleep>>>,
}

fn timed_out(stats: &ConnStats, what: &str) -> std::io::Error {
    stats.timed_out.fetch_add(1, Ordering::Relaxed);
    std::io::Error::new(std::io::ErrorKind::TimedOut, what.to_string())
}

impl Timed {
    /// `r`, the result of a write; while it is pending, fails once the write has stalled for
    /// `self.write`.
    fn stalled<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<std::io::Result<T>>,
    ) -> Poll<std::io::Result<T>> {
        if r.is_ready() {
            self.write_deadline = None;
            return r;
        }
        let limit = self.write;
        let d = self
            .write_deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if d.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(timed_out(
                &self.stats,
                "the client did not take the response",
            )));
        }
        Poll::Pending
    }
}

impl AsyncRead for Timed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before
                    && this
                        .phase
                        .compare_exchange(IDLE, HEAD, Ordering::SeqCst, Ordering::SeqCst)
                        .is_ok()
                {
                    this.head_deadline = Some(Box::pin(tokio::time::sleep(this.head)));
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                if this.phase.load(Ordering::SeqCst) != HEAD {
                    this.head_deadline = None;
                } else if let Some(d) = &mut this.head_deadline {
                    if d.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Err(timed_out(
                            &this.stats,
                            "the request head did not arrive in time",
                        )));
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for Timed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.stalled(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.stalled(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.stalled(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Serves one connection until it closes, or, once `stop` turns true, until it has finished its
/// request.
async fn connection(
    stream: TcpStream,
    router: Router,
    limits: LimitOptions,
    stats: Arc<ConnStats>,
    mut stop: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let phase = Arc::new(AtomicU8::new(IDLE));
    let io = TokioIo::new(Timed {
        io: stream,
        phase: Arc::clone(&phase),
        stats,
        head: limits.header_timeout_duration(),
        write: limits.body_timeout_duration(),
        head_deadline: None,
        write_deadline: None,
    });
    let tower = TowerToHyperService::new(router);
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        phase.store(BUSY, Ordering::SeqCst);
        let answer = hyper::service::Service::call(&tower, req);
        let phase = Arc::clone(&phase);
        async move {
            let r = answer.await;
            phase.store(IDLE, Ordering::SeqCst);
            r
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout_duration())
        .keep_alive(true);
    let mut conn = pin!(builder.serve_connection(io, service));
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.wait_for(|s| *s) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// Answers a connection beyond the limit with a 503 (if the socket takes it at once) and closes
/// it.
fn refuse(stream: TcpStream, limit: usize) {
    let body = ApiError::new(
        503,
        "too_many_connections",
        None,
        format!("{limit} connections are open, the limit; retry in a second"),
    )
    .with_limit(limit)
    .body()
    .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: \
         1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let _ = stream.try_write(format!("{head}{body}").as_bytes());
}

/// Whether a failed accept concerns only the connection being accepted (the client went away).
fn concerns_one_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Prints accept errors at most once per `every`, counting those in between.
struct AcceptLog {
    every: Duration,
    last: Option<Instant>,
    since: u64,
}

impl AcceptLog {
    fn error(&mut self, e: &std::io::Error) {
        match self.last {
            Some(t) if t.elapsed() < self.every => self.since += 1,
            _ => {
                let more = match self.since {
                    0 => String::new(),
                    n => format!(" ({n} more since the last report)"),
                };
                eprintln!(
                    "recsel serve: accepting a connection failed: {e}{more}; retrying (at the \
                     file-descriptor limit, lower --max-connections or raise `ulimit -n`)"
                );
                self.last = Some(Instant::now());
                self.since = 0;
            }
        }
    }
}

/// Accepts connections on `listener` and serves each with `router` under `limits` until `stop`
/// resolves; then lets the connections finish for at most `limits.shutdown_timeout` and drops
/// those still open.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: LimitOptions,
    stats: Arc<ConnStats>,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns = JoinSet::new();
    let mut log = AcceptLog {
        every: Duration::from_secs(10),
        last: None,
        since: 0,
    };
    let mut stop = pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match Arc::clone(&slots).try_acquire_owned() {
                    Ok(permit) => {
                        stats.accepted.fetch_add(1, Ordering::Relaxed);
                        conns.spawn(connection(
                            stream,
                            router.clone(),
                            limits,
                            Arc::clone(&stats),
                            stop_rx.clone(),
                            permit,
                        ));
                    }
                    Err(_) => {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        refuse(stream, limits.max_connections());
                    }
                },
                Err(e) if concerns_one_connection(&e) => {}
                Err(e) => {
                    stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                    log.error(&e);
                    // Out of descriptors or memory: give the connections time to close.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let deadline = tokio::time::sleep(limits.shutdown_timeout_duration());
    let mut deadline = pin!(deadline);
    loop {
        tokio::select! {
            done = conns.join_next() => if done.is_none() { break },
            _ = &mut deadline => {
                let n = conns.len();
                stats.dropped_at_shutdown.fetch_add(n as u64, Ordering::Relaxed);
                eprintln!(
                    "recsel serve: shutdown deadline ({:.1} s) passed: closing {n} connection(s) \
                     still open (their committed charges stay committed)",
                    limits.shutdown_timeout()
                );
                conns.abort_all();
                while conns.join_next().await.is_some() {}
                break;
            }
        }
    }
}
