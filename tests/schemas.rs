//! The message schemas in `schemas/` (DAG, launch message, status callback, dead letter): each is a valid
//! JSON Schema 2020-12, documents every property (an executor is written from them alone),
//! accepts the documented examples and rejects the bad ones.

use std::path::PathBuf;

use serde_json::{json, Value};

const SCHEMAS: [&str; 4] = [
    "dag.schema.json",
    "launch.schema.json",
    "status.schema.json",
    "dead_letter.schema.json",
];

fn load(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("schemas")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name} is not JSON: {e}"))
}

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&load(name))
        .unwrap_or_else(|e| panic!("{name} does not compile: {e}"))
}

fn assert_valid(name: &str, instance: &Value) {
    let validator = validator(name);
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{name} rejected {instance}: {errors:?}");
}

fn assert_invalid(name: &str, instance: &Value) {
    assert!(
        !validator(name).is_valid(instance),
        "{name} accepted {instance}"
    );
}

/// Walks a schema and returns the paths of `properties` entries without a `description`.
fn undocumented(schema: &Value, path: &str, out: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(Value::Object(properties)) = object.get("properties") {
        for (key, property) in properties {
            let documented = property.get("description").is_some()
                || property.get("$ref").is_some_and(|r| r.as_str() != Some(""));
            if !documented {
                out.push(format!("{path}/properties/{key}"));
            }
        }
    }
    for (key, child) in object {
        undocumented(child, &format!("{path}/{key}"), out);
    }
}

fn launch_example() -> Value {
    json!({
        "idempotency_key": "3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e",
        "schedule_id": "daily-report",
        "workflow_id": "etl_orders",
        "version": 3,
        "user_id": "u-42",
        "scheduled_for": "2026-03-09T07:00:00Z",
        "fire_at": "2026-03-09T07:00:01.250Z",
        "source": "schedule",
        "attempt": 1,
        "status_subject": "kairos.status.7.3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e",
        "dag": {"nodes": [{"id": "extract"}, {"id": "load", "depends_on": ["extract"]}]},
    })
}

#[test]
fn every_schema_is_valid_json_schema_2020_12() {
    for name in SCHEMAS {
        let schema = load(name);
        assert_eq!(
            schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name} declares draft 2020-12"
        );
        if let Err(error) = jsonschema::meta::validate(&schema) {
            panic!("{name} is not a valid JSON Schema: {error}");
        }
        assert!(
            schema["description"].is_string(),
            "{name} has a top-level description"
        );
        validator(name);
    }
}

#[test]
fn every_property_is_documented() {
    for name in SCHEMAS {
        let mut missing = Vec::new();
        undocumented(&load(name), "", &mut missing);
        // The launch message's inline `dag` shape points to dag.schema.json in its description.
        missing.retain(|path| !path.starts_with("/properties/dag/"));
        assert!(
            missing.is_empty(),
            "{name}: properties without description: {missing:?}"
        );
    }
}

#[test]
fn dag_schema_accepts_nodes_with_extra_fields() {
    assert_valid(
        "dag.schema.json",
        &json!({
            "name": "orders",
            "nodes": [
                {"id": "extract", "action": "extract.py", "retries": 3},
                {"id": "transform", "depends_on": ["extract"], "params": {"day": "{{ds}}"}},
                {"id": "load", "action": "load.py", "depends_on": ["transform", "extract"]},
            ],
        }),
    );
}

#[test]
fn dag_schema_rejects_bad_shapes() {
    let bad = [
        json!({}),
        json!({"nodes": []}),
        json!({"nodes": [{"action": "no id"}]}),
        json!({"nodes": [{"id": ""}]}),
        json!({"nodes": [{"id": 1}]}),
        json!({"nodes": [{"id": "a", "action": 7}]}),
        json!({"nodes": [{"id": "a"}, {"id": "b", "depends_on": "a"}]}),
        json!({"nodes": [{"id": "a"}, {"id": "b", "depends_on": ["a", "a"]}]}),
    ];
    for instance in bad {
        assert_invalid("dag.schema.json", &instance);
    }
}

