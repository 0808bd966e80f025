//! Reading a JSON object field by field, so that a missing field, a wrong JSON type or an
//! unknown field is a [`Problem`] naming it (serde's messages name a line and column). Every
//! JSON input (the API's bodies and the status reports of both channels) is read with it.

use chrono::{DateTime, Utc};
use kairos_core::Problem;
use serde_json::{Map, Value};

/// The fields of one JSON object, taken one at a time; problems accumulate.
#[derive(Debug)]
pub struct Fields {
    map: Map<String, Value>,
    prefix: String,
    problems: Vec<Problem>,
    /// Every field asked for, in order: what an unknown field's problem lists.
    known: Vec<String>,
}

impl Fields {
    /// The object at `prefix` (empty for the body); anything but an object is a problem.
    pub fn new(value: Value, prefix: &str) -> Fields {
        let mut fields = Fields {
            map: Map::new(),
            prefix: prefix.to_string(),
            problems: Vec::new(),
            known: Vec::new(),
        };
        match value {
            Value::Object(map) => fields.map = map,
            other => {
                let name = if prefix.is_empty() { "body" } else { prefix };
                fields.problems.push(Problem::new(
                    name,
                    format!("must be a JSON object, not {}", kind(&other)),
                ));
            }
        }
        fields
    }

    /// The full name of `field` in this object (`retry_backoff.max_s`, `schedules[2].x`).
    pub fn field_name(&self, field: &str) -> String {
        self.name(field)
    }

