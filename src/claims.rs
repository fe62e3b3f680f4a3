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
//!
//! On a node of a Citus cluster (the claims database has Citus), the worker also reads every
//! node's own claim through Citus (`run_command_on_all_nodes`) and writes it here: the claims of
//! a Citus cluster's nodes meet in every node's table, where the trigger reports two nodes that
//! make ids with one worker id, within one interval of the second's start, without any
//! replication set up (docs/citus.md).

use crate::background::{self, Reaches};
use crate::errors::{self, Code};
use crate::layout::Layout;
use crate::{generator, gucs, own_schema, privileges, registry, subtransaction};
use pgrx::bgworkers::BackgroundWorker;
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
    // After an error (the database dropped, the table altered), it tries again a little later.
    background::register(
        "pg_snowflake claims",
        "pg_snowflake_claims_main",
        Reaches::Database,
        Duration::from_secs(10),
    );
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
// mutant: worker_defaults
// mutant: claims_restart
// mutant: citus_claims
// mutant: claims_elsewhere
pub extern "C-unwind" fn pg_snowflake_claims_main(_arg: pg_sys::Datum) {
    background::attach_signals();
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
    // What the last gathering found, each logged once per change.
    let mut gathered_before = Gathered::default();
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: between transactions, as every PostgreSQL process reloads its settings.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let why_not = BackgroundWorker::transaction(|| {
            if !installed() {
                return Some(format!("pg_snowflake is not installed in database {database}"));
            }
            if let Err(why) = own_schema::check() {
                return Some(format!("its schema snowflake cannot be used: {why}"));
            }
            // With a registry, nothing to claim until it has leased a worker id.
            let worker_id = registry::worker_id()?;
            write_claim(gucs::layout(), worker_id);
            None
        });
        // In a transaction of its own, after this node's claim is committed: an error here
        // (Citus in a state it cannot answer from) restarts the worker, whose claim is written.
        let gathered = BackgroundWorker::transaction(|| {
            if why_not.is_some() {
                Gathered::default()
            } else if citus_installed() {
                gather_citus_claims()
            } else if gucs::citus_preloaded() {
                // A node of a Citus cluster whose claims database is another one: its claim is
                // written, and never meets the other nodes' (this setting is what spares a
                // worker id set by hand the refusal of `gucs::resolve`).
                Gathered {
                    unread: vec![format!(
                        "Citus is not installed in database {database} \
                         (snowflake.claims_database): set snowflake.claims_database to the \
                         database where CREATE EXTENSION citus ran"
                    )],
                    ..Gathered::default()
                }
            } else {
                Gathered::default()
            }
        });
        if gathered.unread != gathered_before.unread && !gathered.unread.is_empty() {
            errors::report(
                Code::ERRCODE_WARNING,
                format!(
                    "pg_snowflake: the claims of some Citus nodes cannot be read, and are not \
                     compared with this node's until they can: {}",
                    listed(&gathered.unread)
                ),
                "Make every node of the Citus cluster reachable from this one, with pg_snowflake \
                 installed and snowflake.claims_database naming the Citus database (docs/citus.md).",
            )
            .warn();
        }
        if gathered.other_layouts != gathered_before.other_layouts
            && !gathered.other_layouts.is_empty()
        {
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
        gathered_before = gathered;
        if why_not != skipped {
            if let Some(why) = &why_not {
                errors::log(format!("pg_snowflake: no worker id claim is written: {why}"));
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

/// Whether Citus is installed in this database (at a release that has
/// `run_command_on_all_nodes`, 11.0 and later, and `master_run_on_worker`: the functions named
/// below).
fn citus_installed() -> bool {
    Spi::get_one::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e
                         WHERE e.extname OPERATOR(pg_catalog.=) 'citus')
            AND pg_catalog.to_regprocedure(
                    'pg_catalog.run_command_on_all_nodes(pg_catalog.text, pg_catalog.bool, \
                     pg_catalog.bool)') IS NOT NULL
            AND pg_catalog.to_regprocedure(
                    'pg_catalog.master_run_on_worker(pg_catalog.text[], pg_catalog.int4[], \
                     pg_catalog.text[], pg_catalog.bool)') IS NOT NULL",
    ) == Ok(Some(true))
}

/// One node's answer to the read of its claims (`master_run_on_worker`).
struct Answer {
    host: String,
    port: i32,
    /// The answer's bytes, when the read succeeded and is no larger than `MAX_ANSWER`.
    claims: Option<Vec<u8>>,
    /// Otherwise why not: the node's error, or the answer's size.
    why_not: Vec<u8>,
}

/// What one gathering of the Citus nodes' claims found.
#[derive(Default, PartialEq)]
struct Gathered {
    /// The nodes whose claims were not read, and why.
    unread: Vec<String>,
    /// The nodes whose live claims are of another layout than this node's, and theirs. The
    /// immutable functions (`snowflake_decode`, `snowflake_timestamp`) run on the shards, in the
    /// layout of the node that holds each, and time ranges are cut in the layout of the node
    /// that plans the query: on nodes of different layouts both read ids wrong, and the
    /// registry, which holds a namespace to one layout, is not there to refuse it.
    other_layouts: Vec<String>,
}

/// Every node's own claims (in the table of each node, written by its claims worker), read
/// through Citus and written into this node's table; the table's trigger warns of each clash
/// once. Citus's functions are in pg_catalog, where only a superuser creates functions. Returns
/// the nodes whose claims were not read (unreachable, without pg_snowflake, or answering what is
/// no list of one cluster's claims), which are passed over until the next interval, and the
/// nodes of another layout.
///
/// The other nodes are peers, and one may be broken or hostile:
/// - each node runs what it is sent as a superuser, in a database where other roles may create
///   objects. So it is first asked only whether its `snowflake.snowflake_claims` is a member of
///   pg_snowflake (a question of the catalogs alone), and only the nodes that say so are sent
///   the read (`master_run_on_worker`, the function under `run_command_on_all_nodes`). Asked in
///   one statement (`CASE WHEN <member> THEN <read> END`), a node planned the read before it
///   checked: a role with CREATE there, where pg_snowflake is not installed, made a
///   `snowflake.snowflake_claims` view over an IMMUTABLE function, which the planner ran, as the
///   superuser, at every gathering (found by a hostile review). Between the two, only a
///   superuser of that node can change what the name is (the schema and the table are the
///   extension's, owned by the superuser who created it);
/// - what comes back is taken within bounds: 64 kB an answer, valid UTF-8 (read as bytes), at
///   most `MAX_CLAIMS` claims, all of one system identifier that no other node answers (a copy
///   of one node's data directory answers as that node), not this node's own, worker ids within
///   22 bits (the widest layout's), names cut to 200 characters with control characters
///   replaced, `expires` at most an hour ahead, one row a key, and a row replaces a gathered one
///   only when seen later. One forged answer of 380 claims of fresh system identifiers had every
///   node log 144,020 WARNINGs of clashes (315 MB) each interval, and one of stale times erased
///   a real clash from `snowflake_clashes`;
/// - each node's answer is written in a subtransaction of its own: one that is no list of
///   claims (no JSON, a worker id past 32 bits: a node whose table was altered, or a later
///   release's) is passed over, and the other nodes' claims are still read (one such answer
///   failed the whole gather, every interval, so no clash was found anywhere);
/// - a node that accepts the query and never answers would hold this worker in Citus's wait,
///   which SIGTERM does not end (pgrx's handler only sets a flag): both questions time out
///   after `GATHER_TIMEOUT_MS`, and a shutdown waits about that long at most (the writes stop
///   at SIGTERM too).
// mutant: citus_layouts
// mutant: claims_planted
// mutant: claims_gather_timeout
fn gather_citus_claims() -> Gathered {
    const IS_OURS: &str = "SELECT EXISTS (
              SELECT FROM pg_catalog.pg_depend d
                JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
                 AND d.objid OPERATOR(pg_catalog.=)
                     pg_catalog.to_regclass('snowflake.snowflake_claims')::pg_catalog.oid
                 AND d.deptype OPERATOR(pg_catalog.=) 'e'
                 AND e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')";
    const OWN_CLAIMS: &str = "SELECT COALESCE(pg_catalog.json_agg(c), '[]'::pg_catalog.json)
          FROM snowflake.snowflake_claims c
         WHERE c.system_identifier OPERATOR(pg_catalog.=)
               (SELECT s.system_identifier FROM pg_catalog.pg_control_system() s)";
    // One node's answer (of one system identifier, checked before), into this node's table; the
    // layouts of its claims in force that are not this node's.
    const WRITE_CLAIMS: &str = "WITH claims AS (
             SELECT DISTINCT ON (x.system_identifier, x.worker_id, x.layout)
                    x.system_identifier, x.worker_id,
                    pg_catalog.regexp_replace(pg_catalog.left(x.layout, 200), '[[:cntrl:]]', '?',
                                              'g') AS layout,
                    pg_catalog.regexp_replace(pg_catalog.left(x.node_name, 200), '[[:cntrl:]]',
                                              '?', 'g') AS node_name,
                    x.since, x.last_seen,
                    LEAST(x.expires, pg_catalog.now() OPERATOR(pg_catalog.+)
                                     '1 hour'::pg_catalog.interval) AS expires
               FROM pg_catalog.json_populate_recordset(NULL::snowflake.snowflake_claims,
                                                       $1::pg_catalog.json) x
              WHERE x.system_identifier OPERATOR(pg_catalog.<>) $2
                AND x.worker_id OPERATOR(pg_catalog.>=) 0
                AND x.worker_id OPERATOR(pg_catalog.<) 4194304
                AND x.layout IS NOT NULL AND x.node_name IS NOT NULL AND x.since IS NOT NULL
                AND x.last_seen IS NOT NULL AND x.expires IS NOT NULL
              ORDER BY x.system_identifier, x.worker_id, x.layout, x.last_seen DESC),
         written AS (
             INSERT INTO snowflake.snowflake_claims AS c
             SELECT * FROM claims
             ON CONFLICT (system_identifier, worker_id, layout) DO UPDATE SET
                 node_name = excluded.node_name, since = excluded.since,
                 last_seen = excluded.last_seen, expires = excluded.expires
              WHERE excluded.last_seen OPERATOR(pg_catalog.>) c.last_seen
             RETURNING c.layout, c.expires)
         SELECT pg_catalog.left(pg_catalog.string_agg(DISTINCT w.layout, ', '), 400)
           FROM written w
          WHERE w.expires OPERATOR(pg_catalog.>) pg_catalog.now()
            AND w.layout OPERATOR(pg_catalog.<>) $3";
    const MAX_ANSWER: i32 = 65_536;
    // SAFETY: reads a value PostgreSQL set at start.
    let own = unsafe { pg_sys::GetSystemIdentifier() } as i64;
    let mut gathered = Gathered::default();
    let answers = {
        let _timeout = GatherTimeout::arm();
        // Which nodes hold pg_snowflake's claims table, and where each is.
        let nodes: Vec<(String, String, i32, bool, Vec<u8>, bool)> = Spi::connect(|client| {
            client
                .select(
                    "SELECT pg_catalog.format('%s (%s:%s)', r.nodeid, h.host, h.port), h.host,
                            h.port, r.success AND r.result OPERATOR(pg_catalog.=) 't',
                            pg_catalog.textsend(pg_catalog.left(r.result, 200)),
                            COALESCE(d.groupid OPERATOR(pg_catalog.=)
                                         (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g),
                                     r.nodeid OPERATOR(pg_catalog.=) 0)
                       FROM pg_catalog.run_command_on_all_nodes($1::pg_catalog.text) r
                       LEFT JOIN pg_catalog.pg_dist_node d
                              ON d.nodeid OPERATOR(pg_catalog.=) r.nodeid
                      CROSS JOIN LATERAL (
                            SELECT COALESCE(d.nodename,
                                            pg_catalog.current_setting('citus.local_hostname'))
                                       AS host,
                                   COALESCE(d.nodeport,
                                            pg_catalog.current_setting('port')::pg_catalog.int4)
                                       AS port) h
                      ORDER BY r.nodeid",
                    None,
                    &[IS_OURS.into()],
                )?
                .map(|row| {
                    Ok((
                        row.get::<String>(1)?.unwrap_or_default(),
                        row.get::<String>(2)?.unwrap_or_default(),
                        row.get::<i32>(3)?.unwrap_or_default(),
                        row.get::<bool>(4)?.unwrap_or_default(),
                        row.get::<Vec<u8>>(5)?.unwrap_or_default(),
                        row.get::<bool>(6)?.unwrap_or_default(),
                    ))
                })
                .collect::<Result<_, pgrx::spi::SpiError>>()
        })
        .unwrap_or_else(|e| table_failed("gather", &e));
        let mut ours = Vec::new();
        for (label, host, port, is_ours, said, local) in nodes {
            if local {
                // This node: its claim is written by this worker.
                continue;
            } else if is_ours {
                ours.push((label, host, port));
            } else if said == b"f" {
                gathered.unread.push(format!(
                    "node {label} has no snowflake_claims of pg_snowflake (is pg_snowflake \
                     installed there?)"
                ));
            } else {
                gathered.unread.push(format!("node {label} answered {}", printable(&said)));
            }
        }
        // The read, sent only to those.
        let answers: Vec<Answer> = if ours.is_empty() {
            Vec::new()
        } else {
            let hosts: Vec<String> = ours.iter().map(|n| n.1.clone()).collect();
            let ports: Vec<i32> = ours.iter().map(|n| n.2).collect();
            Spi::connect(|client| {
                client
                    .select(
                        "SELECT m.node_name, m.node_port,
                                CASE WHEN m.success AND pg_catalog.octet_length(m.result)
                                                        OPERATOR(pg_catalog.<=) $4
                                     THEN pg_catalog.textsend(m.result) END,
                                pg_catalog.textsend(
                                    CASE WHEN NOT m.success THEN pg_catalog.left(m.result, 200)
                                         ELSE pg_catalog.format('%s bytes, more than %s',
                                                  pg_catalog.octet_length(m.result), $4)
                                    END)
                           FROM pg_catalog.master_run_on_worker(
                                    $1::pg_catalog.text[], $2::pg_catalog.int4[],
                                    pg_catalog.array_fill($3::pg_catalog.text,
                                        ARRAY[pg_catalog.cardinality($1::pg_catalog.text[])]),
                                    true) m",
                        None,
                        &[hosts.into(), ports.into(), OWN_CLAIMS.into(), MAX_ANSWER.into()],
                    )?
                    .map(|row| {
                        Ok(Answer {
                            host: row.get::<String>(1)?.unwrap_or_default(),
                            port: row.get::<i32>(2)?.unwrap_or_default(),
                            claims: row.get::<Vec<u8>>(3)?,
                            why_not: row.get::<Vec<u8>>(4)?.unwrap_or_default(),
                        })
                    })
                    .collect::<Result<_, pgrx::spi::SpiError>>()
            })
            .unwrap_or_else(|e| table_failed("gather", &e))
        };
        // Back to the nodes' names, in the order of their ids.
        ours.into_iter()
            .map(|(label, host, port)| {
                let answer = answers.iter().find(|a| a.host == host && a.port == port);
                (label, answer.map(|a| (a.claims.clone(), a.why_not.clone())))
            })
            .collect::<Vec<_>>()
    };
    let layout = gucs::layout().describe();
    // Which node answered for which system identifier.
    let mut clusters: Vec<(i64, String)> = Vec::new();
    for (node, answer) in answers {
        if BackgroundWorker::sigterm_received() {
            break;
        }
        let claims = match answer {
            None => Err("nothing".to_string()),
            Some((None, why)) => Err(printable(&why)),
            Some((Some(bytes), _)) => one_clusters_claims(bytes, own, &clusters),
        };
        let (claims, sysid) = match claims {
            Ok(claims) => claims,
            Err(why) => {
                gathered.unread.push(format!("node {node} answered {why}"));
                continue;
            }
        };
        match subtransaction::catching(|| {
            Spi::get_one_with_args::<String>(
                WRITE_CLAIMS,
                &[claims.as_str().into(), own.into(), layout.as_str().into()],
            )
        }) {
            Ok(written) => {
                let other = written.unwrap_or_else(|e| table_failed("gather", &e));
                if let Some(sysid) = sysid {
                    clusters.push((sysid, node.clone()));
                }
                if let Some(other) = other {
                    // mutant: citus_layouts
                    gathered.other_layouts.push(format!("node {node}'s is {other}"));
                }
            }
            Err(error) => gathered.unread.push(format!(
                "node {node} answered what is no list of claims ({}): {}",
                printable(error.as_bytes()),
                printable(claims.as_bytes())
            )),
        }
    }
    gathered
}

/// The most claims one node's answer may hold: a node writes one a layout and worker id it
/// used, a handful in a node's life.
const MAX_CLAIMS: usize = 64;

/// One node's answer, checked before it is written: UTF-8, a JSON array of at most `MAX_CLAIMS`
/// claims, all of one system identifier (returned) that no node answered before in this
/// gathering. What the claims hold is checked in SQL as they are written.
// mutant: claims_cluster_once
fn one_clusters_claims(
    bytes: Vec<u8>,
    own: i64,
    clusters: &[(i64, String)],
) -> Result<(String, Option<i64>), String> {
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("what is not UTF-8: {}", printable(e.as_bytes())))?;
    let parsed: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| format!("what is no list of claims ({e}): {}", printable(text.as_bytes())))?;
    if parsed.len() > MAX_CLAIMS {
        return Err(format!("{} claims, more than the {MAX_CLAIMS} of one node", parsed.len()));
    }
    let mut sysids: Vec<i64> = parsed
        .iter()
        .filter_map(|c| c.get("system_identifier").and_then(serde_json::Value::as_i64))
        .collect();
    sysids.sort_unstable();
    sysids.dedup();
    let sysid = match sysids.as_slice() {
        [] => None,
        [one] => Some(*one),
        more => {
            return Err(format!(
                "claims of {} system identifiers, where a node has one",
                more.len()
            ))
        }
    };
    if let Some(sysid) = sysid {
        if sysid == own {
            return Err("claims of this node's own system identifier (a copy of this node's data \
                 directory?)"
                .to_string());
        }
        if let Some((_, other)) = clusters.iter().find(|(s, _)| *s == sysid) {
            return Err(format!(
                "claims of the system identifier node {other} answered too (a copy of one \
                 node's data directory?)"
            ));
        }
    }
    Ok((text, sysid))
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

