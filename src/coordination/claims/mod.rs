//! Worker-id claims: each server records which worker id it uses, and since when, in the
//! `snowflake_claims` table (claims_table.sql), so that two servers that share a worker id are
//! found wherever their claims meet: at a subscriber that receives both through logical
//! replication, or in any database the tables are copied into.
//!
//! The identity of a server is its system identifier (`pg_control_system()`), which a physical
//! standby shares with its primary: a primary and its promoted standby legitimately share a
//! worker id (they never generate at once, see lease.rs), and they write the same claim.
//!
//! A background worker renews the claim every `snowflake.claims_interval` in
//! `snowflake.claims_database`, and deletes claims that ended more than `RETAINED` ago: the
//! table holds the claims in force and a week of ended ones. Without the worker, an operator or
//! a scheduler can call `snowflake_claim()` just as well.
//!
//! On a node of a Citus cluster (the claims database has Citus), the worker also gathers every
//! other node's own claims through Citus (`citus`), each node's answer checked (`answer`); a
//! flood of clash WARNINGs is rate-limited (`clash_log`).

mod clash_log;

use crate::background::{self, Reaches};
use crate::errors::{self, Code};
use crate::layout::Layout;
use crate::text::iso_unix;
use crate::{citus, clock, generator, gucs, identity, own_schema, privileges, registry, worker_id};
use pgrx::bgworkers::BackgroundWorker;
use pgrx::lwlock::PgLwLock;
use pgrx::prelude::*;
use pgrx::shmem::PGRXSharedMemory;
use std::time::{Duration, Instant};

/// How long a claim stays valid after its renewal: three intervals, so that one missed renewal
/// (a busy server, a slow replication link) does not end it, and twice the bound of one Citus
/// node's answer, which a gathering may spend on a node that does not answer (`citus`): 40 s
/// at the default 10 s, after which a server that stopped has no claim in force.
fn valid_for() -> Duration {
    let interval = gucs::claims_interval();
    interval * 3 + citus::claims::node_timeout(interval) * 2
}

/// How long a claim that ended is kept: a clash stays listed in `snowflake_clashes` (with
/// `ongoing` false) for that long after it ended, and then goes with the claims that made it.
/// 0.5.0 deleted nothing, and a node inventing clusters grew the table without end.
const RETAINED: &str = "7 days";

/// Sets up the clash log's shared memory and the status of the gatherings, and registers the
/// claims worker when `snowflake.claims_database` is set and a worker id is in use. Called from
/// `_PG_init` while the library is preloaded; the worker never during pg_upgrade, whose server
/// must not write user tables.
pub fn init() {
    clash_log::init();
    pgrx::pg_shmem_init!(STATUS);
    // SAFETY: a plain read of a flag set from the command line before _PG_init.
    if unsafe { pg_sys::IsBinaryUpgrade }
        || (gucs::fixed_worker_id().is_none() && gucs::registry().is_none())
    {
        return;
    }
    if gucs::claims_database().is_none() {
        return;
    }
    // After an error (the database dropped, the table altered), it tries again a little later.
    background::register(
        "pg_snowflake claims",
        "pg_snowflake_claims_main",
        Reaches::Database,
        Duration::from_secs(10),
    );
}

/// The worker: renews the claim at once and then every interval, while the extension is
/// installed in its database (at a version that has the schema `snowflake`), and on a Citus
/// node gathers the other nodes' claims.
///
/// It runs as the bootstrap superuser in a database where other roles may create objects, so
/// nothing it runs can resolve to one of theirs: it calls no SQL function (the claim is written
/// by `write_claim`, here), its search_path holds only pg_catalog (and pg_temp, last, where
/// PostgreSQL never looks for functions or operators), every function, operator and relation it
/// names is named by schema anyway, and the one schema it names is `snowflake`, which only a
/// superuser can rename (checked at every renewal: see own_schema.rs).
///
/// A SIGTERM (a fast shutdown, `pg_terminate_backend()`) ends it wherever it is: it cancels the
/// statement the worker runs (every wait, this worker's and Citus's for a node's answer, checks
/// for it), and marks the process to stop, a mark never cleared (`background`). 0.5.0 took
/// pgrx's handler alone, whose flag is cleared as it is read: a check inside the gathering could
/// use it up, and the worker then looped on past a fast shutdown (twice a stopped worker node
/// ended only with `-m immediate`). Exit code 1 has the postmaster start the worker again after
/// its restart time (at a shutdown it starts nothing).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn pg_snowflake_claims_main(_arg: pg_sys::Datum) {
    background::attach_signals();
    background::cancel_at_sigterm();
    let database = gucs::claims_database().expect("registered only with a database");
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    // The database's owner sets its defaults (ALTER DATABASE ... SET): the worker takes none
    // that could stop its writes, whatever they are.
    BackgroundWorker::transaction(|| {
        Spi::run(&mutant_text!(
            "SET search_path = pg_catalog, pg_temp;
             SET default_transaction_read_only = off;
             SET statement_timeout = 0;
             SET lock_timeout = 0;
             SET idle_in_transaction_session_timeout = 0",
            worker_defaults: "SET default_transaction_read_only = off;" => "",
        ))
        .expect("built-in settings")
    });
    let mut reported = Reported::default();
    let mut gatherer = citus::claims::Gatherer::default();
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: between transactions, as every PostgreSQL process reloads its settings.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        background::show_activity(Some("renewing this server's claim"));
        let skipped = BackgroundWorker::transaction(|| renew(&database));
        // After this node's claim is committed: an error here restarts the worker, whose claim
        // is written.
        let gathered = if skipped.is_some() { None } else { gather(&mut gatherer, &database) };
        background::show_activity(None);
        reported.report(skipped, gathered);
        if !background::wait(gucs::claims_interval()) {
            // SAFETY: proc_exit runs PostgreSQL's exit callbacks and does not return.
            mutant!(claims_restart, { unsafe { pg_sys::proc_exit(1) } }, { break });
        }
    }
}