    fn name(&self, field: &str) -> String {
        if self.prefix.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.prefix)
        }
    }

    fn take(&mut self, field: &str, required: bool) -> Option<Value> {
        self.known.push(field.to_string());
        match self.map.remove(field) {
            None | Some(Value::Null) if required => {
                self.problems
                    .push(Problem::new(self.name(field), "is required"));
                None
            }
            None | Some(Value::Null) => None,
            Some(value) => Some(value),
        }
    }

    fn wrong(&mut self, field: &str, expected: &str, value: &Value) {
        self.problems.push(Problem::new(
            self.name(field),
            format!("must be {expected}, not {}", kind(value)),
        ));
    }

    /// Refuses a value with NUL anywhere (strings or object keys): PostgreSQL cannot store
    /// NUL in text or jsonb, so it must be a 400 naming the field, not a failed insert.
    fn without_nul(&mut self, field: &str, value: Value) -> Option<Value> {
        if crate::dag::contains_nul(&value) {
            self.problems
                .push(Problem::new(self.name(field), crate::dag::NUL_RULE));
            return None;
        }
        Some(value)
    }

    /// A string field.
    pub fn string(&mut self, field: &str, required: bool) -> Option<String> {
        let value = self.take(field, required)?;
        match self.without_nul(field, value)? {
            Value::String(text) => Some(text),
            other => {
                self.wrong(field, "a string", &other);
                None
            }
        }
    }

    /// An integer field (a JSON number without fraction).
    pub fn integer(&mut self, field: &str, required: bool) -> Option<i64> {
        match self.take(field, required)? {
            Value::Number(n) if whole(&n).is_some() => whole(&n),
            other => {
                self.wrong(field, "an integer", &other);
                None
            }
        }
    }

    /// A number field (integer or fraction).
    pub fn number(&mut self, field: &str, required: bool) -> Option<f64> {
        match self.take(field, required)? {
            Value::Number(n) if n.as_f64().is_some() => n.as_f64(),
            other => {
                self.wrong(field, "a number", &other);
                None
            }
        }
    }

    /// A boolean field.
    pub fn boolean(&mut self, field: &str, required: bool) -> Option<bool> {
        match self.take(field, required)? {
            Value::Bool(flag) => Some(flag),
            other => {
                self.wrong(field, "true or false", &other);
                None
            }
        }
    }

    /// An RFC 3339 timestamp field.
    pub fn time(&mut self, field: &str, required: bool) -> Option<DateTime<Utc>> {
        let text = self.string(field, required)?;
        match DateTime::parse_from_rfc3339(&text) {
            Ok(at) => Some(at.with_timezone(&Utc)),
            Err(_) => {
                self.problems.push(Problem::new(
                    self.name(field),
                    format!("{text:?} is not an RFC 3339 timestamp (e.g. 2026-03-09T07:00:00Z)"),
                ));
                None
            }
        }
    }

    /// Any JSON value without NUL characters.
    pub fn value(&mut self, field: &str, required: bool) -> Option<Value> {
        let value = self.take(field, required)?;
        self.without_nul(field, value)
    }

    /// An array field.
    pub fn array(&mut self, field: &str, required: bool) -> Option<Vec<Value>> {
        match self.take(field, required)? {
            Value::Array(items) => Some(items),
            other => {
                self.wrong(field, "an array", &other);
                None
            }
        }
    }

    /// An array of strings; each bad element is a problem naming `field[i]`.
    pub fn strings(&mut self, field: &str) -> Option<Vec<String>> {
        let items = self.array(field, false)?;
        let mut strings = Vec::with_capacity(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let name = format!("{field}[{index}]");
            match item {
                Value::String(text) if !text.contains('\0') => strings.push(text),
                Value::String(_) => self
                    .problems
                    .push(Problem::new(self.name(&name), crate::dag::NUL_RULE)),
                other => self.wrong(&name, "a string", &other),
            }
        }
        Some(strings)
    }

    /// A text field of `min..=max` characters (a string, without NUL).
    pub fn text(&mut self, field: &str, required: bool, min: usize, max: usize) -> Option<String> {
        let text = self.string(field, required)?;
        let len = text.chars().count();
        if len < min || len > max {
            self.problem(field, format!("must be {min} to {max} characters"));
            return None;
        }
        Some(text)
    }

    /// A whole number of at least 1 that fits in a `u32` (a count or an attempt number).
    pub fn positive(&mut self, field: &str, required: bool) -> Option<u32> {
        let value = self.take(field, required)?;
        let n = match &value {
            Value::Number(n) => whole(n).and_then(|n| u32::try_from(n).ok()),
            _ => None,
        };
        match n {
            Some(n) if n >= 1 => Some(n),
            _ => {
                self.problem(field, "must be a whole number of at least 1");
                None
            }
        }
    }

    /// Records a broken rule of `field` in this object.
    pub fn problem(&mut self, field: &str, rule: impl Into<String>) {
        let name = self.name(field);
        self.problems.push(Problem::new(name, rule));
    }

    /// Moves problems found elsewhere (nested objects) into this reader.
    pub fn absorb(&mut self, problems: Vec<Problem>) {
        self.problems.extend(problems);
    }

    /// Ends reading: every field not taken is unknown (a typo must not be ignored), and its
    /// problem lists the fields this object has.
    pub fn finish(mut self) -> Vec<Problem> {
        let unknown: Vec<String> = self.map.keys().cloned().collect();
        if unknown.is_empty() {
            return self.problems;
        }
        let mut known: Vec<&str> = Vec::with_capacity(self.known.len());
        for field in &self.known {
            if !known.contains(&field.as_str()) {
                known.push(field);
            }
        }
        let rule = format!("is not a known field (known: {})", known.join(", "));
        for field in unknown {
            let name = self.name(&field);
            self.problems.push(Problem::new(name, rule.clone()));
        }
        self.problems
    }
}

/// A JSON number without a fraction, as JSON Schema's `integer` (`3` or `3.0`), that fits
/// in an `i64`; anything else is not an integer here.
pub fn whole(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        // i64::MIN as f64 is exactly -2^63; i64::MAX as f64 rounds up to 2^63.
        let fits = f >= i64::MIN as f64 && f < i64::MAX as f64;
        (f.fract() == 0.0 && fits).then_some(f as i64)
    })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
