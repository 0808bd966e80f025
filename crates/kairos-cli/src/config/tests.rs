//! Config layering and validation, each test inside a `figment::Jail` (its own cwd and a
//! cleared environment, so the machine's `DATABASE_URL` or `KAIROS_*` cannot leak in).

use std::path::Path;

use figment::error::Kind;
use figment::Jail;
use kairos_auth::{AuthMode, Role};
use kairos_core::{CatchupPolicy, OverlapPolicy};

use super::*;

/// Runs `test` in a jail with an empty environment.
// The jail's closure must return `figment::Result`, whose error is large; nothing here
// returns one (tests panic instead), so the size does not matter.
#[allow(clippy::result_large_err)]
fn jailed(test: impl FnOnce(&mut Jail)) {
    Jail::expect_with(|jail| {
        jail.clear_env();
        test(jail);
        Ok(())
    });
}

fn load_file(jail: &Jail, toml: &str) -> Result<Config, Box<figment::Error>> {
    jail.create_file("kairos.toml", toml)
        .expect("write kairos.toml");
    load(Some(Path::new("kairos.toml")))
}

/// The dotted key a rule error names (`error.path`).
fn rule_key(error: &figment::Error) -> String {
    assert!(
        matches!(error.kind, Kind::Message(_)),
        "expected a rule error, got {error}"
    );
    error.path.join(".")
}

fn unknown_field(error: &figment::Error) -> &str {
    match &error.kind {
        Kind::UnknownField(field, _) => field,
        other => panic!("expected an unknown field, got {other:?}"),
    }
}

