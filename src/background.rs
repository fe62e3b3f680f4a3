//! How pg_snowflake's background workers (the claims worker and the registry's) are registered
//! and start: both run only on a primary, are restarted after an error, and stop at SIGTERM.
//!
//! A SIGTERM is never lost. pgrx's handler sets a flag that `sigterm_received()` clears as it
//! reads it (and `wait_latch` reads it too): in 0.5.0 a check inside the claims worker's
//! gathering used it up, its wait never saw it, and the worker looped on past a fast shutdown.
//! The handler also sets PostgreSQL's `ShutdownRequestPending`, which nothing clears: `stopping`
//! reads that one, and no code here calls `sigterm_received()`.

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::pg_sys;
use std::time::Duration;

/// What a worker reaches besides shared memory.
pub enum Reaches {
    /// A database, through SPI.
    Database,
    /// Only shared memory (and connections of its own).
    SharedMemory,
}

/// Registers the worker whose entry point is the library's `function`, from `_PG_init`.
pub fn register(name: &str, function: &str, reaches: Reaches, restart_after: Duration) {
    let worker =
        BackgroundWorkerBuilder::new(name).set_library("pg_snowflake").set_function(function);
    let worker = match reaches {
        Reaches::Database => worker.enable_spi_access(),
        Reaches::SharedMemory => worker.enable_shmem_access(None),
    };
    worker
        // Only on a primary: a standby makes no ids, and starts its workers when promoted.
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(restart_after))
        .load();
}

/// The first step of a worker's entry point: SIGHUP and SIGTERM wake it.
pub fn attach_signals() {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
}

/// After `attach_signals`, for a worker connected to a database: a SIGTERM ends the process at
/// its next check for interrupts (PostgreSQL's `die`, as worker_spi does), inside a statement's
/// wait too, such as Citus's for a node that does not answer.
// mutant: claims_sigterm
pub fn end_at_sigterm() {
    // SAFETY: PostgreSQL's own handler for a backend's SIGTERM, installed in this process.
    unsafe { pg_sys::pqsignal(pg_sys::SIGTERM as std::ffi::c_int, Some(die)) };
}

// postgres.c's handler itself: pgrx's `pg_sys::die` is a Rust wrapper, which no signal may
// call. Its arguments are `SIGNAL_ARGS`, which 19 widened.
unsafe extern "C-unwind" {
    #[cfg(not(feature = "pg19"))]
    fn die(signal: std::ffi::c_int);
    #[cfg(feature = "pg19")]
    fn die(signal: std::ffi::c_int, info: *const pg_sys::pg_signal_info);
}

/// Whether a SIGTERM asked this worker to stop (or the postmaster died): sticky, unlike pgrx's
/// `sigterm_received()`.
pub fn stopping() -> bool {
    // SAFETY: plain reads of flags that signal handlers set and nothing clears.
    unsafe { pg_sys::ShutdownRequestPending != 0 || pg_sys::ProcDiePending != 0 }
}

/// Waits `timeout` or until the latch is set; `false` once the worker is to stop (a SIGTERM,
/// now or before, or the postmaster's death).
pub fn wait(timeout: Duration) -> bool {
    BackgroundWorker::wait_latch(Some(timeout)) && !stopping()
}
