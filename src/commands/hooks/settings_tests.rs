//! The merge on literal settings files: the person's hooks on the same events (with matchers),
//! other settings, no `hooks`, an empty file, one-line and tab-indented files, a stale install,
//! and the files cohost refuses to touch.

use super::*;

const HOOK: &str = "/opt/cohost/bin/cohost-hook";
const HOME: &str = "/home/me/.local/state/cohost";

fn wanted() -> Vec<Wanted> {
    wanted_for(HOOK)
}

fn wanted_for(program: &str) -> Vec<Wanted> {
    [
        ("UserPromptSubmit", "", 10),
        ("PreToolUse", "*", 10),
        ("PermissionRequest", "*", 600),
        ("Stop", "", 10),
    ]
    .into_iter()
    .map(|(event, matcher, timeout)| Wanted {
        event,
        matcher,
        hook: json!({
            "type": "command",
            "command": command_line(program, HOME, event),
            "timeout": timeout,
        }),
    })
    .collect()
}

fn changed(edited: Edited) -> String {
    match edited {
        Edited::Changed(text) => text,
        Edited::Unchanged => panic!("expected a change"),
    }
}

/// A person's settings as Claude's own `/hooks` and a hand edit leave them.
const PERSONAL: &str = r#"{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(npm test:*)"],
    "defaultMode": "default"
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/audit.sh"
          }
        ]
      }
    ],
    "Stop": [
      {
        "hooks": [{"type": "command", "command": "notify-send done"}]
      }
    ]
  },
  "statusLine": {"type": "command", "command": "~/bin/status 1.50"}
}
"#;

#[test]
fn the_persons_hooks_on_the_same_events_stay_first_and_byte_for_byte() {
    let installed = changed(install(PERSONAL, &wanted()).unwrap());
    let expected = r#"{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(npm test:*)"],
    "defaultMode": "default"
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "~/bin/audit.sh"
          }
        ]
      },
      {
        "hooks": [
          {
            "command": "/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost PreToolUse",
            "timeout": 10,
            "type": "command"
          }
        ],
        "matcher": "*"
      }
    ],
    "Stop": [
      {
        "hooks": [{"type": "command", "command": "notify-send done"}]
      },
      {
        "hooks": [
          {
            "command": "/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost Stop",
            "timeout": 10,
            "type": "command"
          }
        ],
        "matcher": ""
      }
    ],
    "UserPromptSubmit": [
      {
        "hooks": [
          {
            "command": "/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost UserPromptSubmit",
            "timeout": 10,
            "type": "command"
          }
        ],
        "matcher": ""
      }
    ],
    "PermissionRequest": [
      {
        "hooks": [
          {
            "command": "/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost PermissionRequest",
            "timeout": 600,
            "type": "command"
          }
        ],
        "matcher": "*"
      }
    ]
  },
  "statusLine": {"type": "command", "command": "~/bin/status 1.50"}
}
"#;
    assert_eq!(installed, expected);
    // A second install changes nothing.
    assert_eq!(install(&installed, &wanted()).unwrap(), Edited::Unchanged);
    // Taking cohost's out gives back every byte.
    assert_eq!(changed(uninstall(&installed).unwrap()), PERSONAL);
    assert_eq!(uninstall(PERSONAL).unwrap(), Edited::Unchanged);
    let found = inspect(&installed).unwrap();
    let events: Vec<&str> = found.iter().map(|f| f.event.as_str()).collect();
    assert_eq!(
        events,
        [
            "PreToolUse",
            "Stop",
            "UserPromptSubmit",
            "PermissionRequest"
        ]
    );
    assert!(found.iter().all(|f| f.command.program == HOOK
        && f.command.home == HOME
        && f.command.event == f.event));
    assert!(inspect(PERSONAL).unwrap().is_empty());
}

#[test]
fn other_settings_and_no_hooks_key() {
    let text = "{\n    \"model\": \"sonnet\",\n    \"env\": {\"A\": \"1\"}\n}";
    let installed = changed(install(text, &wanted()[..1]).unwrap());
    assert_eq!(
        installed,
        "{\n    \"model\": \"sonnet\",\n    \"env\": {\"A\": \"1\"},\n    \"hooks\": {\n        \"UserPromptSubmit\": [\n            {\n                \"hooks\": [\n                    {\n                        \"command\": \"/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost UserPromptSubmit\",\n                        \"timeout\": 10,\n                        \"type\": \"command\"\n                    }\n                ],\n                \"matcher\": \"\"\n            }\n        ]\n    }\n}"
    );
    assert_eq!(changed(uninstall(&installed).unwrap()), text);
}

#[test]
fn an_empty_or_blank_file_gets_a_new_document() {
    for text in ["", "\n", "  \n\t"] {
        let installed = changed(install(text, &wanted()).unwrap());
        let value: Value = serde_json::from_str(&installed).unwrap();
        let hooks = value["hooks"].as_object().unwrap();
        assert_eq!(hooks.len(), 4);
        assert_eq!(value.as_object().unwrap().len(), 1);
        assert!(installed.ends_with("}\n"));
        assert_eq!(install(&installed, &wanted()).unwrap(), Edited::Unchanged);
        assert_eq!(changed(uninstall(&installed).unwrap()), "{}\n");
        assert_eq!(uninstall(text).unwrap(), Edited::Unchanged);
        assert!(inspect(text).unwrap().is_empty());
    }
}