/// Renews this server's claim and deletes the claims that ended more than `RETAINED` ago;
/// `Some` says why no claim was written.
fn renew(database: &str) -> Option<String> {
    if !installed() {
        return Some(format!("pg_snowflake is not installed in database {database}"));
    }
    if let Err(why) = own_schema::check() {
        return Some(format!("its schema snowflake cannot be used: {why}"));
    }
    Spi::run_with_args(
        "DELETE FROM snowflake.snowflake_claims c
          WHERE c.expires OPERATOR(pg_catalog.<)
                (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval)",
        &[mutant!(claims_retained, { RETAINED.into() }, { "1000 years".into() })],
    )
    .unwrap_or_else(|e| table_failed("delete the ended", &e));
    // With a registry, nothing to claim until it has leased a worker id.
    let worker_id = worker_id::current()?;
    write_claim(gucs::layout(), worker_id);
    None
}

/// On a Citus node, the other nodes' claims (`None` elsewhere), this node's claim renewed
/// between two nodes when it is due. A node of a Citus cluster whose claims database has no
/// Citus says so: its claim is written, and never meets the other nodes' (this setting is what
/// spares a worker id set by hand the refusal of `gucs::resolve`).
fn gather(
    gatherer: &mut citus::claims::Gatherer,
    database: &str,
) -> Option<citus::claims::Gathered> {
    let gathered =
        if mutant!(citus_claims, { BackgroundWorker::transaction(citus::installed) }, { false }) {
            let interval = gucs::claims_interval();
            let mut renewed = Instant::now();
            let worker =
                citus::claims::Worker { interval, layout: gucs::layout().describe(), table_failed };
            gatherer.gather(&worker, || {
                if renewed.elapsed() >= interval {
                    BackgroundWorker::transaction(|| renew(database));
                    renewed = Instant::now();
                }
            })
        } else if mutant!(claims_elsewhere, { citus::preloaded() }, { false }) {
            citus::claims::Gathered {
                unread: vec![format!(
                "Citus is not installed in database {database} (snowflake.claims_database): set \
                 snowflake.claims_database to the database where CREATE EXTENSION citus ran"
            )],
                ..citus::claims::Gathered::default()
            }
        } else {
            return None;
        };
    STATUS.exclusive().set(clock::now_unix_ms(), &gathered);
    Some(gathered)
}

/// What the worker last logged, so that each state is logged once, when it begins: at once when
/// the nodes it names change, and at most once a minute when only what they said changes (a
/// forging node varies its answer at every gathering: 0.6.0's review counted 52 WARNINGs in
/// 52 s). `snowflake_stats() -> 'claims'` has the last gathering's whole list.
#[derive(Default)]
struct Reported {
    skipped: Option<String>,
    unread: Logged,
    other_layouts: Logged,
}

/// One kind of WARNING: what it said last, and when.
#[derive(Default)]
struct Logged {
    items: Vec<String>,
    at: Option<Instant>,
}

impl Logged {
    /// Whether `items` are to be logged now: not empty, and other nodes than last time, or other
    /// words a minute or more after the last line.
    fn due(&mut self, items: &[String]) -> bool {
        let nodes =
            |list: &[String]| list.iter().map(|i| node_of(i).to_string()).collect::<Vec<_>>();
        let due = !items.is_empty()
            && (nodes(items) != nodes(&self.items)
                || (items != self.items.as_slice()
                    && mutant!(
                        claims_log_rate,
                        { self.at.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) },
                        { true }
                    )));
        if due {
            self.at = Some(Instant::now());
        }
        if due || items.is_empty() || nodes(items) != nodes(&self.items) {
            self.items = items.to_vec();
        }
        due
    }
}

