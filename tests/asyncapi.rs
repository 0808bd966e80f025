//! `schemas/asyncapi.yaml`, the AsyncAPI 3.0 document of every NATS subject kairos uses:
//! the official parser (`@asyncapi/parser`, pinned in `tests/asyncapi/`) accepts it with its
//! `$ref`s to the JSON Schemas resolved, and what it lists is what the code and the schemas
//! say: subjects, streams, the status consumer, message ids, header names, and examples the
//! schemas accept. It fails, never skips, when Node.js or the npm packages are missing
//! (`scripts/test` installs the packages).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use kairos_core::RunKey;
use serde_json::{json, Value};

const DOCUMENT: &str = "schemas/asyncapi.yaml";

/// Each channel: the subject's kind (its second token), the parameter of its last token and
/// the stream's suffix.
const CHANNELS: [(&str, &str, &str); 4] = [
    ("launch", "workflow_id", "LAUNCH"),
    ("status", "idempotency_key", "STATUS"),
    ("dlq", "workflow_id", "DLQ"),
    ("cancel", "workflow_id", "CANCEL"),
];

/// The CloudEvents 1.0 context attributes a `ce-` header may carry.
const CLOUDEVENTS_ATTRIBUTES: [&str; 8] = [
    "specversion",
    "id",
    "source",
    "type",
    "time",
    "subject",
    "datacontenttype",
    "dataschema",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: impl AsRef<Path>) -> String {
    let path = root().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"))
}

fn document() -> Value {
    serde_yaml::from_str(&read(DOCUMENT)).expect("schemas/asyncapi.yaml is YAML")
}

/// Every Rust file under `dir` (relative to the workspace), concatenated.
fn rust_sources(dir: &str) -> String {
    fn walk(dir: &Path, out: &mut String) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {dir:?}: {e}"));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                out.push_str(&std::fs::read_to_string(&path).expect("read source"));
                out.push('\n');
            }
        }
    }
    let mut out = String::new();
    walk(&root().join(dir), &mut out);
    out
}

/// The product crates' sources (`crates/*/src`).
fn product_sources() -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(root().join("crates")).expect("crates/") {
        let src = entry.expect("directory entry").path().join("src");
        if src.is_dir() {
            let relative = src.strip_prefix(root()).expect("under the workspace");
            out.push_str(&rust_sources(relative.to_str().expect("UTF-8 path")));
        }
    }
    out
}

fn object(value: &Value, what: &str) -> serde_json::Map<String, Value> {
    value
        .as_object()
        .unwrap_or_else(|| panic!("{what} is an object"))
        .clone()
}

/// The message of `channel` (each channel has one), resolved from `components`.
fn message<'a>(document: &'a Value, channel: &str) -> &'a Value {
    let messages = object(
        &document["channels"][channel]["messages"],
        "channel messages",
    );
    assert_eq!(messages.len(), 1, "channel {channel} has one message");
    let reference = messages.values().next().expect("one")["$ref"]
        .as_str()
        .expect("a channel's message is a $ref to components");
    let name = reference
        .strip_prefix("#/components/messages/")
        .unwrap_or_else(|| panic!("{reference} points into components/messages"));
    &document["components"]["messages"][name]
}

/// `schema` with every `#/components/schemas/...` reference replaced by its target.
fn inline(schema: &Value, document: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                if let Some(name) = reference.strip_prefix("#/components/schemas/") {
                    return inline(&document["components"]["schemas"][name], document);
                }
            }
            Value::Object(
                map.iter()
                    .map(|(key, value)| (key.clone(), inline(value, document)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline(v, document)).collect()),
        other => other.clone(),
    }
}

fn validator(schema: &Value, what: &str) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("{what} does not compile: {e}"))
}

fn assert_valid(schema: &Value, instance: &Value, what: &str) {
    let errors: Vec<String> = validator(schema, what)
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what} rejected {instance}: {errors:?}");
}

/// The JSON Schema a message's payload `$ref` names, read from `schemas/`.
fn payload_schema(message: &Value) -> (String, Value) {
    let reference = message["payload"]["$ref"]
        .as_str()
        .expect("a payload is a $ref to a schema file");
    let file = reference
        .strip_prefix("./")
        .unwrap_or_else(|| panic!("{reference} is a file beside the document"));
    let schema = serde_json::from_str(&read(Path::new("schemas").join(file)))
        .unwrap_or_else(|e| panic!("{file} is not JSON: {e}"));
    (file.to_string(), schema)
}

#[test]
fn the_asyncapi_parser_accepts_the_document() {
    let package = root().join("tests/asyncapi/node_modules/@asyncapi/parser");
    assert!(
        package.is_dir(),
        "{package:?} is missing: run `npm ci --prefix tests/asyncapi` (scripts/test does)"
    );
    let output = Command::new("node")
        .arg("tests/asyncapi/validate.mjs")
        .arg(DOCUMENT)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `node` (Node.js 18 or later is needed): {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the AsyncAPI parser refused {DOCUMENT} ({}):\n{stdout}{stderr}",
        output.status
    );
    assert!(
        stdout.contains("valid AsyncAPI 3.0.0: 4 channels"),
        "unexpected parser output:\n{stdout}{stderr}"
    );
}

