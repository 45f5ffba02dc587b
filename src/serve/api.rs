//! The service's JSON: requests are checked field by field (every error names its field and, for
//! a limit, the limit), and responses are built from ledger outcomes.
//!
//! A valid user id or request id is 1 to `max_id_bytes` (128) bytes of ASCII letters, digits and
//! `-_.:@` — safe in a URL path, a log line and a CSV cell without quoting.

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::options::LimitOptions;

/// The fields a recommendation request may hold.
pub const REQUEST_FIELDS: &str = "user, history, request_id, k";

/// Fields the operator fixes; a request naming one is refused with this explanation.
const OPERATOR_FIELDS: &[&str] = &[
    "mechanism",
    "mech",
    "epsilon",
    "eps",
    "candidates",
    "budget",
    "period",
    "allow_non_private",
    "seed",
    "params",
];

/// An error answered to a client: HTTP status, a stable code, the field it concerns and a
/// sentence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Stable machine-readable code (`invalid_field`, `budget_exhausted`, …).
    pub code: &'static str,
    /// The request field (`history`, `history[3]`, `requests[2].user`, `body`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// What is wrong and what to do.
    pub message: String,
    /// The limit that was hit, if one was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Extra fields (a refusal's balance and retry time).
    #[serde(flatten, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl ApiError {
    /// An error with `status`, `code`, an optional `field` and a `message`.
    pub fn new(status: u16, code: &'static str, field: Option<&str>, message: String) -> Self {
        ApiError {
            status,
            code,
            field: field.map(str::to_string),
            message,
            limit: None,
            extra: Map::new(),
        }
    }

    /// A 400 about `field`.
    pub fn field(field: &str, message: String) -> Self {
        Self::new(400, "invalid_field", Some(field), message)
    }

    /// This error with the limit it hit.
    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit as u64);
        self
    }

    /// `{"error": {...}}`.
    pub fn body(&self) -> Value {
        json!({ "error": self })
    }
}

/// One checked recommendation request: item ids still as given (mapped to columns later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecommendRequest {
    /// The user whose budget pays.
    pub user: String,
    /// The idempotency key; `None` when the client gave none (the service makes one).
    pub request_id: Option<String>,
    /// The history's item ids, as given.
    pub history: Vec<String>,
    /// Items asked for (a list of k, one release); `None`: the service's default (`--k`).
    pub k: Option<usize>,
}

/// A JSON value read with every object's keys distinct.
struct Distinct(Value);

/// The prefix of the error a repeated key raises (the key follows, then `'`).
const REPEATED: &str = "repeated key '";

impl<'de> serde::Deserialize<'de> for Distinct {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DistinctVisitor).map(Distinct)
    }
}

struct DistinctVisitor;

impl<'de> serde::de::Visitor<'de> for DistinctVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Distinct(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!("{REPEATED}{key}'")));
            }
            let Distinct(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Parses a body as JSON; a syntax error is a 400 on `body` with its line and column. A key
/// repeated in an object is refused (400 `duplicate_key`, naming it): parsers disagree on which
/// value wins, so a proxy that checks `user` could pass a body whose other `user` is charged.
pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice::<Distinct>(body)
        .map(|d| d.0)
        .map_err(|e| {
            let text = e.to_string();
            if let Some(rest) = text.strip_prefix(REPEATED) {
                let key = rest.rsplit_once('\'').map_or(rest, |(k, _)| k);
                return ApiError::new(
                    400,
                    "duplicate_key",
                    Some(key),
                    format!("the body names '{key}' twice ({e}); name each field once"),
                );
            }
            ApiError::new(
                400,
                "malformed_json",
                Some("body"),
                format!("the body is not valid JSON: {e}"),
            )
        })
}

