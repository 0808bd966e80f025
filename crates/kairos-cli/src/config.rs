//! The service configuration: figment layers exactly as docs/design.md §5 names them, typed
//! sections, and the cross-field checks that name the offending key.
//!
//! Layers, lowest to highest:
//! 1. `config/default.toml`, compiled in ([`DEFAULT_TOML`]), so the binary works from any cwd;
//! 2. the `--config FILE`, if given;
//! 3. plain environment variables: `DATABASE_URL` → `database.url`, and the seed 001 §11 names
//!    ([`SEED_ENV_NAMES`], e.g. `TICK_MS`) → the same key in `[scheduler]`;
//! 4. `KAIROS_<SECTION>__<KEY>` (double underscore between section and key), e.g.
//!    `KAIROS_SCHEDULER__TICK_MS=500`. The namespaced form wins over the plain one because it is
//!    the more specific. `KAIROS_*` variables without `__` (for example a CLI's `KAIROS_URL`)
//!    are not config and are ignored.
//!
//! Every struct denies unknown fields, so a typo in a file or a `KAIROS_*__*` name is an error
//! naming the key instead of a silent default.

use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;

use figment::providers::{Env, Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use kairos_auth::AuthConfig;
use kairos_core::{CatchupPolicy, OverlapPolicy, MAX_JITTER_MS};
use serde::{Deserialize, Deserializer};

/// Longest pre-staging lead, ms: the claim transaction stays open while it waits, well
/// inside the session's 30 s idle-in-transaction timeout (with the launch timeout).
const MAX_PRESTAGE_MS: u64 = 10_000;
/// `scheduler.claim_idle_timeout_ms` is at least `prestage_ms` plus this.
const MIN_CLAIM_IDLE_MARGIN_MS: u64 = 1_000;
/// Largest `scheduler.claim_idle_timeout_ms`: the sessions' own idle-in-transaction timeout.
const MAX_CLAIM_IDLE_TIMEOUT_MS: u64 = 30_000;
/// Most status batches one instance writes at once.
const MAX_STATUS_BATCHES: u32 = 16;

mod nats;
mod otlp;
mod regions;
#[cfg(test)]
mod tests;

pub use nats::NatsConfig;
pub use otlp::OtlpConfig;
pub use regions::RegionsConfig;

/// The built-in defaults, `config/default.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../../config/default.toml");

/// Prefix of the namespaced environment variables.
pub const ENV_PREFIX: &str = "KAIROS_";

/// The seed 001 §11 names, read as plain environment variables into `[scheduler]`.
pub const SEED_ENV_NAMES: [&str; 6] = [
    "TICK_MS",
    "LOOKAHEAD_MS",
    "MAX_CATCHUP_PER_TICK",
    "DEFAULT_OVERLAP_POLICY",
    "DEFAULT_CATCHUP_POLICY",
    "DEFAULT_JITTER_MS",
];

/// The whole configuration of a kairos instance.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The region this instance runs in (`region`, or `KAIROS_REGION`): one of
    /// `regions.names`; empty: none.
    #[serde(default)]
    pub region: String,
    /// `[regions]`: the deployment's regions.
    #[serde(default)]
    pub regions: RegionsConfig,
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[nats]`.
    pub nats: NatsConfig,
    /// `[http]`.
    pub http: HttpConfig,
    /// `[auth]`: mode, JWT keys and static tokens (see `kairos_auth`).
    pub auth: AuthConfig,
    /// `[scheduler]`.
    pub scheduler: SchedulerConfig,
    /// `[registrar]`.
    #[serde(default)]
    pub registrar: RegistrarConfig,
    /// `[history]`.
    pub history: HistoryConfig,
    /// `[log]`.
    pub log: LogConfig,
    /// `[otlp]`: span export, off by default.
    pub otlp: OtlpConfig,
}

/// `[database]`: the PostgreSQL that holds all state.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// Connection URL; also read from `DATABASE_URL`. May contain a password: not printed
    /// by `Debug`.
    pub url: String,
    /// Pool size per instance.
    pub max_connections: u32,
}

/// `[http]`: the API listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Listen address; must be loopback when `auth.mode = none`.
    pub bind: SocketAddr,
    /// Largest accepted request body in bytes.
    pub max_body_bytes: usize,
    /// Longest wait for a request's line and headers, ms; also how long a connection may
    /// sit idle (before its first request or between two) before it is closed.
    pub header_read_timeout_ms: u64,
    /// Longest time to receive a request body once its headers are in, ms (then 408).
    pub body_read_timeout_ms: u64,
    /// Most connections open at once; more are closed as soon as they are accepted. Keep it
    /// well below the process's open-file limit (`ulimit -n`).
    pub max_connections: usize,
    /// The `Host` values (`host` or `host:port`) the API answers to and writes may come
    /// from; absent: the bind address, `localhost:<port>` and `127.0.0.1:<port>` (every
    /// host for a bind on `0.0.0.0` or `::`).
    pub allowed_hosts: Option<Vec<String>>,
}

impl HttpConfig {
    /// The `Host` values of [`HttpConfig::allowed_hosts`], or the bind address's defaults.
    ///
    /// # Errors
    /// An entry that is not `host` or `host:port`.
    pub fn hosts(&self) -> Result<kairos_api::AllowedHosts, kairos_api::InvalidHost> {
        match &self.allowed_hosts {
            Some(hosts) => kairos_api::AllowedHosts::list(hosts),
            None => Ok(kairos_api::AllowedHosts::for_bind(self.bind)),
        }
    }

    /// The accept loop's limits.
    pub fn limits(&self) -> kairos_api::ServeLimits {
        kairos_api::ServeLimits {
            header_read_timeout: std::time::Duration::from_millis(self.header_read_timeout_ms),
            body_read_timeout: std::time::Duration::from_millis(self.body_read_timeout_ms),
            max_connections: self.max_connections,
        }
    }
}

/// `[scheduler]`: planner and dispatcher timing and defaults (seed 001 §11 plus docs/design.md §4).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Wake-up period of the planner and dispatcher, ms (`TICK_MS`).
    pub tick_ms: u64,
    /// How far ahead runs are planned, ms (`LOOKAHEAD_MS`).
    pub lookahead_ms: u64,
    /// `fire_immediately`: most missed ticks fired per schedule per pass (`MAX_CATCHUP_PER_TICK`).
    pub max_catchup_per_tick: u32,
    /// Lateness after which a tick counts as missed, ms.
    pub misfire_grace_ms: u64,
    /// Overlap policy of an upsert that names none (`DEFAULT_OVERLAP_POLICY`).
    #[serde(deserialize_with = "from_str")]
    pub default_overlap_policy: OverlapPolicy,
    /// Catch-up policy of an upsert that names none (`DEFAULT_CATCHUP_POLICY`).
    #[serde(deserialize_with = "from_str")]
    pub default_catchup_policy: CatchupPolicy,
    /// Jitter of an upsert that names none, ms (`DEFAULT_JITTER_MS`); at most 3,600,000.
    pub default_jitter_ms: u32,
    /// Schedules or runs claimed per statement.
    pub batch_size: u32,
    /// Smallest allowed gap between two ticks of one schedule, s.
    pub min_interval_s: u64,
    /// A run unpublished this long after `fire_at` fails instead of launching late, s.
    pub launch_deadline_s: u64,
    /// Most missed ticks caught up per schedule after an outage.
    pub max_catchup: u32,
    /// An ENQUEUED run no executor STARTED within this many seconds is re-published (its
    /// message may have been lost); 0: never, unless a schedule sets its own.
    pub start_timeout_s: u64,
    /// Re-publishes of one attempt before it fails as never started.
    pub max_republish: u32,
    /// How far ahead of `fire_at` the dispatcher claims and prepares a run, ms (0: off).
    pub prestage_ms: u64,
    /// How long PostgreSQL keeps a dispatch round's claimed runs locked once its instance
    /// stops talking (cut off, frozen), ms: more than `prestage_ms`.
    pub claim_idle_timeout_ms: u64,
    /// Dispatch rounds one instance holds at once (each a transaction and a connection).
    pub dispatch_lanes: u32,
    /// Status batches one instance writes at once, each on its own runs (each a
    /// transaction and a connection).
    pub status_batches: u32,
    /// A CANCELLING run whose executor has not confirmed the cancel within this many
    /// seconds becomes CANCELLED (and stops blocking its schedule).
    pub cancel_timeout_s: u64,
}

/// `[registrar]`: input rules beyond the built-in ones.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistrarConfig {
    /// When set, the only IANA zones a schedule may use.
    pub allowed_timezones: Option<Vec<String>>,
}

/// `[history]`: retention of finished runs (the `retention` role).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryConfig {
    /// Finished runs older than this many days are deleted...
    pub retention_days: u32,
    /// ...except the newest `keep_last` of each schedule.
    pub keep_last: u32,
    /// Most rows one retention batch (one short transaction) deletes.
    pub batch_size: u32,
    /// Seconds between retention passes.
    pub interval_s: u64,
    /// Daily partitions of `schedule_runs` made ahead of today (by the planner role at start
    /// and by every retention pass).
    pub partition_days_ahead: u32,
    /// Changes in the history of changes (the audit log) are kept this many days.
    pub audit_retention_days: u32,
}

/// `[log]`: tracing output.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `auto` (the default), human-readable or JSON lines.
    pub format: LogFormat,
    /// A `tracing_subscriber::EnvFilter` directive, e.g. `info` or `kairos=debug,sqlx=warn`.
    pub level: String,
}

/// `log.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `json` when stdout is not a terminal (a file, a pipe, a log shipper), else `pretty`.
    Auto,
    /// Human-readable lines; coloured only on a terminal and without `NO_COLOR`.
    Pretty,
    /// One JSON object per line, for log shippers.
    Json,
}

