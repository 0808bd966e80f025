//! Placeholder: schedule validation and upsert will live here. Nothing is implemented yet.
