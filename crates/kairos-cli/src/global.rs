//! The flags of the commands that talk to the API (`schedules`, `workflows`, `calendars`,
//! `runs`), accepted after the command anywhere on the line (`kairos runs --json list` and
//! `kairos runs list --json` are the same) and listed apart from a verb's own options: the
//! API's address, the bearer token and `--json`. `serve`, `migrate`, `preview` and
//! `completions` do not take them.

/// The heading the API flags are listed under in `--help`.
const HEADING: &str = "API connection";

/// The API flags of a command group.
#[derive(Debug, Clone, clap::Args)]
pub struct Global {
    /// Address of the kairos API; `http://` is added when no scheme is given
    /// (`localhost:8080`).
    #[arg(
        long,
        global = true,
        help_heading = HEADING,
        env = "KAIROS_URL",
        default_value = "http://127.0.0.1:8080",
        value_parser = api_url
    )]
    pub url: String,
    /// Bearer token for the API: a reader token lists and shows, a deployer token changes.
    #[arg(
        long,
        global = true,
        help_heading = HEADING,
        env = "KAIROS_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Print the API's JSON answer instead of text and tables.
    #[arg(long, global = true, help_heading = HEADING)]
    pub json: bool,
}

/// The API base URL of `--url`: `http://` added when no scheme is written, then checked to
/// be an http or https URL with a host and no query or fragment. The error says why (clap
/// prefixes it with the flag's name).
pub fn api_url(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("is empty: give the API's address, e.g. localhost:8080".into());
    }
    let full = if text.contains("://") {
        text.to_string()
    } else {
        format!("http://{text}")
    };
    let url = reqwest::Url::parse(&full).map_err(|err| format!("{full:?} is not a URL: {err}"))?;
    match url.scheme() {
        "http" | "https" => {}
        other => return Err(format!("the scheme must be http or https, not {other:?}")),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{full:?} names no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{full:?} must not have a query or fragment: give the API's base address"
        ));
    }
    Ok(full.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::api_url;

    #[test]
    fn a_url_without_a_scheme_gets_http() {
        assert_eq!(api_url("localhost:8080").unwrap(), "http://localhost:8080");
        assert_eq!(api_url("10.0.0.5:8090/").unwrap(), "http://10.0.0.5:8090");
        assert_eq!(api_url("[::1]:8080").unwrap(), "http://[::1]:8080");
        assert_eq!(
            api_url("https://kairos.example.com/api").unwrap(),
            "https://kairos.example.com/api"
        );
    }

    #[test]
    fn a_bad_url_says_why() {
        assert!(api_url("ftp://host").unwrap_err().contains("http or https"));
        assert!(api_url("").unwrap_err().contains("empty"));
        assert!(api_url("http://host?x=1").unwrap_err().contains("query"));
        assert!(api_url("http://exa mple:80")
            .unwrap_err()
            .contains("not a URL"));
    }
}
