//! Reading request bodies and queries field by field, so that a missing field, a wrong JSON
//! type or an unknown field is reported by name (serde's messages name a line and column).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
pub(crate) use kairos_registrar::fields::{whole, Fields};
use kairos_registrar::Problem;
use serde_json::Value;

use crate::body_timeout::BodyTimeout;
use crate::error::ApiError;
use crate::strict::JsonError;

/// Parses a JSON body, mapping an over-limit body to 413 and a late one to 408; a key
/// repeated in one object is a 400 naming it.
pub(crate) fn json(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Value, ApiError> {
    let bytes = body.map_err(|rejection| {
        if let Some(timeout) = BodyTimeout::in_chain(&rejection) {
            return ApiError::BodyTimeout(timeout.timeout.as_millis());
        }
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::TooLarge(limit),
            _ => ApiError::BadRequest(vec![Problem::new("body", rejection.body_text())]),
        }
    })?;
    crate::strict::parse_json(&bytes).map_err(|err| {
        let problem = match err {
            JsonError::Syntax(err) => Problem::new("body", format!("is not valid JSON: {err}")),
            JsonError::Repeated(field) => Problem::new(
                field,
                "is given more than once in one object (JSON keys must be unique)",
            ),
        };
        ApiError::BadRequest(vec![problem])
    })
}

/// Longest text query parameter, in characters: the id limit.
pub(crate) const MAX_QUERY_TEXT: usize = kairos_core::MAX_ID_LEN;

/// Query parameters read by name; unknown ones are problems.
#[derive(Debug)]
pub(crate) struct Query {
    params: HashMap<String, String>,
    problems: Vec<Problem>,
}

impl Query {
    /// The query string's parameters.
    pub(crate) fn new(params: HashMap<String, String>) -> Query {
        Query {
            params,
            problems: Vec::new(),
        }
    }

    /// A text parameter of at most [`MAX_QUERY_TEXT`] characters (every text parameter is an
    /// id, a cursor that is one, or a status name).
    pub(crate) fn text(&mut self, name: &str) -> Option<String> {
        let text = self.params.remove(name)?;
        let len = text.chars().count();
        if len > MAX_QUERY_TEXT {
            self.problems.push(Problem::new(
                name,
                format!("is {len} characters long; the limit is {MAX_QUERY_TEXT}"),
            ));
            return None;
        }
        Some(text)
    }

    /// An integer parameter.
    pub(crate) fn integer(&mut self, name: &str, default: i64) -> i64 {
        match self.params.remove(name) {
            None => default,
            Some(text) => text.parse().unwrap_or_else(|_| {
                self.problems
                    .push(Problem::new(name, format!("{text:?} is not an integer")));
                default
            }),
        }
    }

    /// A boolean parameter (`true`/`false`).
    pub(crate) fn boolean(&mut self, name: &str) -> Option<bool> {
        let text = self.params.remove(name)?;
        match text.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                self.problems.push(Problem::new(
                    name,
                    format!("{text:?} must be true or false"),
                ));
                None
            }
        }
    }

    /// An RFC 3339 timestamp parameter.
    pub(crate) fn time(&mut self, name: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        let text = self.params.remove(name)?;
        match chrono::DateTime::parse_from_rfc3339(&text) {
            Ok(at) => Some(at.with_timezone(&chrono::Utc)),
            Err(_) => {
                self.problems.push(Problem::new(
                    name,
                    format!("{text:?} is not an RFC 3339 timestamp (e.g. 2026-03-09T07:00:00Z)"),
                ));
                None
            }
        }
    }

    /// Ends reading; unknown parameters are problems.
    pub(crate) fn finish(mut self) -> Result<(), ApiError> {
        let mut unknown: Vec<&String> = self.params.keys().collect();
        unknown.sort();
        for name in unknown {
            self.problems
                .push(Problem::new(name.clone(), "is not a known query parameter"));
        }
        if self.problems.is_empty() {
            Ok(())
        } else {
            Err(ApiError::BadRequest(self.problems))
        }
    }
}
