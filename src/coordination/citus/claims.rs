//! The claims of a Citus cluster's nodes, gathered by each node's claims worker: every other
//! node's own claims (in the table of each node, written by its claims worker) are read through
//! Citus and written into this node's table, where the table's trigger reports two nodes that
//! make ids with one worker id, within one interval of the second's start, without any
//! replication set up (docs/citus.md).
//!
//! The other nodes are peers, and one may be broken or hostile (a superuser there decides what
//! it answers):
//! - each node runs what it is sent as a superuser, in a database where other roles may create
//!   objects. So it is first asked only whether its `snowflake.snowflake_claims` is a member of
//!   pg_snowflake (a question of the catalogs alone), and only if it says so is it sent the
//!   read (`master_run_on_worker`). Asked in one statement (`CASE WHEN <member> THEN <read>
//!   END`), a node planned the read before it checked: a role with CREATE there, where
//!   pg_snowflake is not installed, made a `snowflake.snowflake_claims` view over an IMMUTABLE
//!   function, which the planner ran, as the superuser, at every gathering (found by a hostile
//!   review);
//! - each node is asked on its own, in a transaction of its own, within `node_timeout` (the
//!   claims interval, 1 to 5 s): one node that takes the query and never answers (stopped, a
//!   hung disk, a half-open connection) costs that long, and the others' claims are still read.
//!   In 0.5.0 one statement asked every node at once, and its timeout cancelled all of them:
//!   with one worker stopped, the coordinator read nothing of the healthy worker either, and a
//!   real clash showed `ongoing = f`. A node that did not answer is asked again in turn, one
//!   such node a gathering, so that a gathering takes at most one node's bound longer than the
//!   answering nodes take: a claim stays valid long enough for that (`claims::valid_for`);
//! - its answer is read by `answer::read` (types, times, one cluster, a bounded size) and
//!   written from what was parsed there, in a subtransaction of its own;
//! - a node speaks for one cluster, which no other node speaks for and which is not this node's
//!   own (a copy of a data directory answers as its original); a node's cluster changes at most
//!   once in `REBIND_AFTER_MS` (a real node gets a new system identifier only when it is made
//!   anew), so a node inventing clusters adds at most `answer::MAX_CLAIMS` claims an hour to the
//!   table (in 0.5.0, 444 rows of 441 invented clusters in about 10 s).

use super::answer::{self, Answer, Claim};
use crate::text::printable;
use crate::{background, clock, subtransaction};
use pgrx::bgworkers::BackgroundWorker;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi::SpiError;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one node may take to answer both questions: the claims interval, at least 1 s and
/// at most 5 s. Citus answers in milliseconds on a cluster's network; a node that takes longer
/// is no use to a check made every interval.
pub fn node_timeout(interval: Duration) -> Duration {
    interval.clamp(Duration::from_secs(1), Duration::from_secs(5))
}

/// How often a node may change the cluster it speaks for.
const REBIND_AFTER_MS: i64 = 3_600_000;

/// The most bytes of one node's answer (64 claims take about 16 kB).
const MAX_ANSWER: i32 = 65_536;

/// What one gathering found, for the log and `snowflake_stats()`.
#[derive(Default, PartialEq)]
pub struct Gathered {
    /// The nodes whose claims were not read, and why.
    pub unread: Vec<String>,
    /// The nodes whose live claims are of another layout than this node's, and theirs. The
    /// immutable functions (`snowflake_decode`, `snowflake_timestamp`) run on the shards, in the
    /// layout of the node that holds each, and time ranges are cut in the layout of the node
    /// that plans the query: on nodes of different layouts both read ids wrong, and the
    /// registry, which holds a namespace to one layout, is not there to refuse it.
    pub other_layouts: Vec<String>,
    /// How many nodes' claims were read.
    pub read: usize,
}

/// A node of the Citus cluster, as this node's metadata (`pg_dist_node`) names it.
struct Node {
    id: i32,
    host: String,
    port: i32,
}

impl Node {
    fn label(&self) -> String {
        format!("node {} ({}:{})", self.id, printable(self.host.as_bytes()), self.port)
    }
}

/// The cluster a node speaks for, and since when (Unix ms).
struct Binding {
    system_identifier: i64,
    since_ms: i64,
}

/// What the claims worker (the module `claims`) gives a gathering: its interval, this node's layout,
/// and its error for a statement SPI refused on its tables.
pub struct Worker {
    pub interval: Duration,
    /// `Layout::describe()`'s.
    pub layout: String,
    pub table_failed: fn(&str, &SpiError) -> !,
}

