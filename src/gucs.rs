//! Every `snowflake.*` setting: the statics are private, `init()` defines them, and the rest of
//! the crate reads them through the typed getters below.
//!
//! None of them is `USERSET` or `SUSET`: a session must not be able to change which ids the
//! cluster hands out, so they come from the configuration files only, which only a superuser
//! (or `ALTER SYSTEM`, itself superuser-only by default) can change.

use crate::layout::MAX_WORKER_ID;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// -1 means "not set": a missing worker id must fail loudly instead of silently colliding
/// with another server that also forgot to set it (as pgEdge's snowflake does for its node id).
const WORKER_ID_UNSET: i32 = -1;

static WORKER_ID: GucSetting<i32> = GucSetting::<i32>::new(WORKER_ID_UNSET);
static MAX_DRIFT_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static DRIFT_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(100);

/// Defines the settings and reserves the `snowflake.` prefix, so that a typo such as
/// `snowflake.workerid` in postgresql.conf is reported instead of silently ignored.
pub fn init() {
    GucRegistry::define_int_guc(
        c"snowflake.worker_id",
        c"Sets the worker id that this server embeds in every snowflake id.",
        c"Valid values are 0 to 1023; -1 (the default) means unset, and snowflake_next() then \
          fails. Every server that generates ids for the same data needs its own worker id. \
          Changing it requires a restart, so that all backends always use the same value.",
        &WORKER_ID,
        WORKER_ID_UNSET,
        MAX_WORKER_ID as i32,
        // Postmaster, not sighup: after a reload, backends pick up a new value one by one, so
        // for a moment two worker ids would be in use at once and a new id with a smaller worker
        // id could sort below an older id of the same millisecond.
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake.max_drift",
        c"Sets how far the time embedded in new ids may run ahead of the system clock.",
        c"Ids borrow time from the future when the clock steps back or when more than 4096 ids \
          per millisecond are requested. Past half of this bound, each backend gets an equal \
          share of every millisecond's ids, so bursts alone never reach it. Past the bound \
          snowflake_next() waits for the clock (see snowflake.drift_wait) and then fails. Valid \
          values are 0 to 2147483647 ms.",
        &MAX_DRIFT_MS,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake.drift_wait",
        c"Sets how long snowflake_next() waits for the clock when ids run more than \
          snowflake.max_drift ahead of it.",
        c"The wait is counted in naps of 1 ms (at least 1 ms each), so it lasts at least this \
          long; 0 fails at once. A clock stepped back further than snowflake.max_drift needs as \
          long as the step beyond it. Valid values are 0 to 60000 ms.",
        &DRIFT_WAIT_MS,
        0,
        60_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    // SAFETY: called from _PG_init on the main thread with a NUL-terminated literal.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"snowflake".as_ptr()) };
}

/// Reads a setting on the hot path.
///
/// `GucSetting::get()` first checks that it runs on PostgreSQL's thread, which costs a
/// `__tls_get_addr` call in a shared library; two settings are read per id (together with the
/// direct clock read in `clock`, this took an id from 230 to 147.5 instructions, callgrind). PostgreSQL writes
/// these variables only from this backend's one thread (at start and when it processes a
/// reload between statements), so a plain read is what C extensions do.
#[inline]
fn hot(setting: &'static GucSetting<i32>) -> i32 {
    // SAFETY: see above; the pointer is to a static that lives for the whole process.
    unsafe { *setting.as_ptr() }
}

/// The configured worker id, or `None` while `snowflake.worker_id` is unset.
#[inline]
pub fn worker_id() -> Option<u32> {
    u32::try_from(hot(&WORKER_ID)).ok()
}

/// Never negative: the setting's minimum is 0.
#[inline]
pub fn max_drift_ms() -> u64 {
    hot(&MAX_DRIFT_MS) as u64
}

pub fn drift_wait_ms() -> u64 {
    DRIFT_WAIT_MS.get() as u64
}