/// Whether `id` is a valid user id or request id under `limits`; the error names `field`.
pub fn check_id(id: &str, field: &str, limits: &LimitOptions) -> Result<(), ApiError> {
    if id.is_empty() {
        return Err(ApiError::field(field, format!("{field} is empty")));
    }
    if id.len() > limits.max_id_bytes() {
        return Err(ApiError::field(
            field,
            format!(
                "{field} is {} bytes long; the limit is {} bytes",
                id.len(),
                limits.max_id_bytes()
            ),
        )
        .with_limit(limits.max_id_bytes()));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.:@".contains(*c)))
    {
        return Err(ApiError::field(
            field,
            format!(
                "{field} contains {c:?}; an id is ASCII letters, digits and - _ . : @ (1 to {} \
                 bytes)",
                limits.max_id_bytes()
            ),
        ));
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks one recommendation request (`prefix` names where it sits in a batch, e.g.
/// `requests[2].`).
pub fn recommend_request(
    v: &Value,
    prefix: &str,
    limits: &LimitOptions,
) -> Result<RecommendRequest, ApiError> {
    let name = |f: &str| format!("{prefix}{f}");
    let obj = v.as_object().ok_or_else(|| {
        ApiError::field(
            if prefix.is_empty() {
                "body"
            } else {
                prefix.trim_end_matches('.')
            },
            format!(
                "a request is a JSON object with {REQUEST_FIELDS}, got {}",
                type_name(v)
            ),
        )
    })?;
    for key in obj.keys() {
        if OPERATOR_FIELDS.contains(&key.as_str()) {
            return Err(ApiError::new(
                400,
                "operator_fixed",
                Some(&name(key)),
                format!(
                    "'{key}' is fixed by the operator for every request (GET /v1/model shows the \
                     service's mechanism, eps, candidates and budget); a request may not choose \
                     it"
                ),
            ));
        }
        if !["user", "history", "request_id", "k"].contains(&key.as_str()) {
            return Err(ApiError::field(
                &name(key),
                format!("unknown field '{key}'; a request has {REQUEST_FIELDS}"),
            ));
        }
    }
    let user = match obj.get("user") {
        None => {
            return Err(ApiError::field(
                &name("user"),
                "missing: the user whose budget pays".into(),
            ))
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => {
            return Err(ApiError::field(
                &name("user"),
                format!("must be a string, got {}", type_name(other)),
            ))
        }
    };
    check_id(&user, &name("user"), limits)?;
    let request_id = match obj.get("request_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            check_id(s, &name("request_id"), limits)?;
            Some(s.clone())
        }
        Some(other) => {
            return Err(ApiError::field(
                &name("request_id"),
                format!("must be a string, got {}", type_name(other)),
            ))
        }
    };
    let items = match obj.get("history") {
        None => {
            return Err(ApiError::field(
                &name("history"),
                "missing: the user's items, an array of item ids".into(),
            ))
        }
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(ApiError::field(
                &name("history"),
                format!("must be an array of item ids, got {}", type_name(other)),
            ))
        }
    };
    if items.is_empty() {
        return Err(ApiError::field(
            &name("history"),
            "is empty: a recommendation needs at least one item the user has".into(),
        ));
    }
    if items.len() > limits.max_history() {
        return Err(ApiError::field(
            &name("history"),
            format!(
                "has {} items; the limit is {} items per history",
                items.len(),
                limits.max_history()
            ),
        )
        .with_limit(limits.max_history()));
    }
    let mut history = Vec::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        match it {
            Value::String(s) => history.push(s.clone()),
            other => {
                return Err(ApiError::field(
                    &format!("{prefix}history[{i}]"),
                    format!("an item id is a string, got {}", type_name(other)),
                ))
            }
        }
    }
    let k = match obj.get("k") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(k @ 1..) if k as usize <= crate::recommend::MAX_LIST => Some(k as usize),
            _ => {
                return Err(ApiError::field(
                    &name("k"),
                    format!(
                        "must be a whole number from 1 to {}, got {n}",
                        crate::recommend::MAX_LIST
                    ),
                )
                .with_limit(crate::recommend::MAX_LIST))
            }
        },
        Some(other) => {
            return Err(ApiError::field(
                &name("k"),
                format!(
                    "must be a whole number (items in the list), got {}",
                    type_name(other)
                ),
            ))
        }
    };
    Ok(RecommendRequest {
        user,
        request_id,
        history,
        k,
    })
}

/// Checks a batch body `{"requests": [...]}`: the body's own errors fail the whole call; each
/// request is checked on its own (a bad one fails only itself).
pub fn batch_requests(
    v: &Value,
    limits: &LimitOptions,
) -> Result<Vec<Result<RecommendRequest, ApiError>>, ApiError> {
    let obj = v.as_object().ok_or_else(|| {
        ApiError::field(
            "body",
            format!(
                "a batch is a JSON object {{\"requests\": [...]}}, got {}",
                type_name(v)
            ),
        )
    })?;
    if let Some(k) = obj.keys().find(|k| *k != "requests") {
        return Err(ApiError::field(
            k,
            format!("unknown field '{k}'; a batch has only requests"),
        ));
    }
    let list = match obj.get("requests") {
        Some(Value::Array(a)) => a,
        None => {
            return Err(ApiError::field(
                "requests",
                "missing: an array of requests".into(),
            ))
        }
        Some(other) => {
            return Err(ApiError::field(
                "requests",
                format!("must be an array, got {}", type_name(other)),
            ))
        }
    };
    if list.is_empty() {
        return Err(ApiError::field("requests", "is empty".into()));
    }
    if list.len() > limits.max_batch() {
        return Err(ApiError::field(
            "requests",
            format!(
                "has {} requests; the limit is {} per batch",
                list.len(),
                limits.max_batch()
            ),
        )
        .with_limit(limits.max_batch()));
    }
    Ok(list
        .iter()
        .enumerate()
        .map(|(i, r)| recommend_request(r, &format!("requests[{i}]."), limits))
        .collect())
}

/// The default length of `GET /v1/public-list` without `m`: room for device-side filtering.
pub const PUBLIC_LIST_DEFAULT: usize = 100;