#[test]
fn one_line_and_tab_indented_files_keep_their_layout() {
    let text = r#"{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]}]}}"#;
    let installed = changed(install(text, &wanted()[3..]).unwrap());
    assert_eq!(
        installed,
        r#"{"model":"opus","hooks":{"Stop":[{"hooks":[{"type":"command","command":"say done"}]},{"hooks":[{"command":"/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost Stop","timeout":10,"type":"command"}],"matcher":""}]}}"#
    );
    assert_eq!(changed(uninstall(&installed).unwrap()), text);

    let text = "{\n\t\"hooks\": {\n\t\t\"Stop\": []\n\t}\n}\n";
    let installed = changed(install(text, &wanted()[3..]).unwrap());
    assert_eq!(
        installed,
        "{\n\t\"hooks\": {\n\t\t\"Stop\": [\n\t\t\t{\n\t\t\t\t\"hooks\": [\n\t\t\t\t\t{\n\t\t\t\t\t\t\"command\": \"/opt/cohost/bin/cohost-hook --home /home/me/.local/state/cohost Stop\",\n\t\t\t\t\t\t\"timeout\": 10,\n\t\t\t\t\t\t\"type\": \"command\"\n\t\t\t\t\t}\n\t\t\t\t],\n\t\t\t\t\"matcher\": \"\"\n\t\t\t}\n\t\t]\n\t}\n}\n"
    );
    // The list held only cohost's group, so it goes, and `hooks` with it.
    assert_eq!(changed(uninstall(&installed).unwrap()), "{}\n");
}

#[test]
fn a_stale_install_is_rewritten_in_place() {
    let old = changed(install(PERSONAL, &wanted_for("/old place/cohost-hook")).unwrap());
    assert!(old.contains(
        r#""command": "'/old place/cohost-hook' --home /home/me/.local/state/cohost Stop""#
    ));
    let found = inspect(&old).unwrap();
    assert_eq!(found[0].command.program, "/old place/cohost-hook");
    let now = changed(install(&old, &wanted()).unwrap());
    assert_eq!(now, changed(install(PERSONAL, &wanted()).unwrap()));
    assert_eq!(install(&now, &wanted()).unwrap(), Edited::Unchanged);
}

#[test]
fn a_hook_of_the_persons_own_in_cohosts_group_is_kept() {
    let text = r#"{
  "hooks": {
    "Stop": [
      {
        "matcher": "",
        "hooks": [
          {"type": "command", "command": "/opt/cohost/bin/cohost-hook --home /h Stop", "timeout": 10},
          {"type": "command", "command": "say done"}
        ]
      }
    ]
  }
}"#;
    assert_eq!(
        changed(uninstall(text).unwrap()),
        r#"{
  "hooks": {
    "Stop": [
      {
        "matcher": "",
        "hooks": [
          {"type": "command", "command": "say done"}
        ]
      }
    ]
  }
}"#
    );
}

#[test]
fn files_cohost_refuses_are_named() {
    assert!(matches!(
        install("{\"model\": \"opus\",}", &wanted()),
        Err(SettingsError::NotJson(_))
    ));
    assert!(matches!(
        uninstall("{ nope"),
        Err(SettingsError::NotJson(_))
    ));
    assert_eq!(install("[]", &wanted()), Err(SettingsError::NotAnObject));
    assert_eq!(
        install("{\"hooks\": []}", &wanted()),
        Err(SettingsError::HooksNotAnObject)
    );
    assert_eq!(
        install("{\"hooks\": {\"Stop\": {}}}", &wanted()),
        Err(SettingsError::EventNotAList("Stop".into()))
    );
    let message = install("{\"a\": 1,}", &wanted()).unwrap_err().to_string();
    assert!(
        message.contains("not valid JSON") && message.contains("line 1"),
        "{message}"
    );
}

#[test]
fn commands_are_quoted_and_read_back() {
    assert_eq!(shell_quote("/usr/bin/cohost-hook"), "/usr/bin/cohost-hook");
    assert_eq!(shell_quote("/a b/it's"), r"'/a b/it'\''s'");
    for (program, home) in [
        ("/usr/local/bin/cohost-hook", "/home/me/.local/state/cohost"),
        ("/with space/cohost-hook", "/h o m e/it's $HOME"),
    ] {
        let line = command_line(program, home, "Stop");
        assert_eq!(
            cohost_command(&line),
            Some(CohostCommand {
                program: program.into(),
                home: home.into(),
                event: "Stop".into(),
            })
        );
    }
    assert_eq!(
        cohost_command("\"/x y/cohost-hook\" --home \"/h\\\"q\" Stop").map(|c| c.home),
        Some("/h\"q".into())
    );
    // The hosted sessions' own hook, and anything else, is not the machine-wide one.
    for other in [
        "/usr/bin/cohost-hook Stop",
        "/usr/bin/not-cohost-hook --home /h Stop",
        "/usr/bin/cohost-hook --home /h Stop extra",
        "'/usr/bin/cohost-hook --home /h Stop",
        "",
    ] {
        assert_eq!(cohost_command(other), None, "{other}");
    }
}