/// The node an entry of the lists is about: its label, `node N (host:port)`.
fn node_of(entry: &str) -> &str {
    match entry.find(") ").or_else(|| entry.find(")'")) {
        Some(end) if entry.starts_with("node ") => &entry[..=end],
        _ => entry,
    }
}

impl Reported {
    fn report(&mut self, skipped: Option<String>, gathered: Option<citus::claims::Gathered>) {
        let gathered = gathered.unwrap_or_default();
        if self.unread.due(&gathered.unread) {
            errors::report(
                Code::ERRCODE_WARNING,
                format!(
                    "pg_snowflake: the claims of some Citus nodes cannot be read, and are not \
                     compared with this node's until they can: {}",
                    listed(&gathered.unread)
                ),
                "Make every node of the Citus cluster reachable from this one, with pg_snowflake \
                 installed and snowflake.claims_database naming the Citus database \
                 (docs/citus.md); snowflake_stats() -> 'claims' lists the nodes.",
            )
            .warn();
        }
        if self.other_layouts.due(&gathered.other_layouts) {
            errors::report(
                Code::ERRCODE_WARNING,
                format!(
                    "pg_snowflake: the nodes of this Citus cluster make ids of different layouts: \
                     this node's is {}, and {}: time ranges and snowflake_decode() read a \
                     distributed table's ids wrong",
                    gucs::layout().describe(),
                    listed(&gathered.other_layouts)
                ),
                "Give every node of the Citus cluster the same snowflake.layout (docs/citus.md).",
            )
            .warn();
        }
        if skipped != self.skipped {
            if let Some(why) = &skipped {
                errors::log(format!("pg_snowflake: no worker id claim is written: {why}"));
            }
            self.skipped = skipped;
        }
    }
}

/// The first few of `items`, for a log line whose length the number of nodes must not set.
fn listed(items: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = items[..items.len().min(SHOWN)].join("; ");
    if items.len() > SHOWN {
        text.push_str(&format!("; and {} more", items.len() - SHOWN));
    }
    text
}

/// The last gathering, for `snowflake_stats()`: when, how many nodes were read, and which were
/// not and why (as many as fit, one a line).
#[derive(Clone, Copy)]
pub struct Status {
    gathered_ms: i64,
    read: u32,
    unread: u32,
    text_len: u32,
    text: [u8; 2048],
}

impl Default for Status {
    fn default() -> Self {
        Status { gathered_ms: 0, read: 0, unread: 0, text_len: 0, text: [0; 2048] }
    }
}

// SAFETY: plain integers and bytes: valid at the same address in every process.
unsafe impl PGRXSharedMemory for Status {}

static STATUS: PgLwLock<Status> =
    // SAFETY: initialised by pg_shmem_init! in `init` before any process uses it.
    unsafe { PgLwLock::new(c"pg_snowflake claims status") };

impl Status {
    fn set(&mut self, now_ms: i64, gathered: &citus::claims::Gathered) {
        self.gathered_ms = now_ms;
        self.read = gathered.read as u32;
        self.unread = gathered.unread.len() as u32;
        // Whole lines only (each made printable, so without a newline of its own).
        let mut len = 0;
        for line in &gathered.unread {
            let bytes = line.as_bytes();
            if len + bytes.len() + 1 > self.text.len() {
                break;
            }
            self.text[len..len + bytes.len()].copy_from_slice(bytes);
            self.text[len + bytes.len()] = b'\n';
            len += bytes.len() + 1;
        }
        self.text_len = len as u32;
    }
}

/// `snowflake_stats() -> 'claims'`: `None` without `snowflake.claims_database`; `gathered` is
/// null until the claims worker has gathered a Citus cluster's claims (and elsewhere).
pub fn stats() -> Option<serde_json::Value> {
    gucs::claims_database()?;
    let status = *STATUS.share();
    let text = String::from_utf8_lossy(&status.text[..status.text_len as usize]).into_owned();
    Some(serde_json::json!({
        "gathered": (status.gathered_ms != 0).then(|| iso_unix(status.gathered_ms)),
        "nodes_read": status.read,
        "nodes_unread": status.unread,
        "unread": text.lines().collect::<Vec<_>>(),
    }))
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
    let (layout, worker_id) = worker_id::for_next_id();
    if let Err(why) = own_schema::check() {
        own_schema::untrusted(&why);
    }
    write_claim(layout, worker_id)
}