/// The claims worker's memory of the nodes, from one gathering to the next.
#[derive(Default)]
pub struct Gatherer {
    /// By node id (`pg_dist_node.nodeid`, which a node keeps when its host or port changes):
    /// read from `snowflake.snowflake_claims_nodes` at each gathering and written back, so that
    /// a restart of the worker forgets nothing (kept here too, where the table is missing: a
    /// database not yet updated to 0.6.0).
    bound: BTreeMap<i32, Binding>,
    /// The nodes that did not answer within their bound, and when each was asked last (Unix
    /// ms): asked again one a gathering, the one asked longest ago first.
    silent: BTreeMap<i32, i64>,
}

impl Gatherer {
    /// Reads the other nodes' claims, each node in a transaction of its own, and writes them
    /// here. `between` runs between two nodes (the worker renews its own claim there when it
    /// is due). Call outside a transaction.
    pub fn gather(&mut self, worker: &Worker, mut between: impl FnMut()) -> Gathered {
        let mut gathered = Gathered::default();
        let failed = worker.table_failed;
        let (nodes, bound) =
            BackgroundWorker::transaction(|| (other_nodes(failed), bindings(failed)));
        mutant!(
            claims_bindings_kept,
            {
                if let Some(bound) = bound {
                    self.bound = bound;
                }
            },
            {
                let _ = bound;
            }
        );
        self.silent.retain(|id, _| nodes.iter().any(|n| n.id == *id));
        let timeout = node_timeout(worker.interval);
        let now_ms = clock::now_unix_ms();
        let mut answers: Vec<(Node, Answer)> = Vec::new();
        for node in self.in_turn(nodes, &mut gathered, timeout) {
            // A SIGTERM cancelled the last node's question: the worker is to stop, and asks no
            // other node.
            if background::stopping() {
                return gathered;
            }
            between();
            background::show_activity(Some(&format!("asking {} for its claims", node.label())));
            let asked_ms = clock::now_unix_ms();
            match BackgroundWorker::transaction(|| ask(&node, asked_ms * 1000, timeout)) {
                Ok(answer) => {
                    self.silent.remove(&node.id);
                    answers.push((node, answer));
                }
                Err(Unanswered::Silent) => {
                    self.silent.insert(node.id, asked_ms);
                    mutant!(claims_per_node, {}, {
                        answers.clear();
                    });
                    gathered.unread.push(format!(
                        "{} did not answer within {} s",
                        node.label(),
                        timeout.as_secs()
                    ));
                }
                Err(Unanswered::Said(why)) => {
                    self.silent.remove(&node.id);
                    gathered.unread.push(format!("{} {why}", node.label()));
                }
            }
        }
        // SAFETY: reads a value PostgreSQL set at start.
        let own = unsafe { pg_sys::GetSystemIdentifier() } as i64;
        let refusals = self.refusals(&answers, own, now_ms);
        let mut accepted = Vec::new();
        for ((node, answer), refused) in answers.into_iter().zip(refusals) {
            match refused {
                Some(why) => gathered.unread.push(format!("{} answered {why}", node.label())),
                None => {
                    self.bind(&node, &answer, now_ms);
                    accepted.push((node, answer));
                }
            }
        }
        background::show_activity(Some("writing the claims of the Citus nodes"));
        let layout = worker.layout.as_str();
        let bindings: Vec<(i32, i64, i64)> =
            self.bound.iter().map(|(id, b)| (*id, b.system_identifier, b.since_ms)).collect();
        let written = std::panic::AssertUnwindSafe(&mut gathered);
        BackgroundWorker::transaction(move || {
            let gathered = { written }.0;
            for (node, answer) in &accepted {
                write_answer(node, answer, layout, gathered);
            }
            keep_bindings(&bindings, failed);
        });
        gathered
    }

    /// The nodes to ask in this gathering: every node that answered last time, and of those
    /// that did not, the one asked longest ago; the others are listed as unread.
    fn in_turn(&self, nodes: Vec<Node>, gathered: &mut Gathered, timeout: Duration) -> Vec<Node> {
        let retried = nodes
            .iter()
            .filter_map(|n| self.silent.get(&n.id).map(|at| (*at, n.id)))
            .min()
            .map(|(_, id)| id);
        let mut asked = Vec::new();
        for node in nodes {
            if self.silent.contains_key(&node.id) && Some(node.id) != retried {
                gathered.unread.push(format!(
                    "{} did not answer within {} s (asked again in turn)",
                    node.label(),
                    timeout.as_secs()
                ));
            } else {
                asked.push(node);
            }
        }
        asked
    }

