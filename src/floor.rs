//! `snowflake_advance_past(id)`: moves the generator durably above an id that came from
//! elsewhere (a restored dump, an import, a worker id moved between servers), so that every
//! later id of this cluster is larger.

use crate::layout::Layout;
use crate::shared::{self, Shared};
use crate::{errors, generator, gucs, lease};
use std::sync::atomic::Ordering;

/// Every id handed out after this returns is above `id`, also after a crash right after it:
/// the mark goes to WAL and the state file (and the synchronous standbys) before the tick moves.
pub fn advance_past(id: i64) {
    let s = shared::get();
    let layout = gucs::layout();
    let Ok(unsigned) = u64::try_from(id) else {
        errors::negative_id(id)
    };
    // From the next time unit on: an id of another worker in the same unit could sort either
    // side of ours. Read through the id's value, not its fields, so that an id of any layout
    // (one made before a layout change, or by another system) is passed.
    let units = layout.units_from_id(unsigned.saturating_add(1));
    if units > layout.max_units() {
        errors::layout_exhausted(layout);
    }
    let now = generator::clock_units(layout);
    let max_drift = layout.units_in(gucs::max_drift_ms());
    if units > now + max_drift {
        let ahead_ms = (units - now) * layout.unit_ms;
        errors::advance_too_far(id, ahead_ms, gucs::max_drift_ms());
    }
    cover(s, layout, units, now);
    // The id before the first one of unit `units`, or of the clock's if that is later (the next
    // id would be there anyway; the tick then stays a recent id, as stats show it): the next id
    // lands in `units` or later, also if the clock steps back right after this.
    let start = units.max(now).min(layout.max_units());
    s.tick
        .fetch_max(layout.tick_at(start).0.saturating_sub(1), Ordering::AcqRel);
}

/// A durable mark above `units`, renewing the lease if it does not reach that far yet.
fn cover(s: &Shared, layout: &Layout, units: u64, now: u64) {
    if units >= s.lease.load(Ordering::Acquire) {
        lease::cover(s, layout, units, now);
    }
}
