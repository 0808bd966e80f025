//! The OpenAPI document against the server, so that a client generated from it works:
//! it is self-contained and served at `/openapi.json`; every body declares exactly the
//! fields the server reads; every status the request guard answers is declared where it
//! can happen; and real answers are valid against their schemas, with every `required`
//! field present and no field the schema does not declare.

use crate::common;

use std::collections::BTreeSet;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use common::{call, router, DEPLOYER, EXECUTOR, MAX_BODY, READER};
use kairos_auth::Role;
use kairos_testkit::TestDb;
use serde_json::{json, Value};
use tower::ServiceExt;

const NOW: &str = "2026-03-09T12:00:00Z";
/// The field every probe sends: no body has it.
const PROBE: &str = "zz_probe";

fn doc() -> Value {
    serde_json::from_str(kairos_api::openapi::OPENAPI_JSON).expect("openapi.json is JSON")
}

/// Follows `$ref`s inside the document.
fn resolve<'a>(doc: &'a Value, mut schema: &'a Value) -> &'a Value {
    while let Some(reference) = schema["$ref"].as_str() {
        let pointer = reference
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("external $ref {reference:?}"));
        schema = doc
            .pointer(pointer)
            .unwrap_or_else(|| panic!("$ref {reference:?} points nowhere"));
    }
    schema
}

fn properties(doc: &Value, schema: &Value) -> BTreeSet<String> {
    resolve(doc, schema)["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("no properties in {schema}"))
        .keys()
        .cloned()
        .collect()
}

fn token(role: Option<Role>) -> Option<&'static str> {
    role.map(|role| match role {
        Role::Deployer => DEPLOYER,
        Role::Reader => READER,
        Role::Executor => EXECUTOR,
    })
}

/// A concrete path for a route template.
fn concrete(path: &str) -> String {
    path.replace("{id}", "probe")
        .replace("{version}", "1")
        .replace("{key}", "probe-key")
        .replace("{name}", "probe-calendar")
        .replace("{run_at}", "2026-03-09T07:00:00Z")
}

fn operation<'a>(doc: &'a Value, method: &Method, path: &str) -> &'a Value {
    &doc["paths"][path][method.as_str().to_lowercase()]
}

fn declared(doc: &Value, method: &Method, path: &str, status: StatusCode) -> bool {
    operation(doc, method, path)["responses"]
        .get(status.as_str())
        .is_some()
}

/// Every `$ref` in `value`.
fn references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match (key.as_str(), child) {
                    ("$ref", Value::String(reference)) => out.push(reference.clone()),
                    _ => references(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, out)),
        _ => {}
    }
}

#[test]
fn the_document_is_self_contained() {
    let doc = doc();
    let mut found = Vec::new();
    references(&doc, &mut found);
    assert!(found.len() > 50, "{} references", found.len());
    for reference in found {
        let pointer = reference.strip_prefix('#').unwrap_or_else(|| {
            panic!("{reference:?} points outside the document (generators refuse it)")
        });
        assert!(
            doc.pointer(pointer).is_some(),
            "{reference:?} points nowhere"
        );
    }
}

/// Every enum that allows null is a named component referred to with
/// `anyOf: [{$ref}, {type: null}]`: written inline (`type: [string, null]` with `null` among
/// the values) a client generator makes a class per place, and several per nullable union.
/// `scripts/openapi-normalize` rewrites a document into this shape.
#[test]
fn nullable_enums_are_named_components() {
    fn walk(value: &Value, at: String, inline: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                let nullable = map
                    .get("enum")
                    .and_then(Value::as_array)
                    .is_some_and(|values| values.contains(&Value::Null));
                if nullable {
                    inline.push(at.clone());
                }
                for (key, child) in map {
                    walk(child, format!("{at}/{key}"), inline);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, format!("{at}/{i}"), inline);
                }
            }
            _ => {}
        }
    }
    let doc = doc();
    let mut inline = Vec::new();
    walk(&doc, String::new(), &mut inline);
    assert!(
        inline.is_empty(),
        "inline nullable enums (run scripts/openapi-normalize): {inline:#?}"
    );
    let schemas = &doc["components"]["schemas"];
    let policy = &schemas["UpsertRequest"]["properties"]["overlap_policy"];
    assert_eq!(
        policy["anyOf"],
        json!([{"$ref": "#/components/schemas/OverlapPolicy"}, {"type": "null"}])
    );
    assert_eq!(
        schemas["OverlapPolicy"],
        json!({"type": "string", "enum": ["allow", "skip", "queue", "buffer_one", "cancel_other"]})
    );
}

