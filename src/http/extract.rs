//! `ApiJson<T>`: a JSON body extractor whose every failure is an [`ApiError`] naming the field,
//! and `ApiQuery<T>`, the same for query strings.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

use super::ApiError;
use crate::protocol::codes;

pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                codes::UNSUPPORTED_MEDIA_TYPE,
                "the body must be JSON with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    codes::PAYLOAD_TOO_LARGE,
                    format!("the body is larger than {} bytes", super::MAX_BODY_BYTES),
                )
            } else {
                ApiError::bad_request(codes::INVALID_BODY, rejection.body_text())
            }
        })?;
        parse(&bytes).map(ApiJson)
    }
}

/// A query string extractor: a parameter given twice (`?after=1&after=2`) or of the wrong
/// type is a JSON `400`, naming the parameter when it can.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match Query::<T>::try_from_uri(&parts.uri) {
            Ok(Query(query)) => Ok(ApiQuery(query)),
            Err(rejection) => {
                let text = rejection.body_text();
                let duplicate = text
                    .split_once("duplicate field `")
                    .and_then(|(_, rest)| rest.split_once('`'))
                    .map(|(name, _)| name.to_string());
                Err(match duplicate {
                    Some(name) => ApiError::field(
                        codes::INVALID_FIELD,
                        name.clone(),
                        format!("`{name}` is given more than once"),
                    ),
                    None => ApiError::bad_request(codes::INVALID_QUERY, text),
                })
            }
        }
    }
}

pub fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
}

/// Parses a body, naming the offending field on failure.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // The common case in one pass: an object that is what `T` expects. Anything else (even a
    // body the two passes below would accept, such as one naming a field twice) takes them, so
    // what is accepted and every error's wording are theirs.
    if bytes.trim_ascii_start().first() == Some(&b'{')
        && let Ok(parsed) = serde_json::from_slice(bytes)
    {
        return Ok(parsed);
    }
    parse_checked(bytes)
}

/// The two passes: syntax, then the fields, the error naming the field.
fn parse_checked<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Syntax first, so that every later error is about a field (serde_json would report a
    // wrong-typed enum field, `"status": 3`, as a syntax error otherwise).
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|error| {
        ApiError::bad_request(
            codes::INVALID_JSON,
            format!("the body is not valid JSON: {error}"),
        )
    })?;
    // serde would accept a JSON array as a struct's fields by position; bodies are objects only.
    if !value.is_object() {
        return Err(ApiError::bad_request(
            codes::INVALID_BODY,
            "the body must be a JSON object",
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        field_error(&path, &error.into_inner().to_string())
    })
}

fn field_error(path: &str, message: &str) -> ApiError {
    // serde reports a missing field at the parent's path, with the name in the message.
    if let Some(rest) = message.strip_prefix("missing field `")
        && let Some(name) = rest.split('`').next()
    {
        let field = if path == "." {
            name.to_string()
        } else {
            format!("{path}.{name}")
        };
        return ApiError::field(
            codes::MISSING_FIELD,
            field.clone(),
            format!("`{field}` is required"),
        );
    }
    // Strip serde_json's " at line 1 column 20" suffix: the field name says more.
    let message = message
        .rsplit_once(" at line ")
        .map(|(head, _)| head)
        .unwrap_or(message);
    if path == "." {
        return ApiError::bad_request(
            codes::INVALID_BODY,
            format!("the body must be a JSON object: {message}"),
        );
    }
    ApiError::field(codes::INVALID_FIELD, path, format!("`{path}`: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::AgentEventParams;

    fn err(body: &str) -> ApiError {
        match parse::<AgentEventParams>(body.as_bytes()) {
            Ok(_) => panic!("{body} parsed"),
            Err(error) => error,
        }
    }

    #[test]
    fn names_the_field_at_fault() {
        let e = err(r#"{"status":"running","tmuxSession":"s"}"#);
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("missing_field", Some("agent"))
        );
        let e = err(r#"{"agent":"a","status":"sleeping","tmuxSession":"s"}"#);
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("invalid_field", Some("status"))
        );
        assert!(e.message.contains("sleeping"), "{}", e.message);
        let e = err(r#"{"agent":5,"status":"idle","tmuxSession":"s"}"#);
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("invalid_field", Some("agent"))
        );
        let e = err(r#"{"agent":"a","status":"idle","tmuxSession":"s","ts":"soon"}"#);
        assert_eq!(e.field.as_deref(), Some("ts"));
        let e = err(r#"{"agent":"a""#);
        assert_eq!(e.code, "invalid_json");
        let e = err(r#"[1]"#);
        assert_eq!(e.code, "invalid_body");
        let e = err(r#"{"agent":"a","status":"idle","tmuxSession":"s"} {}"#);
        assert_eq!(e.code, "invalid_json");
    }

    /// The one-pass fast path accepts exactly what the two checked passes accept, with the same
    /// value, and leaves every refusal to them.
    #[test]
    fn the_fast_path_agrees_with_the_checked_passes() {
        let bodies = [
            r#"{"agent":"a","status":"running","tmuxSession":"s","threadId":"t"}"#,
            r#"  {"agent":"a","status":"tool-running","projectDir":"/p","ts":5}"#,
            r#"{"agent":"a","status":"idle","agent":"b"}"#,
            r#"{"agent":"a","status":"idle","extra":1}"#,
            r#"{"agent":"a","status":"idle","liveness":null}"#,
            r#"["a","idle"]"#,
            r#"{"agent":"a","status":3}"#,
            r#"{"agent":"a","status":"idle"} x"#,
            r#"{"agent":"\u00e9","status":"idle","ts":18446744073709551615}"#,
            r#"{"agent":"a","status":"idle","ts":1.5}"#,
            "",
            "{",
        ];
        let shown = |result: Result<AgentEventParams, ApiError>| match result {
            Ok(params) => Ok(serde_json::to_value(params).unwrap()),
            Err(error) => Err((error.code, error.message, error.field)),
        };
        for body in bodies {
            assert_eq!(
                shown(parse(body.as_bytes())),
                shown(parse_checked(body.as_bytes())),
                "{body}"
            );
        }
    }
}
