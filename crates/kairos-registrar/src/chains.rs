//! Chained triggers (`@after <schedule_id>`): the checks an upsert or deploy must pass before
//! it writes a chained schedule — the parent exists (stored, or written by the same deploy),
//! it is not the schedule itself, and the new edges make no cycle — and why a stored child
//! waits (its parent is gone).
//!
//! A check takes the chain lock ([`kairos_store::chains::lock_chains`]) for the rest of
//! the caller's transaction, so two concurrent writes cannot each add half of a cycle.

use std::collections::{HashMap, HashSet};

use kairos_core::Schedule;
use kairos_store::schedules as store;
use kairos_store::Tx;

use crate::error::{Error, Problem, Result};
use crate::input::Checked;

/// Checks the chain edges of `checked` (a deploy's schedules, or one upsert) against the
/// stored ones, with the schedules `removed` by the same write gone. `prefix` gives the
/// field prefix of the `index`-th schedule (`schedules[3]` in a deploy, none in an upsert).
///
/// # Errors
/// [`Error::Invalid`] naming each self-chain, unknown parent and cycle (`cron_expr`);
/// [`Error::Store`].
pub(crate) async fn check(
    tx: &mut Tx,
    checked: &[Checked],
    removed: &[String],
    prefix: impl Fn(usize) -> Option<String>,
) -> Result<()> {
    let chained: Vec<(usize, &Checked, &kairos_core::Chain)> = checked
        .iter()
        .enumerate()
        .filter_map(|(index, one)| one.spec.chain().map(|chain| (index, one, chain)))
        .collect();
    if chained.is_empty() {
        // Removing or replacing edges never makes a cycle.
        return Ok(());
    }
    kairos_store::chains::lock_chains(&mut **tx).await?;
    let mut parent_of: HashMap<String, String> = kairos_store::chains::chain_edges(&mut **tx)
        .await?
        .into_iter()
        .collect();
    for one in checked {
        parent_of.remove(&one.schedule_id);
        if let Some(chain) = one.spec.chain() {
            parent_of.insert(one.schedule_id.clone(), chain.parent.clone());
        }
    }
    for id in removed {
        parent_of.remove(id);
    }
    let written: HashSet<&str> = checked.iter().map(|c| c.schedule_id.as_str()).collect();
    let gone: HashSet<&str> = removed.iter().map(String::as_str).collect();
    let asked: Vec<String> = chained.iter().map(|(_, _, c)| c.parent.clone()).collect();
    let stored: HashSet<String> = store::existing(&mut **tx, &asked)
        .await?
        .into_iter()
        .collect();
    let mut problems = Vec::new();
    for (index, one, chain) in chained {
        let field = match prefix(index) {
            Some(prefix) => format!("{prefix}.cron_expr"),
            None => "cron_expr".to_string(),
        };
        let parent = chain.parent.as_str();
        if parent == one.schedule_id {
            problems.push(Problem::new(
                field,
                format!("@after {parent}: a schedule cannot be chained after itself"),
            ));
        } else if gone.contains(parent) || !(written.contains(parent) || stored.contains(parent)) {
            problems.push(Problem::new(
                field,
                format!("@after {parent}: the parent schedule {parent:?} does not exist"),
            ));
        } else if let Some(cycle) = cycle_through(&one.schedule_id, &parent_of) {
            problems.push(Problem::new(
                field,
                format!(
                    "@after {parent} would make a cycle of chained schedules: {} (each runs \
                     after the next)",
                    cycle.join(" → ")
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Invalid(problems))
    }
}

/// The cycle `child → parent → … → child`, if following parents from `child` comes back.
fn cycle_through(child: &str, parent_of: &HashMap<String, String>) -> Option<Vec<String>> {
    let mut path = vec![child.to_string()];
    let mut seen: HashSet<&str> = HashSet::from([child]);
    let mut current = child;
    while let Some(parent) = parent_of.get(current) {
        path.push(parent.clone());
        if parent == child {
            return Some(path);
        }
        if !seen.insert(parent.as_str()) {
            // A stored cycle that does not pass through `child`: not this write's doing.
            return None;
        }
        current = parent;
    }
    None
}

/// Why a chained schedule cannot fire now: its parent does not exist. `None` for a timetable
/// or a child whose parent is stored.
///
/// # Errors
/// [`Error::Store`].
pub(crate) async fn waiting_on(tx: &mut Tx, schedule: &Schedule) -> Result<Option<String>> {
    let Some(chain) = kairos_store::timing::chain(schedule) else {
        return Ok(None);
    };
    let found = store::existing(&mut **tx, std::slice::from_ref(&chain.parent)).await?;
    Ok(found.is_empty().then(|| {
        format!(
            "parent schedule {:?} does not exist: this chained schedule never fires until a \
             schedule of that id is created again",
            chain.parent
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(c, p)| (c.to_string(), p.to_string()))
            .collect()
    }

    #[test]
    fn a_cycle_is_named_from_the_child() {
        let parent_of = edges(&[("a", "b"), ("b", "c"), ("c", "a")]);
        assert_eq!(
            cycle_through("a", &parent_of).map(|p| p.join(" → ")),
            Some("a → b → c → a".to_string())
        );
    }

    #[test]
    fn a_chain_without_a_cycle_passes() {
        let parent_of = edges(&[("a", "b"), ("b", "c")]);
        assert_eq!(cycle_through("a", &parent_of), None);
        // A stored cycle elsewhere does not loop forever.
        let parent_of = edges(&[("a", "b"), ("b", "c"), ("c", "b")]);
        assert_eq!(cycle_through("a", &parent_of), None);
    }
}
