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

use crate::errors::{self, Code};
use crate::layout::Layout;
use crate::{generator, gucs, own_schema, privileges, registry};
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
/// installed in its database (at a version that has the schema `snowflake`).
///
/// It runs as the bootstrap superuser in a database where other roles may create objects, so
/// nothing it runs can resolve to one of theirs: it calls no SQL function (the claim is written
/// by `write_claim`, here), its search_path holds only pg_catalog (and pg_temp, last, where
/// PostgreSQL never looks for functions or operators), every function, operator and relation it
/// names is named by schema anyway, and the one schema it names is `snowflake`, which only a
/// superuser can rename (checked at every renewal: see own_schema.rs).
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
    // Why the last renewal wrote nothing, logged once per reason.
    let mut skipped: Option<String> = None;
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: between transactions, as every PostgreSQL process reloads its settings.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let why_not = BackgroundWorker::transaction(|| {
            if !installed() {
                return Some(format!(
                    "pg_snowflake is not installed in database {database}"
                ));
            }
            if let Err(why) = own_schema::check() {
                return Some(format!("its schema snowflake cannot be used: {why}"));
            }
            // With a registry, nothing to claim until it has leased a worker id.
            let worker_id = registry::worker_id()?;
            write_claim(gucs::layout(), worker_id);
            None
        });
        if why_not != skipped {
            if let Some(why) = &why_not {
                errors::log(format!(
                    "pg_snowflake: no worker id claim is written: {why}"
                ));
            }
            skipped = why_not;
        }
        if !BackgroundWorker::wait_latch(Some(gucs::claims_interval())) {
            // SIGTERM: pg_terminate_backend(), or a shutdown. Exit code 1 has the postmaster
            // start the worker again after its restart time (at a shutdown it starts nothing);
            // returning would be exit code 0, which ends a background worker for good.
            // SAFETY: proc_exit runs PostgreSQL's exit callbacks and does not return.
            unsafe { pg_sys::proc_exit(1) };
        }
    }
}

/// Whether pg_snowflake is installed in this database.
fn installed() -> bool {
    Spi::get_one::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e
                         WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')",
    ) == Ok(Some(true))
}

/// Writes (or renews) this server's claim to its worker id in `snowflake_claims`, and returns
/// how many other clusters claim the same worker id of the same layout at overlapping times.
/// Each such clash is also reported as a WARNING by the table's trigger.
///
/// Superuser only, whatever is granted: a claim names the server. Its own search_path is
/// pg_catalog alone, and its statements name every object by schema.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn snowflake_claim() -> i32 {
    privileges::require_superuser("snowflake_claim()");
    generator::get();
    let Some((layout, worker_id)) = gucs::generating().or_else(registry::generating) else {
        gucs::worker_id_unset()
    };
    if let Err(why) = own_schema::check() {
        own_schema::untrusted(&why);
    }
    write_claim(layout, worker_id)
}

/// The claim itself, in `snowflake.snowflake_claims` (a schema that only a superuser can rename:
/// the caller checked it in this transaction).
fn write_claim(layout: &Layout, worker_id: u32) -> i32 {
    let valid_for = gucs::claims_interval() * VALID_FOR_INTERVALS;
    // SAFETY: reads a value PostgreSQL set at start.
    let system_identifier = unsafe { pg_sys::GetSystemIdentifier() } as i64;
    // Two short statements rather than one: a clash's WARNING (from the table's trigger) shows
    // the statement as its context, in the server log of every renewal's caller.
    Spi::run_with_args(
        "INSERT INTO snowflake.snowflake_claims AS c
         VALUES ($1, $2, $3, $4, pg_catalog.now(), pg_catalog.now(),
                 pg_catalog.now() OPERATOR(pg_catalog.+) $5::pg_catalog.interval)
         ON CONFLICT (system_identifier, worker_id, layout) DO UPDATE SET
             node_name = excluded.node_name, last_seen = pg_catalog.now(),
             expires = excluded.expires,
             since = CASE WHEN c.expires OPERATOR(pg_catalog.<) pg_catalog.now()
                          THEN pg_catalog.now() ELSE c.since END",
        &[
            system_identifier.into(),
            (worker_id as i32).into(),
            layout.describe().into(),
            registry::node_name().into(),
            format!("{} ms", valid_for.as_millis()).into(),
        ],
    )
    .unwrap_or_else(|e| table_failed("write", &e));
    // A claim that had ended starts again (the CASE above): the time between is not claimed.
    let clashes = Spi::get_one_with_args::<i64>(
        "SELECT pg_catalog.count(*)
           FROM snowflake.snowflake_claims o, snowflake.snowflake_claims m
          WHERE m.system_identifier OPERATOR(pg_catalog.=) $1
            AND m.worker_id OPERATOR(pg_catalog.=) $2
            AND m.layout OPERATOR(pg_catalog.=) $3
            AND o.worker_id OPERATOR(pg_catalog.=) m.worker_id
            AND o.layout OPERATOR(pg_catalog.=) m.layout
            AND o.system_identifier OPERATOR(pg_catalog.<>) m.system_identifier
            AND o.since OPERATOR(pg_catalog.<) m.expires
            AND m.since OPERATOR(pg_catalog.<) o.expires",
        &[
            system_identifier.into(),
            (worker_id as i32).into(),
            layout.describe().into(),
        ],
    )
    .unwrap_or_else(|e| table_failed("read", &e))
    .unwrap_or(0);
    clashes as i32
}

extension_sql_file!(
    "../sql/claims_table.sql",
    name = "snowflake_claims",
    requires = ["own_schema", snowflake_claim],
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

/// SPI refused a statement on `snowflake_claims` (PostgreSQL's own errors, such as a dropped
/// column, pass through with their SQLSTATE; this is what SPI itself reports).
#[cold]
#[track_caller]
fn table_failed(action: &str, e: &pgrx::spi::SpiError) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("could not {action} the worker id claims in snowflake_claims: {e}"),
        "Check that snowflake_claims has the columns CREATE EXTENSION pg_snowflake gave it.",
    )
    .raise()
}
