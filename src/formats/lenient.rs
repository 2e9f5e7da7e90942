//! Permissive field readers for the peers' JSON (`#[serde(deserialize_with = "…")]`).
//!
//! A newer codex or Claude Code adds fields, widens enums and now and then changes a field's
//! type. The wire types in `runtime/codex/wire/` and `formats/claude/` therefore read every field a
//! host relies on through these helpers: a value of the wrong type reads as absent instead of
//! failing the whole message, exactly as the former `value.get(key).and_then(Value::as_str)`
//! reads did. Unknown fields are ignored by serde itself (no `deny_unknown_fields` anywhere).
//!
//! Use them with `#[serde(default, deserialize_with = "…")]`, so that a missing field is
//! `None` / empty too.
//!
//! Why not `serde_with` (`DefaultOnError`, `VecSkipError`; measured against it in
//! docs/benchmarks-claude.md "Lenient readers"): it reads differently and slower.
//! `DefaultOnError` reads `null` in an `Option<Value>` as `None` (the "present but null" some
//! readers tell apart is lost), lets a struct read a JSON array positionally (`[7]` becomes
//! `{"n": 7}`), and swallows a broken value (`1e999`) instead of failing the message. It first
//! buffers every value into serde's private `Content`, once per nesting level: decoding the
//! bench's 67 MB Claude transcript from parsed `Value`s took 1.6–2.1× the time, the parse plus
//! decode 1.13–1.27×, recorded Claude lines 2.8–3.3× and recorded codex notifications
//! 1.3–1.4×. Nor has it an open string enum (`#[serde(other)]` drops the value): see
//! [`open_enum!`].

use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{
    self, Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess,
    SeqAccess, Visitor,
};
use serde_json::Value;

/// The visit methods a visitor does not want, each reading its value as `$none` (and consuming
/// arrays and objects).
macro_rules! other_values {
    ($none:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($none)
        }
    };
}

/// A type read permissively: from any JSON value, `Some` when the value is one, `None` when it
/// is not. An implementation consumes the value whatever it is and fails only when the input
/// itself is broken, so a field of the wrong type never fails its message.
///
/// Implemented for `String`, `u64`, `i64`, `bool` and `Value` (which keeps whatever it finds,
/// `null` included), by [`open_enum!`] types, by objects through [`lenient_object!`] (only a JSON
/// object reads as one: serde would read an array positionally), and by the tagged types of
/// the wire modules.
pub trait Lenient: Sized {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error>;
}

/// `#[serde(default, deserialize_with = "lenient::opt")]`: `Some(value)` when the field holds
/// a `T`, `None` when it holds anything else. With `T = Value`, `Some(Value::Null)` is "present
/// but null", which some readers tell apart from "absent".
pub fn opt<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Lenient,
{
    T::read(deserializer)
}

/// A whole record (a parsed line, or its payload) read as a `T` when it is a JSON object, a
/// default `T` when it is anything else: with `T`'s fields lenient, a record never fails to read.
/// What every `formats/<peer>` decoder does with a line after telling its kind.
pub fn object<T: serde::de::DeserializeOwned + Default>(value: &Value) -> T {
    if value.is_object() {
        T::deserialize(value).unwrap_or_default()
    } else {
        T::default()
    }
}

/// `#[serde(default, deserialize_with = "lenient::vec")]`: the elements of an array that are
/// `T`s, in order; the others are skipped. Anything but an array reads as empty.
pub fn vec<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Lenient,
{
    struct Elements<T>(PhantomData<T>);
    impl<'de, T: Lenient> Visitor<'de> for Elements<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any value")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(item) = seq.next_element_seed(Element::<T>(PhantomData))? {
                out.extend(item);
            }
            Ok(out)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Vec<T>, A::Error> {
            drain_map(map).map(|_| Vec::new())
        }
        other_values!(Vec::new());
    }
    deserializer.deserialize_any(Elements(PhantomData))
}

/// `#[serde(default, deserialize_with = "lenient::present")]`: `Some` whenever the field is
/// present: its `T`, or `T::default()` when it holds something else (`null`, a wrong type). For
/// objects whose mere presence matters to a reader.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Lenient + Default,
{
    Ok(Some(T::read(deserializer)?.unwrap_or_default()))
}

/// One element of a [`vec`], read as a [`Lenient`] `T`.
struct Element<T>(PhantomData<T>);

impl<'de, T: Lenient> DeserializeSeed<'de> for Element<T> {
    type Value = Option<T>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
        T::read(deserializer)
    }
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A JSON scalar, or `Other` for anything else (consumed).
enum Scalar {
    Str(String),
    U64(u64),
    I64(i64),
    Bool(bool),
    Other,
}

