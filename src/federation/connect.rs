//! The NATS settings (`--nats`, `--nats-creds`, `--nats-user-file`, `--nats-tls`, `--nats-ca`), checked before
//! anything starts, and the connection made from them.
//!
//! Secure by default, like the HTTP bind: a server that is not on loopback is refused unless the
//! link is encrypted (a `tls://` URL or `nats-tls = true`) and the daemon authenticates (a
//! credentials file or a user file). Credentials are never taken from the URL (they would show in
//! `config show`, health and logs).
//!
//! Every connection reads its replies under the inbox prefix `_INBOX.<machine>` (not the shared
//! `_INBOX`), so a server can give each machine's user the right to read its own replies only
//! (`subscribe: _INBOX.<machine>.>`): one machine cannot read another's JetStream answers or a
//! hub's command replies. A permission the server refuses (its `-ERR 'Permissions Violation
//! for …'`) is recorded in the federation status (`refused`, naming the subject) and handed to the
//! connection's owner through [`Refusals`], so it stops visibly instead of waiting for an answer
//! that never comes.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::service::FederationStatus;

/// How long a reconnect waits at most between two attempts.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(2);

/// The refused permissions the status keeps (the first ones: what follows a refusal is most
/// often its consequence).
const MAX_REFUSALS: usize = 8;

/// The inbox prefix of a machine's connections: its replies arrive under `_INBOX.<machine>.`.
pub fn inbox_prefix(machine: &str) -> String {
    format!("_INBOX.{machine}")
}

/// What a connection's owner waits on: the first permission the server refused on it (`-ERR
/// 'Permissions Violation for Publish to "…"'`), with the role that made the connection.
#[derive(Clone)]
pub struct Refusals(tokio::sync::watch::Receiver<Option<String>>);

impl Refusals {
    /// Waits until the server refuses a permission on this connection, and says which.
    pub async fn refused(&mut self) -> String {
        let refusal = match self.0.wait_for(Option::is_some).await {
            Ok(refusal) => refusal.clone(),
            Err(_) => None,
        };
        match refusal {
            Some(refusal) => refusal,
            // The client is gone (the connection's owner dropped it): nothing more will come.
            None => std::future::pending().await,
        }
    }
}

/// What a server's error says, when it is a refused permission.
fn permission_violation(error: &async_nats::ServerError) -> Option<String> {
    match error {
        async_nats::ServerError::Other(text)
            if text.to_ascii_lowercase().contains("permissions violation") =>
        {
            Some(text.clone())
        }
        _ => None,
    }
}

/// A checked `--nats` setting.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsConfig {
    /// The server's URL as given (no credentials in it).
    pub url: String,
    pub creds: Option<PathBuf>,
    pub user_file: Option<PathBuf>,
    /// TLS required (a `tls://` URL or `--nats-tls`).
    pub tls: bool,
    /// CA certificates (PEM) trusted for the server's certificate beside the system's roots.
    pub ca: Option<PathBuf>,
}

