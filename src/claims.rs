//! Worker-id claims: each server records which worker id it uses, and since when, in the
//! `snowflake_claims` table (claims.sql), so that two servers that share a worker id are found
//! wherever their claims meet: at a subscriber that receives both through logical replication,
//! or in any database the tables are copied into.
//!
//! The identity of a server is its system identifier (`pg_control_system()`), which a physical
//! standby shares with its primary: a primary and its promoted standby legitimately share a
//! worker id (they never generate at once, see lease.rs), and they write the same claim.
//!
//! A background worker renews the claim every `snowflake.claims_interval` in
//! `snowflake.claims_database`; without it, an operator or a scheduler can call
//! `snowflake_claim()` just as well.

use crate::{errors, generator, gucs, privileges, registry};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;
use std::time::Duration;

/// How many intervals a claim stays valid: one missed renewal (a busy server, a slow
/// replication link) does not end it, and a server that stopped ends its claim after at most
/// three intervals (30 s at the default 10 s).
const VALID_FOR_INTERVALS: u32 = 3;

/// Registers the claims worker when `snowflake.claims_database` is set and a worker id is in
/// use. Called from `_PG_init` while the library is preloaded; never during pg_upgrade, whose
/// server must not write user tables.
pub fn init() {
    // SAFETY: a plain read of a flag set from the command line before _PG_init.
    if unsafe { pg_sys::IsBinaryUpgrade }
        || (gucs::worker_id().is_none() && gucs::registry().is_none())
    {
        return;
    }
    if gucs::claims_database().is_none() {
        return;
    }
    BackgroundWorkerBuilder::new("pg_snowflake claims")
        .set_library("pg_snowflake")
        .set_function("pg_snowflake_claims_main")
        .enable_spi_access()
        // Only on a primary: a standby starts it when it is promoted.
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        // After an error (the database dropped, the table altered), try again a little later.
        .set_restart_time(Some(Duration::from_secs(10)))
        .load();
}

/// The worker: renews the claim at once and then every interval, while the extension is
/// installed in its database (at a version that has claims).
///
/// It runs as the bootstrap superuser in a database where other roles may create objects, so
/// nothing it runs can resolve to one of theirs: its search_path holds only pg_catalog (and
/// pg_temp, last, where PostgreSQL never looks for functions or operators), every function,
/// operator and relation it names is named by schema anyway, and the extension's schema is
/// found by its OID at every renewal (a renamed schema is followed).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn pg_snowflake_claims_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = gucs::claims_database().expect("registered only with a database");
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    // The database's owner sets its defaults (ALTER DATABASE ... SET): the worker takes none
    // that could stop its writes, whatever they are.
    BackgroundWorker::transaction(|| {
        Spi::run(
            "SET search_path = pg_catalog, pg_temp;
             SET default_transaction_read_only = off;
             SET statement_timeout = 0;
             SET lock_timeout = 0;
             SET idle_in_transaction_session_timeout = 0",
        )
        .expect("built-in settings")
    });
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: between transactions, as every PostgreSQL process reloads its settings.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        BackgroundWorker::transaction(|| {
            // The extension's schema, if the installed version has claims.
            let call: Option<String> = Spi::get_one(
                "SELECT pg_catalog.format('SELECT %I.snowflake_claim()', n.nspname)
                   FROM pg_catalog.pg_extension e
                   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                  WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake'
                    AND pg_catalog.to_regprocedure(
                            pg_catalog.format('%I.snowflake_claim()', n.nspname)) IS NOT NULL",
            )
            .unwrap_or(None);
            // With a registry, nothing to claim until it has leased a worker id.
            if let Some(call) = call.filter(|_| registry::worker_id().is_some()) {
                Spi::run(&call).expect("the claim is written");
            }
        });
        if !BackgroundWorker::wait_latch(Some(gucs::claims_interval())) {
            // SIGTERM: pg_terminate_backend(), or a shutdown. Exit code 1 has the postmaster
            // start the worker again after its restart time (at a shutdown it starts nothing);
            // returning would be exit code 0, which ends a background worker for good.
            // SAFETY: proc_exit runs PostgreSQL's exit callbacks and does not return.
            unsafe { pg_sys::proc_exit(1) };
        }
    }
}

