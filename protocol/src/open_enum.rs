//! [`open_enum!`]: a string-valued enum of the contract that stays open — the known values as
//! variants, any other string kept verbatim in `Other` — so a value a newer runtime adds, or one
//! an older cohost wrote to the log, still reads and is written back unchanged.

/// Declares an open string enum: `Serialize` writes the plain string, `Deserialize` reads any
/// string (an unknown one as `Other(value)`), and its JSON Schema is a string (the known values
/// as `examples`). It derefs to its string, so `Option<_>::as_deref()` reads it as `&str`.
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
            /// A value this cohost does not know, as written.
            Other(String),
        }

        impl $name {
            /// The known values, in declaration order.
            pub const KNOWN: &'static [$name] = &[$( $name::$variant, )*];

            /// The value as it is written on the wire.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $wire, )*
                    $name::Other(other) => other,
                }
            }

            /// Whether the value is one of the [`KNOWN`](Self::KNOWN) variants.
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
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

        impl From<String> for $name {
            fn from(value: String) -> Self {
                match $name::from(value.as_str()) {
                    $name::Other(_) => $name::Other(value),
                    known => known,
                }
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
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
                Ok($name::from(String::deserialize(deserializer)?))
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "examples": [$( $wire, )*],
                })
            }
        }
    };
}

pub(crate) use open_enum;

#[cfg(test)]
mod tests {
    use serde_json::json;

    open_enum! {
        /// A probe.
        pub enum Color {
            Red = "red",
            DarkBlue = "darkBlue",
        }
    }

    /// Each JSON value read as a `Color`, then written back.
    fn check(input: serde_json::Value, expect: Color) {
        let read: Color = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(read, expect, "{input}");
        assert_eq!(serde_json::to_value(&read).unwrap(), input);
        assert_eq!(read.to_string(), input.as_str().unwrap());
    }

    #[test]
    fn known_values_read_as_variants_and_others_are_kept_verbatim() {
        check(json!("red"), Color::Red);
        check(json!("darkBlue"), Color::DarkBlue);
        check(json!("dark-blue"), Color::Other("dark-blue".into()));
        check(json!("Red"), Color::Other("Red".into()));
        check(json!(""), Color::Other(String::new()));
        assert!(serde_json::from_value::<Color>(json!(1)).is_err());
        assert_eq!(Color::KNOWN, &[Color::Red, Color::DarkBlue]);
        assert!(Color::Red.is_known() && !Color::from("x").is_known());
        assert_eq!(Color::from(String::from("red")), "red");
    }

    #[test]
    fn its_schema_is_a_string() {
        let schema = schemars::schema_for!(Color).to_value();
        assert_eq!(schema["type"], "string");
        assert_eq!(schema["examples"], json!(["red", "darkBlue"]));
    }
}
