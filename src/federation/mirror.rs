//! A hub's copy of what it consumed of each machine, `$COHOST_HOME/hub/<machine>.events`: one
//! line per event, `<stream sequence> <the event's JSON as the machine logged it>`, appended and
//! synced before the hub acknowledges the messages to its durable consumer, so a restarted hub
//! holds everything it acknowledged and the consumer resumes right after it.
//!
//! This is not the log: the hub never writes another machine's events into its own log (the
//! core stays the single writer of its machine). A torn last line (a hub killed mid-write) is
//! cut off when the file is read; the consumer delivers that event again.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// Every how many lines of a copy [`Copies`] marks where a line starts.
const MARK_EVERY: u64 = 512;

/// The hub's copies read back for the events its world let go from memory
/// ([`crate::service::ColdEvents`]). A read starts near its first event, not at the copy's start:
/// for each copy it keeps the seq and byte offset of every [`MARK_EVERY`]-th line, learnt as the
/// copy is read and extended over what was appended since the last read (a copy only grows
/// while the hub runs: its torn tail is cut when it is opened, before any of it leaves memory).
pub struct Copies {
    home: PathBuf,
    marks: Mutex<HashMap<String, Marks>>,
}

/// Where lines of one copy start.
#[derive(Debug, Default, Clone)]
struct Marks {
    /// `(seq, byte offset)` of lines 0, [`MARK_EVERY`], 2 × [`MARK_EVERY`], …: seqs increase.
    at: Vec<(u64, u64)>,
    /// The end of the last whole line read, and the lines read so far.
    end: u64,
    lines: u64,
}

impl Marks {
    /// The offset to read forward from for the events after `after`: the last marked line
    /// whose seq is not past it.
    fn start_after(&self, after: u64) -> u64 {
        match self.at.partition_point(|(seq, _)| *seq <= after) {
            0 => 0,
            i => self.at[i - 1].1,
        }
    }
}

impl Copies {
    pub fn new(home: PathBuf) -> Copies {
        Copies {
            home,
            marks: Mutex::default(),
        }
    }

    /// The marks of `machine`'s copy, extended over what was appended since they were last
    /// read (`None`: there is no copy).
    fn marks(&self, machine: &str) -> anyhow::Result<Option<(Marks, PathBuf)>> {
        let path = path(&self.home, machine);
        let mut file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("failed to open {}", path.display())),
        };
        let mut all = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        let marks = all.entry(machine.to_string()).or_default();
        file.seek(SeekFrom::Start(marks.end))
            .with_context(|| format!("failed to read {}", path.display()))?;
        whole_lines(
            BufReader::with_capacity(1 << 16, file),
            &path,
            |line, read| {
                if marks.lines.is_multiple_of(MARK_EVERY) {
                    let (_, head) = split(line, &path)?;
                    marks.at.push((head.seq, marks.end));
                }
                marks.lines += 1;
                marks.end += read as u64;
                Ok(true)
            },
        )?;
        Ok(Some((marks.clone(), path)))
    }
}

/// A line of a copy: its event's JSON and routing fields.
fn split<'a>(line: &'a str, path: &Path) -> anyhow::Result<(&'a str, HeadRef<'a>)> {
    let Some((_, json)) = line.split_once(' ') else {
        anyhow::bail!("{}: a line without its stream sequence", path.display());
    };
    let head: HeadRef = serde_json::from_str(json)
        .with_context(|| format!("{}: a line that is not an event", path.display()))?;
    Ok((json, head))
}

/// Calls `each` with the events of the copy at `path` from byte `from` on, until `each` answers
/// `false` or the copy's `end`.
fn read_from(
    path: &Path,
    from: u64,
    end: u64,
    mut each: impl FnMut(u64, Option<&str>, &str) -> bool,
) -> anyhow::Result<()> {
    let mut file =
        File::open(path).with_context(|| format!("failed to open {}", path.display()))?;
    file.seek(SeekFrom::Start(from))
        .with_context(|| format!("failed to read {}", path.display()))?;
    let mut at = from;
    whole_lines(
        BufReader::with_capacity(1 << 16, file),
        path,
        |line, read| {
            if at >= end {
                return Ok(false);
            }
            at += read as u64;
            let (json, head) = split(line, path)?;
            Ok(each(head.seq, head.session.as_deref(), json))
        },
    )
}

impl crate::service::ColdEvents for Copies {
    fn scan(
        &self,
        machine: &str,
        after: u64,
        visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
    ) -> anyhow::Result<()> {
        let Some((marks, path)) = self.marks(machine)? else {
            return Ok(());
        };
        read_from(
            &path,
            marks.start_after(after),
            marks.end,
            |seq, session, json| seq <= after || visit(seq, session, json),
        )
    }