/// The host of a `nats://` or `tls://` URL (`[::1]` without brackets), and whether it is TLS.
fn parse_url(url: &str) -> Result<(String, bool), String> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        format!("`{url}` is not a URL: write nats://HOST:PORT or tls://HOST:PORT")
    })?;
    let tls = match scheme {
        "nats" => false,
        "tls" => true,
        other => {
            return Err(format!(
                "`{url}`: the scheme `{other}` is not supported; use nats:// or tls://"
            ));
        }
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return Err(format!(
            "`{url}` holds credentials; put them in a file and name it with --nats-creds or --nats-user-file"
        ));
    }
    if authority.contains(',') {
        return Err(format!(
            "`{url}` names several servers; name one (a cluster's other servers are learned from it)"
        ));
    }
    let host = if let Some(inner) = authority.strip_prefix('[') {
        inner.split(']').next().unwrap_or("").to_string()
    } else {
        authority.split(':').next().unwrap_or("").to_string()
    };
    if host.is_empty() {
        return Err(format!("`{url}` names no host"));
    }
    Ok((host, tls))
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl NatsConfig {
    /// Checks the settings; `name` names a setting as the user set it (flag, variable, key).
    pub fn check(
        url: &str,
        creds: Option<PathBuf>,
        user_file: Option<PathBuf>,
        tls_flag: bool,
        ca: Option<PathBuf>,
        name: impl Fn(&str) -> String,
    ) -> anyhow::Result<NatsConfig> {
        let (host, tls_scheme) =
            parse_url(url).map_err(|reason| anyhow::anyhow!("{}: {reason}", name("nats-url")))?;
        if creds.is_some() && user_file.is_some() {
            bail!(
                "{} and {} both name credentials; keep one",
                name("nats-creds"),
                name("nats-user-file")
            );
        }
        for (key, path) in [
            ("nats-creds", &creds),
            ("nats-user-file", &user_file),
            ("nats-ca", &ca),
        ] {
            if let Some(path) = path
                && !path.is_file()
            {
                bail!("{} {} is not a readable file", name(key), path.display());
            }
        }
        let tls = tls_scheme || tls_flag;
        if ca.is_some() && !tls {
            bail!(
                "{} names CA certificates for a TLS link, but {url} is plain: use a tls:// URL or {}",
                name("nats-ca"),
                name("nats-tls")
            );
        }
        let authenticated = creds.is_some() || user_file.is_some();
        let secured = tls && authenticated;
        if !(is_loopback(&host) || secured) {
            bail!(
                "refusing to publish to the NATS server at {url}: it is not on this machine, so the link must be encrypted (a tls:// URL or {}) and the daemon must authenticate ({} or {}); nothing was started",
                name("nats-tls"),
                name("nats-creds"),
                name("nats-user-file")
            );
        }
        Ok(NatsConfig {
            url: url.to_string(),
            creds,
            user_file,
            tls,
            ca,
        })
    }

    /// Connects in the background: the call returns at once and the client keeps trying (and
    /// reconnecting), so a server that is down never delays the daemon's start.
    ///
    /// `role` (`publisher`, `commands`, `hub`) names the connection in what a refusal says; a
    /// refused permission is written into `status` (`refused`) and logged, an authorization
    /// violation (credentials the server does not accept) into `status`'s last error.
    pub async fn connect(
        &self,
        machine: &str,
        role: &'static str,
        status: FederationStatus,
    ) -> anyhow::Result<(async_nats::Client, Refusals)> {
        let (refused_tx, refused_rx) = tokio::sync::watch::channel(None);
        let url = self.url.clone();
        let user = machine.to_string();
        let tls = self.tls;
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("cohost {machine}"))
            .custom_inbox_prefix(inbox_prefix(machine))
            .event_callback(move |event| {
                let refused_tx = refused_tx.clone();
                let status = std::sync::Arc::clone(&status);
                let url = url.clone();
                let user = user.clone();
                async move {
                    let error = match event {
                        async_nats::Event::ServerError(error) => error,
                        async_nats::Event::ClientError(async_nats::ClientError::Other(error)) => {
                            // A certificate the client does not trust reads as an IO error.
                            let hint = if tls {
                                " (over TLS: if a private CA signs the server's certificate, give its certificate with --nats-ca)"
                            } else {
                                ""
                            };
                            let text = format!(
                                "the {role} cannot connect to the NATS server at {url}: {error}{hint}; trying again"
                            );
                            tracing::warn!(error = %text, "federation: cannot connect");
                            let mut status = status.lock().unwrap_or_else(|e| e.into_inner());
                            status.last_error = Some(text);
                            status.last_error_at = Some(crate::core::now_ms());
                            return;
                        }
                        _ => return,
                    };
                    if let Some(violation) = permission_violation(&error) {
                        let text = format!(
                            "the NATS server at {url} refused the {role} of machine `{user}`: {violation} (see the permissions in docs/federation.md)"
                        );
                        tracing::error!(error = %text, "federation: a permission was refused");
                        let mut status = status.lock().unwrap_or_else(|e| e.into_inner());
                        if status.refused.len() < MAX_REFUSALS && !status.refused.contains(&text)
                        {
                            status.refused.push(text.clone());
                        }
                        drop(status);
                        refused_tx.send_if_modified(|slot| {
                            slot.is_none().then(|| *slot = Some(text)).is_some()
                        });
                    } else if matches!(error, async_nats::ServerError::AuthorizationViolation) {
                        let text = format!(
                            "the NATS server at {url} does not accept the credentials of the {role} (authorization violation); trying again"
                        );
                        tracing::warn!(error = %text, "federation: not authorized");
                        let mut status = status.lock().unwrap_or_else(|e| e.into_inner());
                        status.last_error = Some(text);
                        status.last_error_at = Some(crate::core::now_ms());
                    } else {
                        tracing::warn!(%error, role, "federation: the NATS server reported an error");
                    }
                }
            })
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .reconnect_delay_callback(|attempts| {
                let step = Duration::from_millis(100).saturating_mul(attempts as u32);
                step.min(MAX_RECONNECT_DELAY)
            })
            .require_tls(self.tls);
        if let Some(ca) = &self.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some(creds) = &self.creds {
            options = options
                .credentials_file(creds)
                .await
                .with_context(|| format!("failed to read {}", creds.display()))?;
        }
        if let Some(file) = &self.user_file {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("failed to read {}", file.display()))?;
            let (user, password) = text
                .trim_end_matches(['\n', '\r'])
                .split_once(':')
                .with_context(|| {
                    format!("{} must hold USER:PASSWORD on one line", file.display())
                })?;
            options = options.user_and_password(user.to_string(), password.to_string());
        }
        let client = options
            .connect(self.url.as_str())
            .await
            .with_context(|| format!("failed to connect to the NATS server at {}", self.url))?;
        Ok((client, Refusals(refused_rx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, tls: bool, creds: bool) -> Result<NatsConfig, String> {
        let file = tempfile::NamedTempFile::new().unwrap();
        let creds = creds.then(|| file.path().to_path_buf());
        NatsConfig::check(url, creds, None, tls, None, |k| format!("--{k}"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_refused_permission_is_told_from_other_server_errors() {
        let refused = async_nats::ServerError::Other(
            "Permissions Violation for Publish to \"cohost.ev.beta.x\"".to_string(),
        );
        assert_eq!(
            permission_violation(&refused).as_deref(),
            Some("Permissions Violation for Publish to \"cohost.ev.beta.x\"")
        );
        let other = async_nats::ServerError::Other("Maximum Payload Violation".to_string());
        assert_eq!(permission_violation(&other), None);
        assert_eq!(
            permission_violation(&async_nats::ServerError::AuthorizationViolation),
            None
        );
        assert_eq!(inbox_prefix("alpha"), "_INBOX.alpha");
    }

    #[test]
    fn a_remote_server_needs_tls_and_credentials() {
        assert!(check("nats://127.0.0.1:4222", false, false).is_ok());
        assert!(check("nats://localhost:4222", false, false).is_ok());
        assert!(check("nats://[::1]:4222", false, false).is_ok());
        let refused = check("nats://10.0.0.5:4222", false, false).unwrap_err();
        assert!(refused.contains("refusing to publish"), "{refused}");
        assert!(check("nats://hub.example:4222", false, true).is_err());
        assert!(check("tls://hub.example:4222", false, false).is_err());
        assert!(check("tls://hub.example:4222", false, true).unwrap().tls);
        assert!(check("nats://hub.example:4222", true, true).is_ok());
        assert!(
            check("nats://u:p@127.0.0.1:4222", false, false)
                .unwrap_err()
                .contains("credentials")
        );
        assert!(check("http://127.0.0.1:4222", false, false).is_err());
        assert!(check("127.0.0.1:4222", false, false).is_err());
    }
}
