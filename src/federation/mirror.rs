//! A hub's copy of what it consumed of each machine, `$COHOST_HOME/hub/<machine>.events`: one
//! line per event, `<stream sequence> <the event's JSON as the machine logged it>`, appended and
//! synced before the hub acknowledges the messages to its durable consumer, so a restarted hub
//! holds everything it acknowledged and the consumer resumes right after it.
//!
//! This is not the log: the hub never writes another machine's events into its own log (the
//! core stays the single writer of its machine). A torn last line (a hub killed mid-write) is
//! cut off when the file is read; the consumer delivers that event again.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde::Deserialize;

use crate::service::RemoteEvent;

/// The directory of a hub's copies.
pub fn dir(home: &Path) -> PathBuf {
    home.join("hub")
}

fn path(home: &Path, machine: &str) -> PathBuf {
    dir(home).join(format!("{machine}.events"))
}

/// The routing fields of an event's JSON.
#[derive(Deserialize)]
struct Head {
    seq: u64,
    #[serde(default)]
    session: Option<String>,
}

/// The same, borrowed where it can be (a scan of the copy reads every line).
#[derive(Deserialize)]
struct HeadRef<'a> {
    seq: u64,
    #[serde(default, borrow)]
    session: Option<std::borrow::Cow<'a, str>>,
}

/// How many events [`Mirror::open`] hands over at a time.
const OPEN_BATCH: usize = 4096;

/// The hub's copies read back for the events its world let go from memory
/// ([`crate::service::ColdEvents`]): each read scans the machine's copy from its start.
pub struct Copies {
    pub home: PathBuf,
}

impl crate::service::ColdEvents for Copies {
    fn scan(
        &self,
        machine: &str,
        visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
    ) -> anyhow::Result<()> {
        let path = path(&self.home, machine);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("failed to open {}", path.display())),
        };
        whole_lines(BufReader::with_capacity(1 << 16, file), &path, |line, _| {
            let Some((_, json)) = line.split_once(' ') else {
                anyhow::bail!("{}: a line without its stream sequence", path.display());
            };
            let head: HeadRef = serde_json::from_str(json)
                .with_context(|| format!("{}: a line that is not an event", path.display()))?;
            Ok(visit(head.seq, head.session.as_deref(), json))
        })
    }
}

/// Calls `each` with every whole line of a copy (without its newline) and the bytes it took,
/// until the end, a line still being written (no newline yet), or `each` answering `false`.
fn whole_lines(
    mut reader: impl BufRead,
    path: &Path,
    mut each: impl FnMut(&str, usize) -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let mut line = String::new();
    loop {
        line.clear();
        let read = reader
            .read_line(&mut line)
            .with_context(|| format!("failed to read {}", path.display()))?;
        if read == 0 || !line.ends_with('\n') || !each(line.trim_end(), read)? {
            return Ok(());
        }
    }
}

/// Reads an event's seq and session from its JSON.
pub fn parse(json: &str) -> anyhow::Result<RemoteEvent> {
    let head: Head = serde_json::from_str(json).context("not an event (no `seq`)")?;
    Ok(RemoteEvent {
        seq: head.seq,
        session: head.session,
        json: Arc::from(json),
    })
}

/// The machines a hub holds copies of (their file names).
pub fn machines(home: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir(home)) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let machine = name.strip_suffix(".events")?.to_string();
            super::names::check_machine(&machine).ok()?;
            Some(machine)
        })
        .collect();
    names.sort();
    names
}

/// A machine's copy, open for appending.
pub struct Mirror {
    file: File,
    /// The stream sequence of the last event held.
    pub stream_seq: u64,
}