/// The `m` of `GET /v1/public-list?m=M` (1 to [`crate::recommend::MAX_LIST`]; without it
/// [`PUBLIC_LIST_DEFAULT`]); any other query parameter is an error that names it.
pub fn public_list_m(query: Option<&str>) -> Result<usize, ApiError> {
    let mut m = PUBLIC_LIST_DEFAULT;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("m", v)) => {
                m = v
                    .parse::<usize>()
                    .ok()
                    .filter(|m| (1..=crate::recommend::MAX_LIST).contains(m))
                    .ok_or_else(|| {
                        ApiError::field(
                            "m",
                            format!(
                                "m = '{v}': a public list has 1 to {} items",
                                crate::recommend::MAX_LIST
                            ),
                        )
                    })?
            }
            _ => {
                return Err(ApiError::field(
                    "m",
                    format!("unknown query parameter '{pair}': the only one is m"),
                ))
            }
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: &str) -> Result<RecommendRequest, ApiError> {
        recommend_request(&parse_json(body.as_bytes())?, "", &LimitOptions::default())
    }

    #[test]
    fn every_bad_request_names_its_field() {
        let cases: &[(&str, u16, &str)] = &[
            ("{\"user\": \"u\", \"history\": [\"1\"", 400, "body"),
            ("[1, 2]", 400, "body"),
            ("{\"history\": [\"1\"]}", 400, "user"),
            ("{\"user\": \"u\"}", 400, "history"),
            ("{\"user\": 7, \"history\": [\"1\"]}", 400, "user"),
            ("{\"user\": \"a b\", \"history\": [\"1\"]}", 400, "user"),
            ("{\"user\": \"\", \"history\": [\"1\"]}", 400, "user"),
            ("{\"user\": \"u\", \"history\": \"1,2\"}", 400, "history"),
            ("{\"user\": \"u\", \"history\": []}", 400, "history"),
            (
                "{\"user\": \"u\", \"history\": [\"1\", 2]}",
                400,
                "history[1]",
            ),
            (
                "{\"user\": \"u\", \"history\": [\"1\"], \"request_id\": 5}",
                400,
                "request_id",
            ),
            (
                "{\"user\": \"u\", \"history\": [\"1\"], \"epsilon\": 8}",
                400,
                "epsilon",
            ),
            (
                "{\"user\": \"u\", \"history\": [\"1\"], \"mechanism\": \"rnmh\"}",
                400,
                "mechanism",
            ),
            (
                "{\"user\": \"u\", \"history\": [\"1\"], \"colour\": 1}",
                400,
                "colour",
            ),
        ];
        for (body, status, field) in cases {
            let e = check(body).unwrap_err();
            assert_eq!(
                (e.status, e.field.as_deref()),
                (*status, Some(*field)),
                "{body}: {e:?}"
            );
        }
        let long = format!(
            "{{\"user\": \"{}\", \"history\": [\"1\"]}}",
            "u".repeat(129)
        );
        assert_eq!(check(&long).unwrap_err().limit, Some(128));
        let many: Vec<String> = (0..10_001).map(|i| format!("\"{i}\"")).collect();
        let big = format!("{{\"user\": \"u\", \"history\": [{}]}}", many.join(","));
        assert_eq!(check(&big).unwrap_err().limit, Some(10_000));
    }

    #[test]
    fn a_repeated_key_is_refused_naming_it_at_any_depth() {
        for (body, key) in [
            (r#"{"user": "a", "history": ["1"], "user": "b"}"#, "user"),
            (
                r#"{"requests": [{"user": "a", "history": ["1"], "history": ["2"]}]}"#,
                "history",
            ),
            (
                r#"{"user": "a", "history": ["1"], "request_id": "x", "request_id": "y"}"#,
                "request_id",
            ),
        ] {
            let e = parse_json(body.as_bytes()).unwrap_err();
            assert_eq!(
                (e.status, e.code, e.field.as_deref()),
                (400, "duplicate_key", Some(key)),
                "{body}: {e:?}"
            );
        }
        let v =
            parse_json(br#"{"a": [1, -2, 3.5, null, true, {"b": "c"}], "d": {"b": 1}}"#).unwrap();
        assert_eq!(
            v,
            json!({"a": [1, -2, 3.5, null, true, {"b": "c"}], "d": {"b": 1}})
        );
    }

    #[test]
    fn a_good_request_and_a_batch_parse() {
        let r =
            check("{\"user\": \"u-1@x\", \"history\": [\"3\", \"9\"], \"request_id\": \"r:1\"}")
                .unwrap();
        assert_eq!(r.user, "u-1@x");
        assert_eq!(r.request_id.as_deref(), Some("r:1"));
        assert_eq!(r.history, ["3", "9"]);
        let b =
            parse_json(b"{\"requests\": [{\"user\": \"a\", \"history\": [\"1\"]}, {\"user\": 1}]}")
                .unwrap();
        let out = batch_requests(&b, &LimitOptions::default()).unwrap();
        assert!(out[0].is_ok());
        assert_eq!(
            out[1].as_ref().unwrap_err().field.as_deref(),
            Some("requests[1].user")
        );
    }
}
