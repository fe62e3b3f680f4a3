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

// The generator and its durability.
mod generator; // the lease protocol, owner of the shared state
mod shared_memory; // structs in PostgreSQL's shared memory, set up under its lock
mod sync_standby; // waiting for synchronous standbys
mod upgrade; // carrying the mark through pg_upgrade
mod wait_event; // what a waiting session shows in pg_stat_activity
mod wal; // the custom WAL resource manager

// Configuration, and how problems are reported (each module raises its own, at its check).
mod address; // worker ids from the server's own address (snowflake.worker_id_network)
mod errors; // the report builder: SQLSTATE, message, hint; depends on no other module
mod gucs; // the snowflake.* settings
mod identity; // where this data directory runs, and a start's secret (copies tell apart)

// The SQL interface, by concern.
mod admin; // advance_past, reset_layout
mod adopt; // switching a serial or identity column to snowflake_next()
mod background; // how the background workers are registered and start
mod base62; // short text ids
mod built; // text PostgreSQL builds, byte for byte (names in any encoding)
mod citus; // Citus in one place: preloaded, the nodes' claims, adopt on every node
mod claims; // worker id claims and their background worker
mod compose; // ids of given fields
mod decode; // decoding ids, their time, and time ranges as id ranges
mod next; // snowflake_next()
mod own_schema; // the schema `snowflake`, where privileged code finds its objects
mod planner; // time ranges through the primary key (and adopt's one-relation plan)
mod privileges; // who may call what
mod registry; // worker ids leased from a registry database
mod stats; // snowflake_stats()
mod subtransaction; // a step whose error is caught and rolled back
mod text_arg; // text arguments in any database encoding
mod worker_id; // the worker id in use: from the settings or a registry's lease, answered once

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