impl Mirror {
    /// Opens (or makes) the copy of `machine` and reads what it holds into `held`, a batch at a
    /// time (so a long copy is never all in memory at once); a torn or unreadable tail is cut
    /// off. Answers the copy and how many events it holds.
    pub fn open(
        home: &Path,
        machine: &str,
        mut held: impl FnMut(Vec<RemoteEvent>),
    ) -> anyhow::Result<(Mirror, usize)> {
        let dir = dir(home);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("failed to create {}", dir.display()))?;
        let path = path(home, machine);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("failed to open {}", path.display()))?;
        let mut events = Vec::new();
        let mut count = 0;
        let mut stream_seq = 0;
        let mut good: u64 = 0;
        whole_lines(BufReader::new(&file), &path, |line, read| {
            let parsed = line
                .split_once(' ')
                .and_then(|(s, json)| Some((s.parse::<u64>().ok()?, parse(json).ok()?)));
            // An unreadable line ends what the copy holds (its tail is cut below).
            let Some((seq, event)) = parsed else {
                return Ok(false);
            };
            stream_seq = seq;
            events.push(event);
            count += 1;
            good += read as u64;
            if events.len() == OPEN_BATCH {
                held(std::mem::take(&mut events));
            }
            Ok(true)
        })?;
        held(events);
        if file.metadata().map(|m| m.len()).unwrap_or(good) != good {
            tracing::warn!(path = %path.display(), kept = count, "hub: cutting a torn tail off a machine's copy");
            file.set_len(good)
                .with_context(|| format!("failed to cut {}", path.display()))?;
        }
        Ok((Mirror { file, stream_seq }, count))
    }

    /// Appends `(stream sequence, event)` lines and syncs them (on a blocking thread).
    pub async fn append(&mut self, events: &[(u64, RemoteEvent)]) -> std::io::Result<()> {
        let Some((last, _)) = events.last() else {
            return Ok(());
        };
        let mut bytes = Vec::new();
        for (stream_seq, event) in events {
            bytes.extend_from_slice(format!("{stream_seq} ").as_bytes());
            bytes.extend_from_slice(event.json.as_bytes());
            bytes.push(b'\n');
        }
        let mut file = self.file.try_clone()?;
        tokio::task::spawn_blocking(move || {
            file.write_all(&bytes)?;
            file.sync_data()
        })
        .await
        .map_err(std::io::Error::other)??;
        self.stream_seq = *last;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_copy_survives_a_reopen_and_a_torn_tail_is_cut() {
        let home = tempfile::tempdir().unwrap();
        let (mut mirror, count) = Mirror::open(home.path(), "b", |_| {}).unwrap();
        assert_eq!(count, 0);
        let events: Vec<(u64, RemoteEvent)> = (1..=3)
            .map(|i| {
                let json = format!("{{\"seq\":{i},\"session\":\"s\",\"type\":\"x\"}}");
                (i + 10, parse(&json).unwrap())
            })
            .collect();
        mirror.append(&events).await.unwrap();
        drop(mirror);
        let path = path(home.path(), "b");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"14 {\"seq\":4,\"sess").unwrap();
        let mut held = Vec::new();
        let (mirror, count) = Mirror::open(home.path(), "b", |batch| held.extend(batch)).unwrap();
        assert_eq!(count, 3);
        assert_eq!(held.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(held[0].session.as_deref(), Some("s"));
        assert_eq!(mirror.stream_seq, 13);
        assert!(std::fs::read_to_string(&path).unwrap().ends_with("}\n"));
        assert_eq!(machines(home.path()), ["b"]);
        // Read back for a world's cold reads: every whole line, in order, until told to stop.
        use crate::service::ColdEvents;
        let copies = Copies {
            home: home.path().to_path_buf(),
        };
        let mut seen = Vec::new();
        copies
            .scan("b", &mut |seq, session, json| {
                seen.push((seq, session.map(str::to_string), json.len()));
                seq < 2
            })
            .unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].0, 2);
        assert_eq!(seen[1].1.as_deref(), Some("s"));
        let mut none = 0;
        copies
            .scan("nobody", &mut |_, _, _| {
                none += 1;
                true
            })
            .unwrap();
        assert_eq!(none, 0);
    }
}
