//! cohost's entries in a person's Claude settings file, pure: which hook commands are cohost's
//! (the machine-wide `cohost-hook --home <home> <Event>`), and the text of the file with them
//! added ([`install`]) or taken out ([`uninstall`]), every byte of the person's own left as it
//! was — their entries first and in their order, their keys, spacing and other settings. Each
//! edit is checked before it is answered: the edited text, parsed, must be exactly the parsed
//! original with cohost's change made, or the edit is refused.

use serde_json::{Map, Value, json};

use super::json_text::{self, Edit, Layout, Node, Placement};

/// One hook cohost wants: its event, the matcher of its group, and the hook object
/// (`{"type":"command","command":…,"timeout":…}`).
#[derive(Debug, Clone, PartialEq)]
pub struct Wanted {
    pub event: &'static str,
    pub matcher: &'static str,
    pub hook: Value,
}

impl Wanted {
    /// The matcher group cohost adds for it: `{"matcher": …, "hooks": [hook]}`.
    fn group(&self) -> Value {
        json!({ "matcher": self.matcher, "hooks": [self.hook] })
    }
}

/// Why the settings cannot be changed. Nothing was written.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("it is not valid JSON ({0}); fix or move it first: cohost changes nothing in it")]
    NotJson(String),
    #[error("it is not a JSON object; cohost changes nothing in it")]
    NotAnObject,
    #[error("its `hooks` is not an object; cohost changes nothing in it")]
    HooksNotAnObject,
    #[error("its `hooks.{0}` is not a list; cohost changes nothing in it")]
    EventNotAList(String),
    /// A bug of ours: the edit would have changed something else.
    #[error("cohost could not edit it safely ({0}); nothing was changed")]
    Unsafe(String),
}

/// What an edit does to the file.
#[derive(Debug, Clone, PartialEq)]
pub enum Edited {
    /// The file already is what was asked.
    Unchanged,
    /// The new text of the file.
    Changed(String),
}

/// One of cohost's hook commands found in the settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub event: String,
    /// The hook object as written.
    pub hook: Value,
    pub command: CohostCommand,
}

/// A machine-wide `cohost-hook` command, read back: `<program> --home <home> <Event>`.
#[derive(Debug, Clone, PartialEq)]
pub struct CohostCommand {
    pub program: String,
    pub home: String,
    pub event: String,
}

/// The command line Claude runs for `event`: the hook program and the home, shell-quoted
/// (Claude runs it through a shell).
pub fn command_line(program: &str, home: &str, event: &str) -> String {
    format!(
        "{} --home {} {event}",
        shell_quote(program),
        shell_quote(home)
    )
}

/// `word` as one shell word: as it is when only safe characters make it up, else in single
/// quotes.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-./+=:,@%".contains(&b));
    if safe {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The words of a simple shell command (quotes and backslashes; no expansions), or `None` for
/// anything else (an unterminated quote).
fn shell_words(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => {
                            let next = chars.next()?;
                            if !matches!(next, '"' | '\\' | '$' | '`') {
                                word.push('\\');
                            }
                            word.push(next);
                        }
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// `command` read as cohost's machine-wide hook, whatever program path or home it names.
pub fn cohost_command(command: &str) -> Option<CohostCommand> {
    let words = shell_words(command)?;
    let [program, flag, home, event] = words.as_slice() else {
        return None;
    };
    let name = std::path::Path::new(program).file_name()?;
    (name == "cohost-hook" && flag == "--home").then(|| CohostCommand {
        program: program.clone(),
        home: home.clone(),
        event: event.clone(),
    })
}

/// The hook object `value` is cohost's.
fn is_ours(value: &Value) -> bool {
    value
        .get("command")
        .and_then(Value::as_str)
        .is_some_and(|c| cohost_command(c).is_some())
}

/// Parses the settings: `None` for a file that is empty (or blank).
fn parse(text: &str) -> Result<Option<(Value, Node)>, SettingsError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| SettingsError::NotJson(e.to_string()))?;
    if !value.is_object() {
        return Err(SettingsError::NotAnObject);
    }
    let node = json_text::parse(text).map_err(SettingsError::Unsafe)?;
    Ok(Some((value, node)))
}