/// Writes (or renews) this server's claim to its worker id in `snowflake_claims`, and returns
/// how many other clusters claim the same worker id of the same layout at overlapping times.
/// Each such clash is also reported as a WARNING by the table's trigger.
///
/// Superuser only, whatever is granted: a claim names the server. Its own search_path is
/// pg_catalog alone, and its statements name every object by schema.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn snowflake_claim(fcinfo: pg_sys::FunctionCallInfo) -> i32 {
    privileges::require_superuser("snowflake_claim()");
    generator::get();
    let Some((layout, worker_id)) = gucs::generating().or_else(registry::generating) else {
        errors::worker_id_unset()
    };
    let table = format!("{}.snowflake_claims", own_schema(fcinfo));
    let valid_for = gucs::claims_interval() * VALID_FOR_INTERVALS;
    // SAFETY: reads a value PostgreSQL set at start.
    let system_identifier = unsafe { pg_sys::GetSystemIdentifier() } as i64;
    // Two short statements rather than one: a clash's WARNING (from the table's trigger) shows
    // the statement as its context, in the server log of every renewal's caller.
    Spi::run_with_args(
        &format!(
            "INSERT INTO {table} AS c
             VALUES ($1, $2, $3, $4, pg_catalog.now(), pg_catalog.now(),
                     pg_catalog.now() OPERATOR(pg_catalog.+) $5::pg_catalog.interval)
             ON CONFLICT (system_identifier, worker_id, layout) DO UPDATE SET
                 node_name = excluded.node_name, last_seen = pg_catalog.now(),
                 expires = excluded.expires,
                 since = CASE WHEN c.expires OPERATOR(pg_catalog.<) pg_catalog.now()
                              THEN pg_catalog.now() ELSE c.since END"
        ),
        &[
            system_identifier.into(),
            (worker_id as i32).into(),
            layout.describe().into(),
            registry::node_name().into(),
            format!("{} ms", valid_for.as_millis()).into(),
        ],
    )
    .unwrap_or_else(|e| errors::claims_table_failed("write", &e));
    // A claim that had ended starts again (the CASE above): the time between is not claimed.
    let clashes = Spi::get_one_with_args::<i64>(
        &format!(
            "SELECT pg_catalog.count(*) FROM {table} o, {table} m
             WHERE m.system_identifier OPERATOR(pg_catalog.=) $1
               AND m.worker_id OPERATOR(pg_catalog.=) $2
               AND m.layout OPERATOR(pg_catalog.=) $3
               AND o.worker_id OPERATOR(pg_catalog.=) m.worker_id
               AND o.layout OPERATOR(pg_catalog.=) m.layout
               AND o.system_identifier OPERATOR(pg_catalog.<>) m.system_identifier
               AND o.since OPERATOR(pg_catalog.<) m.expires
               AND m.since OPERATOR(pg_catalog.<) o.expires"
        ),
        &[
            system_identifier.into(),
            (worker_id as i32).into(),
            layout.describe().into(),
        ],
    )
    .unwrap_or_else(|e| errors::claims_table_failed("read", &e))
    .unwrap_or(0);
    clashes as i32
}

/// The schema this function was created in, quoted: the claims table lives beside it, and a
/// background worker or an apply worker may run with a search_path that does not name it.
fn own_schema(fcinfo: pg_sys::FunctionCallInfo) -> String {
    // SAFETY: fcinfo and its flinfo come from PostgreSQL for this call; the returned strings are
    // palloc'd in the current memory context and copied before it ends.
    unsafe {
        let namespace = pg_sys::get_func_namespace((*(*fcinfo).flinfo).fn_oid);
        let name = pg_sys::get_namespace_name(namespace);
        std::ffi::CStr::from_ptr(pg_sys::quote_identifier(name))
            .to_string_lossy()
            .into_owned()
    }
}

extension_sql_file!(
    "../sql/claims_table.sql",
    name = "snowflake_claims",
    requires = [snowflake_claim],
);

extension_sql_file!(
    "../sql/claims_check.sql",
    name = "snowflake_claims_check",
    requires = ["snowflake_claims"],
);

extension_sql_file!(
    "../sql/clashes.sql",
    name = "snowflake_clashes",
    requires = ["snowflake_claims"],
);
