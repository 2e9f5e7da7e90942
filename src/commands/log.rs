//! `cohost log verify`: reads the event log of a home (no daemon needed) and reports damage.

use std::io::Write;
use std::path::PathBuf;

/// Checks the log of `home`; fails when it is damaged.
pub fn verify(home: Option<PathBuf>, json: bool) -> anyhow::Result<()> {
    let home = crate::config::resolve_home(home)?;
    let report = crate::core::verify(&home)?;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        report.render(&mut out)?;
    }
    if report.damage.is_some() {
        anyhow::bail!(
            "the event log in {} is damaged; the next `cohost serve` quarantines the bad lines and reports the rest",
            home.display()
        );
    }
    Ok(())
}