// Secrets stay out of `Debug`, so logging the config at startup cannot leak them.
impl fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DatabaseConfig")
            .field("url", &redact_url(&self.url))
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:<redacted>@host/db`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:<redacted>@{host}"),
        None => url.to_owned(),
    }
}

fn from_str<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    let value = String::deserialize(deserializer)?;
    value.parse().map_err(serde::de::Error::custom)
}

/// The figment with every layer, lowest first; `path` is the `--config` file.
pub fn figment(path: Option<&Path>) -> Figment {
    let mut figment = Figment::from(Toml::string(DEFAULT_TOML));
    if let Some(path) = path {
        figment = figment.merge(Toml::file_exact(path));
    }
    let database_url = Env::raw()
        .only(&["DATABASE_URL"])
        .map(|_| "database.url".into());
    let region = Env::raw().only(&["KAIROS_REGION"]).map(|_| "region".into());
    let seed_names = Env::raw()
        .only(&SEED_ENV_NAMES)
        .map(|name| format!("scheduler.{}", name.as_str().to_ascii_lowercase()).into());
    let namespaced = Env::prefixed(ENV_PREFIX)
        .filter(|key| key.as_str().contains("__"))
        .split("__");
    figment
        .merge(StringEnv(database_url))
        .merge(StringEnv(region))
        .merge(StringEnv(seed_names))
        .merge(StringEnv(namespaced))
}

/// Environment variables as strings. figment's own `Env` parses every value, so a password
/// `007` would become the number 7 and then fail to deserialize as a string; here values stay
/// text and [`load`]'s lossy extraction converts them only where a number or bool is
/// expected. A value starting with `[` or `{` is parsed as an array or table
/// (`KAIROS_REGISTRAR__ALLOWED_TIMEZONES='["UTC"]'`).
struct StringEnv(Env);

impl Provider for StringEnv {
    fn metadata(&self) -> Metadata {
        self.0.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut dict = Dict::new();
        for (key, text) in self.0.iter() {
            let value = if text.trim_start().starts_with(['[', '{']) {
                text.parse::<Value>().unwrap_or_else(|never| match never {})
            } else {
                Value::from(text)
            };
            insert_nested(&mut dict, key.as_str(), value);
        }
        Ok(Profile::Default.collect(dict))
    }
}

/// Inserts `value` at the dotted `key` (`scheduler.tick_ms`), creating tables on the way.
fn insert_nested(dict: &mut Dict, key: &str, value: Value) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(last) = parts.pop() else { return };
    let mut table = dict;
    for part in parts {
        let entry = table
            .entry(part.to_owned())
            .or_insert_with(|| Dict::new().into());
        if !matches!(entry, Value::Dict(..)) {
            *entry = Dict::new().into();
        }
        let Value::Dict(_, next) = entry else { return };
        table = next;
    }
    table.insert(last.to_owned(), value);
}

/// Loads and checks the configuration: the layers of [`figment`], then [`Config::validate`].
///
/// # Errors
/// A (boxed: it is large) `figment::Error` naming the key: a missing `--config` file, bad TOML, an unknown key,
/// a value of the wrong type, or a rule broken (`scheduler.tick_ms must be > 0`). For rule
/// errors, `error.path` holds the key's parts.
pub fn load(path: Option<&Path>) -> Result<Config, Box<figment::Error>> {
    // Lossy: environment values are strings, turned into numbers where a number is expected.
    let config: Config = figment(path).extract_lossy()?;
    config.validate()?;
    Ok(config)
}

/// A rule error for `key` (dotted), with `path` set so callers can tell which key failed.
/// A configuration error in plain words, one line per problem: the key, what is wrong with
/// it, and where its value came from (a file, or the environment).
pub fn explain(error: &figment::Error) -> String {
    error
        .clone()
        .into_iter()
        .map(|one| explain_one(&one))
        .collect::<Vec<_>>()
        .join("\n")
}

fn explain_one(error: &figment::Error) -> String {
    use figment::error::Kind;
    let key = error
        .path
        .iter()
        .filter(|part| part.as_str() != "default")
        .cloned()
        .collect::<Vec<_>>()
        .join(".");
    let from = match &error.metadata {
        Some(metadata) => match &metadata.source {
            Some(source) => format!(" (in {source})"),
            None => format!(" (from the {})", metadata.name.to_lowercase()),
        },
        None => String::new(),
    };
    let what = match &error.kind {
        Kind::UnknownField(_, expected) => {
            let section = key
                .rsplit_once('.')
                .map_or("the top level", |(section, _)| section);
            format!(
                "{key} is not a setting; those of {section} are {}",
                expected.join(", ")
            )
        }
        Kind::InvalidType(actual, expected) | Kind::InvalidValue(actual, expected) => {
            format!("{key}: expected {expected}, found {actual}")
        }
        Kind::MissingField(field) if key.is_empty() => format!("{field} is missing"),
        Kind::MissingField(field) => format!("{key}.{field} is missing"),
        Kind::Message(message) if key.is_empty() || message.starts_with(&key) => message.clone(),
        Kind::Message(message) => format!("{key}: {message}"),
        other => match key.as_str() {
            "" => other.to_string(),
            key => format!("{key}: {other}"),
        },
    };
    format!("config: {what}{from}")
}

fn invalid(key: &str, rule: impl fmt::Display) -> Box<figment::Error> {
    let mut error = figment::Error::from(format!("{key} {rule}"));
    error.path = key.split('.').map(str::to_owned).collect();
    Box::new(error)
}

fn positive(key: &str, value: u64) -> Result<(), Box<figment::Error>> {
    if value == 0 {
        return Err(invalid(key, "must be > 0"));
    }
    Ok(())
}

impl Config {
    /// Checks the rules no type expresses, each error naming its key.
    ///
    /// # Errors
    /// The first rule broken, as a `figment::Error` whose message starts with the key.
    pub fn validate(&self) -> Result<(), Box<figment::Error>> {
        self.validate_database()?;
        self.nats.validate(
            self.scheduler.launch_deadline_s,
            self.scheduler.start_timeout_s,
        )?;
        self.validate_http_and_auth()?;
        self.validate_scheduler()?;
        self.validate_registrar()?;
        self.regions.validate(&self.region)?;
        positive("history.retention_days", self.history.retention_days.into())?;
        positive(
            "history.audit_retention_days",
            self.history.audit_retention_days.into(),
        )?;
        positive("history.batch_size", self.history.batch_size.into())?;
        positive("history.interval_s", self.history.interval_s)?;
        if self.log.level.trim().is_empty() {
            return Err(invalid("log.level", "must not be empty"));
        }
        self.otlp.validate()
    }

    fn validate_database(&self) -> Result<(), Box<figment::Error>> {
        if self.database.url.trim().is_empty() {
            return Err(invalid(
                "database.url",
                "must not be empty (or set DATABASE_URL)",
            ));
        }
        positive(
            "database.max_connections",
            self.database.max_connections.into(),
        )
    }

    fn validate_http_and_auth(&self) -> Result<(), Box<figment::Error>> {
        let http = &self.http;
        positive("http.max_body_bytes", http.max_body_bytes as u64)?;
        positive("http.header_read_timeout_ms", http.header_read_timeout_ms)?;
        positive("http.body_read_timeout_ms", http.body_read_timeout_ms)?;
        positive("http.max_connections", http.max_connections as u64)?;
        if http.allowed_hosts.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid(
                "http.allowed_hosts",
                "must list at least one host (remove it for the defaults)",
            ));
        }
        if let Err(error) = http.hosts() {
            let index = http
                .allowed_hosts
                .iter()
                .flatten()
                .position(|entry| *entry == error.entry)
                .unwrap_or(0);
            return Err(invalid(
                &format!("http.allowed_hosts.{index}"),
                "must be host or host:port",
            ));
        }
        // The auth crate's errors already name their key (`auth.tokens[1].sha256 ...`).
        self.auth.validate().map_err(|error| invalid_auth(&error))?;
        kairos_auth::check_bind(self.auth.mode, self.http.bind)
            .map_err(|error| invalid_auth(&error))
    }

    fn validate_scheduler(&self) -> Result<(), Box<figment::Error>> {
        let scheduler = &self.scheduler;
        positive("scheduler.tick_ms", scheduler.tick_ms)?;
        positive("scheduler.lookahead_ms", scheduler.lookahead_ms)?;
        if scheduler.lookahead_ms < scheduler.tick_ms {
            return Err(invalid(
                "scheduler.lookahead_ms",
                format_args!("must be >= scheduler.tick_ms ({})", scheduler.tick_ms),
            ));
        }
        positive(
            "scheduler.max_catchup_per_tick",
            scheduler.max_catchup_per_tick.into(),
        )?;
        if scheduler.default_jitter_ms > MAX_JITTER_MS {
            return Err(invalid(
                "scheduler.default_jitter_ms",
                "must be <= 3600000 (one hour)",
            ));
        }
        positive("scheduler.batch_size", scheduler.batch_size.into())?;
        positive("scheduler.min_interval_s", scheduler.min_interval_s)?;
        positive("scheduler.launch_deadline_s", scheduler.launch_deadline_s)?;
        positive("scheduler.cancel_timeout_s", scheduler.cancel_timeout_s)?;
        if scheduler.prestage_ms > MAX_PRESTAGE_MS {
            return Err(invalid(
                "scheduler.prestage_ms",
                "must be <= 10000 (the claim transaction stays open while it waits)",
            ));
        }
        let least_idle = scheduler.prestage_ms + MIN_CLAIM_IDLE_MARGIN_MS;
        if scheduler.claim_idle_timeout_ms < least_idle
            || scheduler.claim_idle_timeout_ms > MAX_CLAIM_IDLE_TIMEOUT_MS
        {
            return Err(invalid(
                "scheduler.claim_idle_timeout_ms",
                format_args!(
                    "must be between prestage_ms + {MIN_CLAIM_IDLE_MARGIN_MS} ({least_idle}) \
                     and {MAX_CLAIM_IDLE_TIMEOUT_MS}: a round waits up to prestage_ms idle \
                     in its transaction for its tick"
                ),
            ));
        }
        let batches = scheduler.status_batches;
        if batches == 0 || batches > MAX_STATUS_BATCHES {
            return Err(invalid(
                "scheduler.status_batches",
                format_args!("must be between 1 and {MAX_STATUS_BATCHES}"),
            ));
        }
        let lanes = scheduler.dispatch_lanes;
        if lanes == 0 || lanes >= self.database.max_connections {
            return Err(invalid(
                "scheduler.dispatch_lanes",
                format_args!(
                    "must be between 1 and database.max_connections - 1 ({})",
                    self.database.max_connections.saturating_sub(1)
                ),
            ));
        }
        Ok(())
    }

    fn validate_registrar(&self) -> Result<(), Box<figment::Error>> {
        let Some(zones) = &self.registrar.allowed_timezones else {
            return Ok(());
        };
        if zones.is_empty() {
            return Err(invalid(
                "registrar.allowed_timezones",
                "must list at least one zone (remove it to allow every zone)",
            ));
        }
        for (index, zone) in zones.iter().enumerate() {
            if let Err(error) = kairos_core::parse_zone(zone) {
                return Err(invalid(
                    &format!("registrar.allowed_timezones.{index}"),
                    error,
                ));
            }
        }
        Ok(())
    }
}

/// Auth rule errors carry their key in the message; the path says `auth`.
fn invalid_auth(error: &kairos_auth::Error) -> Box<figment::Error> {
    let mut figment_error = figment::Error::from(error.to_string());
    figment_error.path = vec!["auth".to_owned()];
    Box::new(figment_error)
}
