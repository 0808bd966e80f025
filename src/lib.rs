//! Root package of the kairos workspace: it exists so that `tests/` can exercise the crates together.
