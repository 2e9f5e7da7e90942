//! `ApiError`: the one place HTTP errors become `{"error":{"code","message"}}` responses, and
//! [`json_errors`], the outermost layer that turns any other error answer (an axum extractor's
//! rejection, rmcp's transport errors) into the same shape.

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::protocol::codes;
use crate::protocol::{ErrorBody, ErrorDetail, FieldError};
use crate::service::{ErrorKind, ServiceError};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn field(code: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            field: Some(field.into()),
            ..ApiError::bad_request(code, message)
        }
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }
}

impl From<ServiceError> for ApiError {
    /// The one mapping of a service error to an HTTP answer: its class decides the status.
    fn from(error: ServiceError) -> Self {
        let status = match error.kind {
            ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Gone => StatusCode::GONE,
            ErrorKind::TooMany => StatusCode::TOO_MANY_REQUESTS,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Upstream => StatusCode::BAD_GATEWAY,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
        };
        ApiError {
            status,
            code: error.code,
            message: error.message.to_string(),
            field: error.field.map(|field| field.http_name().to_string()),
        }
    }
}

impl From<FieldError> for ApiError {
    fn from(error: FieldError) -> Self {
        ApiError::from(ServiceError::from(error))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
                field: self.field,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}

/// The longest error text kept from an answer that was not JSON.
const MAX_ERROR_TEXT: usize = 1024;

/// Rewrites an error answer (4xx, 5xx) that is not JSON into `{"error":{"code","message"}}`
/// with the same status and headers: the code follows the status, the message is the
/// original text. Every route the daemon serves then answers errors in one shape.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || super::extract::is_json(response.headers())
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
        .unwrap_or_default();
    let mut message: String = text.chars().take(MAX_ERROR_TEXT).collect();
    if message.is_empty() {
        message = status
            .canonical_reason()
            .unwrap_or("request failed")
            .to_string();
    }
    let code = match status {
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => codes::INVALID_REQUEST,
        StatusCode::UNAUTHORIZED => codes::UNAUTHORIZED,
        StatusCode::FORBIDDEN => codes::FORBIDDEN,
        StatusCode::NOT_FOUND => codes::NOT_FOUND,
        StatusCode::METHOD_NOT_ALLOWED => codes::METHOD_NOT_ALLOWED,
        StatusCode::NOT_ACCEPTABLE => codes::NOT_ACCEPTABLE,
        StatusCode::REQUEST_TIMEOUT => codes::REQUEST_TIMEOUT,
        StatusCode::CONFLICT => codes::CONFLICT,
        StatusCode::PAYLOAD_TOO_LARGE => codes::PAYLOAD_TOO_LARGE,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => codes::UNSUPPORTED_MEDIA_TYPE,
        StatusCode::TOO_MANY_REQUESTS => codes::TOO_MANY_REQUESTS,
        StatusCode::SERVICE_UNAVAILABLE => codes::UNAVAILABLE,
        status if status.is_server_error() => codes::INTERNAL_ERROR,
        _ => codes::REQUEST_FAILED,
    };
    let mut answer = ApiError::new(status, code, message).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.remove(header::CONTENT_TYPE);
    for (name, value) in answer.headers() {
        parts.headers.insert(name, value.clone());
    }
    *answer.headers_mut() = parts.headers;
    answer
}
