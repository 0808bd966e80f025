//! What JSON and query strings say twice: a key repeated in one JSON object, or a query
//! parameter given more than once, is refused (400 naming it) rather than read as "the last
//! one wins", which two parsers of the same request could read differently.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why a body is not one JSON value with unique keys.
#[derive(Debug)]
pub(crate) enum JsonError {
    /// Not JSON at all.
    Syntax(serde_json::Error),
    /// The path of the first key repeated in one object (`schedules[2].cron_expr`).
    Repeated(String),
}

/// Parses `bytes` as JSON in one pass, refusing a key repeated in one object. Paths are
/// only built for the refusal, so a large body costs what `serde_json::from_slice` does.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, JsonError> {
    let repeated = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let walk = Walk {
        parent: None,
        step: Step::Root,
        repeated: &repeated,
    };
    let parsed = walk
        .deserialize(&mut deserializer)
        .and_then(|value| deserializer.end().map(|()| value));
    match (parsed, repeated.into_inner()) {
        (_, Some(path)) => Err(JsonError::Repeated(path)),
        (Ok(value), None) => Ok(value),
        (Err(err), None) => Err(JsonError::Syntax(err)),
    }
}

/// The first parameter a query string names more than once, if any.
pub(crate) fn repeated_query_parameter(query: &str) -> Option<String> {
    let mut seen = HashSet::new();
    form_urlencoded::parse(query.as_bytes())
        .map(|(name, _)| name.into_owned())
        .find(|name| !seen.insert(name.clone()))
}

/// Where a value stands in its parent.
#[derive(Clone, Copy)]
enum Step<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

/// Builds one value; its place is a chain of borrowed steps up to the root, written out
/// as a path only when a key repeats (into `repeated`).
struct Walk<'a> {
    parent: Option<&'a Walk<'a>>,
    step: Step<'a>,
    repeated: &'a RefCell<Option<String>>,
}

impl<'a> Walk<'a> {
    fn child(&'a self, step: Step<'a>) -> Walk<'a> {
        Walk {
            parent: Some(self),
            step,
            repeated: self.repeated,
        }
    }

    /// `schedules[2].cron_expr`: the steps from the root to this value.
    fn path(&self) -> String {
        let mut steps = Vec::new();
        let mut walk = Some(self);
        while let Some(current) = walk {
            steps.push(current.step);
            walk = current.parent;
        }
        let mut path = String::new();
        for step in steps.into_iter().rev() {
            match step {
                Step::Root => {}
                Step::Key(key) if path.is_empty() => path.push_str(key),
                Step::Key(key) => {
                    path.push('.');
                    path.push_str(key);
                }
                Step::Index(index) => path.push_str(&format!("[{index}]")),
            }
        }
        path
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            if map.contains_key(&key) {
                let path = self.child(Step::Key(&key)).path();
                *self.repeated.borrow_mut() = Some(path);
                return Err(de::Error::custom("a key is repeated in one object"));
            }
            let value = access.next_value_seed(self.child(Step::Key(&key)))?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(access.size_hint().unwrap_or(0));
        while let Some(item) = access.next_element_seed(self.child(Step::Index(items.len())))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }
    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }
    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repeated(text: &str) -> Option<String> {
        match parse_json(text.as_bytes()) {
            Err(JsonError::Repeated(path)) => Some(path),
            Err(JsonError::Syntax(err)) => panic!("{text}: {err}"),
            Ok(_) => None,
        }
    }

    #[test]
    fn a_repeated_key_is_named_by_its_path() {
        assert_eq!(repeated(r#"{"a": 1, "b": {"c": [1, {"d": 1}]}}"#), None);
        assert_eq!(repeated(r#"{"a": 1, "a": 2}"#).as_deref(), Some("a"));
        assert_eq!(
            repeated(r#"{"schedules": [{"x": 1}, {"cron_expr": "a", "cron_expr": "b"}]}"#)
                .as_deref(),
            Some("schedules[1].cron_expr")
        );
        assert_eq!(repeated(r#"[{"k": 1, "k": 1}]"#).as_deref(), Some("[0].k"));
        assert_eq!(repeated(r#"{"a": {"b": 1}, "c": {"b": 2}}"#), None);
    }

    #[test]
    fn the_value_is_what_serde_json_reads_and_bad_json_is_a_syntax_error() {
        let text = r#"{"a": [1, -2, 3.5, "x", true, null, {"b": 18446744073709551615}]}"#;
        let value = parse_json(text.as_bytes()).expect("valid");
        let expected: Value = serde_json::from_str(text).expect("valid");
        assert_eq!(value, expected);
        for bad in ["", "{", r#"{"a": 1} x"#, "[1,]"] {
            assert!(
                matches!(parse_json(bad.as_bytes()), Err(JsonError::Syntax(_))),
                "{bad:?}"
            );
        }
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
