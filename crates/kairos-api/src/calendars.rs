//! Handlers of the `/calendars` routes: named sets of excluded dates.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use kairos_registrar::CalendarInput;

use crate::access::Caller;
use crate::body::{self, Fields};
use crate::error::bad_request;
use crate::error::ApiError;
use crate::wire::{CalendarBody, CalendarWrittenBody, CalendarsBody};
use crate::AppState;

/// `PUT /calendars/{name}` `{dates, description?}`: 201 when created, 200 when replaced;
/// the answer names the schedules re-planned.
pub(crate) async fn put(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let input = read_calendar(name, body::json(body, state.max_body_bytes)?)?;
    let written = state
        .registrar
        .acting_as(actor)
        .put_calendar(&input)
        .await?;
    let location = format!("/calendars/{}", written.calendar.name);
    let answer = CalendarWrittenBody {
        calendar: CalendarBody::of(written.calendar),
        replanned: written.replanned,
    };
    Ok(crate::wire::written(
        written.created,
        location,
        Json(answer),
    ))
}

/// `GET /calendars/{name}`.
pub(crate) async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<CalendarBody>, ApiError> {
    Ok(Json(CalendarBody::of(
        state.registrar.get_calendar(&name).await?,
    )))
}

/// `GET /calendars`: every calendar, by name.
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<CalendarsBody>, ApiError> {
    let calendars: Vec<CalendarBody> = state
        .registrar
        .list_calendars()
        .await?
        .into_iter()
        .map(CalendarBody::of)
        .collect();
    Ok(Json(CalendarsBody { calendars }))
}

/// `DELETE /calendars/{name}` → 204; 409 while a schedule uses it; 404 if unknown.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .registrar
        .acting_as(actor)
        .delete_calendar(&name)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Reads a calendar body `{dates, description?}` for calendar `name`.
pub(crate) fn read_calendar(
    name: String,
    body: serde_json::Value,
) -> Result<CalendarInput, ApiError> {
    let mut fields = Fields::new(body, "");
    let dates = fields.strings("dates");
    let description = fields.string("description", false);
    let mut problems = fields.finish();
    if dates.is_none() && problems.iter().all(|p| p.field != "dates") {
        problems.push(kairos_registrar::Problem::new("dates", "is required"));
    }
    bad_request(problems)?;
    Ok(CalendarInput {
        name,
        dates: dates.unwrap_or_default(),
        description,
    })
}
