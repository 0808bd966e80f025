//! Placeholder: the axum HTTP surface will live here. Nothing is implemented yet.
