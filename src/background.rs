//! How pg_snowflake's background workers (the claims worker and the registry's) are registered
//! and start: both run only on a primary, are restarted after an error, and stop at SIGTERM.

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
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