#[test]
fn launch_schema_accepts_the_design_example_and_its_dag_is_a_valid_dag() {
    let launch = launch_example();
    assert_valid("launch.schema.json", &launch);
    assert_valid("dag.schema.json", &launch["dag"]);
    let mut manual = launch;
    manual["source"] = json!("manual");
    manual["attempt"] = json!(2);
    manual["future_field"] = json!("ignored by executors");
    assert_valid("launch.schema.json", &manual);
}

#[test]
fn launch_schema_rejects_bad_messages() {
    let changes: [(&str, Option<Value>); 12] = [
        ("dag", None),
        ("status_subject", None),
        ("status_subject", Some(json!("kairos.status.has space"))),
        ("idempotency_key", None),
        ("idempotency_key", Some(json!("has.dot"))),
        ("workflow_id", Some(json!("etl.orders"))),
        ("version", Some(json!("3"))),
        ("version", Some(json!(-1))),
        ("scheduled_for", Some(json!("yesterday"))),
        ("source", Some(json!("cron"))),
        ("attempt", Some(json!(0))),
        ("dag", Some(json!({"nodes": []}))),
    ];
    for (field, value) in changes {
        let mut launch = launch_example();
        let object = launch.as_object_mut().expect("object");
        match value {
            None => object.remove(field),
            Some(value) => object.insert(field.to_owned(), value),
        };
        assert_invalid("launch.schema.json", &launch);
    }
}

#[test]
fn status_schema_accepts_http_and_nats_forms() {
    assert_valid("status.schema.json", &json!({"status": "STARTED"}));
    assert_valid(
        "status.schema.json",
        &json!({"status": "FAILED", "run_id": "r-1", "executor_id": "exec-a", "error": "exit 1"}),
    );
    assert_valid(
        "status.schema.json",
        &json!({
            "status": "SUCCESS",
            "idempotency_key": "3f0a9c4e1b7d2a6f8e5c0b9a7d6e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e",
        }),
    );
}

#[test]
fn status_schema_accepts_heartbeats_attempts_and_retryable() {
    assert_valid(
        "status.schema.json",
        &json!({"status": "HEARTBEAT", "attempt": 2}),
    );
    assert_valid(
        "status.schema.json",
        &json!({"status": "FAILED", "attempt": 3, "retryable": false, "error": "bad input"}),
    );
    assert_invalid(
        "status.schema.json",
        &json!({"status": "FAILED", "attempt": 0}),
    );
    assert_invalid(
        "status.schema.json",
        &json!({"status": "FAILED", "retryable": "no"}),
    );
}

#[test]
fn status_schema_takes_a_log_link_and_output_but_no_other_scheme() {
    assert_valid(
        "status.schema.json",
        &json!({
            "status": "FAILED",
            "log_url": "https://logs.example.com/runs/42?attempt=1",
            "output": "step 1 ok\n<b>step 2</b> failed\n",
        }),
    );
    assert_valid(
        "status.schema.json",
        &json!({"status": "HEARTBEAT", "output": ""}),
    );
    for url in [
        "javascript:alert(1)",
        "data:text/html,x",
        "ftp://logs.example.com/",
        "https://",
        "https://logs.example.com/a b",
    ] {
        assert_invalid(
            "status.schema.json",
            &json!({"status": "STARTED", "log_url": url}),
        );
    }
}

#[test]
fn dead_letter_schema_is_the_launch_message_plus_attempts() {
    let mut letter = launch_example();
    letter["attempt"] = json!(3);
    letter["attempts"] = json!(3);
    letter["last_error"] = json!("exit 1");
    assert_valid("dead_letter.schema.json", &letter);
    let mut missing = launch_example();
    missing["last_error"] = json!("exit 1");
    assert_invalid("dead_letter.schema.json", &missing);
}

#[test]
fn status_schema_rejects_bad_callbacks() {
    let bad = [
        json!({}),
        json!({"status": "DONE"}),
        json!({"status": "success"}),
        json!({"status": "SUCCESS", "stauts": "typo"}),
        json!({"status": "FAILED", "error": {"code": 1}}),
        json!({"status": "STARTED", "run_id": ""}),
        json!({"status": "STARTED", "idempotency_key": "a.b"}),
    ];
    for instance in bad {
        assert_invalid("status.schema.json", &instance);
    }
}