fn scalar<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Scalar, D::Error> {
    struct ScalarVisitor;
    impl<'de> Visitor<'de> for ScalarVisitor {
        type Value = Scalar;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any value")
        }
        fn visit_bool<E: de::Error>(self, value: bool) -> Result<Scalar, E> {
            Ok(Scalar::Bool(value))
        }
        fn visit_i64<E: de::Error>(self, value: i64) -> Result<Scalar, E> {
            Ok(Scalar::I64(value))
        }
        fn visit_u64<E: de::Error>(self, value: u64) -> Result<Scalar, E> {
            Ok(Scalar::U64(value))
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Scalar, E> {
            Ok(Scalar::Other)
        }
        fn visit_str<E: de::Error>(self, value: &str) -> Result<Scalar, E> {
            Ok(Scalar::Str(value.to_owned()))
        }
        fn visit_string<E: de::Error>(self, value: String) -> Result<Scalar, E> {
            Ok(Scalar::Str(value))
        }
        fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Scalar, E> {
            Ok(Scalar::Other)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
            Ok(Scalar::Other)
        }
        fn visit_none<E: de::Error>(self) -> Result<Scalar, E> {
            Ok(Scalar::Other)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Scalar, A::Error> {
            drain_seq(seq).map(|_| Scalar::Other)
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Scalar, A::Error> {
            drain_map(map).map(|_| Scalar::Other)
        }
    }
    deserializer.deserialize_any(ScalarVisitor)
}

impl Lenient for String {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        Ok(match scalar(deserializer)? {
            Scalar::Str(value) => Some(value),
            _ => None,
        })
    }
}

/// A non-negative integer (as `Value::as_u64` reads it: not a float).
impl Lenient for u64 {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        Ok(match scalar(deserializer)? {
            Scalar::U64(value) => Some(value),
            Scalar::I64(value) => u64::try_from(value).ok(),
            _ => None,
        })
    }
}

/// An integer that fits (as `Value::as_i64` reads it: not a float).
impl Lenient for i64 {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        Ok(match scalar(deserializer)? {
            Scalar::I64(value) => Some(value),
            Scalar::U64(value) => i64::try_from(value).ok(),
            _ => None,
        })
    }
}

impl Lenient for bool {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        Ok(match scalar(deserializer)? {
            Scalar::Bool(value) => Some(value),
            _ => None,
        })
    }
}

/// Whatever the field holds, `null` included.
impl Lenient for Value {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        Value::deserialize(deserializer).map(Some)
    }
}

/// Reads a JSON object as a `T` (whose fields are themselves lenient), anything else as
/// `None`. The object is read in place, not copied first.
pub fn read_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct ObjectVisitor<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any value")
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<T>, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map)).map(Some)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<T>, A::Error> {
            drain_seq(seq).map(|_| None)
        }
        other_values!(None);
    }
    deserializer.deserialize_any(ObjectVisitor(PhantomData))
}

/// Reads any value as a `Value`, then as a `T`: `None` when it is not one. For types whose own
/// `Deserialize` dispatches on a copy (tagged unions).
pub fn read_via_value<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}

/// Implements [`Lenient`] for object types (read with [`read_object`]).
macro_rules! lenient_object {
    ($($name:ty),* $(,)?) => {
        $(
            impl $crate::formats::lenient::Lenient for $name {
                fn read<'de, D: serde::Deserializer<'de>>(
                    deserializer: D,
                ) -> Result<Option<Self>, D::Error> {
                    $crate::formats::lenient::read_object(deserializer)
                }
            }
        )*
    };
}

pub(crate) use lenient_object;

/// Implements [`Lenient`] for types read through a `Value` (see [`read_via_value`]).
macro_rules! lenient_via_value {
    ($($name:ty),* $(,)?) => {
        $(
            impl $crate::formats::lenient::Lenient for $name {
                fn read<'de, D: serde::Deserializer<'de>>(
                    deserializer: D,
                ) -> Result<Option<Self>, D::Error> {
                    $crate::formats::lenient::read_via_value(deserializer)
                }
            }
        )*
    };
}

pub(crate) use lenient_via_value;

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

        impl $crate::formats::lenient::Lenient for $name {
            fn read<'de, D: serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Option<Self>, D::Error> {
                let value: Option<String> = $crate::formats::lenient::Lenient::read(deserializer)?;
                Ok(value.map(|value| $name::from(value.as_str())))
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
        #[serde(default, deserialize_with = "super::opt")]
        nested: Option<Inner>,
        #[serde(default, deserialize_with = "super::vec")]
        nested_list: Vec<Inner>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    struct Inner {
        #[serde(default, deserialize_with = "super::opt")]
        n: Option<u64>,
    }

    super::lenient_object!(Inner);

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
    fn a_broken_value_still_fails_the_message() {
        // Only a value of the wrong type reads as absent; a value that is not JSON (here a
        // number out of range) fails the whole message, wherever it sits.
        for line in [
            r#"{"text": "t", "count": 1e999}"#,
            r#"{"raw": 1e999}"#,
            r#"{"nested": {"n": 1e999}}"#,
            r#"{"list": [1e999, "a"]}"#,
            r#"{"text": [1, 2 x]}"#,
        ] {
            assert!(serde_json::from_str::<Probe>(line).is_err(), "{line}");
        }
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