#[test]
fn channels_are_the_subjects_streams_and_consumer_of_the_code() {
    let document = document();
    let launcher = rust_sources("crates/kairos-launcher/src");
    let config = read("config/default.toml");
    let channels = object(&document["channels"], "channels");
    let addresses: BTreeSet<String> = channels
        .values()
        .map(|channel| channel["address"].as_str().expect("address").to_string())
        .collect();
    let expected: BTreeSet<String> = CHANNELS
        .iter()
        .map(|(kind, parameter, _)| format!("{{subject_prefix}}.{kind}.{{{parameter}}}"))
        .collect();
    assert_eq!(addresses, expected, "the channel addresses");

    for (kind, parameter, suffix) in CHANNELS {
        let (name, channel) = channels
            .iter()
            .find(|(_, c)| {
                c["address"]
                    .as_str()
                    .is_some_and(|a| a.contains(&format!(".{kind}.")))
            })
            .expect("a channel of each kind");
        // The subject as the launcher builds it: `<prefix>.<kind>.<last token>`.
        assert!(
            launcher.contains(&format!("\"{{prefix}}.{kind}.")),
            "channel {name}: kairos-launcher builds no subject \"{{prefix}}.{kind}.…\""
        );
        let stream = channel["x-jetstream"]["stream"]
            .as_str()
            .expect("x-jetstream.stream");
        assert_eq!(
            stream,
            format!("{{stream_prefix}}_{suffix}"),
            "channel {name}"
        );
        assert!(
            launcher.contains(&format!("\"{{prefix}}_{suffix}\"")),
            "channel {name}: kairos-launcher names no stream \"{{prefix}}_{suffix}\""
        );
        assert_eq!(
            channel["x-jetstream"]["subjects"],
            json!(format!("{{subject_prefix}}.{kind}.>")),
            "channel {name}: the stream's subjects"
        );
        // `<prefix>.<kind>.>` literally, or `<prefix>.{kind}.>` with the kind named apart.
        assert!(
            launcher.contains(&format!("\"{{prefix}}.{kind}.>\""))
                || (launcher.contains("\"{prefix}.{kind}.>\"")
                    && launcher.contains(&format!("\"{kind}\""))),
            "channel {name}: kairos-launcher binds no stream to \"{{prefix}}.{kind}.>\""
        );
        // The body's schema names the same subject (with the default prefix).
        let (file, schema) = payload_schema(message(&document, name));
        let subject = format!("`kairos.{kind}.<{parameter}>`");
        assert!(
            schema["description"]
                .as_str()
                .is_some_and(|d| d.contains(&subject)),
            "{file} does not name the subject {subject}"
        );
    }

    let status = &document["channels"]["status"];
    assert_eq!(status["x-jetstream"]["retention"], "workqueue");
    assert!(launcher.contains("RetentionPolicy::WorkQueue"));
    let consumer = document["operations"]["receiveStatus"]["x-jetstream"]["durable_consumer"]
        .as_str()
        .expect("the status operation names its durable consumer");
    assert!(
        launcher.contains(&format!("\"{consumer}\"")),
        "kairos-launcher has no consumer named {consumer:?}"
    );

    let prefix = document["components"]["parameters"]["subject_prefix"]["default"]
        .as_str()
        .expect("subject_prefix has a default");
    assert!(config.contains(&format!("subject_prefix = \"{prefix}\"")));
    assert!(config.contains("stream_prefix = \"KAIROS\""));
}

