//! Errors as one line a person can act on: an error's message followed by its causes
//! (`std::error::Error::source`), each said once.

use std::error::Error;

/// `e` followed by its sources, each said once: a cause whose text the line already
/// holds is left out, since transport layers often repeat their source's text ("tcp
/// connect error: tcp connect error").
pub fn error_chain(e: &dyn Error) -> String {
    with_causes(e.to_string(), e.source())
}

/// `message` followed by `cause` and the causes under it, each said once (see
/// [`error_chain`]). For an error whose own text is not the line to show: a gRPC status,
/// whose message is the part a person reads.
pub fn with_causes(message: String, cause: Option<&(dyn Error + 'static)>) -> String {
    let mut line = message;
    let mut next = cause;
    while let Some(c) = next {
        let said = c.to_string();
        if !said.is_empty() && !line.contains(&said) {
            line.push_str(": ");
            line.push_str(&said);
        }
        next = c.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    /// An error with a text and an optional cause.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn each_cause_is_said_once_and_empty_ones_not_at_all() {
        let e = Layer(
            "transport error",
            Some(Box::new(Layer(
                "tcp connect error",
                Some(Box::new(Layer(
                    "tcp connect error",
                    Some(Box::new(Layer("", Some(Box::new(Layer("refused", None)))))),
                ))),
            ))),
        );
        assert_eq!(error_chain(&e), "transport error: tcp connect error: refused");
        assert_eq!(with_causes("status".into(), None), "status");
    }
}
