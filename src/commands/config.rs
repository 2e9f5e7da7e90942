//! `cohost config show`: the effective `serve` settings, each with where it came from.

use std::io::Write;

use serde_json::json;

use crate::config::file::{Source, serve_settings};

/// Prints what `cohost serve` would run with here (this shell's environment, the config file,
/// the defaults; the global `--home`/`--listen` given to `config show` count as flags), after
/// the same validation `serve` does.
pub fn show(json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let mut argv: Vec<std::ffi::OsString> = vec!["cohost".into()];
    // The global options before the subcommand (`cohost --listen X config show`) are kept.
    argv.extend(
        std::env::args_os()
            .skip(1)
            .take_while(|word| word != "config"),
    );
    argv.push("serve".into());
    let settings = serve_settings(argv)?;
    crate::config::ServeConfig::from_settings(
        settings.home.clone(),
        settings.listen.clone(),
        &settings.args,
        &settings.origins,
    )?
    .with_profiles(&settings)?;
    if json {
        let mut map = serde_json::Map::new();
        for (key, value, source) in &settings.shown {
            map.insert(
                key.clone(),
                json!({ "value": value, "source": source.label() }),
            );
        }
        let body = json!({
            "file": settings.file,
            "fileFound": settings.file_found,
            "settings": map,
        });
        serde_json::to_writer_pretty(&mut *out, &body)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "# config file: {}{}",
        settings.file.display(),
        if settings.file_found {
            ""
        } else {
            " (not found)"
        }
    )?;
    let width = settings
        .shown
        .iter()
        .map(|(key, value, _)| key.len() + value.len() + 3)
        .max()
        .unwrap_or(0);
    for (key, value, source) in &settings.shown {
        let line = if value == "(unset)" {
            format!("# {key} =")
        } else {
            format!("{key} = {}", toml_value(value))
        };
        let source = match source {
            Source::File(_) => "file".to_string(),
            other => other.label(),
        };
        writeln!(out, "{line:<width$}  # {source}", width = width + 2)?;
    }
    Ok(())
}

/// A shown value as TOML: numbers and booleans bare, lists as arrays, the rest quoted.
fn toml_value(value: &str) -> String {
    if value == "true" || value == "false" || value.parse::<i64>().is_ok() {
        return value.to_string();
    }
    if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        let items: Vec<String> = inner
            .split(", ")
            .filter(|item| !item.is_empty())
            .map(|item| serde_json::Value::from(item).to_string())
            .collect();
        return format!("[{}]", items.join(", "));
    }
    serde_json::Value::from(value).to_string()
}
