//! pg_snowflake on Citus (docs/citus.md): a coordinator and workers on this machine, metadata
//! synced, Citus first in `shared_preload_libraries`, every node leasing its worker id from the
//! coordinator's database with one configuration for all.
//!
//! - Every path that makes an id (single-row and multi-row INSERT, COPY, INSERT ... SELECT whose
//!   ids the workers make, writes sent to a worker, writers on every node at once): no id twice,
//!   and each id carries the worker id of the node that made it (a volatile default beside the
//!   id records the node's port where the id is made).
//! - The experiment (`INSERT INTO dup(k) SELECT t.k FROM tk t, generate_series(1, 40)`):
//!   with one worker id for every node it repeats ids, and the claims, gathered through Citus,
//!   report the shared worker id on every node; leased from the coordinator it repeats none.
//! - A shard move, a third node added, a rebalance, a node drained, removed and added back, all
//!   under writes from every node: nothing lost, nothing repeated, the new node with a worker id
//!   of its own, the node added back with its old one (and a new Citus group id).
//! - A node killed with SIGKILL and restarted goes on above its earlier ids; the coordinator
//!   failing over to its standby, and a worker restored from a backup, keep their worker ids
//!   and the others keep leasing.
//! - Time ranges on distributed tables: a seeded differential test (hook on and off, from the
//!   coordinator and from a worker, router and multi-shard queries, prepared statements, a
//!   distributed table partitioned by id ranges, a join of co-located tables), the id range in
//!   the shard queries of EXPLAIN, and decoding in WHERE and GROUP BY as on one server.
//! - Lifecycle: CREATE EXTENSION at 0.4.0 on the coordinator and ALTER EXTENSION UPDATE reach
//!   every node; a node without the library preloaded, or without a worker id, refuses where the
//!   id would be made (55000, through Citus to the client) and stores nothing; the wrong order
//!   in `shared_preload_libraries` stops the server with Citus's message; `snowflake_adopt()` on
//!   a distributed table moves every node's generator, or refuses and changes nothing.
#![cfg(not(feature = "pg_test"))]

