//! The renewal lock: one backend at a time writes a mark durably (see `lease`), while every
//! other backend goes on generating under the lease in force.
//!
//! The renewer holds an LWLock while it writes the state file, flushes WAL and syncs: it waits
//! for the disk as PostgreSQL's own WAL flush does, with interrupts held. Whoever needs the next
//! lease meanwhile does not queue in `LWLockAcquire`, where interrupts are held too and a stalled
//! disk would hold every caller with it, beyond the reach of `statement_timeout`,
//! `pg_cancel_backend`, `pg_terminate_backend` and a shutdown. It sleeps on a condition variable
//! instead, which the renewer broadcasts when it lets go of the lock: a cancel or a terminate
//! ends that sleep as any other wait of PostgreSQL's (`ConditionVariableSleep`), and a background
//! worker (the registry's) leaves it when asked to stop. Taking a free lock costs what it did: a
//! conditional acquire, and no condition variable unless the lock is taken.

use super::problems;
use super::shmem;
use crate::clock;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::pg_sys::PgTryBuilder;
use pgrx::PgSqlErrorCode;

/// A waiter looks at the lock again at least this often, also when nobody wakes it: after a
/// renewal ended with an error, PostgreSQL's abort released the lock without a broadcast, and a
/// background worker's stop request sets its latch without waking the sleep.
const RECHECK_MS: i64 = 100;

/// The renewal lock, held; released (and the waiters woken) on drop. On an error PostgreSQL's
/// abort releases all LWLocks, so the drop during unwinding leaves it to that.
pub(super) struct RenewalLock(*mut pg_sys::LWLock);

/// A background worker was asked to stop (SIGTERM) while it waited for the lock.
pub(super) struct StopRequested;

impl RenewalLock {
    /// Takes the lock if it is free.
    pub(super) fn try_take() -> Option<RenewalLock> {
        let lock = shmem::renewal_lock();
        mutant!(renewal_lock, {}, {
            return Some(RenewalLock(std::ptr::null_mut()));
        });
        // SAFETY: the lock lives in shared memory set up at start.
        if !unsafe { pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) } {
            return None;
        }
        shmem::renewal().held_since(clock::monotonic_ms());
        Some(RenewalLock(lock))
    }

    /// Waits until the lock is free and takes it. A cancel or `statement_timeout` ends the wait
    /// with an error that says what it waited for, `pg_terminate_backend` ends the session; a
    /// background worker asked to stop gets `StopRequested`, and its latch set again for its
    /// own loop to see.
    pub(super) fn wait() -> Result<RenewalLock, StopRequested> {
        mutant!(
            renewal_wait,
            {
                if let Some(held) = RenewalLock::try_take() {
                    return Ok(held);
                }
            },
            {
                // SAFETY: the lock lives in shared memory set up at start.
                unsafe {
                    pg_sys::LWLockAcquire(shmem::renewal_lock(), pg_sys::LWLockMode::LW_EXCLUSIVE)
                };
                return Ok(RenewalLock(shmem::renewal_lock()));
            }
        );
        let done = shmem::renewal().done();
        // SAFETY: the condition variable lives in shared memory set up at start. Prepared
        // before the first look at the lock, this process stays on its wakeup list across
        // sleeps, so that a broadcast between a look and the next sleep still ends that sleep.
        // An error (a cancel) leaves it prepared: PostgreSQL's abort cancels it.
        unsafe { pg_sys::ConditionVariablePrepareToSleep(done) };
        let taken = loop {
            if let Some(held) = RenewalLock::try_take() {
                break Ok(held);
            }
            // SAFETY: a flag of this process, set by its SIGTERM handler.
            if mutant!(worker_leaves, { (unsafe { pg_sys::ShutdownRequestPending } != 0) }, {
                false
            }) {
                // SAFETY: this process's latch.
                unsafe { pg_sys::SetLatch(pg_sys::MyLatch) };
                break Err(StopRequested);
            }
            sleep(done);
        };
        // SAFETY: as above; this process prepared the sleep.
        unsafe { pg_sys::ConditionVariableCancelSleep() };
        taken
    }
}

/// One sleep on `done`, until a broadcast, an interrupt or `RECHECK_MS`. A cancel (or
/// `statement_timeout`) is raised again as an error that says which wait it ended: PostgreSQL's
/// error context would say so, but it does not survive the way pgrx carries an error through
/// Rust code.
fn sleep(done: *mut pg_sys::ConditionVariable) {
    PgTryBuilder::new(|| {
        // SAFETY: the condition variable lives in shared memory; PG_WAIT_EXTENSION shows the
        // wait in pg_stat_activity as wait_event_type 'Extension'.
        unsafe { pg_sys::ConditionVariableTimedSleep(done, RECHECK_MS, pg_sys::PG_WAIT_EXTENSION) };
    })
    .catch_when(PgSqlErrorCode::ERRCODE_QUERY_CANCELED, |cancel| {
        let why = match &cancel {
            CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => {
                report.message().to_string()
            }
            CaughtError::RustPanic { .. } => cancel.rethrow(),
        };
        let renewing_ms = clock::monotonic_ms().saturating_sub(shmem::renewal().since());
        problems::renewal_wait_cancelled(&why, renewing_ms)
    })
    .execute();
}

impl Drop for RenewalLock {
    fn drop(&mut self) {
        if !std::thread::panicking() && mutant!(renewal_lock, { true }, { !self.0.is_null() }) {
            // SAFETY: this backend holds the lock; the condition variable lives in shared
            // memory. A broadcast without sleepers is a spinlock taken and let go.
            unsafe {
                pg_sys::LWLockRelease(self.0);
                pg_sys::ConditionVariableBroadcast(shmem::renewal().done());
            }
        }
    }
}
