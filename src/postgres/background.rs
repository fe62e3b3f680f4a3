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
use std::ffi::CString;
use std::time::Duration;

/// The backend's `pqsignal`: 18 renamed it `pqsignal_be` (a macro keeps the name in C) and made it
/// return nothing; the result is not used here.
#[cfg(not(any(feature = "pg18", feature = "pg19")))]
use pg_sys::pqsignal;
#[cfg(any(feature = "pg18", feature = "pg19"))]
use pg_sys::pqsignal_be as pqsignal;

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

/// After `attach_signals`, for a worker connected to a database: a SIGTERM also cancels the
/// statement the worker runs (as `pg_cancel_backend` would), so that a wait inside a statement
/// ends at once, such as Citus's for a node that does not answer; the worker's own code catches
/// the cancel, sees `stopping`, and exits outside any transaction. (PostgreSQL's `die`, which
/// worker_spi takes, ends the process at the next check for interrupts, inside that wait too:
/// there, on 17 built with assertions, Citus's wait set was released after its resource owner,
/// and the exit failed an assertion.)
pub fn cancel_at_sigterm() {
    mutant!(
        claims_sigterm,
        {
            // SAFETY: a handler that only sets flags and the latch, installed in this process.
            unsafe { pqsignal(pg_sys::SIGTERM as std::ffi::c_int, Some(sigterm_cancels)) };
        },
        {
            let _ = sigterm_cancels;
        }
    );
}

/// The handler: what pgrx's does (`ShutdownRequestPending`, the latch), and a cancel.
#[cfg(not(feature = "pg19"))]
unsafe extern "C-unwind" fn sigterm_cancels(_signal: std::ffi::c_int) {
    // SAFETY: only sig_atomic_t flags and SetLatch, which PostgreSQL's own handlers use.
    unsafe { cancel_and_wake() }
}

/// The handler of 19, whose `SIGNAL_ARGS` carry the signal's information.
#[cfg(feature = "pg19")]
unsafe extern "C-unwind" fn sigterm_cancels(
    _signal: std::ffi::c_int,
    _info: *const pg_sys::pg_signal_info,
) {
    // SAFETY: as above.
    unsafe { cancel_and_wake() }
}

/// # Safety
/// Only from a signal handler of this process, or where one could run.
unsafe fn cancel_and_wake() {
    // SAFETY: errno is this thread's; the flags are sig_atomic_t; SetLatch is async-signal-safe.
    unsafe {
        let saved = *libc::__errno_location();
        pg_sys::ShutdownRequestPending = 1;
        pg_sys::QueryCancelPending = 1;
        pg_sys::InterruptPending = 1;
        pg_sys::SetLatch(pg_sys::MyLatch);
        *libc::__errno_location() = saved;
    }
}

/// Whether a SIGTERM asked this worker to stop (or the postmaster died): sticky, unlike pgrx's
/// `sigterm_received()`.
pub fn stopping() -> bool {
    // SAFETY: a plain read of a flag that signal handlers set and nothing clears.
    unsafe { pg_sys::ShutdownRequestPending != 0 }
}

/// Waits `timeout` or until the latch is set; `false` once the worker is to stop (a SIGTERM,
/// now or before). The postmaster's death ends the process (exit code 1).
///
/// Not pgrx's `wait_latch`: it checks for interrupts after the wait, where the cancel that
/// `cancel_at_sigterm` adds raised "canceling statement due to user request" with no statement
/// running (an ERROR in the log at every shutdown, and an exit through the error path, so that
/// the worker's own exit below was never reached).
pub fn wait(timeout: Duration) -> bool {
    // A SIGTERM whose latch a wait inside a statement already consumed ends it here, not after
    // the timeout.
    if stopping() {
        return false;
    }
    let events = pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH;
    // SAFETY: this process's own latch, as every PostgreSQL process waits on it.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            events as i32,
            timeout.as_millis().min(i32::MAX as u128) as std::ffi::c_long,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
    if stopping() {
        return false;
    }
    // A cancel that came while no statement ran (pg_cancel_backend() of the worker) has nothing
    // to cancel: dropped, as an idle backend drops one. Other interrupts are served.
    // SAFETY: a sig_atomic_t flag of this process, which handlers only ever set.
    unsafe { pg_sys::QueryCancelPending = 0 };
    pgrx::check_for_interrupts!();
    true
}

/// What a background worker is doing, in `pg_stat_activity.query` (`state` active), or idle.
pub fn show_activity(doing: Option<&str>) {
    let text = CString::new(doing.unwrap_or_default()).unwrap_or_default();
    let state = if doing.is_some() {
        pg_sys::BackendState::STATE_RUNNING
    } else {
        pg_sys::BackendState::STATE_IDLE
    };
    // SAFETY: a NUL-terminated string, copied by PostgreSQL into its own buffer.
    unsafe { pg_sys::pgstat_report_activity(state, text.as_ptr()) };
}
