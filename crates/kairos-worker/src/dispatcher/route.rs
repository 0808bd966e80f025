//! Before a round decides anything: each claimed run is routed to its region
//! (`crate::regions`). A run whose region's launch stream is not ready stays `PENDING` and
//! leaves the round.

use std::time::Instant;

use kairos_launcher::RunLauncher;
use kairos_store::dispatch::{Claimed, Outcome};

use super::Dispatcher;
use crate::regions::Route;

impl<L: RunLauncher> Dispatcher<L> {
    /// The claimed runs that go out now, each with the region it goes to, and the outcomes
    /// of those held for their region.
    pub(super) fn route(&self, claimed: Vec<Claimed>) -> (Vec<Claimed>, Vec<Outcome>) {
        let now = Instant::now();
        let mut go = Vec::with_capacity(claimed.len());
        let mut held = Vec::new();
        for mut run in claimed {
            match self.regions.route(&mut run, now) {
                Route::Go => {
                    if let (Some(home), Some(region), None) =
                        (&run.home_region, &run.region, &run.launch_region)
                    {
                        if home != region {
                            crate::metrics::fallback(home, region);
                        }
                    }
                    go.push(run);
                }
                Route::Hold { region, pin } => {
                    crate::metrics::held_for_region(&region, 1);
                    held.push(Outcome::held(&run.idempotency_key, &region, pin));
                }
            }
        }
        (go, held)
    }
}
