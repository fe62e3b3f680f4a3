//! `snowflake_next()`: the next id of this cluster.

use crate::{generator, stats, worker_id};
use pgrx::prelude::*;

/// The next id of this cluster.
///
/// VOLATILE, as every generator. PARALLEL SAFE on purpose: the state lives in shared memory,
/// not in the backend as a sequence cache does (which is why `nextval()` is PARALLEL UNSAFE), so
/// a parallel worker draws from the same counter as its leader and its ids are just as unique.
#[pg_extern(volatile, parallel_safe)]
fn snowflake_next() -> i64 {
    next_id()
}

/// Errors if the library is not preloaded, the worker id is unset (or not leased), this is a standby, or the
/// clock is too far behind.
#[inline]
fn next_id() -> i64 {
    let generator = generator::get();
    let (layout, worker_id) = worker_id::for_next_id();
    let id = layout.id(generator.next_tick(layout), worker_id);
    mutant!(
        ids_counted,
        {
            stats::count_id();
            id
        },
        { id }
    )
}