/// A call may carry a bearer token or none (`auth.mode = none` answers every route without
/// one): that is the document's default, which every operation that requires a role takes
/// by stating no `security` of its own; routes open to anyone state `security: []`
/// (`routes.rs` holds both to the router).
#[test]
fn security_is_a_bearer_token_or_none() {
    let doc = doc();
    assert_eq!(doc["security"], json!([{"bearer": []}, {}]));
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            if let Some(security) = op.get("security") {
                assert_eq!(security, &json!([]), "{method} {path}");
            } else {
                assert!(
                    op["responses"].get("401").is_some(),
                    "{method} {path}: a route that needs a token declares 401"
                );
            }
        }
    }
}

/// `components/schemas/Dag` (with `DagNode` and `DagNodeId`) is `schemas/dag.schema.json`,
/// which executors read, with its `$defs` moved into the components.
#[test]
fn the_dag_component_is_the_dag_schema() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../schemas/dag.schema.json"
    ))
    .expect("dag.schema.json");
    let moved = text
        .replace("#/$defs/node_id", "#/components/schemas/DagNodeId")
        .replace("#/$defs/node\"", "#/components/schemas/DagNode\"");
    let mut dag: Value = serde_json::from_str(&moved).expect("JSON");
    let defs = dag
        .as_object_mut()
        .expect("object")
        .remove("$defs")
        .expect("$defs");
    for key in ["$schema", "$id"] {
        dag.as_object_mut().expect("object").remove(key);
    }
    let schemas = &doc()["components"]["schemas"];
    assert_eq!(schemas["Dag"], dag);
    assert_eq!(schemas["DagNode"], defs["node"]);
    assert_eq!(schemas["DagNodeId"], defs["node_id"]);
}

