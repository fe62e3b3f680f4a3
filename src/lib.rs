//! pg_snowflake: Twitter-snowflake 64-bit ids generated inside PostgreSQL, from one lock-free
//! generator in shared memory per cluster.

mod clock;
mod errors;
mod functions;
mod generator;
mod gucs;
pub mod layout;

#[cfg(any(test, feature = "pg_test"))]
#[path = "../pgrx-tests/mod.rs"]
mod pg_tests;
#[cfg(test)]
pub use pg_tests::pg_test;

pgrx::pg_module_magic!(name, version);

/// Settings are defined in every process that loads the library, so that `SET` and
/// `ALTER SYSTEM` report sensible errors even without preloading. Shared memory can only be
/// requested while `shared_preload_libraries` is processed; otherwise `snowflake_next()` says so.
#[pgrx::pg_guard]
pub extern "C-unwind" fn _PG_init() {
    gucs::init();
    // SAFETY: a plain read of a flag PostgreSQL sets before calling _PG_init.
    if unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        generator::init();
    }
}