/// The hook objects of one event's list, with where each is: `(group index, hook index,
/// node)`.
fn hooks_of(list: &Node) -> Vec<(usize, usize, &Node)> {
    let Node::Array { items: groups, .. } = list else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        if let Some(Node::Array { items: hooks, .. }) = group.get("hooks") {
            for (h, hook) in hooks.iter().enumerate() {
                found.push((g, h, hook));
            }
        }
    }
    found
}

/// cohost's hook commands in the settings `text`, by event.
pub fn inspect(text: &str) -> Result<Vec<Found>, SettingsError> {
    let Some((_, root)) = parse(text)? else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    let Some(Node::Object { members, .. }) = root.get("hooks") else {
        return Ok(found);
    };
    for member in members {
        for (_, _, hook) in hooks_of(&member.value) {
            let Some(value) = hook.value(text) else {
                continue;
            };
            let command = value.get("command").and_then(Value::as_str);
            if let Some(command) = command.and_then(cohost_command) {
                found.push(Found {
                    event: member.key.clone(),
                    hook: value,
                    command,
                });
            }
        }
    }
    Ok(found)
}

/// The settings `text` with cohost's `wanted` hooks: each appended to its event's list (after
/// the person's own groups), or — where a hook of cohost's is already in that list — that hook
/// made the wanted one in place.
pub fn install(text: &str, wanted: &[Wanted]) -> Result<Edited, SettingsError> {
    let Some((original, root)) = parse(text)? else {
        let mut hooks = Map::new();
        for want in wanted {
            hooks.insert(want.event.to_string(), json!([want.group()]));
        }
        let document = json!({ "hooks": hooks });
        let pretty = serde_json::to_string_pretty(&document)
            .map_err(|e| SettingsError::Unsafe(e.to_string()))?;
        return Ok(Edited::Changed(pretty + "\n"));
    };
    let layout = Layout::of(text);
    let mut edits = Vec::new();
    match root.get("hooks") {
        None => {
            let mut hooks = Map::new();
            for want in wanted {
                hooks.insert(want.event.to_string(), json!([want.group()]));
            }
            let place = Placement::of(text, &root, &layout);
            let member = place.render_member(&layout, "hooks", &Value::Object(hooks));
            edits.extend(json_text::append(text, &root, &[member], &place));
        }
        Some(hooks @ Node::Object { .. }) => {
            let mut missing = Vec::new();
            let place = Placement::of(text, hooks, &layout);
            for want in wanted {
                match hooks.get(want.event) {
                    None => missing.push(place.render_member(
                        &layout,
                        want.event,
                        &json!([want.group()]),
                    )),
                    Some(list @ Node::Array { .. }) => {
                        edits.extend(install_in_list(text, list, want, &layout));
                    }
                    Some(_) => return Err(SettingsError::EventNotAList(want.event.to_string())),
                }
            }
            edits.extend(json_text::append(text, hooks, &missing, &place));
        }
        Some(_) => return Err(SettingsError::HooksNotAnObject),
    }
    if edits.is_empty() {
        return Ok(Edited::Unchanged);
    }
    let edited = json_text::apply(text, edits).map_err(SettingsError::Unsafe)?;
    let mut expected = original;
    install_value(&mut expected, wanted);
    check(&edited, &expected)?;
    Ok(Edited::Changed(edited))
}

/// The edits that put `want` in one event's `list`.
fn install_in_list(text: &str, list: &Node, want: &Wanted, layout: &Layout) -> Vec<Edit> {
    let ours: Vec<&Node> = hooks_of(list)
        .into_iter()
        .map(|(_, _, hook)| hook)
        .filter(|hook| hook.value(text).as_ref().is_some_and(is_ours))
        .collect();
    if ours.is_empty() {
        let place = Placement::of(text, list, layout);
        let group = place.render(layout, &want.group());
        return json_text::append(text, list, &[group], &place)
            .into_iter()
            .collect();
    }
    ours.into_iter()
        .filter(|hook| hook.value(text).as_ref() != Some(&want.hook))
        .map(|hook| {
            let written = &text[hook.start()..hook.end()];
            let with = if written.contains('\n') {
                layout.render(&want.hook, json_text::line_indent(text, hook.start()))
            } else {
                want.hook.to_string()
            };
            Edit {
                start: hook.start(),
                end: hook.end(),
                with,
            }
        })
        .collect()
}

