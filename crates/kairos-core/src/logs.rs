//! What an executor reports of an attempt's output: a link to the attempt's logs in its own
//! systems ([`check_log_url`]) and the tail of its output ([`output_tail`]), kept per
//! attempt as an [`AttemptLog`].

use chrono::{DateTime, Utc};

/// The most of an attempt's output kairos keeps: its last 16 KiB.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024;
/// The longest `log_url`.
pub const MAX_LOG_URL_LEN: usize = 2048;
/// What starts an output that was cut to its tail.
pub const CUT_MARK: &str = "…";

/// The logs of one attempt of a run, as the newest report about it left them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLog {
    /// The attempt (1, 2, ...).
    pub attempt: i32,
    /// Where the executor keeps the attempt's logs (http or https).
    pub log_url: Option<String>,
    /// The tail of the attempt's output ([`output_tail`]).
    pub output: Option<String>,
    /// When a report last changed either.
    pub updated_at: DateTime<Utc>,
}

/// Checks a `log_url`: an absolute `http://` or `https://` link with a host, at most
/// [`MAX_LOG_URL_LEN`] bytes of printable ASCII without spaces (anything else is
/// percent-encoded in a URL). The page shows it as a link, so any other scheme
/// (`javascript:`, `data:`) is refused here.
///
/// # Errors
/// The rule it breaks, as a sentence for the field's problem.
pub fn check_log_url(url: &str) -> Result<(), String> {
    if url.len() > MAX_LOG_URL_LEN {
        return Err(format!("must be at most {MAX_LOG_URL_LEN} bytes"));
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces (percent-encode the rest)".into());
    }
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") {
        &url[7..]
    } else {
        return Err("must be an http:// or https:// link".into());
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() {
        return Err("must name a host after the scheme".into());
    }
    Ok(())
}

/// The part of a reported output kairos keeps: the whole of it when it fits in
/// [`MAX_OUTPUT_BYTES`], else [`CUT_MARK`] and its last bytes, cut at a character boundary.
pub fn output_tail(output: &str) -> String {
    if output.len() <= MAX_OUTPUT_BYTES {
        return output.to_string();
    }
    let mut from = output.len() - MAX_OUTPUT_BYTES;
    while !output.is_char_boundary(from) {
        from += 1;
    }
    format!("{CUT_MARK}{}", &output[from..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_must_be_http_or_https_with_a_host() {
        assert!(check_log_url("https://logs.example.com/runs/42").is_ok());
        assert!(check_log_url("HTTP://logs:8080?run=1").is_ok());
        for bad in [
            "javascript:alert(1)",
            "JavaScript://x/%0aalert(1)",
            "data:text/html,<b>x</b>",
            "ftp://logs.example.com/",
            "https://",
            "https:///path",
            "/relative/path",
            "https://logs.example.com/a b",
            "https://logs.example.com/\u{7}",
            "https://logs.example.com/é",
        ] {
            assert!(check_log_url(bad).is_err(), "{bad} was accepted");
        }
        let long = format!("https://e.com/{}", "a".repeat(MAX_LOG_URL_LEN));
        assert_eq!(
            check_log_url(&long).unwrap_err(),
            "must be at most 2048 bytes"
        );
    }

    #[test]
    fn output_keeps_its_tail_at_a_character_boundary() {
        assert_eq!(output_tail("short\nout"), "short\nout");
        let exact = "x".repeat(MAX_OUTPUT_BYTES);
        assert_eq!(output_tail(&exact), exact);
        let long = format!("head{}", "é".repeat(MAX_OUTPUT_BYTES / 2));
        let kept = output_tail(&long);
        assert!(kept.starts_with(CUT_MARK));
        let body = &kept[CUT_MARK.len()..];
        assert!(body.len() <= MAX_OUTPUT_BYTES && body.len() >= MAX_OUTPUT_BYTES - 1);
        assert!(body.chars().all(|c| c == 'é'));
    }
}
