//! The history of changes (the audit log): who changed what, when, in which request, and
//! why. Every write of the registrar records its changes here in its own transaction
//! ([`Registrar::acting_as`] names the caller); [`Registrar::history`] reads them back a page
//! at a time, newest first.

use chrono::{DateTime, Utc};
use kairos_core::{
    schedule_fields, Actor, Change, ChangeKind, FieldChange, HistoryEntry, HistoryFilter, Schedule,
    Subject,
};
use kairos_store::history;
use kairos_store::Tx;

use crate::checks::{check_id, check_limit};
use crate::error::{Error, Result};
use crate::Registrar;

/// What a history listing asks, as the caller gave it (checked by [`Registrar::history`]).
#[derive(Debug, Clone, Default)]
pub struct HistoryQuery {
    /// Only this schedule's changes.
    pub schedule_id: Option<String>,
    /// Only this calendar's.
    pub calendar: Option<String>,
    /// Only this workflow's (its versions and its schedules).
    pub workflow_id: Option<String>,
    /// Only this actor's.
    pub actor: Option<String>,
    /// Only this kind (`create`, `update`, `deploy_sync`, `pause`, ...).
    pub kind: Option<String>,
    /// Only changes recorded at or after this instant.
    pub since: Option<DateTime<Utc>>,
    /// Only changes recorded before this instant.
    pub until: Option<DateTime<Utc>>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Page size, 1 to [`crate::LIST_LIMIT_MAX`].
    pub limit: i64,
}

/// A page of changes, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// The changes of this page.
    pub entries: Vec<HistoryEntry>,
    /// Pass as `cursor` for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

impl Registrar {
    /// This registrar with its writes recorded as made by `actor` (a clone: cheap).
    pub fn acting_as(&self, actor: Actor) -> Registrar {
        Registrar {
            actor,
            ..self.clone()
        }
    }

    /// Who this registrar's writes are recorded as made by ([`Actor::system`] unless
    /// [`Registrar::acting_as`] said otherwise).
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// A page of the history of changes that `query` selects, newest first. The cursor is
    /// the last entry's id: entries recorded after the first page never show up on a later
    /// page, and none is repeated or skipped.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a bad id, kind, range, cursor or limit; [`Error::Store`].
    pub async fn history(&self, query: &HistoryQuery) -> Result<HistoryPage> {
        check_limit(query.limit)?;
        for (field, value) in [
            ("schedule_id", &query.schedule_id),
            ("calendar", &query.calendar),
            ("workflow_id", &query.workflow_id),
        ] {
            if let Some(value) = value {
                kairos_core::validate_id(field, value)
                    .map_err(|err| Error::invalid(field, err.to_string()))?;
            }
        }
        if let Some(actor) = &query.actor {
            if actor.is_empty()
                || actor.chars().count() > 200
                || actor.chars().any(char::is_control)
            {
                return Err(Error::invalid(
                    "actor",
                    "must be 1 to 200 characters without control characters",
                ));
            }
        }
        let kind = match query.kind.as_deref().map(str::parse::<ChangeKind>) {
            Some(Err(err)) => {
                return Err(Error::invalid(
                    "kind",
                    format!(
                        "{:?} is not a kind of change: use one of {}",
                        err.value, err.allowed
                    ),
                ))
            }
            Some(Ok(kind)) => Some(kind),
            None => None,
        };
        if let (Some(since), Some(until)) = (query.since, query.until) {
            if until <= since {
                return Err(Error::invalid("until", "must be after since"));
            }
        }
        let before_id = query.cursor.as_deref().map(parse_cursor).transpose()?;
        let filter = HistoryFilter {
            schedule_id: query.schedule_id.clone(),
            calendar: query.calendar.clone(),
            workflow_id: query.workflow_id.clone(),
            run_key: None,
            actor: query.actor.clone(),
            kind,
            since: query.since,
            until: query.until,
            before_id,
            limit: query.limit + 1,
        };
        let mut entries = history::list(&self.pool, &filter).await?;
        let full = i64::try_from(entries.len()).unwrap_or(i64::MAX) > query.limit;
        entries.truncate(usize::try_from(query.limit).unwrap_or(0));
        let next_cursor = full
            .then(|| entries.last().map(|entry| entry.id.to_string()))
            .flatten();
        Ok(HistoryPage {
            entries,
            next_cursor,
        })
    }

    /// [`Registrar::history`] of one schedule (also after it was deleted).
    ///
    /// # Errors
    /// As [`Registrar::history`].
    pub async fn schedule_history(
        &self,
        schedule_id: &str,
        cursor: Option<&str>,
        limit: i64,
    ) -> Result<HistoryPage> {
        check_id(schedule_id)?;
        self.history(&HistoryQuery {
            schedule_id: Some(schedule_id.to_string()),
            cursor: cursor.map(str::to_string),
            limit,
            ..HistoryQuery::default()
        })
        .await
    }

    /// A change by this registrar's actor.
    pub(crate) fn change(
        &self,
        subject: Subject,
        kind: ChangeKind,
        fields: Vec<FieldChange>,
    ) -> Change {
        Change {
            subject,
            kind,
            actor: self.actor.clone(),
            note: None,
            fields,
        }
    }

    /// A change of schedule `old` → `new` (either absent: created or deleted) by this
    /// registrar's actor; `None` when no field changed.
    pub(crate) fn schedule_change(
        &self,
        kind: ChangeKind,
        old: Option<&Schedule>,
        new: Option<&Schedule>,
    ) -> Option<Change> {
        let fields = schedule_fields(old, new);
        let schedule = new.or(old)?;
        (!fields.is_empty()).then(|| {
            let subject = Subject::schedule(&schedule.schedule_id, &schedule.workflow_id);
            self.change(subject, kind, fields)
        })
    }
}

/// Records `changes` in the write's transaction, at the write's now.
///
/// # Errors
/// [`Error::Store`].
pub(crate) async fn record(tx: &mut Tx, changes: &[Change], now: DateTime<Utc>) -> Result<()> {
    Ok(history::record_many(tx, changes, now).await?)
}

fn parse_cursor(cursor: &str) -> Result<i64> {
    // Invariant: the shape `next_cursor` has (an id, digits without a leading zero, at most
    // 18 of them so that it fits an i64); schemas/openapi.json declares the same pattern.
    let shaped = (1..=18).contains(&cursor.len())
        && !cursor.starts_with('0')
        && cursor.bytes().all(|b| b.is_ascii_digit());
    shaped
        .then(|| cursor.parse::<i64>().ok())
        .flatten()
        .ok_or_else(|| {
            Error::invalid(
                "cursor",
                "is not a cursor this listing gave (pass next_cursor as it came)",
            )
        })
}
