//! The NATS settings (`--nats`, `--nats-creds`, `--nats-user-file`, `--nats-tls`), checked before
//! anything starts, and the connection made from them.
//!
//! Secure by default, like the HTTP bind: a server that is not on loopback is refused unless the
//! link is encrypted (a `tls://` URL or `nats-tls = true`) and the daemon authenticates (a
//! credentials file or a user file). Credentials are never taken from the URL (they would show in
//! `config show`, health and logs).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};

/// How long a reconnect waits at most between two attempts.
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(2);

/// A checked `--nats` setting.
#[derive(Debug, Clone, PartialEq)]
pub struct NatsConfig {
    /// The server's URL as given (no credentials in it).
    pub url: String,
    pub creds: Option<PathBuf>,
    pub user_file: Option<PathBuf>,
    /// TLS required (a `tls://` URL or `--nats-tls`).
    pub tls: bool,
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
        for (key, path) in [("nats-creds", &creds), ("nats-user-file", &user_file)] {
            if let Some(path) = path
                && !path.is_file()
            {
                bail!("{} {} is not a readable file", name(key), path.display());
            }
        }
        let tls = tls_scheme || tls_flag;
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
        })
    }

    /// Connects in the background: the call returns at once and the client keeps trying (and
    /// reconnecting), so a server that is down never delays the daemon's start.
    pub async fn connect(&self, machine: &str) -> anyhow::Result<async_nats::Client> {
        let mut options = async_nats::ConnectOptions::new()
            .name(format!("cohost {machine}"))
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(5))
            .reconnect_delay_callback(|attempts| {
                let step = Duration::from_millis(100).saturating_mul(attempts as u32);
                step.min(MAX_RECONNECT_DELAY)
            })
            .require_tls(self.tls);
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
        options
            .connect(self.url.as_str())
            .await
            .with_context(|| format!("failed to connect to the NATS server at {}", self.url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, tls: bool, creds: bool) -> Result<NatsConfig, String> {
        let file = tempfile::NamedTempFile::new().unwrap();
        let creds = creds.then(|| file.path().to_path_buf());
        NatsConfig::check(url, creds, None, tls, |k| format!("--{k}")).map_err(|e| e.to_string())
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
