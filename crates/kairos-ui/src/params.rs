//! The query parameters of a fragment, taken by name; an empty value means "not given" (a
//! filter form submits its empty fields), an unknown name is a problem like in the API.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use kairos_registrar::{Error, Problem};

/// A fragment's query parameters.
#[derive(Debug, Default)]
pub struct Params {
    map: HashMap<String, String>,
    problems: Vec<Problem>,
}

impl Params {
    /// The parameters of one request.
    pub fn new(map: HashMap<String, String>) -> Params {
        Params {
            map,
            problems: Vec::new(),
        }
    }

    /// A text parameter; `None` when absent or empty.
    pub fn text(&mut self, name: &str) -> Option<String> {
        self.map
            .remove(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// `true` or `false`; anything else is a problem.
    pub fn boolean(&mut self, name: &str) -> Option<bool> {
        match self.text(name)?.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            other => {
                self.problems.push(Problem::new(
                    name,
                    format!("{other:?} is not true or false"),
                ));
                None
            }
        }
    }

    /// An RFC 3339 instant.
    pub fn time(&mut self, name: &str) -> Option<DateTime<Utc>> {
        let text = self.text(name)?;
        match DateTime::parse_from_rfc3339(&text) {
            Ok(at) => Some(at.with_timezone(&Utc)),
            Err(_) => {
                self.problems.push(Problem::new(
                    name,
                    format!("{text:?} is not an RFC 3339 time such as 2026-03-08T12:00:00Z"),
                ));
                None
            }
        }
    }

    /// The problems found, unknown parameters included.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming each bad or unknown parameter.
    pub fn finish(mut self) -> Result<(), Error> {
        let mut unknown: Vec<String> = self.map.keys().cloned().collect();
        unknown.sort();
        for name in unknown {
            self.problems
                .push(Problem::new(name, "is not a known query parameter"));
        }
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid(self.problems))
        }
    }

    /// Records a problem found by the caller.
    pub fn problem(&mut self, problem: Problem) {
        self.problems.push(problem);
    }
}
