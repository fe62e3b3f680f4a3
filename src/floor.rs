//! `snowflake_advance_past(id)`: moves the generator durably above an id that came from
//! elsewhere (a restored dump, an import, a worker id moved between servers), so that every
//! later id of this cluster is larger.

use crate::layout::{Parts, Tick, MAX_MS};
use crate::shared::{self, Shared};
use crate::{errors, generator, gucs, lease};
use std::sync::atomic::Ordering;

/// Every id handed out after this returns is above `id`, also after a crash right after it:
/// the mark goes to WAL and the state file (and the synchronous standbys) before the tick moves.
pub fn advance_past(id: i64) {
    let s = shared::get();
    let Some(parts) = Parts::of(id) else {
        errors::negative_id(id)
    };
    // From the next millisecond on: an id of another worker in the same millisecond could sort
    // either side of ours.
    let ms = parts.ms + 1;
    if ms > MAX_MS {
        errors::layout_exhausted();
    }
    let now = generator::now_ms();
    let max_drift = gucs::max_drift_ms();
    if ms > now + max_drift {
        errors::advance_too_far(id, ms - now, max_drift);
    }
    cover(s, ms, now);
    // The id before the first one of millisecond `ms`, or of the clock's if that is later (the
    // next id would be there anyway; the tick then stays a recent id, as stats show it): the
    // next id lands in `ms` or later, also if the clock steps back right after this.
    s.tick
        .fetch_max(Tick::at_ms(ms.max(now).min(MAX_MS)).0 - 1, Ordering::AcqRel);
}

/// A durable mark above `ms`, renewing the lease if it does not reach that far yet.
fn cover(s: &Shared, ms: u64, now: u64) {
    if ms >= s.lease_ms.load(Ordering::Acquire) {
        lease::cover(s, ms, now);
    }
}
