//! The wait events a session of pg_snowflake shows in `pg_stat_activity` while it waits: on 17
//! and later a name of its own (`WaitEventExtensionNew`), on 15 and 16 `Extension`, the one
//! event those majors give extensions (wait_event_type `Extension` either way).

use pgrx::pg_sys;

/// What a session waits for.
#[derive(Clone, Copy)]
pub enum Event {
    /// Its pacing slot (see `pacing`).
    Pacing = 0,
    /// The clock, while the next id would run more than `snowflake.max_drift` ahead of it.
    Clock = 1,
}

impl Event {
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    const fn name(self) -> &'static std::ffi::CStr {
        match self {
            Event::Pacing => c"SnowflakePacing",
            Event::Clock => c"SnowflakeClock",
        }
    }

    /// The wait event's id, registered by this backend's first wait (PostgreSQL keeps one id per
    /// name for the whole cluster).
    #[cfg(not(any(feature = "pg15", feature = "pg16")))]
    pub fn info(self) -> u32 {
        use std::sync::atomic::{AtomicU32, Ordering};
        static IDS: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
        let id = &IDS[self as usize];
        match id.load(Ordering::Relaxed) {
            0 => {
                let new = mutant!(
                    wait_event_names,
                    {
                        // SAFETY: a NUL-terminated name; PostgreSQL copies it into shared memory.
                        unsafe { pg_sys::WaitEventExtensionNew(self.name().as_ptr()) }
                    },
                    { pg_sys::PG_WAIT_EXTENSION }
                );
                id.store(new, Ordering::Relaxed);
                new
            }
            known => known,
        }
    }

    #[cfg(any(feature = "pg15", feature = "pg16"))]
    pub fn info(self) -> u32 {
        pg_sys::PG_WAIT_EXTENSION
    }
}

/// Sleeps `ms` on this backend's latch, showing `event`; serves interrupts after it (a cancel,
/// `statement_timeout` and a shutdown end the wait at once). A postmaster that died ends the
/// process.
pub fn nap(ms: i64, event: Event) {
    let events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    // SAFETY: this backend's own latch, reset before interrupts are looked at, as every wait
    // loop of PostgreSQL's does.
    unsafe {
        pg_sys::WaitLatch(pg_sys::MyLatch, events as i32, ms as _, event.info());
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    pgrx::check_for_interrupts!();
}