#[test]
fn defaults_load_without_any_file_or_env() {
    jailed(|_| {
        let config = load(None).expect("load");
        assert_eq!(
            config.database.url,
            "postgres://postgres@127.0.0.1:5432/kairos"
        );
        assert_eq!(config.database.max_connections, 16);
        assert_eq!(config.nats.stream_prefix, "KAIROS");
        assert_eq!(config.nats.stream, None);
        let launcher = config.nats.launcher();
        assert_eq!(
            streams(&launcher),
            [
                "KAIROS_LAUNCH",
                "KAIROS_STATUS",
                "KAIROS_DLQ",
                "KAIROS_CANCEL"
            ]
        );
        assert_eq!(
            launcher.launch_retention,
            kairos_launcher::Retention::LAUNCH
        );
        assert_eq!(
            launcher.dlq_retention,
            kairos_launcher::Retention::DEAD_LETTERS
        );
        assert_eq!(config.nats.subject_prefix, "kairos");
        assert_eq!(config.nats.replicas, 1);
        assert_eq!(config.nats.token, None);
        assert_eq!(config.http.bind, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(config.auth.mode, AuthMode::None);
        assert!(config.auth.tokens.is_empty());
        assert_eq!(config.scheduler.tick_ms, 1000);
        assert_eq!(config.scheduler.lookahead_ms, 30_500);
        assert_eq!(config.scheduler.max_catchup_per_tick, 100);
        assert_eq!(config.scheduler.misfire_grace_ms, 60_000);
        assert_eq!(config.scheduler.default_overlap_policy, OverlapPolicy::Skip);
        assert_eq!(config.scheduler.default_catchup_policy, CatchupPolicy::None);
        assert_eq!(config.scheduler.default_jitter_ms, 0);
        assert_eq!(config.registrar.allowed_timezones, None);
        assert_eq!(config.history.retention_days, 30);
        assert_eq!(config.history.audit_retention_days, 365);
        assert_eq!(
            (config.history.keep_last, config.history.batch_size),
            (100, 1000)
        );
        assert_eq!(config.history.interval_s, 300);
        assert_eq!(config.history.partition_days_ahead, 7);
        assert_eq!(config.log.format, LogFormat::Auto);
    });
}

#[test]
fn config_file_overrides_defaults_key_by_key() {
    jailed(|jail| {
        let config = load_file(
            jail,
            r#"
            [scheduler]
            tick_ms = 250
            default_overlap_policy = "queue"

            [registrar]
            allowed_timezones = ["UTC", "Europe/Berlin"]

            [log]
            format = "json"
            "#,
        )
        .expect("load");
        assert_eq!(config.scheduler.tick_ms, 250);
        assert_eq!(
            config.scheduler.lookahead_ms, 30_500,
            "untouched keys keep the default"
        );
        assert_eq!(
            config.scheduler.default_overlap_policy,
            OverlapPolicy::Queue
        );
        assert_eq!(
            config
                .registrar
                .allowed_timezones
                .as_deref()
                .map(<[_]>::len),
            Some(2)
        );
        assert_eq!(config.log.format, LogFormat::Json);
    });
}

#[test]
fn missing_config_file_is_an_error() {
    jailed(|_| {
        assert!(load(Some(Path::new("nope.toml"))).is_err());
    });
}

#[test]
fn unknown_key_or_section_in_the_file_is_named() {
    jailed(|jail| {
        let error = load_file(jail, "[scheduler]\ntick_msx = 5\n").expect_err("typo");
        assert_eq!(unknown_field(&error), "tick_msx");
        assert_eq!(error.path, ["scheduler", "tick_msx"]);
        let error = load_file(jail, "[schedular]\ntick_ms = 5\n").expect_err("typo");
        assert_eq!(unknown_field(&error), "schedular");
    });
}

#[test]
fn wrong_type_is_an_error() {
    jailed(|jail| {
        let error = load_file(jail, "[scheduler]\ntick_ms = \"soon\"\n").expect_err("type");
        assert!(matches!(error.kind, Kind::InvalidType(..)), "{error}");
        jail.set_env("KAIROS_HTTP__BIND", "localhost");
        assert!(load(None).is_err(), "bind must be ip:port");
    });
}

#[test]
fn namespaced_env_overrides_the_file() {
    jailed(|jail| {
        jail.set_env("KAIROS_SCHEDULER__TICK_MS", "125");
        jail.set_env("KAIROS_NATS__SUBJECT_PREFIX", "acme.kairos");
        jail.set_env("KAIROS_HTTP__MAX_BODY_BYTES", "1024");
        let config = load_file(jail, "[scheduler]\ntick_ms = 250\n").expect("load");
        assert_eq!(config.scheduler.tick_ms, 125);
        assert_eq!(config.nats.subject_prefix, "acme.kairos");
        assert_eq!(config.http.max_body_bytes, 1024);
    });
}

#[test]
fn database_url_env_overrides_the_file_and_loses_to_the_namespaced_form() {
    jailed(|jail| {
        jail.create_file("kairos.toml", "[database]\nurl = \"postgres://file/db\"\n")
            .expect("write kairos.toml");
        let path = Some(Path::new("kairos.toml"));
        assert_eq!(load(path).expect("load").database.url, "postgres://file/db");
        jail.set_env(
            "DATABASE_URL",
            "postgres://kairos:pw@db.internal:5432/kairos",
        );
        assert_eq!(
            load(path).expect("load").database.url,
            "postgres://kairos:pw@db.internal:5432/kairos"
        );
        jail.set_env("KAIROS_DATABASE__URL", "postgres://namespaced/db");
        assert_eq!(
            load(path).expect("load").database.url,
            "postgres://namespaced/db"
        );
    });
}

#[test]
fn seed_names_map_into_the_scheduler_section() {
    jailed(|jail| {
        jail.set_env("TICK_MS", "200");
        jail.set_env("LOOKAHEAD_MS", "30000");
        jail.set_env("MAX_CATCHUP_PER_TICK", "7");
        jail.set_env("DEFAULT_OVERLAP_POLICY", "allow");
        jail.set_env("DEFAULT_CATCHUP_POLICY", "fire_immediately");
        jail.set_env("DEFAULT_JITTER_MS", "1500");
        let config =
            load_file(jail, "[scheduler]\ntick_ms = 250\nlookahead_ms = 90000\n").expect("load");
        let scheduler = &config.scheduler;
        assert_eq!(scheduler.tick_ms, 200, "seed env beats the file");
        assert_eq!(scheduler.lookahead_ms, 30_000);
        assert_eq!(scheduler.max_catchup_per_tick, 7);
        assert_eq!(scheduler.default_overlap_policy, OverlapPolicy::Allow);
        assert_eq!(
            scheduler.default_catchup_policy,
            CatchupPolicy::FireImmediately
        );
        assert_eq!(scheduler.default_jitter_ms, 1500);
        jail.set_env("KAIROS_SCHEDULER__TICK_MS", "100");
        assert_eq!(
            load(None).expect("load").scheduler.tick_ms,
            100,
            "namespaced beats the seed name"
        );
    });
}

#[test]
fn bad_policy_name_is_an_error() {
    jailed(|jail| {
        jail.set_env("DEFAULT_OVERLAP_POLICY", "sometimes");
        let error = load(None).expect_err("unknown policy");
        assert_eq!(error.path, ["scheduler", "default_overlap_policy"]);
    });
}

#[test]
fn kairos_vars_without_a_section_are_not_config() {
    jailed(|jail| {
        jail.set_env("KAIROS_URL", "http://127.0.0.1:8080");
        jail.set_env("KAIROS_TOKEN", "abc");
        load(None).expect("load");
    });
}

#[test]
fn typo_in_a_namespaced_env_var_is_named() {
    jailed(|jail| {
        jail.set_env("KAIROS_SCHEDULER__TICKMS", "5");
        let error = load(None).expect_err("typo");
        assert_eq!(unknown_field(&error), "tickms");
    });
}

#[test]
fn env_values_stay_strings_unless_structured() {
    jailed(|jail| {
        jail.set_env("KAIROS_NATS__USER", "kairos");
        jail.set_env("KAIROS_NATS__PASSWORD", "007");
        jail.set_env(
            "KAIROS_REGISTRAR__ALLOWED_TIMEZONES",
            r#"["UTC", "Asia/Tokyo"]"#,
        );
        let config = load(None).expect("load");
        assert_eq!(config.nats.password.as_deref(), Some("007"));
        let zones = config.registrar.allowed_timezones.expect("zones from env");
        assert_eq!(zones, ["UTC", "Asia/Tokyo"]);
    });
}

#[test]
fn the_region_comes_from_kairos_region_and_the_regions_from_their_section() {
    jailed(|jail| {
        jail.set_env("KAIROS_REGION", "us");
        jail.set_env("KAIROS_REGIONS__NAMES", r#"["eu", "us"]"#);
        jail.set_env("KAIROS_REGIONS__FALLBACK_AFTER_S", "20");
        let config = load(None).expect("load");
        assert_eq!(config.region, "us");
        assert_eq!(config.regions.names, ["eu", "us"]);
        assert_eq!(config.regions.fallback_after().as_secs(), 20);
        jail.set_env("KAIROS_REGION", "ap");
        let error = load(None).expect_err("a region not among the names");
        assert_eq!(error.path, ["region"]);
        assert!(error.to_string().contains("eu, us"), "{error}");
    });
}

#[test]
fn debug_output_hides_secrets() {
    jailed(|jail| {
        jail.set_env("DATABASE_URL", "postgres://kairos:hunter2@db/kairos");
        jail.set_env("KAIROS_NATS__TOKEN", "natstoken");
        jail.set_env("KAIROS_AUTH__JWT_HS256_SECRET", "jwtsecret");
        let text = format!("{:?}", load(None).expect("load"));
        assert!(
            !["hunter2", "natstoken", "jwtsecret"]
                .iter()
                .any(|secret| text.contains(secret)),
            "{text}"
        );
        assert!(
            text.contains("postgres://kairos:<redacted>@db/kairos"),
            "{text}"
        );
    });
}

#[test]
fn rule_errors_name_their_key() {
    let cases = [
        ("[scheduler]\ntick_ms = 0\n", "scheduler.tick_ms"),
        ("[scheduler]\nlookahead_ms = 10\n", "scheduler.lookahead_ms"),
        (
            "[scheduler]\ndefault_jitter_ms = 3600001\n",
            "scheduler.default_jitter_ms",
        ),
        ("[scheduler]\nbatch_size = 0\n", "scheduler.batch_size"),
        (
            "[scheduler]\nprestage_ms = 10001\n",
            "scheduler.prestage_ms",
        ),
        (
            "[scheduler]\nprestage_ms = 5000\nclaim_idle_timeout_ms = 5500\n",
            "scheduler.claim_idle_timeout_ms",
        ),
        (
            "[scheduler]\nclaim_idle_timeout_ms = 30001\n",
            "scheduler.claim_idle_timeout_ms",
        ),
        (
            "[scheduler]\ndispatch_lanes = 0\n",
            "scheduler.dispatch_lanes",
        ),
        (
            "[scheduler]\ndispatch_lanes = 16\n",
            "scheduler.dispatch_lanes",
        ),
        (
            "[database]\nmax_connections = 0\n",
            "database.max_connections",
        ),
        ("[database]\nurl = \"\"\n", "database.url"),
        ("[http]\nmax_body_bytes = 0\n", "http.max_body_bytes"),
        (
            "[nats]\nduplicate_window_s = 300\n",
            "nats.duplicate_window_s",
        ),
        ("[nats]\nstream = \"a.b\"\n", "nats.stream"),
        ("[nats]\nstream_prefix = \"A.B\"\n", "nats.stream_prefix"),
        ("[nats]\nstream_prefix = \"\"\n", "nats.stream_prefix"),
        ("[nats]\nlaunch_max_age_s = 900\n", "nats.launch_max_age_s"),
        ("[nats]\ndlq_max_age_s = 60\n", "nats.dlq_max_age_s"),
        ("[nats]\nlaunch_max_bytes = 0\n", "nats.launch_max_bytes"),
        (
            "[nats]\nlaunch_max_age_s = 1000\n[scheduler]\nstart_timeout_s = 1000\n",
            "nats.launch_max_age_s",
        ),
        ("[nats]\nreplicas = 2\n", "nats.replicas"),
        ("[nats]\nreplicas = 0\n", "nats.replicas"),
        (
            "[nats]\nstatus_partitions = 257\n",
            "nats.status_partitions",
        ),
        (
            "[scheduler]\nstatus_batches = 0\n",
            "scheduler.status_batches",
        ),
        (
            "[scheduler]\nstatus_batches = 17\n",
            "scheduler.status_batches",
        ),
        ("[nats]\nsubject_prefix = \"a..b\"\n", "nats.subject_prefix"),
        ("[nats]\ntls_cert = \"c.pem\"\n", "nats.tls_key"),
        ("[nats]\nuser = \"kairos\"\n", "nats.password"),
        (
            "[nats]\ntoken = \"t\"\ncreds_file = \"k.creds\"\n",
            "nats.creds_file",
        ),
        (
            "[registrar]\nallowed_timezones = []\n",
            "registrar.allowed_timezones",
        ),
        (
            "[registrar]\nallowed_timezones = [\"UTC\", \"Mars/Olympus\"]\n",
            "registrar.allowed_timezones.1",
        ),
        ("[log]\nlevel = \" \"\n", "log.level"),
        ("[regions]\nnames = [\"EU\"]\n", "regions.names.0"),
        ("[regions]\nnames = [\"eu\", \"eu\"]\n", "regions.names.1"),
        (
            "[regions]\nfallback_after_s = 0\n",
            "regions.fallback_after_s",
        ),
        ("region = \"eu\"\n", "region"),
        ("[http]\nbind = \"0.0.0.0:8080\"\n", "auth"),
        ("[auth]\nmode = \"jwt\"\n", "auth"),
        ("[auth]\nmode = \"tokens\"\n", "auth"),
    ];
    jailed(|jail| {
        for (toml, key) in cases {
            let error = load_file(jail, toml).expect_err(toml);
            assert_eq!(rule_key(&error), key, "{toml}");
        }
    });
}

#[test]
fn tokens_mode_reads_token_tables_and_may_bind_anywhere() {
    jailed(|jail| {
        let config = load_file(
            jail,
            r#"
            [http]
            bind = "0.0.0.0:8080"

            [auth]
            mode = "tokens"

            [[auth.tokens]]
            name = "compiler"
            role = "deployer"
            sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

            [[auth.tokens]]
            name = "executor"
            role = "executor"
            sha256 = "60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752"
            "#,
        )
        .expect("load");
        assert_eq!(config.auth.mode, AuthMode::Tokens);
        assert_eq!(config.auth.tokens.len(), 2);
        assert_eq!(config.auth.tokens[1].role, Role::Executor);
        kairos_auth::Authenticator::from_config(&config.auth).expect("authenticator");
    });
}

#[test]
fn bad_token_role_in_the_file_is_an_error() {
    jailed(|jail| {
        let toml = "[auth]\nmode = \"tokens\"\n[[auth.tokens]]\nname = \"x\"\nrole = \"admin\"\nsha256 = \"00\"\n";
        assert!(load_file(jail, toml).is_err());
    });
}

#[test]
fn http_limits_default_to_a_complete_request_within_30_s() {
    jailed(|_| {
        let config = load(None).expect("load");
        let limits = config.http.limits();
        assert_eq!(
            limits.header_read_timeout + limits.body_read_timeout,
            std::time::Duration::from_secs(30)
        );
        assert_eq!(limits.max_connections, 4096);
        assert_eq!(config.http.allowed_hosts, None);
        config.http.hosts().expect("default hosts");
    });
}

#[test]
fn http_limits_and_hosts_are_configurable_and_checked() {
    jailed(|jail| {
        let config = load_file(
            jail,
            r#"
            [http]
            header_read_timeout_ms = 1000
            body_read_timeout_ms = 1500
            max_connections = 10
            allowed_hosts = ["kairos.internal:8080", "localhost"]
            "#,
        )
        .expect("load");
        assert_eq!(
            config.http.limits().body_read_timeout,
            std::time::Duration::from_millis(1500)
        );
        assert_eq!(config.http.allowed_hosts.as_ref().map(Vec::len), Some(2));
        for (toml, key) in [
            (
                "[http]\nheader_read_timeout_ms = 0\n",
                "http.header_read_timeout_ms",
            ),
            (
                "[http]\nbody_read_timeout_ms = 0\n",
                "http.body_read_timeout_ms",
            ),
            ("[http]\nmax_connections = 0\n", "http.max_connections"),
            ("[http]\nallowed_hosts = []\n", "http.allowed_hosts"),
            (
                "[http]\nallowed_hosts = [\"localhost\", \"a b:80\"]\n",
                "http.allowed_hosts.1",
            ),
        ] {
            let error = load_file(jail, toml).expect_err(toml);
            assert_eq!(rule_key(&error), key, "{toml}");
        }
    });
}

#[test]
fn stream_prefix_names_every_stream_and_stream_overrides_the_launch_stream() {
    jailed(|jail| {
        let config = load_file(
            jail,
            "[nats]\nstream_prefix = \"TEAM_A\"\nsubject_prefix = \"team_a\"\n",
        )
        .expect("load");
        let launcher = config.nats.launcher();
        assert_eq!(
            streams(&launcher),
            [
                "TEAM_A_LAUNCH",
                "TEAM_A_STATUS",
                "TEAM_A_DLQ",
                "TEAM_A_CANCEL"
            ]
        );
        assert_eq!(launcher.subject_prefix, "team_a");
        let config = load_file(
            jail,
            "[nats]\nstream_prefix = \"TEAM_A\"\nstream = \"LAUNCHES\"\n",
        )
        .expect("load");
        let launcher = config.nats.launcher();
        assert_eq!(launcher.stream, "LAUNCHES");
        assert_eq!(launcher.dlq_stream, "TEAM_A_DLQ");
    });
}

/// The launch, status, dead-letter and cancel stream names, in that order.
fn streams(launcher: &kairos_launcher::NatsConfig) -> [&str; 4] {
    [
        &launcher.stream,
        &launcher.status_stream,
        &launcher.dlq_stream,
        &launcher.cancel_stream,
    ]
}

#[test]
fn config_errors_read_as_the_key_what_is_wrong_and_where() {
    jailed(|jail| {
        let error = load_file(jail, "[http]\nbnd = \"127.0.0.1:1\"\n").expect_err("unknown key");
        let said = explain(&error);
        assert!(
            said.starts_with("config: http.bnd is not a setting; those of http are bind, "),
            "{said}"
        );
        assert!(said.ends_with("kairos.toml)"), "{said}");
        assert!(!said.contains('`') && !said.contains("default."), "{said}");

        let error = load_file(jail, "[http]\nbind = 5\n").expect_err("wrong type");
        let said = explain(&error);
        assert!(
            said.starts_with("config: http.bind: expected socket address, found "),
            "{said}"
        );

        let error = load_file(jail, "[scheduler]\ntick_ms = 0\n").expect_err("a rule");
        assert_eq!(explain(&error), "config: scheduler.tick_ms must be > 0");
    });
}
