//! The service's profile operations: the list (`GET /api/profiles`), the `cwd` a profile sets
//! (MCP checks it against its roots), and the reload that reads and validates the config
//! file's `[profiles.*]` tables again (`POST /api/profiles/reload`, SIGHUP).

use super::{ErrorKind, Service, ServiceError};
use crate::protocol::{ProfileList, codes};

impl Service {
    /// The config file's profiles, each with its effective values and where they came from.
    pub fn profiles(&self) -> ProfileList {
        self.profiles.current().list()
    }

    /// The `cwd` profile `name` sets, if it exists and sets one (MCP checks it against the
    /// project roots before it starts anything).
    pub fn profile_cwd(&self, name: &str) -> Option<String> {
        self.profiles
            .current()
            .effective(name)
            .ok()
            .and_then(|effective| effective.cwd.map(|cwd| cwd.value))
    }

    /// Reads the config file's `[profiles.*]` tables again and, when every one validates,
    /// puts them in place of the old ones: sessions started after use them, sessions already
    /// started keep the values they started with. On any error the old profiles stay and the
    /// error (naming the file, and the profile and key when one is at fault) is the answer.
    pub fn reload_profiles(&self) -> Result<ProfileList, ServiceError> {
        match self.profiles.reload() {
            Ok(profiles) => Ok(profiles.list()),
            Err(super::profiles::ReloadError::Unsupported(why)) => Err(ServiceError::new(
                ErrorKind::Invalid,
                codes::UNSUPPORTED,
                why,
            )),
            Err(super::profiles::ReloadError::Invalid(why)) => Err(ServiceError::new(
                ErrorKind::Invalid,
                codes::INVALID_CONFIG,
                format!("{why}; the profiles were not changed"),
            )),
        }
    }
}
