//! Reports about runs another transaction held, waiting for their next try.
//!
//! A run is tried again as soon as the transaction that held it is seen to have ended
//! (polled every [`HOLDER_POLL`] while any such transaction is known), or when its timer
//! runs out, whichever comes first. The timer is the fallback: [`BUSY_RETRY`], doubling on
//! every try that finds the run still held, up to [`BUSY_RETRY_MAX`]. A run whose holder is
//! known waits [`BUSY_RETRY_MAX`] on its timer, since its holder's end will wake it sooner.
//! A report about a held run that arrives meanwhile waits behind the ones before it, so a
//! run's reports still apply in their order.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// How long reports about a run another transaction holds wait before they are tried again
/// when the holder is not known (doubled at every try that finds it still held).
pub const BUSY_RETRY: Duration = Duration::from_millis(20);
/// The longest wait between two tries of a held run (a dispatcher's round holds its runs
/// until it commits, a few seconds after a burst's tick at most).
pub const BUSY_RETRY_MAX: Duration = Duration::from_millis(500);
/// How often the applier asks whether the transactions holding its held runs have ended.
pub const HOLDER_POLL: Duration = Duration::from_millis(20);

/// What is waiting: something about one run, named by its key.
pub(crate) trait Keyed {
    fn key(&self) -> &str;
}

/// The held runs, by key, each with its waiting jobs in their order.
#[derive(Debug)]
pub(crate) struct Held<J> {
    runs: HashMap<String, HeldRun<J>>,
    /// For the runs taken by the last `due`: their tries so far, and the holder whose end
    /// woke them (so a holder wrongly seen as ended does not wake the run again at once).
    retried: HashMap<String, (u32, Option<i64>)>,
}

#[derive(Debug)]
struct HeldRun<J> {
    next_try: Instant,
    tries: u32,
    /// The transaction holding the run, when known.
    holder: Option<i64>,
    /// Woken because `holder` ended.
    woken: bool,
    jobs: Vec<J>,
}

impl<J> Default for Held<J> {
    fn default() -> Self {
        Held {
            runs: HashMap::new(),
            retried: HashMap::new(),
        }
    }
}

impl<J: Keyed> Held<J> {
    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Into `batch`, unless reports about its run are held: then behind them.
    pub(crate) fn admit(&mut self, job: J, batch: &mut Vec<J>) {
        match self.runs.get_mut(job.key()) {
            Some(run) => run.jobs.push(job),
            None => batch.push(job),
        }
    }