mod common;
use common::citus::*;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The experiment of the issue: a table keyed by (k, id), filled by one INSERT ... SELECT from a
/// distributed table of 2400 keys, 40 rows each (96,000 rows), the ids made by the workers that
/// hold `tk`'s shards. Returns (rows, repeated ids).
fn duplicates_experiment(c: &mut Client) -> (i64, i64) {
    c.batch_execute(
        "DROP TABLE IF EXISTS dup, tk;
         CREATE TABLE tk (k int PRIMARY KEY);
         SELECT create_distributed_table('tk', 'k');
         INSERT INTO tk SELECT g FROM generate_series(1, 2400) g;
         CREATE TABLE dup (k int NOT NULL, id bigint NOT NULL DEFAULT snowflake_next(),
                           PRIMARY KEY (k, id));
         SELECT create_distributed_table('dup', 'k', colocate_with => 'none');
         INSERT INTO dup(k) SELECT t.k FROM tk t, generate_series(1, 40);",
    )
    .unwrap();
    let row = c
        .query_one(
            "SELECT count(*), count(*) - count(DISTINCT id) FROM dup",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// `made_on()`: the port of the node that evaluates it, volatile like `snowflake_next()`, so
/// that Citus evaluates it where it evaluates the id (Citus creates it on every node, with the
/// tables that use it).
const MADE_ON: &str =
    "CREATE FUNCTION made_on() RETURNS int LANGUAGE sql VOLATILE AS $$SELECT current_setting('port')::int$$";

/// Each node's port and worker id.
fn worker_ids(citus: &Citus) -> BTreeMap<i32, i64> {
    citus
        .nodes()
        .iter()
        .map(|n| {
            (
                n.port as i32,
                worker_id_of(n).unwrap_or_else(|| panic!("{} has no worker id", n.name)),
            )
        })
        .collect()
}

/// Rows, distinct ids, and rows whose id does not carry the worker id of the node that made it,
/// of `table` where `filter`.
fn audit(c: &mut Client, table: &str, filter: &str, ports: &BTreeMap<i32, i64>) -> (i64, i64, i64) {
    let rows = c
        .query(
            &format!(
                "SELECT id, (snowflake_decode(id)).worker_id::int8, port FROM {table} WHERE {filter}"
            ),
            &[],
        )
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut wrong = 0;
    for r in &rows {
        let (id, worker, port): (i64, i64, i32) = (r.get(0), r.get(1), r.get(2));
        seen.insert(id);
        if ports.get(&port) != Some(&worker) {
            wrong += 1;
        }
    }
    (rows.len() as i64, seen.len() as i64, wrong)
}

/// Ids made on a node as (id, port), in a table keyed by them.
const PATHS: &str = "CREATE TABLE paths (
        k int NOT NULL,
        id bigint NOT NULL DEFAULT snowflake_next(),
        path text NOT NULL,
        port int NOT NULL DEFAULT made_on(),
        PRIMARY KEY (k, id));
    SELECT create_distributed_table('paths', 'k')";

#[test]
fn every_path_that_makes_an_id_makes_it_once_with_the_worker_id_of_its_node() {
    let citus = Citus::start("citus_paths", 2, &[]);
    let mut c = citus.coordinator.connect();
    let ports = worker_ids(&citus);
    let distinct: BTreeSet<i64> = ports.values().copied().collect();
    assert_eq!(distinct.len(), 3, "three nodes, three worker ids: {ports:?}");
    println!(
        "worker ids by port: {ports:?} (coordinator {})",
        citus.coordinator.port
    );

    // The registry is the coordinator's: its tables hold the three leases there, and on the
    // workers, where CREATE EXTENSION made them too, they stay local, empty and unused; Citus
    // distributes none of them, nor the lease function.
    let leases: i64 = c
        .query_one(
            "SELECT count(*) FROM snowflake.snowflake_registry WHERE expires > now()",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(leases, 3);
    for node in citus.nodes() {
        let mut n = node.connect();
        let row = n
            .query_one(
                "SELECT (SELECT count(*) FROM pg_dist_partition
                          WHERE logicalrelid::text LIKE 'snowflake.%'),
                        (SELECT count(*) FROM pg_dist_object
                          WHERE classid = 'pg_proc'::regclass
                            AND objid = 'snowflake.snowflake_registry_lease(text, text, bigint, integer,
                                integer, integer, integer, boolean, integer, bigint, text, bigint,
                                bigint)'::regprocedure),
                        (SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake')",
                &[],
            )
            .unwrap();
        let (tables, functions, version): (i64, i64, String) = (row.get(0), row.get(1), row.get(2));
        assert_eq!((tables, functions), (0, 0), "{}: distributed", node.name);
        assert_eq!(version, env!("CARGO_PKG_VERSION"), "{}", node.name);
        if node.port != citus.coordinator.port {
            let rows: i64 = n
                .query_one(
                    "SELECT (SELECT count(*) FROM snowflake.snowflake_registry)
                          + (SELECT count(*) FROM snowflake.snowflake_registry_namespaces)",
                    &[],
                )
                .unwrap()
                .get(0);
            assert_eq!(rows, 0, "{}'s registry tables are used", node.name);
        }
    }

    // The experiment gives no repeated id.
    let (rows, repeated) = duplicates_experiment(&mut c);
    println!("duplicates experiment, leased worker ids: {rows} rows, {repeated} repeated ids");
    assert_eq!((rows, repeated), (96_000, 0));

    c.batch_execute(&format!("{MADE_ON}; {PATHS}")).unwrap();
    // Through the coordinator: single-row, multi-row, COPY, INSERT ... SELECT.
    for k in 0..200 {
        c.execute(
            "INSERT INTO paths (k, path) VALUES ($1, 'single')",
            &[&k],
        )
        .unwrap();
    }
    c.batch_execute(
        "INSERT INTO paths (k, path) SELECT g, 'multi' FROM generate_series(1, 2000) g;
         INSERT INTO paths (k, path) VALUES (1, 'values'), (2, 'values'), (3, 'values'), (4, 'values');",
    )
    .unwrap();
    {
        use std::io::Write;
        let mut w = c.copy_in("COPY paths (k, path) FROM STDIN").unwrap();
        for k in 0..2000 {
            writeln!(w, "{k}\tcopy").unwrap();
        }
        w.finish().unwrap();
    }
    c.batch_execute(
        "INSERT INTO paths (k, path) SELECT t.k, 'insert-select' FROM tk t, generate_series(1, 2) g",
    )
    .unwrap();
    // Sent to each worker: single-row, multi-row, COPY, INSERT ... SELECT.
    for w in &citus.workers {
        let mut wc = w.connect();
        for k in 0..100 {
            wc.execute("INSERT INTO paths (k, path) VALUES ($1, 'worker-single')", &[&k])
                .unwrap();
        }
        wc.batch_execute(
            "INSERT INTO paths (k, path) SELECT g, 'worker-multi' FROM generate_series(1, 500) g;
             INSERT INTO paths (k, path) SELECT t.k, 'worker-insert-select' FROM tk t",
        )
        .unwrap();
        use std::io::Write;
        let mut copy = wc.copy_in("COPY paths (k, path) FROM STDIN").unwrap();
        for k in 0..500 {
            writeln!(copy, "{k}\tworker-copy").unwrap();
        }
        copy.finish().unwrap();
    }
    // Writers on every node at once, two each.
    let acknowledged: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = citus
            .nodes()
            .into_iter()
            .flat_map(|node| [node, node])
            .enumerate()
            .map(|(i, node)| {
                s.spawn(move || {
                    let mut wc = node.connect();
                    (0..300)
                        .map(|j| {
                            wc.query_one(
                                "INSERT INTO paths (k, path) VALUES ($1, 'concurrent') RETURNING id",
                                &[&((i * 1000 + j) as i32)],
                            )
                            .unwrap()
                            .get::<_, i64>(0)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(acknowledged.iter().collect::<BTreeSet<_>>().len(), 1800);

    let mut report = Vec::new();
    for path in [
        "single",
        "multi",
        "values",
        "copy",
        "insert-select",
        "worker-single",
        "worker-multi",
        "worker-copy",
        "worker-insert-select",
        "concurrent",
    ] {
        let (rows, distinct, wrong) = audit(&mut c, "paths", &format!("path = '{path}'"), &ports);
        let made_on: Vec<i32> = c
            .query(
                "SELECT DISTINCT port FROM paths WHERE path = $1 ORDER BY 1",
                &[&path],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        report.push(format!(
            "{path}: {rows} rows, {distinct} distinct ids, made on ports {made_on:?}, {wrong} with another node's worker id"
        ));
        assert_eq!((distinct, wrong), (rows, 0), "{path}");
        assert!(rows > 0, "{path}");
    }
    let (rows, distinct, wrong) = audit(&mut c, "paths", "true", &ports);
    report.push(format!("all: {rows} rows, {distinct} distinct ids, {wrong} wrong"));
    println!("{}", report.join("\n"));
    assert_eq!((distinct, wrong), (rows, 0));
    // INSERT ... SELECT between distributed tables: the ids are made by the workers that hold
    // the source's shards, never the coordinator (issue 34); sent to a worker, by that worker
    // and the others.
    let coordinator_made: i64 = c
        .query_one(
            "SELECT count(*) FROM paths WHERE path = 'insert-select' AND port = $1",
            &[&(citus.coordinator.port as i32)],
        )
        .unwrap()
        .get(0);
    assert_eq!(coordinator_made, 0);

    // A node killed with SIGKILL and restarted goes on above every id it made before.
    let w1 = &citus.workers[0];
    let w1_id = ports[&(w1.port as i32)];
    let before: i64 = c
        .query_one(
            "SELECT max(id) FROM paths WHERE (snowflake_decode(id)).worker_id = $1",
            &[&(w1_id as i32)],
        )
        .unwrap()
        .get(0);
    w1.crash();
    w1.start();
    assert_eq!(leased_worker_id(w1), w1_id, "the same lease after the restart");
    let mut wc = w1.connect();
    let after: i64 = wc
        .query_one(
            "INSERT INTO paths (k, path) VALUES (1, 'after-kill') RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    c.batch_execute("INSERT INTO paths (k, path) SELECT t.k, 'after-kill-select' FROM tk t")
        .unwrap();
    let min_after: i64 = c
        .query_one(
            "SELECT min(id) FROM paths WHERE path LIKE 'after-kill%'
                AND (snowflake_decode(id)).worker_id = $1",
            &[&(w1_id as i32)],
        )
        .unwrap()
        .get(0);
    println!(
        "worker {w1_id} killed: last id before {before}, first after {after}, smallest after {min_after}"
    );
    assert!(min_after > before, "{min_after} is not above {before}");
    let (rows, distinct, wrong) = audit(&mut c, "paths", "true", &ports);
    assert_eq!((distinct, wrong), (rows, 0));

    adopt_on_distributed_tables(&citus, &mut c);
}

/// The default of a column as each node has it (workers keep the distributed table's shell).
fn defaults(citus: &Citus, table: &str, column: &str) -> Vec<String> {
    citus
        .nodes()
        .iter()
        .map(|n| {
            n.connect()
                .query_one(
                    "SELECT coalesce(pg_get_expr(d.adbin, d.adrelid), '') FROM pg_attribute a
                       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                      WHERE a.attrelid = $1::text::regclass AND a.attname = $2",
                    &[&table, &column],
                )
                .unwrap()
                .get(0)
        })
        .collect()
}

/// `snowflake_adopt()` on Citus tables: on the distribution column it refuses before changing
/// anything (Citus changes no default there), and its hint works; on another column it switches
/// every node's default and moves every node's generator above the largest id, one 3 s ahead of
/// the clock here, which no node would otherwise pass for 3 s.
fn adopt_on_distributed_tables(citus: &Citus, c: &mut Client) {
    c.batch_execute(
        "CREATE TABLE legacy (id bigserial PRIMARY KEY, note text);
         SELECT create_distributed_table('legacy', 'id');
         INSERT INTO legacy (note) SELECT 'old' FROM generate_series(1, 100);",
    )
    .unwrap();
    let (code, message, hint) = expect_error(c, "SELECT snowflake_adopt('legacy', 'id')");
    println!("adopt on a distribution column: {code}: {message} (hint: {hint})");
    assert_eq!(code, "0A000", "{message}");
    assert!(message.contains("distribution column"), "{message}");
    assert!(hint.contains("undistribute_table"), "{hint}");
    for d in defaults(citus, "legacy", "id") {
        assert!(d.starts_with("nextval("), "changed: {d}");
    }
    // The way the hint gives.
    c.batch_execute(
        "SELECT undistribute_table('legacy');
         SELECT snowflake_adopt('legacy', 'id');
         SELECT create_distributed_table('legacy', 'id');
         INSERT INTO legacy (note) VALUES ('new');",
    )
    .unwrap();
    for d in defaults(citus, "legacy", "id") {
        assert_eq!(d, "snowflake_next()");
    }

    let top: i64 = c
        .query_one(
            "SELECT snowflake_compose(now() + interval '3 s', 1023, 0)",
            &[],
        )
        .unwrap()
        .get(0);
    c.batch_execute(&format!(
        "CREATE TABLE legacy2 (tenant int NOT NULL, id bigserial, note text,
                               PRIMARY KEY (tenant, id));
         SELECT create_distributed_table('legacy2', 'tenant');
         INSERT INTO legacy2 (tenant, note) SELECT g % 7, 'old' FROM generate_series(1, 100) g;
         INSERT INTO legacy2 (tenant, id, note) VALUES (3, {top}, 'imported');
         SELECT snowflake_adopt('legacy2', 'id');"
    ))
    .unwrap();
    for d in defaults(citus, "legacy2", "id") {
        assert_eq!(d, "snowflake_next()");
    }
    for node in citus.nodes() {
        let next: i64 = node
            .connect()
            .query_one("SELECT snowflake_next()", &[])
            .unwrap()
            .get(0);
        assert!(next > top, "{}: {next} is not above {top}", node.name);
    }
}

/// A writer inserting one row at a time into `moves` on one node until told to stop: the ids
/// and ports it was acknowledged, and the errors it met (statements then retried).
struct Writer {
    stop: AtomicBool,
    acknowledged: std::sync::Mutex<Vec<(i64, i32)>>,
    errors: std::sync::Mutex<Vec<String>>,
}

impl Writer {
    fn new() -> Writer {
        Writer {
            stop: AtomicBool::new(false),
            acknowledged: Default::default(),
            errors: Default::default(),
        }
    }

    fn run(&self, node: &Cluster, seed: i32) {
        let mut c = node.connect();
        let mut k = seed;
        while !self.stop.load(Ordering::Relaxed) {
            k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345) & 0x7fff_ffff;
            match c.query_one(
                "INSERT INTO moves (k) VALUES ($1) RETURNING id, port",
                &[&k],
            ) {
                Ok(r) => self.acknowledged.lock().unwrap().push((r.get(0), r.get(1))),
                Err(e) => {
                    self.errors.lock().unwrap().push(why(&e));
                    std::thread::sleep(Duration::from_millis(50));
                    if c.is_closed() {
                        c = node.connect();
                    }
                }
            }
        }
    }

    fn count(&self) -> usize {
        self.acknowledged.lock().unwrap().len()
    }

    /// Waits until this writer has `n` more acknowledged rows.
    fn wait_for_more(&self, n: usize, what: &str) {
        let until = self.count() + n;
        poll(Duration::from_secs(60), Duration::from_millis(20), || {
            (self.count() >= until).then_some(()).ok_or(format!(
                "{what}: {} of {until} rows; errors: {:?}",
                self.count(),
                self.errors.lock().unwrap().iter().rev().take(3).collect::<Vec<_>>()
            ))
        });
    }
}

/// The Citus group id of the node at `port`.
fn group_of(c: &mut Client, port: u16) -> i32 {
    c.query_one(
        "SELECT groupid FROM pg_dist_node WHERE nodeport = $1",
        &[&(port as i32)],
    )
    .unwrap()
    .get(0)
}

#[test]
fn a_shard_move_a_node_added_a_rebalance_and_a_node_removed_and_added_back_under_writes_from_every_node(
) {
    let citus = Citus::start("citus_moves", 2, &[]);
    let mut c = citus.coordinator.connect();
    c.batch_execute(&format!(
        "{MADE_ON};
         CREATE TABLE moves (k int NOT NULL, id bigint NOT NULL DEFAULT snowflake_next(),
                             port int NOT NULL DEFAULT made_on(), PRIMARY KEY (k, id));
         SELECT create_distributed_table('moves', 'k');"
    ))
    .unwrap();
    let mut ports = worker_ids(&citus);
    let (w1, w2) = (&citus.workers[0], &citus.workers[1]);
    let w3 = citus.init_worker(&[]);
    let writers: Vec<Writer> = (0..5).map(|_| Writer::new()).collect();
    let (coord_w, w1_w, w2_w, w3_w, w2_again_w) =
        (&writers[0], &writers[1], &writers[2], &writers[3], &writers[4]);
    let mut steps = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| coord_w.run(&citus.coordinator, 1));
        s.spawn(|| w1_w.run(w1, 2));
        s.spawn(|| w2_w.run(w2, 3));
        for w in [coord_w, w1_w, w2_w] {
            w.wait_for_more(50, "writers start");
        }

        // A shard of w1 moves to w2.
        let started = Instant::now();
        c.batch_execute(&format!(
            "SELECT citus_move_shard_placement(
                 (SELECT shardid FROM citus_shards WHERE table_name = 'moves'::regclass
                     AND nodeport = {} ORDER BY shardid LIMIT 1),
                 '127.0.0.1', {}, '127.0.0.1', {})",
            w1.port, w1.port, w2.port
        ))
        .unwrap();
        steps.push(format!("shard move: {:.1} s", started.elapsed().as_secs_f64()));
        for w in [coord_w, w1_w, w2_w] {
            w.wait_for_more(20, "writers after the move");
        }

        // A third node, while every node writes: a worker id of its own.
        w3.start();
        citus.join(&w3);
        let w3_id = leased_worker_id(&w3);
        steps.push(format!("third node: worker id {w3_id}"));
        assert!(
            !ports.values().any(|&w| w == w3_id),
            "the third node got a worker id in use: {w3_id} {ports:?}"
        );
        s.spawn(|| w3_w.run(&w3, 4));
        w3_w.wait_for_more(50, "the third node's writer");
        let started = Instant::now();
        c.batch_execute("SELECT rebalance_table_shards('moves')").unwrap();
        let on_w3: i64 = c
            .query_one(
                "SELECT count(*) FROM citus_shards WHERE table_name = 'moves'::regclass
                   AND nodeport = $1",
                &[&(w3.port as i32)],
            )
            .unwrap()
            .get(0);
        steps.push(format!(
            "rebalance: {:.1} s, {on_w3} shards moved to the third node",
            started.elapsed().as_secs_f64()
        ));
        assert!(on_w3 > 0, "the rebalance moved no shard to the third node");
        for w in [coord_w, w1_w, w2_w, w3_w] {
            w.wait_for_more(20, "writers after the rebalance");
        }

        // w2 drained, removed and added back: a new Citus group id, the same worker id.
        w2_w.stop.store(true, Ordering::Relaxed);
        let group_before = group_of(&mut c, w2.port);
        let started = Instant::now();
        c.batch_execute(&format!(
            "SELECT citus_drain_node('127.0.0.1', {p});
             SELECT citus_remove_node('127.0.0.1', {p});",
            p = w2.port
        ))
        .unwrap();
        citus.join(w2);
        let group_after = group_of(&mut c, w2.port);
        let w2_id = leased_worker_id(w2);
        steps.push(format!(
            "w2 drained, removed and added back in {:.1} s: group id {group_before} then \
             {group_after}, worker id {w2_id} both times",
            started.elapsed().as_secs_f64()
        ));
        assert_eq!(w2_id, ports[&(w2.port as i32)]);
        assert!(group_after > group_before);
        s.spawn(|| w2_again_w.run(w2, 5));
        c.batch_execute("SELECT rebalance_table_shards('moves')").unwrap();
        for w in [coord_w, w1_w, w3_w, w2_again_w] {
            w.wait_for_more(20, "writers at the end");
        }
        for w in &writers {
            w.stop.store(true, Ordering::Relaxed);
        }
    });
    ports.insert(w3.port as i32, worker_id_of(&w3).unwrap());

    // Every acknowledged row is there once, with its node's worker id; nothing else is.
    let mut acknowledged: BTreeMap<i64, i32> = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, w) in writers.iter().enumerate() {
        for &(id, port) in w.acknowledged.lock().unwrap().iter() {
            assert!(acknowledged.insert(id, port).is_none(), "id {id} acknowledged twice");
        }
        errors.extend(w.errors.lock().unwrap().iter().map(|e| format!("writer {i}: {e}")));
    }
    let stored: BTreeMap<i64, i32> = c
        .query("SELECT id, port FROM moves", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let (rows, distinct, wrong) = audit(&mut c, "moves", "true", &ports);
    println!(
        "{}\n{} rows acknowledged by {} writers, {rows} stored, {distinct} distinct ids, {wrong} \
         with another node's worker id; {} failed statements: {:?}",
        steps.join("\n"),
        acknowledged.len(),
        writers.len(),
        errors.len(),
        errors.iter().take(5).collect::<Vec<_>>()
    );
    let lost: Vec<_> = acknowledged
        .keys()
        .filter(|id| !stored.contains_key(id))
        .collect();
    assert!(lost.is_empty(), "{} acknowledged rows lost: {lost:?}", lost.len());
    assert_eq!((distinct, wrong), (rows, 0));
    // A statement whose answer was lost may have committed: at most one row for each failure.
    assert!(
        stored.len() <= acknowledged.len() + errors.len(),
        "{} rows stored, {} acknowledged",
        stored.len(),
        acknowledged.len()
    );
}
