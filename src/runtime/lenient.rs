//! Permissive field readers for the peers' JSON (`#[serde(deserialize_with = "…")]`).
//!
//! A newer codex or Claude Code adds fields, widens enums and now and then changes a field's
//! type. The wire types in `codex/wire.rs` and `claude/records.rs` therefore read every field a
//! host relies on through these helpers: a value of the wrong type reads as absent instead of
//! failing the whole message, exactly as the former `value.get(key).and_then(Value::as_str)`
//! reads did. Unknown fields are ignored by serde itself (no `deny_unknown_fields` anywhere).
//!
//! Use them with `#[serde(default, deserialize_with = "…")]`, so that a missing field is
//! `None` / empty too.

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::Value;

/// `Some(value)` when the field holds a `T`, `None` when it holds anything else (including
/// `null`). For scalars, open enums and `Value`: `T = Value` keeps whatever the field holds,
/// `null` included, so `Some(Value::Null)` is "present but null", which some readers tell apart
/// from "absent". Struct-typed fields use [`object`] (serde would read an array positionally).
pub fn opt<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}

/// `Some(value)` when the field holds an object that reads as a `T`, `None` otherwise.
pub fn object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(match Value::deserialize(deserializer)? {
        value @ Value::Object(_) => T::deserialize(value).ok(),
        _ => None,
    })
}

/// The elements of an array that are `T`s, in order; the others are skipped. Anything but an
/// array reads as empty. For scalar elements; objects use [`objects`].
pub fn vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|item| T::deserialize(item).ok())
            .collect(),
        _ => Vec::new(),
    })
}

/// The elements of an array that are objects reading as `T`s, in order; the others are
/// skipped. Anything but an array reads as empty.
pub fn objects<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => items
            .into_iter()
            .filter(Value::is_object)
            .filter_map(|item| T::deserialize(item).ok())
            .collect(),
        _ => Vec::new(),
    })
}

/// `Some` whenever the field is present: the object as a `T`, or `T::default()` when it holds
/// something else (`null`, a wrong type). For objects whose mere presence matters to a reader.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    Ok(Some(match Value::deserialize(deserializer)? {
        value @ Value::Object(_) => T::deserialize(value).unwrap_or_default(),
        _ => T::default(),
    }))
}

/// A string-valued enum that stays open: the known values as variants, anything else kept
/// verbatim in `Other`, so a value a newer peer adds parses (and is passed on unchanged).
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )*
            /// A value this cohost does not know, as sent.
            Other(String),
        }

        impl $name {
            /// The value as it is written on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $wire, )*
                    $name::Other(other) => other,
                }
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $wire => $name::$variant, )*
                    other => $name::Other(other.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
                Ok($name::from(value.as_ref()))
            }
        }
    };
}

pub(crate) use open_enum;

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::{Value, json};

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Probe {
        #[serde(default, deserialize_with = "super::opt")]
        text: Option<String>,
        #[serde(default, deserialize_with = "super::opt")]
        count: Option<u64>,
        #[serde(default, deserialize_with = "super::opt")]
        raw: Option<Value>,
        #[serde(default, deserialize_with = "super::vec")]
        list: Vec<String>,
        #[serde(default, deserialize_with = "super::present")]
        inner: Option<Inner>,
        #[serde(default, deserialize_with = "super::object")]
        nested: Option<Inner>,
        #[serde(default, deserialize_with = "super::objects")]
        nested_list: Vec<Inner>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Inner {
        #[serde(default, deserialize_with = "super::opt")]
        n: Option<u64>,
    }

    super::open_enum! {
        pub enum Color {
            Red = "red",
        }
    }

    #[test]
    fn wrong_types_read_as_absent_and_nothing_fails() {
        let probe: Probe = serde_json::from_value(json!({
            "text": 5, "count": -1, "raw": null, "list": ["a", 1, "b", null], "inner": "x", "new": {},
            "nested": [7], "nested_list": [{"n": 1}, [2], "x", {"n": "y"}]
        }))
        .unwrap();
        assert_eq!(
            probe,
            Probe {
                text: None,
                count: None,
                raw: Some(Value::Null),
                list: vec!["a".into(), "b".into()],
                inner: Some(Inner::default()),
                nested: None,
                nested_list: vec![Inner { n: Some(1) }, Inner { n: None }],
            }
        );
        let probe: Probe =
            serde_json::from_str(r#"{"text":"t","count":3,"list":{},"inner":{"n":2}}"#).unwrap();
        assert_eq!(probe.text.as_deref(), Some("t"));
        assert_eq!(probe.count, Some(3));
        assert_eq!(probe.raw, None, "absent stays None");
        assert!(probe.list.is_empty());
        assert_eq!(probe.inner, Some(Inner { n: Some(2) }));
        assert_eq!(
            serde_json::from_value::<Probe>(json!({})).unwrap(),
            Probe::default()
        );
    }

    #[test]
    fn open_enums_keep_unknown_values() {
        assert_eq!(
            serde_json::from_str::<Color>("\"red\"").unwrap(),
            Color::Red
        );
        let other = serde_json::from_str::<Color>("\"ultraviolet\"").unwrap();
        assert_eq!(other, Color::Other("ultraviolet".into()));
        assert_eq!(serde_json::to_string(&other).unwrap(), "\"ultraviolet\"");
        assert_eq!(Color::Red.as_str(), "red");
    }
}