    /// Takes the jobs whose next try has come.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<J> {
        let keys: Vec<String> = self
            .runs
            .iter()
            .filter(|(_, run)| run.next_try <= now)
            .map(|(key, _)| key.clone())
            .collect();
        let mut batch = Vec::new();
        for key in keys {
            if let Some(run) = self.runs.remove(&key) {
                let woke = run.holder.filter(|_| run.woken);
                self.retried.insert(key, (run.tries, woke));
                batch.extend(run.jobs);
            }
        }
        batch
    }

    /// Holds `busy` (in their order, each with the transaction holding its run when known)
    /// until their next try.
    pub(crate) fn hold(&mut self, busy: impl IntoIterator<Item = (J, Option<i64>)>, now: Instant) {
        let retried = std::mem::take(&mut self.retried);
        for (job, holder) in busy {
            let (tries, woke) = retried.get(job.key()).copied().unwrap_or((0, None));
            let tries = tries + 1;
            let run = self.runs.entry(job.key().to_string()).or_insert_with(|| {
                // The same holder again after its end woke the run: it was not the holder
                // (a row several transactions lock names none of them), so the timer alone.
                let holder = holder.filter(|h| woke != Some(*h));
                let wait = match holder {
                    Some(_) => BUSY_RETRY_MAX,
                    None => BUSY_RETRY.saturating_mul(1 << tries.min(16).saturating_sub(1)),
                };
                HeldRun {
                    next_try: now + wait.min(BUSY_RETRY_MAX),
                    tries,
                    holder,
                    woken: false,
                    jobs: Vec::new(),
                }
            });
            run.jobs.push(job);
        }
    }

    /// Whether a held run waits for a holder's end (then the holders are polled).
    pub(crate) fn polling(&self) -> bool {
        self.runs
            .values()
            .any(|run| !run.woken && run.holder.is_some())
    }

    /// The transactions holding the held runs, where known (each once).
    pub(crate) fn holders(&self) -> Vec<i64> {
        let holders: HashSet<i64> = self
            .runs
            .values()
            .filter(|run| !run.woken)
            .filter_map(|run| run.holder)
            .collect();
        holders.into_iter().collect()
    }

    /// The transactions `ended` are over: their runs are tried again now.
    pub(crate) fn ended(&mut self, ended: &[i64], now: Instant) {
        let ended: HashSet<i64> = ended.iter().copied().collect();
        for run in self.runs.values_mut() {
            if run.holder.is_some_and(|h| ended.contains(&h)) {
                run.woken = true;
                run.next_try = run.next_try.min(now);
            }
        }
    }

    /// When something is next to be done: the earliest held run's next try, or, while a
    /// holder is known, the next poll after `polled`. `None` when nothing is held.
    pub(crate) fn next_wake(&self, polled: Instant) -> Option<Instant> {
        let timer = self.runs.values().map(|run| run.next_try).min();
        let poll = self.polling().then(|| polled + HOLDER_POLL);
        timer.into_iter().chain(poll).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Report(&'static str, u32);

    impl Keyed for Report {
        fn key(&self) -> &str {
            self.0
        }
    }

    #[test]
    fn a_run_without_a_known_holder_backs_off_doubling_up_to_the_most() {
        let mut held = Held::default();
        let t0 = Instant::now();
        held.hold([(Report("a", 1), None)], t0);
        assert_eq!(held.next_wake(t0), Some(t0 + BUSY_RETRY));
        assert!(held.due(t0).is_empty());
        let mut at = t0;
        let mut waits = Vec::new();
        for _ in 0..7 {
            at = held.next_wake(at).expect("held");
            let batch = held.due(at);
            assert_eq!(batch, vec![Report("a", 1)]);
            held.hold(batch.into_iter().map(|r| (r, None)), at);
            waits.push(held.next_wake(at).expect("held") - at);
        }
        let ms: Vec<u128> = waits.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [40, 80, 160, 320, 500, 500, 500]);
    }

    #[test]
    fn a_run_is_tried_again_when_its_holder_ends_not_before() {
        let mut held = Held::default();
        let t0 = Instant::now();
        held.hold([(Report("a", 1), Some(7)), (Report("b", 1), Some(8))], t0);
        assert_eq!(held.next_wake(t0), Some(t0 + HOLDER_POLL), "poll first");
        let mut holders = held.holders();
        holders.sort_unstable();
        assert_eq!(holders, [7, 8]);
        let t1 = t0 + HOLDER_POLL;
        held.ended(&[], t1);
        assert!(held.due(t1).is_empty(), "neither holder ended");
        held.ended(&[8], t1);
        assert_eq!(held.due(t1), vec![Report("b", 1)]);
        assert_eq!(held.holders(), [7]);
        // The timer still runs for the other, as the fallback.
        assert_eq!(held.due(t0 + BUSY_RETRY_MAX), vec![Report("a", 1)]);
        assert!(held.is_empty());
        assert_eq!(held.next_wake(t1), None);
    }

    #[test]
    fn a_later_report_waits_behind_the_held_ones_in_order() {
        let mut held = Held::default();
        let t0 = Instant::now();
        held.hold([(Report("a", 1), Some(7))], t0);
        let mut batch = Vec::new();
        held.admit(Report("a", 2), &mut batch);
        held.admit(Report("b", 1), &mut batch);
        assert_eq!(batch, vec![Report("b", 1)]);
        held.ended(&[7], t0);
        assert_eq!(held.due(t0), vec![Report("a", 1), Report("a", 2)]);
    }

    #[test]
    fn a_holder_seen_ended_that_still_holds_the_run_is_not_trusted_again() {
        let mut held = Held::default();
        let t0 = Instant::now();
        held.hold([(Report("a", 1), Some(7))], t0);
        held.ended(&[7], t0);
        let batch = held.due(t0);
        // Still held, and the row names the same transaction (a multixact's id, say).
        held.hold(batch.into_iter().map(|r| (r, Some(7))), t0);
        assert!(held.holders().is_empty(), "no poll for it");
        assert_eq!(
            held.next_wake(t0),
            Some(t0 + BUSY_RETRY * 2),
            "the timer's back-off"
        );
        // Another holder later is trusted again.
        let batch = held.due(t0 + BUSY_RETRY * 2);
        held.hold(batch.into_iter().map(|r| (r, Some(9))), t0);
        assert_eq!(held.holders(), [9]);
    }
}