    fn bind(&mut self, node: &Node, answer: &Answer, now_ms: i64) {
        let Some(sysid) = answer.system_identifier() else { return };
        let binding = self
            .bound
            .entry(node.id)
            .or_insert(Binding { system_identifier: sysid, since_ms: now_ms });
        if binding.system_identifier != sysid {
            *binding = Binding { system_identifier: sysid, since_ms: now_ms };
        }
    }

    /// For each answer, why it is refused, if it is: the cluster it speaks for is this node's,
    /// or another node's (bound to it by an earlier gathering), or answered by another node in
    /// this gathering while bound to neither (both are refused: nothing tells which one is the
    /// cluster), or not the one this node spoke for less than `REBIND_AFTER_MS` ago. A node
    /// that echoes the cluster of a node that answered before it is refused, and that node's
    /// claims are read as before.
    fn refusals(&self, answers: &[(Node, Answer)], own: i64, now_ms: i64) -> Vec<Option<String>> {
        answers
            .iter()
            .map(|(node, answer)| {
                let sysid = answer.system_identifier()?;
                if sysid == own {
                    return Some(
                        "claims of this node's own system identifier (a copy of this node's \
                         data directory, or a node forging claims)"
                            .to_string(),
                    );
                }
                match self.bound.iter().find(|(_, b)| {
                    mutant!(claims_cluster_once, { true }, { false })
                        && b.system_identifier == sysid
                }) {
                    Some((id, _)) if *id == node.id => return None,
                    Some((id, _)) => {
                        return Some(format!(
                            "claims of system identifier {sysid}, which node {id} answers for (a \
                             copy of that node's data directory, or a node forging claims)"
                        ))
                    }
                    None => {}
                }
                if let Some((other, _)) = answers.iter().find(|(n, a)| {
                    mutant!(claims_cluster_once, { true }, { false })
                        && n.id != node.id
                        && a.system_identifier() == Some(sysid)
                }) {
                    return Some(format!(
                        "claims of system identifier {sysid}, which {} answered too (a copy of \
                         one node's data directory, or a node forging claims)",
                        other.label()
                    ));
                }
                match self.bound.get(&node.id) {
                    Some(b)
                        if mutant!(claims_rebind, { true }, { false })
                            && now_ms - b.since_ms < REBIND_AFTER_MS =>
                    {
                        Some(format!(
                            "claims of system identifier {sysid}, where it answered for {} less \
                             than an hour ago (a node's system identifier changes only when it is \
                             made anew: at most once an hour here)",
                            b.system_identifier
                        ))
                    }
                    _ => None,
                }
            })
            .collect()
    }
}

/// The bindings kept in `snowflake.snowflake_claims_nodes`, of the nodes still in this node's
/// metadata (inactive ones included); `None` where the table is missing.
fn bindings(failed: fn(&str, &SpiError) -> !) -> Option<BTreeMap<i32, Binding>> {
    if Spi::get_one::<bool>(
        "SELECT pg_catalog.to_regclass('snowflake.snowflake_claims_nodes') IS NOT NULL",
    ) != Ok(Some(true))
    {
        return None;
    }
    let rows = Spi::connect(|client| {
        client
            .select(
                "SELECT b.node_id, b.system_identifier,
                        (pg_catalog.date_part('epoch', b.since) OPERATOR(pg_catalog.*) 1000)
                            ::pg_catalog.int8
                   FROM snowflake.snowflake_claims_nodes b
                  WHERE EXISTS (SELECT FROM pg_catalog.pg_dist_node d
                                 WHERE d.nodeid OPERATOR(pg_catalog.=) b.node_id)",
                None,
                &[],
            )?
            .map(|row| {
                Ok((
                    row.get::<i32>(1)?.unwrap_or_default(),
                    Binding {
                        system_identifier: row.get::<i64>(2)?.unwrap_or_default(),
                        since_ms: row.get::<i64>(3)?.unwrap_or_default(),
                    },
                ))
            })
            .collect::<Result<BTreeMap<i32, Binding>, pgrx::spi::SpiError>>()
    })
    .unwrap_or_else(|e| failed("read the Citus nodes' clusters in", &e));
    Some(rows)
}

