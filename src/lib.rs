//! pg_snowflake: Twitter-snowflake 64-bit ids generated inside PostgreSQL, from one lock-free
//! generator in shared memory per cluster.

#[cfg(any(feature = "pg13", feature = "pg14"))]
compile_error!(
    "pg_snowflake needs PostgreSQL 15 or later: its durable lease travels in WAL through a custom \
     WAL resource manager, which PostgreSQL 13 and 14 do not have"
);

// The id itself, in plain Rust, and the files of the data directory: the crate in core/, which
// `make check` tests in seconds without PostgreSQL; named here as modules of this crate.
pub(crate) use pg_snowflake_core::{
    clock, data_file, layout, mark, network, pacing, state_file, text,
};
// `mutant!(name, { kept }, { removed })`, the mutation points (core/src/mutant.rs), in every
// module without an import.
#[macro_use]
extern crate pg_snowflake_core;

// The modules, by concern (docs/architecture.md draws them). Those inside a folder are named
// here too, so that `crate::wal` and the like name them wherever they live.
mod coordination; // which worker id, leased, claimed and compared: registry, claims, Citus
mod durability; // WAL, synchronous standbys, pg_upgrade (the state file is the core's)
mod generator; // the lease protocol, owner of the shared state
mod gucs; // the snowflake.* settings, each one row
mod postgres; // what the extension needs of PostgreSQL beyond pgrx
mod surface; // the SQL functions and the planner hook
pub(crate) use coordination::{address, citus, claims, identity, registry, worker_id};
pub(crate) use durability::{sync_standby, upgrade, wal};
pub(crate) use postgres::{
    background, built, errors, own_schema, privileges, shared_memory, subtransaction, text_arg,
    wait_event,
};
pub(crate) use surface::{decode, planner, stats};

#[cfg(test)]
mod module_graph; // a test: no import cycles

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
    mutant!(backtraces, { no_backtraces_for_clients() }, {});
    // SAFETY: a plain read of a flag PostgreSQL sets before calling _PG_init.
    if !unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress } {
        return;
    }
    // A build of scripts/mutations.sh has a guard removed: its server's log says so from the
    // start (a LOG, which no test reads as a failure of its own).
    if let Some(name) = option_env!("PG_SNOWFLAKE_MUTANT").filter(|name| !name.is_empty()) {
        errors::log(format!(
            "pg_snowflake: this build removes the guard {name} (PG_SNOWFLAKE_MUTANT): it is for scripts/mutations.sh only"
        ));
    }
    // SAFETY: a plain read of a flag set from the command line before _PG_init.
    if unsafe { pgrx::pg_sys::IsBinaryUpgrade } {
        upgrade::at_binary_upgrade_start();
    }
    gucs::init();
    generator::init();
    registry::init(); // after the generator: its shared memory starts from the generator's
    if address::source().is_some() {
        generator::on_ahead(address::explain_ahead);
    }
    wal::register(wal::Replay {
        mark: |mark| generator::get().replay_mark(mark),
        reset: |mark| generator::get().replay_reset(mark),
    });
    stats::init();
    mutant!(time_ranges, { planner::init() }, {});
    mutant!(claims_worker, { claims::init() }, {});
}

/// pgrx adds the Rust backtrace of an error that passes through Rust code (a cancel during a
/// wait, an error inside SPI) to the DETAIL the client gets, whenever the process environment
/// has RUST_BACKTRACE set, as a server started from a developer's shell may. A client must see
/// PostgreSQL's error, not the extension's stack: RUST_LIB_BACKTRACE=0 turns capturing off
/// (it wins over RUST_BACKTRACE), before any backtrace could be captured in this process and,
/// set in the postmaster, in every process it starts.
fn no_backtraces_for_clients() {
    // SAFETY: _PG_init runs on PostgreSQL's only thread, before anything reads the environment
    // concurrently; children inherit it.
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
}
