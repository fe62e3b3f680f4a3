//! The worker id this server makes ids with, answered here and nowhere else. It comes from one
//! of three places, chosen by the settings: `snowflake.worker_id` or the server's address in
//! `snowflake.worker_id_network`, both fixed at start (`gucs` resolves them once, in the
//! postmaster), or else the lease a registry grants (`registry`), which changes while the server
//! runs and may be lost.

use crate::layout::Layout;
use crate::{gucs, registry};

/// The worker id in use now; `None` while there is none (unset, refused at start, or no lease
/// from the registry). Never raises: for reports and the claims.
pub fn current() -> Option<u32> {
    gucs::fixed_worker_id().or_else(registry::leased_worker_id)
}

/// The layout and worker id of the next id, or the error that says why there is none (55000,
/// with the reason and what to do): `current()` for the hot path and for `snowflake_claim()`.
/// The error's place is the caller's (`snowflake_next()`'s or `snowflake_claim()`'s).
#[inline]
#[track_caller]
pub fn for_next_id() -> (&'static Layout, u32) {
    // One read for the layout and a fixed worker id; a registry's lease is read only where the
    // settings fix none: no cost to the others.
    match gucs::generating().or_else(registry::generating) {
        Some(found) => found,
        None => gucs::worker_id_unset(),
    }
}