#[tokio::test]
async fn the_document_is_served() {
    let db = TestDb::new().await;
    let app = router(db.pool(), NOW);
    let (status, _, served) = call(&app, Method::GET, "/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(served, doc());
}

/// The unknown-field problems in an answer: the field it names → the fields it lists as
/// known.
fn known_fields(answer: &Value, out: &mut Vec<(String, BTreeSet<String>)>) {
    match answer {
        Value::Object(map) => {
            let rule = map.get("rule").and_then(Value::as_str).unwrap_or_default();
            if let (Some(Value::String(field)), Some(list)) = (
                map.get("field"),
                rule.strip_prefix("is not a known field (known: "),
            ) {
                let list = list.strip_suffix(')').expect("closing parenthesis");
                out.push((
                    field.clone(),
                    list.split(", ").map(str::to_string).collect(),
                ));
            }
            map.values().for_each(|child| known_fields(child, out));
        }
        Value::Array(items) => items.iter().for_each(|item| known_fields(item, out)),
        _ => {}
    }
}

/// Each body, and each nested object of a body, reads exactly the fields its schema
/// declares: a probe field is refused with the list of the fields the server read, and that
/// list is the schema's `properties`.
#[tokio::test]
async fn every_body_reads_exactly_the_fields_its_schema_declares() {
    let db = TestDb::new().await;
    let app = router(db.pool(), NOW);
    let doc = doc();
    let mut checked = 0;
    for route in kairos_api::routes() {
        let op = operation(&doc, &route.method, route.path);
        let schema = &op["requestBody"]["content"]["application/json"]["schema"];
        if schema.is_null() {
            continue;
        }
        let schema = resolve(&doc, schema);
        let mut probes = Vec::new();
        if schema["type"] == "array" {
            let body = json!([{ "idempotency_key": "probe-key", PROBE: 1 }]);
            probes.push((body, schema["items"].clone(), ""));
        } else {
            probes.push((json!({ PROBE: 1 }), schema.clone(), ""));
            let nested = resolve(&doc, schema);
            if let Some(backoff) = nested["properties"].get("retry_backoff") {
                let body = json!({ "retry_backoff": { PROBE: 1 } });
                probes.push((body, backoff.clone(), "retry_backoff."));
            }
            if let Some(schedules) = nested["properties"].get("schedules") {
                let body = json!({ "dag": {"nodes": [{"id": "a"}]}, "schedules": [{ PROBE: 1 }] });
                let items = resolve(&doc, schedules)["items"].clone();
                probes.push((body, items, "schedules[0]."));
            }
        }
        for (body, schema, prefix) in probes {
            let path = concrete(route.path);
            let (status, _, answer) = call(
                &app,
                route.method.clone(),
                &path,
                token(route.role),
                Some(body.clone()),
            )
            .await;
            let mut found = Vec::new();
            known_fields(&answer, &mut found);
            let field = format!("{prefix}{PROBE}");
            let read = found
                .iter()
                .find(|(name, _)| name.ends_with(&field))
                .map(|(_, known)| known.clone())
                .unwrap_or_else(|| {
                    panic!(
                        "{} {path} {body}: no unknown-field problem for {field} ({status}): {answer}",
                        route.method
                    )
                });
            let declared = properties(&doc, &schema);
            assert_eq!(
                read, declared,
                "{} {} ({prefix}): the fields the server reads vs the schema's properties",
                route.method, route.path
            );
            checked += 1;
        }
    }
    assert!(checked >= 14, "only {checked} bodies checked");
}

/// A repeated query parameter, a request from a foreign `Host`, a body that is not JSON, a
/// body over the limit, and a reserved word where an identifier goes: each answer's status
/// is declared for that route.
#[tokio::test]
async fn every_status_the_guard_answers_is_declared() {
    let db = TestDb::new().await;
    let app = router(db.pool(), NOW);
    let doc = doc();
    let statics: Vec<String> = kairos_api::routes()
        .iter()
        .filter(|route| !route.path.contains('{'))
        .map(|route| route.path.to_string())
        .collect();
    let mut reserved_refusals = 0;
    for route in kairos_api::routes() {
        let path = concrete(route.path);
        let has_body = operation(&doc, &route.method, route.path)["requestBody"].is_object();
        let send = |host: &'static str, kind: &'static str, body: Vec<u8>, uri: String| {
            let mut request = Request::builder()
                .method(route.method.clone())
                .uri(uri)
                .header(header::HOST, host)
                .header(header::CONTENT_TYPE, kind);
            if let Some(token) = token(route.role) {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            let request = request.body(Body::from(body)).expect("request");
            status_of(&app, request)
        };
        let twice = format!("{path}?zz_probe=1&zz_probe=2");
        let repeated = send("127.0.0.1:8080", "application/json", b"{}".to_vec(), twice);
        assert_eq!(
            repeated.await,
            StatusCode::BAD_REQUEST,
            "{} {path}",
            route.method
        );
        assert!(
            declared(&doc, &route.method, route.path, StatusCode::BAD_REQUEST),
            "{} {}: 400 (a repeated query parameter) is not declared",
            route.method,
            route.path
        );
        let foreign = send(
            "evil.example",
            "application/json",
            b"{}".to_vec(),
            path.clone(),
        );
        assert_eq!(
            foreign.await,
            StatusCode::FORBIDDEN,
            "{} {path}",
            route.method
        );
        assert!(
            declared(&doc, &route.method, route.path, StatusCode::FORBIDDEN),
            "{} {}: 403 (foreign Host) is not declared",
            route.method,
            route.path
        );
        if has_body {
            let local = "127.0.0.1:8080";
            let text = send(local, "text/plain", b"{}".to_vec(), path.clone()).await;
            let large = send(
                local,
                "application/json",
                vec![b' '; MAX_BODY + 1],
                path.clone(),
            );
            for status in [text, large.await, StatusCode::REQUEST_TIMEOUT] {
                assert!(
                    declared(&doc, &route.method, route.path, status),
                    "{} {}: {status} is not declared",
                    route.method,
                    route.path
                );
            }
        }
        // `/schedules/upsert` where `/schedules/{id}` is asked for with another method.
        for other in &statics {
            let Some(uri) = same_shape(route.path, other) else {
                continue;
            };
            let status = send("127.0.0.1:8080", "application/json", b"{}".to_vec(), uri);
            let status = status.await;
            if status == StatusCode::METHOD_NOT_ALLOWED {
                reserved_refusals += 1;
                assert!(
                    declared(&doc, &route.method, route.path, status),
                    "{} {} ({other}): 405 is not declared",
                    route.method,
                    route.path
                );
            }
        }
    }
    assert!(
        reserved_refusals >= 3,
        "{reserved_refusals} reserved-word refusals"
    );
}

/// `other` when it is a static path that `template` would match.
fn same_shape(template: &str, other: &str) -> Option<String> {
    if !template.contains('{') {
        return None;
    }
    let (a, b): (Vec<&str>, Vec<&str>) =
        (template.split('/').collect(), other.split('/').collect());
    let matches = a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x == y || x.starts_with('{'));
    matches.then(|| other.to_string())
}

async fn status_of(app: &Router, request: Request<Body>) -> StatusCode {
    app.clone()
        .oneshot(request)
        .await
        .expect("infallible")
        .status()
}

/// Validates `answer` against `schema` (a `$ref` into the document) and checks that every
/// field of each object it names as `strict` is declared.
fn assert_matches(doc: &Value, schema: &str, answer: &Value) {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "components": doc["components"],
        "$ref": schema,
    });
    let validator = jsonschema::options()
        .build(&root)
        .unwrap_or_else(|e| panic!("{schema} does not compile: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(answer)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{schema}: {errors:?}\n{answer}");
}

