//! Search over schedules (`GET /schedules?q=`, the page's search box and substring filters)
//! and the workflow page (versions, the DAG drawn as SVG), through the real router on a
//! real database.

use crate::common;

use axum::http::{Method, StatusCode};
use common::{call, deploy_workflow, router, upsert_new, DEPLOYER, READER};
use kairos_testkit::TestDb;
use serde_json::{json, Value};

const NOW: &str = "2026-03-05T12:00:00Z";

/// (schedule_id, workflow_id, user_id) of the fixture.
const FIXTURE: [(&str, &str, &str); 6] = [
    ("Nightly-Report", "demo", "alice"),
    ("hourly_sync", "demo", "bob"),
    ("hourlyXsync", "billing", "Carol"),
    ("weekly", "billing", "dave_ops"),
    ("cleanup", "ops", "erin"),
    ("monthly", "ledger", "frank"),
];

async fn upsert(api: &axum::Router, schedule_id: &str, workflow_id: &str, user_id: &str) {
    let body = json!({
        "schedule_id": schedule_id,
        "workflow_id": workflow_id,
        "version": 1,
        "user_id": user_id,
        "cron_expr": "0 7 * * *",
        "timezone": "UTC",
    });
    upsert_new(api, body).await;
}

async fn fixture(api: &axum::Router) {
    for workflow in ["demo", "billing", "ops", "ledger"] {
        deploy_workflow(api, workflow, 1).await;
    }
    for (schedule_id, workflow_id, user_id) in FIXTURE {
        upsert(api, schedule_id, workflow_id, user_id).await;
    }
}

/// The schedule ids `GET /schedules` answers for `query`, and its next cursor.
async fn ids(api: &axum::Router, query: &str) -> (Vec<String>, Value) {
    let (status, _, body) = call(
        api,
        Method::GET,
        &format!("/schedules?{query}"),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{query}: {body}");
    let ids = body["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| s["schedule_id"].as_str().expect("id").to_string())
        .collect();
    (ids, body["next_cursor"].clone())
}

/// The fixture's ids with `needle` in any of the three fields, ignoring case, sorted as
/// PostgreSQL sorts them here (byte order for these ASCII ids under the test collation is
/// checked by the answer itself, so compare as sets).
fn expected(needle: &str) -> Vec<String> {
    let needle = needle.to_lowercase();
    let mut ids: Vec<String> = FIXTURE
        .iter()
        .filter(|(s, w, u)| {
            [s, w, u]
                .iter()
                .any(|field| field.to_lowercase().contains(&needle))
        })
        .map(|(s, _, _)| s.to_string())
        .collect();
    ids.sort();
    ids
}

fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

fn html(answer: &Value) -> &str {
    answer.as_str().expect("an HTML answer")
}

#[tokio::test]
async fn q_finds_substrings_of_schedule_workflow_and_user_ids_ignoring_case() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    fixture(&api).await;

    // Schedule id, in another case.
    let (found, _) = ids(&api, "q=REPORT").await;
    assert_eq!(found, vec!["Nightly-Report"]);
    // Workflow id: demo's two schedules, nothing else (no exact match needed).
    let (found, _) = ids(&api, "q=DeM").await;
    assert_eq!(sorted(found), vec!["Nightly-Report", "hourly_sync"]);
    // User id.
    let (found, _) = ids(&api, "q=caro").await;
    assert_eq!(found, vec!["hourlyXsync"]);
    // A broader needle matches each field kind at once.
    let (found, _) = ids(&api, "q=o").await;
    assert_eq!(sorted(found), expected("o"));
    assert!(
        expected("o").len() >= 5,
        "the fixture exercises all three fields"
    );
    // q narrows the exact filters, it does not replace them.
    let (found, _) = ids(&api, "q=sync&workflow_id=billing").await;
    assert_eq!(found, vec!["hourlyXsync"]);
    let (found, _) = ids(&api, "q=nothing-like-this").await;
    assert!(found.is_empty());
    // The exact filter stays exact.
    let (found, _) = ids(&api, "workflow_id=dem").await;
    assert!(found.is_empty());
}

#[tokio::test]
async fn percent_underscore_and_backslash_in_q_match_literally() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    fixture(&api).await;

    // `_` is not "any one character": hourlyXsync does not match `y_s`.
    let (found, _) = ids(&api, "q=y_s").await;
    assert_eq!(found, vec!["hourly_sync"]);
    let (found, _) = ids(&api, "q=_").await;
    assert_eq!(sorted(found), vec!["hourly_sync", "weekly"]);
    // `%` is not "anything": no id holds a percent sign.
    for q in ["%25", "hourly%25sync", "%5C", "%5C_"] {
        let (found, _) = ids(&api, &format!("q={q}")).await;
        assert!(found.is_empty(), "q={q} found {found:?}");
    }
}