    fn scan_back(
        &self,
        machine: &str,
        through: u64,
        visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
    ) -> anyhow::Result<()> {
        let Some((marks, path)) = self.marks(machine)? else {
            return Ok(());
        };
        // The marked stretches that may hold events up to `through`, newest first, each read
        // forward and visited backwards.
        let stretches = marks.at.partition_point(|(seq, _)| *seq <= through);
        for i in (0..stretches).rev() {
            let from = marks.at[i].1;
            let end = marks.at.get(i + 1).map_or(marks.end, |(_, at)| *at);
            let mut stretch: Vec<(u64, Option<String>, String)> = Vec::new();
            read_from(&path, from, end, |seq, session, json| {
                if seq > through {
                    return false;
                }
                stretch.push((seq, session.map(str::to_string), json.to_string()));
                true
            })?;
            for (seq, session, json) in stretch.iter().rev() {
                if !visit(*seq, session.as_deref(), json) {
                    return Ok(());
                }
            }
        }
        Ok(())
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
        let copies = Copies::new(home.path().to_path_buf());
        let mut seen = Vec::new();
        copies
            .scan("b", 0, &mut |seq, session, json| {
                seen.push((seq, session.map(str::to_string), json.len()));
                seq < 2
            })
            .unwrap();
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].0, 2);
        assert_eq!(seen[1].1.as_deref(), Some("s"));
        let mut none = 0;
        copies
            .scan("nobody", 0, &mut |_, _, _| {
                none += 1;
                true
            })
            .unwrap();
        assert_eq!(none, 0);
    }

    /// `(seq, session)` of each event `scan`/`scan_back` visit, until `stop` of them.
    fn forward(copies: &Copies, after: u64, stop: usize) -> Vec<(u64, String)> {
        let mut seen = Vec::new();
        use crate::service::ColdEvents;
        copies
            .scan("b", after, &mut |seq, session, _| {
                seen.push((seq, session.unwrap().to_string()));
                seen.len() < stop
            })
            .unwrap();
        seen
    }

    fn backward(copies: &Copies, through: u64, stop: usize) -> Vec<(u64, String)> {
        let mut seen = Vec::new();
        use crate::service::ColdEvents;
        copies
            .scan_back("b", through, &mut |seq, session, _| {
                seen.push((seq, session.unwrap().to_string()));
                seen.len() < stop
            })
            .unwrap();
        seen
    }

    #[tokio::test]
    async fn reads_start_near_their_first_event_and_see_what_was_appended_since() {
        let home = tempfile::tempdir().unwrap();
        let (mut mirror, _) = Mirror::open(home.path(), "b", |_| {}).unwrap();
        // Seqs with holes (events of sessions the hub never saw are not there), two sessions.
        let event = |i: u64| {
            let seq = 3 * i + 1;
            let session = if i.is_multiple_of(3) { "s" } else { "t" };
            let json = format!("{{\"seq\":{seq},\"session\":\"{session}\"}}");
            (i + 100, parse(&json).unwrap())
        };
        let n = 3 * MARK_EVERY + 7;
        let first: Vec<_> = (0..n).map(event).collect();
        mirror.append(&first).await.unwrap();
        let all = |upto: u64| -> Vec<(u64, String)> {
            (0..upto)
                .map(|i| {
                    let (_, e) = event(i);
                    (e.seq, e.session.unwrap())
                })
                .collect()
        };
        let copies = Copies::new(home.path().to_path_buf());
        let everything = all(n);
        assert_eq!(forward(&copies, 0, usize::MAX), everything);
        // After a seq that is an event's, one that falls in a hole, one before the first, one
        // on a mark, the last.
        for after in [
            0,
            1,
            2,
            700,
            3 * MARK_EVERY + 1,
            3 * MARK_EVERY + 2,
            3 * (n - 1) + 1,
        ] {
            let want: Vec<_> = everything
                .iter()
                .filter(|(s, _)| *s > after)
                .cloned()
                .collect();
            assert_eq!(forward(&copies, after, usize::MAX), want, "after {after}");
            let want: Vec<_> = everything
                .iter()
                .rev()
                .filter(|(s, _)| *s <= after)
                .cloned()
                .collect();
            assert_eq!(
                backward(&copies, after, usize::MAX),
                want,
                "through {after}"
            );
        }
        assert_eq!(forward(&copies, 10, 2), everything[4..6]);
        assert_eq!(
            backward(&copies, u64::MAX, 3),
            everything.iter().rev().take(3).cloned().collect::<Vec<_>>()
        );
        // The marks: every MARK_EVERY-th line, at its offset.
        let marks = copies.marks("b").unwrap().unwrap().0;
        assert_eq!(marks.at.len(), 4);
        assert_eq!(marks.at[1].0, 3 * MARK_EVERY + 1);
        // Appended after the first reads: seen by the next, forward and backwards.
        let more: Vec<_> = (n..n + MARK_EVERY).map(event).collect();
        mirror.append(&more).await.unwrap();
        let everything = all(n + MARK_EVERY);
        assert_eq!(forward(&copies, 0, usize::MAX), everything);
        assert_eq!(
            backward(&copies, u64::MAX, usize::MAX),
            everything.iter().rev().cloned().collect::<Vec<_>>()
        );
        assert_eq!(copies.marks("b").unwrap().unwrap().0.at.len(), 5);
        // A line still being written is not read (nor marked) until it is whole.
        let path = path(home.path(), "b");
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(b"9999 {\"seq\":999999,\"sess").unwrap();
        assert_eq!(forward(&copies, 0, usize::MAX), everything);
        assert_eq!(
            backward(&copies, u64::MAX, 1),
            everything[everything.len() - 1..]
        );
    }
}
