//! The page's addresses: where a run's and a workflow's pages are.

/// The link to run `key`'s page.
pub(crate) fn run_href(key: &str) -> String {
    format!("/ui/runs/{key}")
}

/// The page's link to a workflow, optionally at one version.
pub(crate) fn workflow_href(workflow_id: &str, version: Option<i32>) -> String {
    match version {
        Some(version) => format!("/ui/workflows/{workflow_id}?version={version}"),
        None => format!("/ui/workflows/{workflow_id}"),
    }
}
