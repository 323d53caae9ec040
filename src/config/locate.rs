//! The line of a node found by its path in the file.
//!
//! serde_yaml_ng reports the position of errors raised while deserializing, at the
//! node being deserialized, but keeps no positions once it is done. So a check that
//! spans several nodes, made after deserialization, names its node by path, and the
//! file is read again by a seed that fails on purpose when it reaches that node: the
//! error's position is the node's. This costs a second parse only on error.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::error::Location;

/// One step down the file: a mapping's key or a sequence's index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Key(&'static str),
    Index(usize),
}

/// Where the node at `path` starts in `yaml`, if it is there.
pub(crate) fn locate(yaml: &str, path: &[Step]) -> Option<Location> {
    let deserializer = serde_yaml_ng::Deserializer::from_str(yaml);
    match (Seek { path }).deserialize(deserializer) {
        Err(e) if e.to_string().contains(FOUND) => e.location().map(Location::from_yaml),
        _ => None,
    }
}

const FOUND: &str = "tollgate: node found";

struct Seek<'p> {
    path: &'p [Step],
}

impl<'de> DeserializeSeed<'de> for Seek<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seek<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Step::Key(wanted), rest)) = self.path.split_first() else {
            return self.here();
        };
        while let Some(key) = map.next_key::<KeyName>()? {
            if key.0.as_deref() == Some(*wanted) {
                return map.next_value_seed(Seek { path: rest });
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Step::Index(wanted), rest)) = self.path.split_first() else {
            return self.here();
        };
        let mut index = 0;
        while index < *wanted {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            index += 1;
        }
        seq.next_element_seed(Seek { path: rest }).map(|_| ())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.here()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.here()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.here()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.here()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.here()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.here()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.here()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Seek<'_> {
    /// At the end of the path the node is found: fail, so that the error carries its
    /// position. Elsewhere the path does not lead here: nothing to find.
    fn here<E: de::Error>(&self) -> Result<(), E> {
        if self.path.is_empty() {
            Err(E::custom(FOUND))
        } else {
            Ok(())
        }
    }
}

/// A mapping key: a string, or `None` for keys of other kinds.
struct KeyName(Option<String>);

impl<'de> de::Deserialize<'de> for KeyName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<KeyName, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyName;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping key")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<KeyName, E> {
                Ok(KeyName(Some(s.to_owned())))
            }

            fn visit_bool<E: de::Error>(self, _: bool) -> Result<KeyName, E> {
                Ok(KeyName(None))
            }

            fn visit_i64<E: de::Error>(self, _: i64) -> Result<KeyName, E> {
                Ok(KeyName(None))
            }

            fn visit_u64<E: de::Error>(self, _: u64) -> Result<KeyName, E> {
                Ok(KeyName(None))
            }

            fn visit_f64<E: de::Error>(self, _: f64) -> Result<KeyName, E> {
                Ok(KeyName(None))
            }

            fn visit_unit<E: de::Error>(self) -> Result<KeyName, E> {
                Ok(KeyName(None))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeyName, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(KeyName(None))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<KeyName, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(KeyName(None))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}
