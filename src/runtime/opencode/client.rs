//! The HTTP client of one `opencode serve` on loopback: JSON requests and the `/event` stream,
//! each with HTTP Basic auth (user `opencode`, the server's generated password), over hyper's
//! connection-level HTTP/1.1 client (one connection per request; the stream keeps its own).

use std::time::Duration;

use base64::Engine;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How long a request (not the event stream) may take: prompts are asynchronous, so every
/// call cohost makes answers at once unless the server is stuck.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The most bytes of an error body kept in an error message.
const ERROR_BODY_MAX: usize = 600;

/// Why a request to the server failed; each variant names the request.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to opencode on 127.0.0.1:{port}: {source}")]
    Connect { port: u16, source: std::io::Error },
    #[error("{method} {path}: {source}")]
    Http {
        method: Method,
        path: String,
        source: hyper::Error,
    },
    #[error("{method} {path} timed out after {}s", REQUEST_TIMEOUT.as_secs())]
    Timeout { method: Method, path: String },
    #[error("{method} {path} answered {status}: {body}")]
    Status {
        method: Method,
        path: String,
        status: StatusCode,
        body: String,
    },
    #[error("{method} {path} answered what cohost cannot read: {message}")]
    Decode {
        method: Method,
        path: String,
        message: String,
    },
}

impl ClientError {
    /// The server answered `404` (a permission or question already answered, a session gone).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::Status { status, .. } if *status == StatusCode::NOT_FOUND)
    }
}

/// A client of one server. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    port: u16,
    authorization: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("port", &self.port).finish()
    }
}

impl Client {
    pub fn new(port: u16, username: &str, password: &str) -> Self {
        let credentials =
            base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}"));
        Client {
            port,
            authorization: format!("Basic {credentials}"),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<hyper::Response<Incoming>, ClientError> {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|source| ClientError::Connect {
                port: self.port,
                source,
            })?;
        let http = |source| ClientError::Http {
            method: method.clone(),
            path: path.to_string(),
            source,
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(http)?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut request = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(hyper::header::HOST, format!("127.0.0.1:{}", self.port))
            .header(hyper::header::AUTHORIZATION, &self.authorization);
        if body.is_some() {
            request = request.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let request =
            request
                .body(body.unwrap_or_default())
                .map_err(|error| ClientError::Decode {
                    method: method.clone(),
                    path: path.to_string(),
                    message: error.to_string(),
                })?;
        sender.send_request(request).await.map_err(http)
    }

    /// One request, its whole answer as text; a status outside 2xx is an error.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> Result<String, ClientError> {
        let exchange = async {
            let response = self.send(method.clone(), path, body).await?;
            let status = response.status();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|source| ClientError::Http {
                    method: method.clone(),
                    path: path.to_string(),
                    source,
                })?
                .to_bytes();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if !status.is_success() {
                let mut body = text;
                if body.len() > ERROR_BODY_MAX {
                    let mut cut = ERROR_BODY_MAX;
                    while !body.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    body.truncate(cut);
                    body.push('…');
                }
                return Err(ClientError::Status {
                    method: method.clone(),
                    path: path.to_string(),
                    status,
                    body,
                });
            }
            Ok(text)
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Timeout {
                    method: method.clone(),
                    path: path.to_string(),
                })
            })
    }

    fn decode<T: DeserializeOwned>(
        method: Method,
        path: &str,
        text: &str,
    ) -> Result<T, ClientError> {
        serde_json::from_str(text).map_err(|error| ClientError::Decode {
            method,
            path: path.to_string(),
            message: format!(
                "{error}; body starts {:?}",
                text.chars().take(80).collect::<String>()
            ),
        })
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let text = self.call(Method::GET, path, None).await?;
        Self::decode(Method::GET, path, &text)
    }

    /// A JSON request whose answer is read as `T`.
    pub async fn send_json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_string(body).map_err(|error| ClientError::Decode {
            method: method.clone(),
            path: path.to_string(),
            message: error.to_string(),
        })?;
        let text = self.call(method.clone(), path, Some(body)).await?;
        Self::decode(method, path, &text)
    }

    /// A JSON request whose answer (`204`, `true`) does not matter beyond its status.
    pub async fn post(&self, path: &str, body: &impl Serialize) -> Result<(), ClientError> {
        let body = serde_json::to_string(body).map_err(|error| ClientError::Decode {
            method: Method::POST,
            path: path.to_string(),
            message: error.to_string(),
        })?;
        self.call(Method::POST, path, Some(body)).await.map(drop)
    }

    /// Opens the event stream at `path`; the body streams until the server closes it.
    pub async fn stream(&self, path: &str) -> Result<Incoming, ClientError> {
        let response = tokio::time::timeout(REQUEST_TIMEOUT, self.send(Method::GET, path, None))
            .await
            .unwrap_or_else(|_| {
                Err(ClientError::Timeout {
                    method: Method::GET,
                    path: path.to_string(),
                })
            })?;
        if !response.status().is_success() {
            return Err(ClientError::Status {
                method: Method::GET,
                path: path.to_string(),
                status: response.status(),
                body: String::new(),
            });
        }
        Ok(response.into_body())
    }
}

/// The next chunk of a streaming body; `None` at its end (or on an error, logged).
pub async fn next_chunk(body: &mut Incoming) -> Option<hyper::body::Bytes> {
    loop {
        match body.frame().await? {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    return Some(data);
                }
            }
            Err(error) => {
                tracing::debug!(%error, "opencode event stream ended");
                return None;
            }
        }
    }
}