/// Fields of `answer` that `schema` (and its `allOf` parts) does not declare.
fn undeclared(doc: &Value, schema: &Value, answer: &Value) -> Vec<String> {
    let schema = resolve(doc, schema);
    let mut declared = BTreeSet::new();
    let mut parts = vec![schema];
    if let Some(all) = schema["allOf"].as_array() {
        parts.extend(all.iter().map(|part| resolve(doc, part)));
    }
    for part in parts {
        if let Some(properties) = part["properties"].as_object() {
            declared.extend(properties.keys().cloned());
        }
    }
    answer
        .as_object()
        .expect("an object")
        .keys()
        .filter(|key| !declared.contains(*key))
        .cloned()
        .collect()
}

#[tokio::test]
async fn answers_match_their_schemas_field_for_field() {
    let db = TestDb::new().await;
    let app = router(db.pool(), NOW);
    let doc = doc();
    let deploy = json!({"dag": {"nodes": [{"id": "a"}]}, "schedules": [{
        "schedule_id": "nightly", "user_id": "u", "cron_expr": "0 7 * * *",
        "timezone": "Europe/Paris", "exclude": ["2026-03-10"], "roll": "none",
        "deadline_s": 3600}]});
    let put = "/workflows/report/versions/1";
    let (status, _, answer) = call(&app, Method::PUT, put, Some(DEPLOYER), Some(deploy)).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_matches(&doc, "#/components/schemas/DeployAnswer", &answer);
    let trigger = json!({"request_id": "r-1"});
    let uri = "/schedules/nightly/trigger";
    let (status, _, run) = call(&app, Method::POST, uri, Some(DEPLOYER), Some(trigger)).await;
    assert_eq!(status, StatusCode::CREATED, "{run}");
    let key = run["idempotency_key"].as_str().expect("key").to_string();

    let get = |uri: String| {
        let app = app.clone();
        async move {
            let (status, _, answer) = call(&app, Method::GET, &uri, Some(READER), None).await;
            assert_eq!(status, StatusCode::OK, "{uri}: {answer}");
            answer
        }
    };
    let schedule = get("/schedules/nightly?explain=true".into()).await;
    let run = get(format!("/runs/{key}")).await;
    let runs = get("/schedules/nightly/runs".into()).await;
    let listed = get("/schedules".into()).await;
    let history = get("/history".into()).await;
    for (schema, answer) in [
        ("Schedule", &schedule),
        ("RunWithAttempts", &run),
        ("Run", &runs["runs"][0]),
        ("Schedule", &listed["schedules"][0]),
        ("ExplainedTick", &schedule["explained_preview"][0]),
        ("ScheduleStats", &schedule["stats"]),
        ("HistoryChange", &history["history"][0]),
    ] {
        let reference = format!("#/components/schemas/{schema}");
        assert_matches(&doc, &reference, answer);
        let extra = undeclared(&doc, &json!({ "$ref": reference }), answer);
        assert!(extra.is_empty(), "{schema}: undeclared fields {extra:?}");
    }
    assert!(runs["runs"].as_array().is_some_and(|runs| !runs.is_empty()));
}
