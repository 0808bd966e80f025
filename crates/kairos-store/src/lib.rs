//! Placeholder: all SQL will live here (migrations, claims, run rows). Nothing is implemented yet.
