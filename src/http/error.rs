//! `ApiError`: the one place HTTP errors become `{"error":{"code","message"}}` responses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::core::CoreError;
use crate::core::event_log::ReadError;
use crate::protocol::{ErrorBody, ErrorDetail, FieldError};

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

    pub fn with_status(self, status: StatusCode) -> Self {
        ApiError { status, ..self }
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }
}

impl From<FieldError> for ApiError {
    fn from(error: FieldError) -> Self {
        ApiError::field("invalid_field", error.field, error.message)
    }
}

impl From<CoreError> for ApiError {
    fn from(error: CoreError) -> Self {
        let status = match &error {
            CoreError::Overloaded | CoreError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            CoreError::TooManyInstances { .. } => StatusCode::TOO_MANY_REQUESTS,
            CoreError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
            CoreError::Duplicate => StatusCode::CONFLICT,
        };
        let code = match &error {
            CoreError::Overloaded => "overloaded",
            CoreError::ShuttingDown => "shutting_down",
            CoreError::TooManyInstances { .. } => "too_many_instances",
            CoreError::Storage(_) => "storage_error",
            CoreError::Duplicate => "duplicate",
        };
        if let CoreError::Storage(detail) = &error {
            tracing::error!(detail, "event log write failed");
            return ApiError::new(
                status,
                code,
                "the event log could not be written; nothing was recorded",
            );
        }
        ApiError::new(status, code, error.to_string())
    }
}

impl From<ReadError> for ApiError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::CursorExpired { .. } => {
                ApiError::new(StatusCode::GONE, "cursor_expired", error.to_string())
            }
            ReadError::Io { .. } => {
                tracing::error!(%error, "event log read failed");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "storage_error",
                    "the event log could not be read",
                )
            }
        }
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
