//! Placeholder: `RunLauncher` and its JetStream implementation will live here. Nothing is implemented yet.