/// Writes the bindings back (`node id, system identifier, since` in Unix ms), and forgets those
/// of nodes gone from this node's metadata. Nothing where the table is missing.
fn keep_bindings(bindings: &[(i32, i64, i64)], failed: fn(&str, &SpiError) -> !) {
    if Spi::get_one::<bool>(
        "SELECT pg_catalog.to_regclass('snowflake.snowflake_claims_nodes') IS NOT NULL",
    ) != Ok(Some(true))
    {
        return;
    }
    Spi::run_with_args(
        "WITH kept AS (
             SELECT * FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int4[]),
                                      pg_catalog.unnest($2::pg_catalog.int8[]),
                                      pg_catalog.unnest($3::pg_catalog.int8[]))
                    AS k(node_id, system_identifier, since_ms)),
         gone AS (
             DELETE FROM snowflake.snowflake_claims_nodes b
              WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_dist_node d
                                 WHERE d.nodeid OPERATOR(pg_catalog.=) b.node_id))
         INSERT INTO snowflake.snowflake_claims_nodes AS b
         SELECT k.node_id, k.system_identifier,
                pg_catalog.to_timestamp(k.since_ms::pg_catalog.float8
                                        OPERATOR(pg_catalog./) 1000)
           FROM kept k
         ON CONFLICT (node_id) DO UPDATE SET system_identifier = excluded.system_identifier,
                                             since = excluded.since
          WHERE b.system_identifier OPERATOR(pg_catalog.<>) excluded.system_identifier",
        &[
            bindings.iter().map(|b| b.0).collect::<Vec<i32>>().into(),
            bindings.iter().map(|b| b.1).collect::<Vec<i64>>().into(),
            bindings.iter().map(|b| b.2).collect::<Vec<i64>>().into(),
        ],
    )
    .unwrap_or_else(|e| failed("write the Citus nodes' clusters in", &e));
}