#[test]
fn message_ids_are_the_forms_the_code_builds() {
    let document = document();
    let message_rs = read("crates/kairos-launcher/src/message.rs");
    let republish_rs = read("crates/kairos-worker/src/sweep/republish.rs");
    // The formats of `LaunchMessage::msg_id`, `DeadLetter::msg_id`, `CancelMessage::msg_id`
    // and of a lost launch delivered again.
    for format in ["\"{}:{}\"", "\"{}:dlq:{}\"", "\"{}:cancel:{}\""] {
        assert!(message_rs.contains(format), "message.rs has no {format}");
    }
    assert!(
        republish_rs.contains("\"{}:r{}\""),
        "republish.rs has no \"{{}}:r{{}}\""
    );

    let key = RunKey::manual("daily-report", "request-1");
    let caller_key = "order-2026-03-09"; // a POST /run-launcher/start key
    let cases = [
        (
            "launch",
            vec![
                key.to_string(),
                key.attempt_msg_id(2),
                key.attempt_msg_id(12),
                format!("{key}:r1"),
                format!("{}:r3", key.attempt_msg_id(2)),
                caller_key.to_string(),
            ],
            vec![format!("{key}:1"), format!("{key}:0"), format!("{key}:r0")],
        ),
        (
            "deadLetter",
            vec![format!("{key}:dlq:1"), format!("{caller_key}:dlq:3")],
            vec![key.to_string(), format!("{key}:dlq:")],
        ),
        (
            "cancel",
            vec![format!("{key}:cancel:1"), format!("{caller_key}:cancel:2")],
            vec![key.to_string(), format!("{key}:dlq:1")],
        ),
    ];
    for (channel, good, bad) in cases {
        let headers = &message(&document, channel)["headers"]["properties"];
        for header in ["Nats-Msg-Id", "ce-id"] {
            let schema = validator(&headers[header], header);
            for id in &good {
                assert!(
                    schema.is_valid(&json!(id)),
                    "{channel} {header} refuses {id}"
                );
            }
            for id in &bad {
                assert!(
                    !schema.is_valid(&json!(id)),
                    "{channel} {header} accepts {id}"
                );
            }
        }
    }
}

#[test]
fn headers_are_cloudevents_and_trace_context_and_the_examples_hold() {
    let document = document();
    let sent = ["launch", "deadLetter", "cancel"];
    let mut names: Option<BTreeSet<String>> = None;
    for channel in sent {
        let message = message(&document, channel);
        let headers = &message["headers"];
        let properties: BTreeSet<String> = object(&headers["properties"], "headers")
            .keys()
            .cloned()
            .collect();
        let required: BTreeSet<String> = headers["required"]
            .as_array()
            .expect("required headers")
            .iter()
            .map(|h| h.as_str().expect("header name").to_string())
            .collect();
        assert_eq!(
            required, properties,
            "{channel}: kairos sets every header it lists"
        );
        for name in &properties {
            if let Some(attribute) = name.strip_prefix("ce-") {
                assert!(
                    CLOUDEVENTS_ATTRIBUTES.contains(&attribute),
                    "{channel}: {name} is no CloudEvents 1.0 attribute"
                );
            }
        }
        assert_eq!(
            names.get_or_insert_with(|| properties.clone()),
            &properties,
            "launch, dead-letter and cancel messages carry the same headers"
        );

        let schema = inline(headers, &document);
        let (file, payload_schema) = payload_schema(message);
        let examples = message["examples"].as_array().expect("examples");
        assert!(!examples.is_empty(), "{channel} has an example");
        for example in examples {
            let (headers, payload) = (&example["headers"], &example["payload"]);
            assert_valid(&schema, headers, &format!("{channel} headers"));
            assert_valid(&payload_schema, payload, &file);
            let key = payload["idempotency_key"].as_str().expect("key");
            assert_eq!(headers["ce-id"], headers["Nats-Msg-Id"], "{channel}: ce-id");
            assert_eq!(headers["ce-subject"], json!(key), "{channel}: ce-subject");
            let traceparent = headers["traceparent"].as_str().expect("traceparent");
            assert_eq!(
                &traceparent[3..35],
                &key[..32],
                "{channel}: one trace per run"
            );
            if channel != "cancel" {
                assert_eq!(
                    headers["ce-time"], payload["scheduled_for"],
                    "{channel}: ce-time"
                );
                let source = format!(
                    "/kairos/kairos/schedules/{}",
                    payload["schedule_id"].as_str().expect("schedule_id")
                );
                assert_eq!(headers["ce-source"], json!(source), "{channel}: ce-source");
            }
        }
    }

    let status = message(&document, "status");
    let (file, payload_schema) = payload_schema(status);
    let schema = inline(&status["headers"], &document);
    for example in status["examples"].as_array().expect("examples") {
        assert_valid(&schema, &example["headers"], "status headers");
        assert_valid(&payload_schema, &example["payload"], &file);
    }
}

/// Header names (and `ce-type` values) are looked up among the string literals of the
/// product crates, ignoring ASCII case.
#[test]
fn every_header_the_document_lists_is_named_in_the_code() {
    let document = document();
    let code = product_sources().to_ascii_lowercase();
    let mut missing = BTreeSet::new();
    for message in object(&document["components"]["messages"], "messages").values() {
        let Some(headers) = message["headers"]["properties"].as_object() else {
            continue;
        };
        for name in headers.keys() {
            if !code.contains(&format!("\"{}\"", name.to_ascii_lowercase())) {
                missing.insert(name.clone());
            }
        }
        // And each `ce-type`, a fixed value per message.
        if let Some(kind) = headers.get("ce-type").and_then(|h| h["const"].as_str()) {
            if !code.contains(&format!("\"{kind}\"")) {
                missing.insert(format!("ce-type {kind}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{DOCUMENT} lists headers that no string literal under crates/*/src names: {missing:?}"
    );
}