/// [`install`] on the parsed settings: what the edited text must parse to.
fn install_value(settings: &mut Value, wanted: &[Wanted]) {
    let Some(root) = settings.as_object_mut() else {
        return;
    };
    let hooks = root
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else {
        return;
    };
    for want in wanted {
        let list = hooks
            .entry(want.event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Some(groups) = list.as_array_mut() else {
            continue;
        };
        let mut had_ours = false;
        for group in groups.iter_mut() {
            if let Some(group_hooks) = group.get_mut("hooks").and_then(Value::as_array_mut) {
                for hook in group_hooks.iter_mut().filter(|h| is_ours(h)) {
                    *hook = want.hook.clone();
                    had_ours = true;
                }
            }
        }
        if !had_ours {
            groups.push(want.group());
        }
    }
}

/// The settings `text` without cohost's hooks: a group holding only cohost's is removed, an
/// event's list left empty by that is removed, and `hooks` too when nothing else was in it;
/// a group that also holds another hook keeps it.
pub fn uninstall(text: &str) -> Result<Edited, SettingsError> {
    let Some((original, root)) = parse(text)? else {
        return Ok(Edited::Unchanged);
    };
    let Some(hooks @ Node::Object { members, .. }) = root.get("hooks") else {
        return Ok(Edited::Unchanged);
    };
    let mut edits = Vec::new();
    let mut emptied_members = Vec::new();
    for (m, member) in members.iter().enumerate() {
        let Node::Array { items: groups, .. } = &member.value else {
            continue;
        };
        let mut emptied_groups = Vec::new();
        let mut inner = Vec::new();
        for (g, group) in groups.iter().enumerate() {
            let Some(list @ Node::Array { items, .. }) = group.get("hooks") else {
                continue;
            };
            let ours: Vec<usize> = items
                .iter()
                .enumerate()
                .filter(|(_, hook)| hook.value(text).as_ref().is_some_and(is_ours))
                .map(|(h, _)| h)
                .collect();
            if ours.is_empty() {
                continue;
            }
            if ours.len() == items.len() {
                emptied_groups.push(g);
            } else {
                inner.extend(json_text::remove(list, &ours));
            }
        }
        if !groups.is_empty() && emptied_groups.len() == groups.len() {
            emptied_members.push(m);
        } else {
            edits.extend(inner);
            edits.extend(json_text::remove(&member.value, &emptied_groups));
        }
    }
    if !members.is_empty() && emptied_members.len() == members.len() {
        if let Node::Object {
            members: root_members,
            ..
        } = &root
            && let Some(at) = root_members.iter().rposition(|m| m.key == "hooks")
        {
            edits.extend(json_text::remove(&root, &[at]));
        }
    } else {
        edits.extend(json_text::remove(hooks, &emptied_members));
    }
    if edits.is_empty() {
        return Ok(Edited::Unchanged);
    }
    let edited = json_text::apply(text, edits).map_err(SettingsError::Unsafe)?;
    let mut expected = original;
    uninstall_value(&mut expected);
    check(&edited, &expected)?;
    Ok(Edited::Changed(edited))
}

/// [`uninstall`] on the parsed settings.
fn uninstall_value(settings: &mut Value) {
    let Some(root) = settings.as_object_mut() else {
        return;
    };
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else {
        return;
    };
    let had_members = !hooks.is_empty();
    hooks.retain(|_, list| {
        let Some(groups) = list.as_array_mut() else {
            return true;
        };
        let had_groups = !groups.is_empty();
        groups.retain_mut(|group| {
            let Some(items) = group.get_mut("hooks").and_then(Value::as_array_mut) else {
                return true;
            };
            let before = items.len();
            items.retain(|hook| !is_ours(hook));
            // A group that held only cohost's hooks goes with them.
            !(before > 0 && items.is_empty())
        });
        !(had_groups && groups.is_empty())
    });
    if had_members && hooks.is_empty() {
        root.remove("hooks");
    }
}

/// The edited text parses to `expected`.
fn check(edited: &str, expected: &Value) -> Result<(), SettingsError> {
    let parsed: Value = serde_json::from_str(edited)
        .map_err(|e| SettingsError::Unsafe(format!("the edited text is not JSON: {e}")))?;
    if &parsed != expected {
        return Err(SettingsError::Unsafe(
            "the edited text differs from the intended change".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
