//! What JSON and query strings say twice: a key repeated in one JSON object, or a query
//! parameter given more than once, is refused (400 naming it) rather than read as "the last
//! one wins", which two parsers of the same request could read differently.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The path of the first key a JSON document repeats in one object (`schedules[2].cron_expr`),
/// if any. Meant for a document already known to be valid JSON.
pub(crate) fn repeated_json_key(bytes: &[u8]) -> Option<String> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let error = Walk {
        path: String::new(),
    }
    .deserialize(&mut deserializer)
    .err()?
    .to_string();
    // serde_json adds the position after the message: the path is between the marks.
    error.split(MARK).nth(1).map(str::to_string)
}

/// Brackets the path in the walk's error, ahead of the position serde_json appends.
const MARK: char = '\u{1}';

/// The first parameter a query string names more than once, if any.
pub(crate) fn repeated_query_parameter(query: &str) -> Option<String> {
    let mut seen = HashSet::new();
    form_urlencoded::parse(query.as_bytes())
        .map(|(name, _)| name.into_owned())
        .find(|name| !seen.insert(name.clone()))
}

/// Walks a value; fails with the path of the first repeated key (between two [`MARK`]s).
struct Walk {
    path: String,
}

impl Walk {
    fn child(&self, step: &str) -> Walk {
        Walk {
            path: format!("{}{step}", self.path),
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let step = if self.path.is_empty() {
                key.clone()
            } else {
                format!(".{key}")
            };
            let child = self.child(&step);
            if !keys.insert(key) {
                return Err(de::Error::custom(format!("{MARK}{}{MARK}", child.path)));
            }
            map.next_value_seed(child)?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while seq
            .next_element_seed(self.child(&format!("[{index}]")))?
            .is_some()
        {
            index += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_named_by_its_path() {
        let found = |text: &str| repeated_json_key(text.as_bytes());
        assert_eq!(found(r#"{"a": 1, "b": {"c": [1, {"d": 1}]}}"#), None);
        assert_eq!(found(r#"{"a": 1, "a": 2}"#).as_deref(), Some("a"));
        assert_eq!(
            found(r#"{"schedules": [{"x": 1}, {"cron_expr": "a", "cron_expr": "b"}]}"#).as_deref(),
            Some("schedules[1].cron_expr")
        );
        assert_eq!(found(r#"[{"k": 1, "k": 1}]"#).as_deref(), Some("[0].k"));
        assert_eq!(found(r#"{"a": {"b": 1}, "c": {"b": 2}}"#), None);
    }

    #[test]
    fn a_repeated_parameter_is_named() {
        assert_eq!(repeated_query_parameter("limit=1&cursor=x"), None);
        assert_eq!(
            repeated_query_parameter("limit=1&limit=2").as_deref(),
            Some("limit")
        );
        assert_eq!(
            repeated_query_parameter("a=1&b=2&a%20=3&b=4").as_deref(),
            Some("b")
        );
    }
}