/// The claim itself, in `snowflake.snowflake_claims` (a schema that only a superuser can rename:
/// the caller checked it in this transaction), at this data directory's place (`identity`): a copy
/// of the data directory, another start of the cluster elsewhere, makes a claim of its own.
///
/// It leaves the claims of other places alone, its primary's before a failover among them: the
/// clash trigger and `snowflake_clashes` take two claims of one cluster for a clash only while
/// each was seen after the other began (0.6.0's review: ending the other claims here wrote
/// other servers' rows, and a copy's write ended its original's claim at the hub).
fn write_claim(layout: &Layout, worker_id: u32) -> i32 {
    let valid_for = valid_for();
    // SAFETY: reads a value PostgreSQL set at start.
    let system_identifier = unsafe { pg_sys::GetSystemIdentifier() } as i64;
    let place = mutant!(claims_place, { identity::place().description }, { String::new() });
    let key = [
        system_identifier.into(),
        (worker_id as i32).into(),
        layout.describe().into(),
        place.as_str().into(),
    ];
    // Two short statements rather than one: a clash's WARNING (from the table's trigger) shows
    // the statement as its context, in the server log of every renewal's caller.
    Spi::run_with_args(
        "INSERT INTO snowflake.snowflake_claims AS c
         VALUES ($1, $2, $3, $5, pg_catalog.now(), pg_catalog.now(),
                 pg_catalog.now() OPERATOR(pg_catalog.+) $6::pg_catalog.interval, $4)
         ON CONFLICT (system_identifier, worker_id, layout, place) DO UPDATE SET
             node_name = excluded.node_name, last_seen = pg_catalog.now(),
             expires = excluded.expires,
             since = CASE WHEN c.expires OPERATOR(pg_catalog.<) pg_catalog.now()
                          THEN pg_catalog.now() ELSE c.since END",
        &[
            system_identifier.into(),
            (worker_id as i32).into(),
            layout.describe().into(),
            place.as_str().into(),
            registry::node_name().into(),
            format!("{} ms", valid_for.as_millis()).into(),
        ],
    )
    .unwrap_or_else(|e| table_failed("write", &e));
    // A claim that had ended starts again (the CASE above): the time between is not claimed.
    // The clashes as the view defines them (sql/clashes.sql), this claim on either side.
    let clashes = Spi::get_one_with_args::<i64>(
        "SELECT pg_catalog.count(*) FROM snowflake.snowflake_clashes c
          WHERE c.worker_id OPERATOR(pg_catalog.=) $2
            AND c.layout OPERATOR(pg_catalog.=) $3
            AND ((c.system_identifier, c.place) OPERATOR(pg_catalog.=) ($1, $4)
                 OR (c.other_system_identifier, c.other_place) OPERATOR(pg_catalog.=) ($1, $4))",
        &key,
    )
    .unwrap_or_else(|e| table_failed("read", &e))
    .unwrap_or(0);
    clashes as i32
}

extension_sql_file! { "../../../sql/claims_table.sql", name = "snowflake_claims", requires = ["own_schema", snowflake_claim] }
extension_sql_file! { "../../../sql/claims_check.sql", name = "snowflake_claims_check", requires = ["snowflake_claims", "snowflake_clash_warning_due"] }
extension_sql_file! { "../../../sql/claims_merge.sql", name = "snowflake_claims_merge", requires = ["snowflake_claims"] }
extension_sql_file! { "../../../sql/clashes.sql", name = "snowflake_clashes", requires = ["snowflake_claims"] }
extension_sql_file! { "../../../sql/claims_index.sql", name = "snowflake_claims_worker_id", requires = ["snowflake_claims"] }
extension_sql_file! { "../../../sql/claims_nodes.sql", name = "snowflake_claims_nodes", requires = ["own_schema"] }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_logged_when_its_nodes_change_and_its_words_once_a_minute() {
        let mut logged = Logged::default();
        let a = |why: &str| vec![format!("node 3 (10.0.0.3:5432) answered {why}")];
        assert!(logged.due(&a("x")), "a first problem");
        assert!(!logged.due(&a("x")), "the same again");
        assert!(!logged.due(&a("y")), "other words within the minute");
        let two = vec![a("y")[0].clone(), "node 4 (10.0.0.4:5432) did not answer".into()];
        assert!(logged.due(&two), "another node");
        assert!(!logged.due(&[]), "nothing to say");
        assert!(logged.due(&a("z")), "a problem again after none");
        logged.at = Some(Instant::now() - Duration::from_secs(61));
        assert!(logged.due(&a("w")), "other words a minute later");
        assert_eq!(node_of("node 2 (h:1)'s is sonyflake"), "node 2 (h:1)");
    }
}
