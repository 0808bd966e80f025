//! One error and its causes on one line, the form every log and readiness answer uses.

/// An error and its causes on one line (`err: cause: cause`).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|cause| cause as _)
        }
    }

    #[test]
    fn every_cause_follows_on_the_same_line() {
        let err = Layer(
            "publish",
            Some(Box::new(Layer("io", Some(Box::new(Layer("reset", None)))))),
        );
        assert_eq!(error_chain(&err), "publish: io: reset");
        assert_eq!(error_chain(&Layer("alone", None)), "alone");
    }
}
