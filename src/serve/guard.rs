//! What every request passes before a handler sees it: the API key, the Host allow-list, the
//! body's media type, length and arrival time — and the rule that every error answer, whoever
//! made it, has the documented JSON shape.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use http_body_util::BodyExt;

use super::api::ApiError;
use super::constant_time_eq;

/// The answer of an error: its JSON body, `Retry-After` and `WWW-Authenticate` where they apply.
pub fn error_response(e: &ApiError) -> Response {
    let mut r = Response::new(Body::from(e.body().to_string()));
    *r.status_mut() = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(serde_json::Value::Number(n)) = e.extra.get("retry_after_seconds") {
        if let Ok(v) = HeaderValue::from_str(&n.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    if e.status == 503 {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if e.status == 401 {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"recsel\""),
        );
    }
    r
}

/// The key an `Authorization` header carries: `Bearer KEY`, the scheme in any case (RFC 9110,
/// 11.1), any number of spaces before the key.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let start = rest.iter().position(|&b| b != b' ')?;
    Some(&rest[start..])
}

/// Requires the API key (`Authorization: Bearer KEY` or `X-API-Key: KEY`) when the service has
/// one.
pub async fn auth(State(key): State<Arc<Option<Vec<u8>>>>, req: Request, next: Next) -> Response {
    if let Some(key) = key.as_ref() {
        let h = req.headers();
        let (given, field, message) = match (h.get("x-api-key"), h.get(header::AUTHORIZATION)) {
            (Some(v), _) => (Some(v.as_bytes()), "x-api-key", "wrong API key"),
            (None, Some(v)) => match bearer(v.as_bytes()) {
                Some(k) => (Some(k), "authorization", "wrong API key"),
                None => (
                    None,
                    "authorization",
                    "the Authorization header must be 'Bearer KEY' (or send 'X-API-Key: KEY')",
                ),
            },
            (None, None) => (
                None,
                "authorization",
                "an API key is required: send the header 'Authorization: Bearer KEY' or \
                 'X-API-Key: KEY'",
            ),
        };
        if !given.is_some_and(|g| constant_time_eq(g, key)) {
            return error_response(&ApiError::new(
                401,
                "unauthorized",
                Some(field),
                message.into(),
            ));
        }
    }
    next.run(req).await
}

/// The host name of a Host header's value: without the port, brackets or a final dot, in
/// lower case (`[::1]:8080` → `::1`, `Localhost.:80` → `localhost`).
pub fn host_name(value: &str) -> String {
    let v = value.trim();
    let name = if let Some(rest) = v.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        match v.rsplit_once(':') {
            Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => v,
        }
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Refuses (403, `host_not_allowed`) a request whose Host is not among `allowed` (when the
/// service checks hosts): a page on another site whose name was made to resolve to this address
/// (DNS rebinding) names its own host. Health and readiness are not checked.
pub async fn host(
    State(allowed): State<Arc<Option<Vec<String>>>>,
    req: Request,
    next: Next,
) -> Response {
    if let Some(allowed) = allowed.as_ref() {
        let path = req.uri().path();
        if path != "/healthz" && path != "/readyz" {
            let given = req
                .headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(host_name);
            if !given.as_ref().is_some_and(|h| allowed.contains(h)) {
                return error_response(&ApiError::new(
                    403,
                    "host_not_allowed",
                    Some("host"),
                    format!(
                        "Host {} is not one this service answers to ({}); set --allowed-hosts, \
                         or require an API key (--api-key-file)",
                        given.map_or("(none)".into(), |h| format!("'{h}'")),
                        allowed.join(", ")
                    ),
                ));
            }
        }
    }
    next.run(req).await
}

/// The code of an error answer made outside the service's handlers (the router, a rejection).
fn code_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "bad_request",
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "timeout",
        413 => "body_too_large",
        415 => "unsupported_media_type",
        _ if status.is_server_error() => "internal",
        _ => "error",
    }
}

/// Gives every error answer that is not JSON yet (one made by the router or an extractor) the
/// documented shape, its text as the message.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let r = next.run(req).await;
    let status = r.status();
    let is_json = r
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return r;
    }
    let (parts, body) = r.into_parts();
    let text = match tokio::time::timeout(Duration::from_secs(1), body.collect()).await {
        Ok(Ok(b)) => String::from_utf8_lossy(&b.to_bytes()).trim().to_string(),
        _ => String::new(),
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let mut out = error_response(&ApiError::new(
        status.as_u16(),
        code_of(status),
        None,
        message,
    ));
    for (k, v) in &parts.headers {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}

/// The body of a POST: `Content-Type: application/json` (415 otherwise: a browser's "simple"
/// POST from any page is text/plain or a form), no Content-Encoding (415), a Content-Length
/// within `max` (413 before reading), the whole body within `max` bytes (413) and `timeout`
/// (408).
pub async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let json = media.as_deref().is_some_and(|m| {
        m.split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("application/json"))
    });
    if !json {
        return Err(ApiError::new(
            415,
            "unsupported_media_type",
            Some("content-type"),
            format!(
                "a request body is JSON, sent with 'Content-Type: application/json'; got {}",
                media.map_or("no Content-Type".into(), |m| format!("'{m}'"))
            ),
        ));
    }
    if let Some(enc) = headers.get(header::CONTENT_ENCODING) {
        if !enc.as_bytes().eq_ignore_ascii_case(b"identity") {
            return Err(ApiError::new(
                415,
                "unsupported_media_type",
                Some("content-encoding"),
                format!(
                    "Content-Encoding '{}' is not accepted; send the JSON uncompressed",
                    String::from_utf8_lossy(enc.as_bytes())
                ),
            ));
        }
    }
    let too_large = || {
        ApiError::new(
            413,
            "body_too_large",
            Some("body"),
            format!("the request body is larger than the limit of {max} bytes"),
        )
        .with_limit(max)
    };
    if let Some(len) = headers.get(header::CONTENT_LENGTH) {
        let n = std::str::from_utf8(len.as_bytes())
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        if n.is_none_or(|n| n > max as u64) {
            return Err(too_large());
        }
    }
    let limited = http_body_util::Limited::new(body, max);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Ok(Ok(b)) => Ok(b.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Ok(Err(e)) => Err(ApiError::new(
            400,
            "unreadable_body",
            Some("body"),
            format!("the request body could not be read: {e}"),
        )),
        Err(_) => Err(ApiError::new(
            408,
            "body_timeout",
            Some("body"),
            format!(
                "the request body did not arrive whole within {} s",
                timeout.as_secs_f64()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"BEARER   abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearerabc"), None);
        assert_eq!(bearer(b"Bearer "), None);
    }

    #[test]
    fn host_names_lose_their_port_brackets_case_and_final_dot() {
        assert_eq!(host_name("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("[::1]"), "::1");
        assert_eq!(host_name("Localhost.:80"), "localhost");
        assert_eq!(host_name("evil.example"), "evil.example");
    }
}
