//! The deploy call the bench and the chaos suite make: one workflow version with its whole
//! schedule set (`PUT /workflows/{id}/versions/{v}` with `schedules`), a one-node DAG.

use std::time::Duration;

/// Deploys `schedules` as workflow `workflow`, version 1, through the instance at
/// `base_url`, waiting at most `timeout` for the answer.
///
/// # Errors
/// The request that failed, or the status and body of an answer that is not a success.
pub async fn workflow(
    client: &reqwest::Client,
    base_url: &str,
    workflow: &str,
    schedules: Vec<serde_json::Value>,
    timeout: Duration,
) -> Result<(), String> {
    let body = serde_json::json!({"dag": {"nodes": [{"id": "noop"}]}, "schedules": schedules});
    let url = format!("{base_url}/workflows/{workflow}/versions/1");
    let answer = client
        .put(&url)
        .json(&body)
        .timeout(timeout)
        .send()
        .await
        .map_err(|err| format!("deploy to {url}: {err}"))?;
    let status = answer.status();
    if status.is_success() {
        return Ok(());
    }
    let text = answer.text().await.unwrap_or_default();
    Err(format!("deploy to {url} answered {status}: {text}"))
}