#[tokio::test]
async fn paging_with_q_walks_every_match_once_in_id_order() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    fixture(&api).await;

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let query = match &cursor {
            Some(c) => format!("q=o&limit=2&cursor={c}"),
            None => "q=o&limit=2".to_string(),
        };
        let (page, next) = ids(&api, &query).await;
        assert!(page.len() <= 2);
        seen.extend(page);
        pages += 1;
        match next.as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => break,
        }
        assert!(pages < 10, "paging does not end");
    }
    let all = expected("o");
    assert!(pages >= 3, "{pages} pages for {} matches", all.len());
    assert_eq!(sorted(seen.clone()), all, "every match exactly once");
    // One unfiltered-order listing of the same matches: the pages concatenate to it.
    let (whole, _) = ids(&api, "q=o&limit=100").await;
    assert_eq!(seen, whole);
}

#[tokio::test]
async fn a_too_long_or_control_character_q_is_a_400_naming_q() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    let long = "a".repeat(201);
    for uri in [
        format!("/schedules?q={long}"),
        format!("/ui/fragments/schedules?q={long}"),
        "/ui/fragments/schedules?q=a%00b".to_string(),
        "/schedules?q=a%00b".to_string(),
    ] {
        let (status, kind, body) = call(&api, Method::GET, &uri, Some(READER), None).await;
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::BAD_REQUEST, "application/problem+json"),
            "{uri}: {body}"
        );
        assert_eq!(body["errors"][0]["field"], json!("q"), "{uri}: {body}");
    }
    // 200 characters is within the bound.
    let (status, _, body) = call(
        &api,
        Method::GET,
        &format!("/schedules?q={}", "a".repeat(200)),
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn the_page_search_shows_only_matching_schedules_and_keeps_the_query() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    fixture(&api).await;

    // The shell carries no data; its script fetches the fragment with the same query.
    let (status, _, shell) = call(&api, Method::GET, "/ui?q=dem", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html(&shell).contains(r#"data-fragment="/ui/fragments/schedules""#));

    let (status, _, page) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules?q=dem",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let page = html(&page);
    for (schedule_id, workflow_id, _) in FIXTURE {
        let row = format!(r#"data-schedule="{schedule_id}""#);
        assert_eq!(
            page.contains(&row),
            workflow_id == "demo",
            "{schedule_id} on the page for q=dem"
        );
    }
    // The search box holds the query, and the form sends it to /ui.
    assert!(page.contains(r#"name="q""#), "{page}");
    assert!(page.contains(r#"value="dem""#), "{page}");
    assert!(page.contains(r#"action="/ui""#));

    // The page's workflow and user filters match substrings too.
    for (query, want) in [
        ("workflow_id=dem", vec!["Nightly-Report", "hourly_sync"]),
        ("user_id=OPS", vec!["weekly"]),
        ("workflow_id=bill&user_id=car", vec!["hourlyXsync"]),
    ] {
        let (status, _, page) = call(
            &api,
            Method::GET,
            &format!("/ui/fragments/schedules?{query}"),
            Some(READER),
            None,
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let page = html(&page);
        for (schedule_id, _, _) in FIXTURE {
            let row = format!(r#"data-schedule="{schedule_id}""#);
            assert_eq!(
                page.contains(&row),
                want.contains(&schedule_id),
                "{schedule_id} for {query}"
            );
        }
    }

    // Workflow ids link to the workflow page at the schedule's version, on the list and on
    // the schedule's page.
    let (_, _, list) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules",
        Some(READER),
        None,
    )
    .await;
    assert!(html(&list).contains(r#"href="/ui/workflows/demo?version=1""#));
    let (_, _, one) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules/weekly",
        Some(READER),
        None,
    )
    .await;
    assert!(html(&one).contains(r#"href="/ui/workflows/billing?version=1""#));
}

#[tokio::test]
async fn the_next_page_link_keeps_the_search_encoded() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_workflow(&api, "bulk", 1).await;
    // 51 matches: one more than a page.
    for n in 0..51 {
        upsert(&api, &format!("s-{n:02}"), "bulk", "u").await;
    }
    let (status, _, page) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules?q=S-%25&workflow_id=bul",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    // "S-%" matches nothing: the percent sign is part of the needle, not a wildcard.
    assert!(html(&page).contains("No schedule matches."));

    let (_, _, page) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules?q=S-&workflow_id=bul",
        Some(READER),
        None,
    )
    .await;
    let page = html(&page);
    assert_eq!(page.matches("data-schedule=").count(), 50);
    assert!(
        page.contains(r#"href="/ui?q=S-&amp;workflow_id=bul&amp;cursor=s-49""#),
        "{page}"
    );
    let (_, _, rest) = call(
        &api,
        Method::GET,
        "/ui/fragments/schedules?q=S-&workflow_id=bul&cursor=s-49",
        Some(READER),
        None,
    )
    .await;
    let rest = html(&rest);
    assert_eq!(rest.matches("data-schedule=").count(), 1);
    assert!(rest.contains(r#"data-schedule="s-50""#));
}

/// Deploys `pipeline`: version 1 with one node, version 2 with four nodes (one id full of
/// markup) and four dependencies.
async fn deploy_pipeline(api: &axum::Router) {
    deploy_workflow(api, "pipeline", 1).await;
    let dag = json!({"dag": {"nodes": [
        {"id": "extract"},
        {"id": "transform", "depends_on": ["extract"]},
        {"id": "load", "depends_on": ["transform", "extract"]},
        {"id": "<b>&\"x\"", "depends_on": ["extract"]},
    ]}});
    let (status, _, body) = call(
        api,
        Method::PUT,
        "/workflows/pipeline/versions/2",
        Some(DEPLOYER),
        Some(dag),
    )
    .await;
    assert!(status.is_success(), "{status} {body}");
}

#[tokio::test]
async fn the_workflow_page_lists_versions_and_draws_the_dag() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_pipeline(&api).await;

    let (status, _, shell) = call(&api, Method::GET, "/ui/workflows/pipeline", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let shell = html(&shell);
    assert!(shell.contains(r#"data-fragment="/ui/fragments/workflows/pipeline""#));
    assert!(shell.contains(r#"data-page="workflow""#));

    // Default: the newest version.
    let (status, _, page) = call(
        &api,
        Method::GET,
        "/ui/fragments/workflows/pipeline",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let page = html(&page);
    assert!(page.contains(r#"data-version="2""#) && page.contains(r#"data-version="1""#));
    assert!(page.find(r#"data-version="2""#) < page.find(r#"data-version="1""#));
    assert!(page.contains(r#"href="/ui/workflows/pipeline?version=2" aria-current="page""#));
    assert!(page.contains("<svg"), "{page}");
    assert_eq!(page.matches(r#"<g class="node""#).count(), 4, "{page}");
    assert_eq!(page.matches(r#"<path class="edge""#).count(), 4, "{page}");
    assert_eq!(page.matches(r#"marker-end="url(#arrow)""#).count(), 4);
    assert!(page.contains(r#"<marker id="arrow""#));
    for (from, to) in [
        ("extract", "transform"),
        ("transform", "load"),
        ("extract", "load"),
        ("extract", "&lt;b&gt;&amp;&quot;x&quot;"),
    ] {
        let edge = format!(r#"data-from="{from}" data-to="{to}""#);
        assert!(page.contains(&edge), "edge {from} -> {to}: {page}");
    }
    // The id full of markup is text, never markup.
    assert!(!page.contains("<b>"), "{page}");
    assert!(page.contains("&lt;b&gt;&amp;"), "{page}");
    // Columns by depth: extract left of transform left of load.
    let x_of = |id: &str| -> i64 {
        let at = page.find(&format!(r#"data-node="{id}""#)).expect(id);
        let rect = &page[at..];
        let x = rect.find("<rect x=\"").expect("rect") + 9;
        let end = rect[x..].find('"').expect("quote");
        rect[x..x + end].parse().expect("x")
    };
    assert!(x_of("extract") < x_of("transform"));
    assert!(x_of("transform") < x_of("load"));
    assert_eq!(x_of("transform"), x_of("&lt;b&gt;&amp;&quot;x&quot;"));

    // An older version on request.
    let (status, _, old) = call(
        &api,
        Method::GET,
        "/ui/fragments/workflows/pipeline?version=1",
        Some(READER),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let old = html(&old);
    assert_eq!(old.matches(r#"<g class="node""#).count(), 1);
    assert_eq!(old.matches(r#"<path class="edge""#).count(), 0);
    assert!(old.contains(r#"href="/ui/workflows/pipeline?version=1" aria-current="page""#));
}

#[tokio::test]
async fn an_unknown_workflow_or_version_is_not_found_and_bad_input_is_named() {
    let db = TestDb::new().await;
    let api = router(db.pool(), NOW);
    deploy_pipeline(&api).await;

    for uri in [
        "/ui/fragments/workflows/nope",
        "/ui/fragments/workflows/pipeline?version=3",
    ] {
        let (status, kind, body) = call(&api, Method::GET, uri, Some(READER), None).await;
        assert_eq!(
            (status, kind.as_str()),
            (StatusCode::NOT_FOUND, "application/problem+json"),
            "{uri}: {body}"
        );
        assert_eq!(
            body["type"],
            json!("urn:kairos:problem:not-found"),
            "{body}"
        );
    }
    for (uri, field) in [
        ("/ui/fragments/workflows/pipeline?version=two", "version"),
        ("/ui/fragments/workflows/pipeline?version=0", "version"),
        ("/ui/fragments/workflows/pipeline?colour=red", "colour"),
        ("/ui/fragments/workflows/bad%20id", "workflow_id"),
        ("/ui/workflows/bad%20id", "workflow_id"),
    ] {
        let token = uri.contains("fragments").then_some(READER);
        let (status, _, body) = call(&api, Method::GET, uri, token, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(body["errors"][0]["field"], json!(field), "{uri}: {body}");
    }
    // The fragment is behind the reader role like the other fragments.
    let (status, _, _) = call(
        &api,
        Method::GET,
        "/ui/fragments/workflows/pipeline",
        None,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
