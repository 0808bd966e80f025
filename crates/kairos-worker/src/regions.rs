//! Where a run launches when its schedule names a region (docs/regions.md).
//!
//! Every instance watches the launch stream of each region ([`Regions::watch`]): a region is
//! ready while its stream answers with a leader, and *away* once it has not been ready for
//! `fallback_after`. The dispatcher routes each claimed run ([`Regions::route`]):
//! - a run whose launch was recorded for a region before (`launch_region`) goes there again,
//!   or waits while that region is not ready: it may have reached that region's executors
//!   already, and a second region must never get it;
//! - a run of a ready home region goes home;
//! - a run whose home is not ready waits, until its home is away; then it goes to the first
//!   ready fallback region, or, with none, is pinned to its home and waits for it (the
//!   claim leaves runs pinned to a region that is not ready alone);
//! - a run of a schedule without a region launches as it always has.
//!
//! Claims stay in their region ([`Regions::claim_scope`]): an instance that knows its own region
//! claims that region's runs and those without a region, and another region's only once
//! they are past due by `others_after` (its own instances are gone, or behind). A dispatcher
//! cut off with its region then holds no other region's runs.
//!
//! The region chosen is recorded with the launch in the transaction that commits it, before
//! anything is published, so every publish of a run goes to one region whichever instance
//! makes it. Instances judge readiness each on their own; a run is routed by whichever
//! claims it, once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kairos_launcher::RunLauncher;
use kairos_store::dispatch::{ClaimScope, Claimed};

/// Where one claimed run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Publish it now, in `Claimed::region` (set by [`Regions::route`]).
    Go,
    /// Leave it `PENDING`: `region`'s launch stream is not ready. With `pin`, the region is
    /// recorded as the run's launch region (it has nowhere else to go).
    Hold {
        /// The region it waits for.
        region: String,
        /// Record the region on the run.
        pin: bool,
    },
}

#[derive(Debug, Clone, Copy)]
struct Health {
    /// The last probe found the stream with a leader.
    ready: bool,
    /// Since when it has not been ready (`None` while ready).
    down_since: Option<Instant>,
}

/// The regions this instance knows and how each is doing. Regions not configured here are
/// taken as ready (their runs go home; another instance may know better).
#[derive(Debug)]
pub struct Regions {
    fallback_after: Duration,
    health: Mutex<HashMap<String, Health>>,
    /// This instance's region and how long past due another region's runs wait for theirs.
    home: Option<(String, Duration)>,
}

impl Regions {
    /// No regions: every run launches as routed at claim (home or none).
    pub fn none() -> Arc<Regions> {
        Regions::new(&[], Duration::from_secs(10))
    }

    /// The regions `names`, each ready until a probe says otherwise; a region not ready for
    /// `fallback_after` is away and its runs go to their fallback regions.
    pub fn new(names: &[String], fallback_after: Duration) -> Arc<Regions> {
        Arc::new(Regions::watching(names, fallback_after, None))
    }

    /// [`Regions::new`] for an instance in region `home`: it claims the runs of another
    /// region only once they are `others_after` past due.
    pub fn at_home(
        names: &[String],
        fallback_after: Duration,
        home: &str,
        others_after: Duration,
    ) -> Arc<Regions> {
        let home = Some((home.to_string(), others_after));
        Arc::new(Regions::watching(names, fallback_after, home))
    }

    fn watching(
        names: &[String],
        fallback_after: Duration,
        home: Option<(String, Duration)>,
    ) -> Regions {
        let health = names
            .iter()
            .map(|name| {
                let health = Health {
                    ready: true,
                    down_since: None,
                };
                (name.clone(), health)
            })
            .collect();
        Regions {
            fallback_after,
            health: Mutex::new(health),
            home,
        }
    }

    /// What this instance's claims take: not the runs recorded for a region that is not
    /// ready, and in a region, other regions' runs only once `others_after` past due.
    pub fn claim_scope(&self) -> ClaimScope {
        ClaimScope {
            unavailable: self.unavailable(),
            region: self.home.as_ref().map(|(home, _)| home.clone()),
            others_after: self
                .home
                .as_ref()
                .map_or(Duration::ZERO, |(_, after)| *after),
            after: None,
        }
    }

    /// Every configured region, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lock().keys().cloned().collect();
        names.sort();
        names
    }

    /// Records a probe of `region` made at `at`.
    pub fn observe(&self, region: &str, ready: bool, at: Instant) {
        let mut health = self.lock();
        let Some(entry) = health.get_mut(region) else {
            return;
        };
        let was = *entry;
        entry.ready = ready;
        entry.down_since = if ready {
            None
        } else {
            was.down_since.or(Some(at))
        };
        drop(health);
        if was.ready != ready {
            if ready {
                tracing::info!(region, "region launch stream ready again: its runs go home");
            } else {
                tracing::warn!(region, "region launch stream not ready");
            }
        }
        crate::metrics::region_ready(region, ready);
    }

    /// The regions whose launch stream is not ready now: the claim leaves runs pinned to
    /// them alone.
    pub fn unavailable(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, health)| !health.ready)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// Routes `run` (see the module's summary): sets `run.region` to where it goes.
    pub fn route(&self, run: &mut Claimed, now: Instant) -> Route {
        let health = self.lock();
        let ready = |region: &str| health.get(region).is_none_or(|h| h.ready);
        let away = |region: &str| {
            health.get(region).is_some_and(|h| {
                h.down_since
                    .is_some_and(|since| now.duration_since(since) >= self.fallback_after)
            })
        };
        if let Some(pinned) = &run.launch_region {
            run.region = Some(pinned.clone());
            return if ready(pinned) {
                Route::Go
            } else {
                Route::Hold {
                    region: pinned.clone(),
                    pin: false,
                }
            };
        }
        let Some(home) = run.home_region.clone() else {
            run.region = None;
            return Route::Go;
        };
        if ready(&home) {
            run.region = Some(home);
            return Route::Go;
        }
        if !away(&home) {
            run.region = Some(home.clone());
            return Route::Hold {
                region: home,
                pin: false,
            };
        }
        match run.fallback_regions.iter().find(|region| ready(region)) {
            Some(fallback) => {
                run.region = Some(fallback.clone());
                Route::Go
            }
            None => {
                run.region = Some(home.clone());
                Route::Hold {
                    region: home,
                    pin: true,
                }
            }
        }
    }

    /// Probes every region's launch stream each `every`, until the task is dropped.
    pub async fn watch<L: RunLauncher>(self: Arc<Self>, launcher: Arc<L>, every: Duration) {
        let names = self.names();
        if names.is_empty() {
            return;
        }
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let probes = names.iter().map(|name| {
                let launcher = launcher.clone();
                async move { (name, launcher.region_ready(name).await) }
            });
            let at = Instant::now();
            for (name, ready) in futures::future::join_all(probes).await {
                self.observe(name, ready, at);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Health>> {
        self.health
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests;