/// The primary nodes of this node's metadata other than this node's group, in the order of
/// their ids.
fn other_nodes(failed: fn(&str, &SpiError) -> !) -> Vec<Node> {
    Spi::connect(|client| {
        client
            .select(
                "SELECT d.nodeid, d.nodename, d.nodeport
                   FROM pg_catalog.pg_dist_node d
                  WHERE d.isactive
                    AND d.noderole OPERATOR(pg_catalog.=) 'primary'
                    AND d.groupid OPERATOR(pg_catalog.<>)
                        (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g)
                  ORDER BY d.nodeid",
                None,
                &[],
            )?
            .map(|row| {
                Ok(Node {
                    id: row.get::<i32>(1)?.unwrap_or_default(),
                    host: row.get::<String>(2)?.unwrap_or_default(),
                    port: row.get::<i32>(3)?.unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>, pgrx::spi::SpiError>>()
    })
    .unwrap_or_else(|e| failed("read the Citus nodes for", &e))
}

/// Whether the node's table is pg_snowflake's (a question of the catalogs alone).
const IS_OURS: &str = "SELECT EXISTS (
      SELECT FROM pg_catalog.pg_depend d
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
       WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid
         AND d.objid OPERATOR(pg_catalog.=)
             pg_catalog.to_regclass('snowflake.snowflake_claims')::pg_catalog.oid
         AND d.deptype OPERATOR(pg_catalog.=) 'e'
         AND e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')";

/// The node's claims of its own cluster.
const OWN_CLAIMS: &str = "SELECT COALESCE(pg_catalog.json_agg(c), '[]'::pg_catalog.json)
  FROM snowflake.snowflake_claims c
 WHERE c.system_identifier OPERATOR(pg_catalog.=)
       (SELECT s.system_identifier FROM pg_catalog.pg_control_system() s)";

/// Why a node's claims were not read.
enum Unanswered {
    /// No answer within the bound.
    Silent,
    /// What it said instead, or why its answer was refused.
    Said(String),
}

/// Asks one node, within `timeout`: whether its table is pg_snowflake's, then its claims, read
/// by `answer::read` at `now_us`.
fn ask(node: &Node, now_us: i64, timeout: Duration) -> Result<Answer, Unanswered> {
    let _timeout = mutant!(claims_gather_timeout, { NodeTimeout::arm(timeout) }, { NodeTimeout });
    let result = subtransaction::catching(|| -> Result<(bool, Vec<u8>), pgrx::spi::SpiError> {
        let (ours, said) = run_on(node, IS_OURS)?;
        if mutant!(claims_planted, { !(ours && said == b"t") }, { false }) {
            return Ok((false, said));
        }
        run_on(node, OWN_CLAIMS)
    });
    let said = Unanswered::Said;
    match said_by(result) {
        Err(e) if e.contains("statement timeout") => Err(Unanswered::Silent),
        Err(e) => Err(said(format!("could not be asked: {}", printable(e.as_bytes())))),
        Ok((false, answer)) if answer == b"f" => Err(said(
            "has no snowflake_claims of pg_snowflake (is pg_snowflake installed there?)".into(),
        )),
        Ok((false, answer)) => Err(said(format!("answered {}", printable(&answer)))),
        Ok((true, claims)) => {
            answer::read(&claims, now_us).map_err(|why| said(format!("answered {why}")))
        }
    }
}

/// A step's result or its error's message, whichever way it failed.
fn said_by(
    result: Result<Result<(bool, Vec<u8>), pgrx::spi::SpiError>, String>,
) -> Result<(bool, Vec<u8>), String> {
    match result {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(e),
    }
}

/// Runs `command` on `node` through Citus: whether it succeeded, and its result's bytes (at
/// most `MAX_ANSWER`, else why not; an error at most 200 characters).
fn run_on(node: &Node, command: &str) -> Result<(bool, Vec<u8>), pgrx::spi::SpiError> {
    let row = Spi::get_two_with_args::<bool, Vec<u8>>(
        "SELECT m.success AND pg_catalog.octet_length(m.result) OPERATOR(pg_catalog.<=) $4,
                pg_catalog.textsend(
                    CASE WHEN m.success AND pg_catalog.octet_length(m.result)
                                             OPERATOR(pg_catalog.<=) $4
                         THEN m.result
                         WHEN m.success
                         THEN pg_catalog.format('%s bytes, more than %s',
                                                pg_catalog.octet_length(m.result), $4)
                         ELSE pg_catalog.left(m.result, 200)
                    END)
           FROM pg_catalog.master_run_on_worker(ARRAY[$1::pg_catalog.text],
                                                ARRAY[$2::pg_catalog.int4],
                                                ARRAY[$3::pg_catalog.text], false) m",
        &[node.host.as_str().into(), node.port.into(), command.into(), MAX_ANSWER.into()],
    )?;
    Ok((row.0.unwrap_or(false), row.1.unwrap_or_default()))
}

/// Writes one node's accepted answer, in a subtransaction of its own (an answer that fails its
/// write, a worker id past 32 bits for one, is passed over, and the other nodes' are written).
fn write_answer(node: &Node, answer: &Answer, layout: &str, gathered: &mut Gathered) {
    let failed = |e: &str| format!("{}: its claims could not be written: {}", node.label(), e);
    match subtransaction::catching(|| write(&answer.claims, layout)) {
        Ok(Ok(other)) => {
            gathered.read += 1;
            if let Some(other) = other {
                mutant!(
                    citus_layouts,
                    {
                        gathered.other_layouts.push(format!("{}'s is {other}", node.label()));
                    },
                    {
                        let _ = other;
                    }
                );
            }
        }
        Ok(Err(e)) => gathered.unread.push(failed(&printable(e.to_string().as_bytes()))),
        Err(e) => gathered.unread.push(failed(&printable(e.as_bytes()))),
    }
}

/// Writes one node's checked claims into this node's table: a row replaces a gathered one only
/// when seen later. Returns the layouts of its claims in force that are not `layout`.
fn write(claims: &[Claim], layout: &str) -> Result<Option<String>, pgrx::spi::SpiError> {
    if claims.is_empty() {
        return Ok(None);
    }
    // PostgreSQL's timestamps count microseconds from 2000-01-01.
    let time = |us: i64| TimestampWithTimeZone::try_from(us - clock::PG_EPOCH_UNIX_MS * 1000).ok();
    let times = |f: fn(&Claim) -> i64| -> Vec<Option<TimestampWithTimeZone>> {
        claims.iter().map(|c| time(f(c))).collect()
    };
    // The node's answer replaces what this node held of its cluster: at most `MAX_CLAIMS` rows
    // a cluster, whatever keys it invents from one gathering to the next (0.6.0's review: 64 new
    // layouts a gathering grew every other node's table by 64 rows, for a week).
    Spi::run_with_args(
        &mutant_text!(
        "DELETE FROM snowflake.snowflake_claims c
          WHERE c.system_identifier OPERATOR(pg_catalog.=) $1
            AND NOT EXISTS (
                SELECT FROM ROWS FROM (pg_catalog.unnest($2::pg_catalog.int4[]),
                                       pg_catalog.unnest($3::pg_catalog.text[]),
                                       pg_catalog.unnest($4::pg_catalog.text[]))
                            AS k(worker_id, layout, place)
                 WHERE k.worker_id OPERATOR(pg_catalog.=) c.worker_id
                   AND k.layout OPERATOR(pg_catalog.=) c.layout
                   AND k.place OPERATOR(pg_catalog.=) c.place)",
            claims_replaced: "WHERE c.system_identifier" => "WHERE false AND c.system_identifier",
        ),
        &[
            claims[0].system_identifier.into(),
            claims.iter().map(|c| c.worker_id).collect::<Vec<i32>>().into(),
            claims.iter().map(|c| c.layout.clone()).collect::<Vec<String>>().into(),
            claims.iter().map(|c| c.place.clone()).collect::<Vec<String>>().into(),
        ],
    )?;
    Spi::get_one_with_args::<String>(
        "WITH claims AS (
             SELECT DISTINCT ON (x.system_identifier, x.worker_id, x.layout, x.place) x.*
               FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]),
                               pg_catalog.unnest($2::pg_catalog.int4[]),
                               pg_catalog.unnest($3::pg_catalog.text[]),
                               pg_catalog.unnest($4::pg_catalog.text[]),
                               pg_catalog.unnest($5::pg_catalog.timestamptz[]),
                               pg_catalog.unnest($6::pg_catalog.timestamptz[]),
                               pg_catalog.unnest($7::pg_catalog.timestamptz[]),
                               pg_catalog.unnest($9::pg_catalog.text[]))
                    AS x(system_identifier, worker_id, layout, node_name, since, last_seen,
                         expires, place)
              WHERE x.since IS NOT NULL AND x.last_seen IS NOT NULL AND x.expires IS NOT NULL
              ORDER BY x.system_identifier, x.worker_id, x.layout, x.place, x.last_seen DESC),
         written AS (
             INSERT INTO snowflake.snowflake_claims AS c
             SELECT * FROM claims
             ON CONFLICT (system_identifier, worker_id, layout, place) DO UPDATE SET
                 node_name = excluded.node_name, since = excluded.since,
                 last_seen = excluded.last_seen, expires = excluded.expires
              WHERE excluded.last_seen OPERATOR(pg_catalog.>) c.last_seen
             RETURNING c.layout, c.expires)
         SELECT pg_catalog.left(pg_catalog.string_agg(DISTINCT w.layout, ', '), 400)
           FROM written w
          WHERE w.expires OPERATOR(pg_catalog.>) pg_catalog.now()
            AND w.layout OPERATOR(pg_catalog.<>) $8",
        &[
            claims.iter().map(|c| c.system_identifier).collect::<Vec<i64>>().into(),
            claims.iter().map(|c| c.worker_id).collect::<Vec<i32>>().into(),
            claims.iter().map(|c| c.layout.clone()).collect::<Vec<String>>().into(),
            claims.iter().map(|c| c.node_name.clone()).collect::<Vec<String>>().into(),
            times(|c| c.since_us).into(),
            times(|c| c.last_seen_us).into(),
            times(|c| c.expires_us).into(),
            layout.into(),
            claims.iter().map(|c| c.place.clone()).collect::<Vec<String>>().into(),
        ],
    )
}

/// PostgreSQL's statement timeout, armed for one node's questions: a background worker's SPI
/// statements get none of their own (the server arms it for a client's statements), and the
/// timeout's cancel ends Citus's wait as it would a client's. Disarmed when dropped.
struct NodeTimeout;

impl NodeTimeout {
    fn arm(timeout: Duration) -> NodeTimeout {
        let ms = std::ffi::c_int::try_from(timeout.as_millis()).unwrap_or(std::ffi::c_int::MAX);
        // SAFETY: a registered timeout of this backend (InitPostgres registers
        // STATEMENT_TIMEOUT in every backend with a database connection).
        unsafe { enable_timeout_after(STATEMENT_TIMEOUT, ms) };
        NodeTimeout
    }
}

impl Drop for NodeTimeout {
    fn drop(&mut self) {
        // SAFETY: disabling a timeout that may have fired already is allowed; a cancel it asked
        // for after the statements it bounds ended is no longer wanted (it would cancel the
        // next node's question, and name a healthy node as unread).
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
