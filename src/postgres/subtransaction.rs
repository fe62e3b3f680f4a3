//! Running a step in a subtransaction of its own, so that its error is caught and the rest of the
//! transaction goes on: PL/pgSQL's `BEGIN ... EXCEPTION WHEN OTHERS`, as pl_exec.c does it
//! (begin an internal subtransaction, and on an error roll it back and put the memory context and
//! resource owner back). pgrx has no such helper.

use pgrx::pg_sys::panic::CaughtError;
use pgrx::pg_sys::{self, PgTryBuilder};

/// Runs `step` in a subtransaction: its result, or the message of the PostgreSQL error that
/// ended it, whose work is then rolled back. A Rust panic is no PostgreSQL error: it goes on
/// unwinding (and aborts the transaction).
pub fn catching<T>(step: impl FnOnce() -> T) -> Result<T, String> {
    // SAFETY: in a transaction (the callers run in one); the context and owner are restored
    // below whichever way the step ends, as pl_exec.c does.
    let (context, owner) = unsafe {
        let saved = (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner);
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        // The step's results outlive the subtransaction's memory context.
        pg_sys::MemoryContextSwitchTo(saved.0);
        saved
    };
    // Whatever the step leaves half-done on an error is rolled back with the subtransaction.
    let step = std::panic::AssertUnwindSafe(step);
    let result = mutant!(
        claims_gather_apart,
        {
            PgTryBuilder::new(move || Ok(step()))
                .catch_others(|caught| match caught {
                    CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) => {
                        Err(report.message().to_string())
                    }
                    panic @ CaughtError::RustPanic { .. } => panic.rethrow(),
                })
                .execute()
        },
        { Ok(step()) }
    );
    // SAFETY: the subtransaction begun above is the current one (the step's SPI calls ended
    // theirs, and an error's are cleaned up by the rollback); the error state was flushed by
    // PgTryBuilder after the handler.
    unsafe {
        if result.is_ok() {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
    }
    result
}
