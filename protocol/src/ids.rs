//! The ids of the contract as newtypes: a plain string on the wire (and in the schema), a type
//! of its own in code, so a task id is never passed where an approval id is meant.

/// Declares a string id: `#[serde(transparent)]`, a string in the JSON Schema, read as `&str`
/// (`Deref`, `Borrow<str>`, so a map keyed by it is looked up with a `&str`).
macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Default,
            PartialEq,
            Eq,
            PartialOrd,
            Ord,
            Hash,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                $name(id.to_string())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                "String".into()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                String::json_schema(generator)
            }
        }
    };
}

string_id!(
    /// A hosted session's id (`cs_…`), given by cohost.
    SessionId
);
string_id!(
    /// A tmux session's name: what the tracker's events are about.
    TmuxSessionName
);
string_id!(
    /// A task's id (`task_…`), given by cohost.
    TaskId
);
string_id!(
    /// An approval's id, derived from the runtime's turn and item (`ap:…`).
    ApprovalId
);

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn an_id_is_a_plain_string_on_the_wire_and_looks_up_by_str() {
        let id = ApprovalId::from("ap:t:c:command");
        assert_eq!(serde_json::to_string(&id).unwrap(), r#""ap:t:c:command""#);
        let read: ApprovalId = serde_json::from_str(r#""ap:t:c:command""#).unwrap();
        assert_eq!(read, id);
        assert_eq!(id, "ap:t:c:command");
        let map = HashMap::from([(TaskId::from("task_1"), 1)]);
        assert_eq!(map.get("task_1"), Some(&1));
        let schema = schemars::schema_for!(TaskId).to_value();
        assert_eq!(schema["type"], "string");
    }
}
