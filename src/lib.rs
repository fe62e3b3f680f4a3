//! pg_snowflake: Twitter-snowflake 64-bit ids generated inside PostgreSQL, from one lock-free
//! generator in shared memory per cluster.

#[cfg(any(feature = "pg13", feature = "pg14"))]
compile_error!(
    "pg_snowflake needs PostgreSQL 15 or later: its durable lease travels in WAL through a custom \
     WAL resource manager, which PostgreSQL 13 and 14 do not have"
);
#[cfg(feature = "pg16")]
compile_error!(
    "pg_snowflake is built and tested for PostgreSQL 15, 17 and 18; 16 is not in its test matrix"
);

mod base62;
mod claims;
mod clock;
mod errors;
mod floor;
mod functions;
mod generator;
mod gucs;
mod layout;
mod lease;
mod planner;
mod shared;
mod state_file;
mod stats;
mod sync_standby;
mod toolkit;
mod upgrade;
mod wal;

#[cfg(any(test, feature = "pg_test"))]
#[path = "../pgrx-tests/mod.rs"]
mod pg_tests;
#[cfg(test)]
pub use pg_tests::pg_test;

pgrx::pg_module_magic!(name, version);

/// Everything is set up only while `shared_preload_libraries` is processed, as
/// pg_stat_statements does: shared memory cannot be requested later, and defining the
/// postmaster-level `snowflake.worker_id` after startup is a FATAL error that would end the
/// session of whoever runs `CREATE EXTENSION` on a server that does not preload the library.
/// Without preloading, `snowflake_next()` says what to do and `snowflake_decode()` still works.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: a plain read of a flag PostgreSQL sets before calling _PG_init.
    if !unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    // SAFETY: a plain read of a flag set from the command line before _PG_init.
    if unsafe { pgrx::pg_sys::IsBinaryUpgrade } {
        upgrade::at_binary_upgrade_start();
    }
    gucs::init();
    shared::init();
    wal::register();
    stats::init();
    planner::init();
    claims::init();
}
