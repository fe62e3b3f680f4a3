//! In-database tests, run by `cargo pgrx test` against a server that preloads the library with
//! `snowflake.worker_id = 42` (see `pg_test::postgresql_conf_options`).
//!
//! What needs another server configuration (not preloaded, worker id unset, ALTER SYSTEM,
//! restarts, clock steps) lives in the black-box suites under `tests/`.

// The server `cargo pgrx test` starts trusts every connection and listens on localhost: the
// test process (never the library, which servers load) makes its own network namespace first,
// as the black-box suites do.
#[cfg(all(test, feature = "pg_test"))]
#[path = "../tests/common/private_network.rs"]
#[allow(dead_code)]
mod private_network;

mod backtraces;
mod claims;
mod compose;
mod decode;
mod next;
mod registry;
mod settings;
mod time;
mod toolkit;

/// Hooks the pgrx test framework calls at `crate::pg_test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'pg_snowflake'", "snowflake.worker_id = 42"]
    }
}

/// The setting that makes the planner use a parallel worker for any parallel-safe query: renamed
/// in PostgreSQL 16.
#[cfg(feature = "pg15")]
pub const FORCE_PARALLEL: &str = "force_parallel_mode";
#[cfg(not(feature = "pg15"))]
pub const FORCE_PARALLEL: &str = "debug_parallel_query";

/// Test helpers callable from SQL, in the `tests` schema of the test build only.
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Whether the calling process is a parallel worker (`IsParallelWorker()`): lets a query
    /// prove which kind of process computed each row.
    #[pg_extern(volatile, parallel_safe)]
    fn in_parallel_worker() -> bool {
        // SAFETY: a plain read of a process-local global set at process start.
        unsafe { pg_sys::ParallelWorkerNumber >= 0 }
    }
}

/// An error as a client sees it.
#[derive(Debug)]
pub struct SqlError {
    pub sqlstate: String,
    pub message: String,
}

/// Runs `sql` in a PL/pgSQL subtransaction and returns the error it raised, if any, so that a
/// test can check the SQLSTATE and not only the message. (Hints are checked by the black-box
/// suites, through a real client.)
pub fn error_of(sql: &str) -> Option<SqlError> {
    use pgrx::prelude::*;
    Spi::run(
        "CREATE OR REPLACE FUNCTION pg_temp.error_of(q text, OUT state text, OUT message text)
         LANGUAGE plpgsql AS $$
         BEGIN
             EXECUTE q;
         EXCEPTION WHEN OTHERS THEN
             GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
         END $$",
    )
    .unwrap();
    let (state, message) = Spi::get_two_with_args::<String, String>(
        "SELECT * FROM pg_temp.error_of($1)",
        &[sql.into()],
    )
    .unwrap();
    state.map(|sqlstate| SqlError { sqlstate, message: message.unwrap_or_default() })
}

/// Every row of a one-column query without NULLs, in the order the query returned them.
pub fn column<T: pgrx::FromDatum + pgrx::IntoDatum>(sql: &str) -> Vec<T> {
    use pgrx::prelude::*;
    Spi::connect(|client| {
        client
            .select(sql, None, &[])
            .unwrap()
            .map(|row| row.get::<T>(1).unwrap().unwrap())
            .collect()
    })
}

/// Every row of a one-column bigint query, in the order the query returned them.
pub fn bigints(sql: &str) -> Vec<i64> {
    column(sql)
}

pub fn one<T: pgrx::FromDatum + pgrx::IntoDatum>(sql: &str) -> T {
    pgrx::Spi::get_one::<T>(sql).unwrap().unwrap_or_else(|| panic!("NULL from {sql}"))
}