/// At most 200 characters of what a peer sent, for a log line: control characters (a newline
/// would start a line of its own in the log) and invalid UTF-8 replaced.
fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .take(200)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// How long the claims worker waits for the Citus nodes' answers, each interval. Citus answers
/// in milliseconds here; a node that takes longer is no use to a check made every interval.
const GATHER_TIMEOUT_MS: i32 = 5_000;

/// PostgreSQL's statement timeout, armed for the gather: a background worker's SPI statements
/// get none of their own (the server arms it for a client's statements), and the timeout's
/// SIGINT cancels Citus's wait as it would a client's. Disarmed when dropped.
struct GatherTimeout;

impl GatherTimeout {
    fn arm() -> GatherTimeout {
        // SAFETY: a registered timeout of this backend (InitPostgres registers
        // STATEMENT_TIMEOUT in every backend with a database connection).
        unsafe { enable_timeout_after(STATEMENT_TIMEOUT, GATHER_TIMEOUT_MS) };
        GatherTimeout
    }
}

impl Drop for GatherTimeout {
    fn drop(&mut self) {
        // SAFETY: disabling a timeout that may have fired already is allowed; a cancel it asked
        // for after the statements it bounds ended is no longer wanted (it would cancel the
        // first write of a node's claims, and name a healthy node as unread).
        unsafe {
            let fired = get_timeout_indicator(STATEMENT_TIMEOUT, false);
            disable_timeout(STATEMENT_TIMEOUT, false);
            if fired {
                pg_sys::QueryCancelPending = 0;
            }
        }
    }
}

/// utils/timeout.h, which pgrx's bindings leave out: `STATEMENT_TIMEOUT` is the fourth
/// `TimeoutId` in 15 to 19's headers (read there).
const STATEMENT_TIMEOUT: std::ffi::c_int = 3;

unsafe extern "C-unwind" {
    fn enable_timeout_after(id: std::ffi::c_int, delay_ms: std::ffi::c_int);
    fn disable_timeout(id: std::ffi::c_int, keep_indicator: bool);
    fn get_timeout_indicator(id: std::ffi::c_int, reset_indicator: bool) -> bool;
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
        &[system_identifier.into(), (worker_id as i32).into(), layout.describe().into()],
    )
    .unwrap_or_else(|e| table_failed("read", &e))
    .unwrap_or(0);
    clashes as i32
}

extension_sql_file! { "../sql/claims_table.sql", name = "snowflake_claims", requires = ["own_schema", snowflake_claim] }
extension_sql_file! { "../sql/claims_check.sql", name = "snowflake_claims_check", requires = ["snowflake_claims"] }
extension_sql_file! { "../sql/clashes.sql", name = "snowflake_clashes", requires = ["snowflake_claims"] }

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
