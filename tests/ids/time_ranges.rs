//! The planner hook that turns comparisons of `snowflake_timestamp(id)` into id ranges never
//! changes a result and never costs a capability.
//!
//! A seeded differential test: random statements run with the hook on and off
//! (`snowflake.time_ranges`), in one transaction each, and any difference in their rows (as a
//! multiset, or in order where the statement orders by a unique key), in the rows of the table a
//! MERGE leaves, or in the SQLSTATE they fail with, fails with the seed and the statement. The
//! statements: WHERE trees (AND, OR, NOT, BETWEEN) comparing `snowflake_timestamp` of a column
//! with constants at and around time unit edges, before the epoch, past the end, infinity and
//! NULL, with parameters of generic and custom plans, other columns, now()-relative stable
//! expressions and sub-selects; every join type with conditions in ON and in WHERE, LATERAL,
//! CTEs (MATERIALIZED, recursive, data-modifying), sub-queries in FROM, window functions,
//! aggregates, set operations, UPDATE and DELETE ... RETURNING, INSERT ... SELECT, and MERGE;
//! over tables with a primary key, without an index, with an expression index on
//! `snowflake_timestamp(id)`, partitioned by range of id and by `snowflake_timestamp(id)`,
//! inherited, with a column of a domain over bigint, and a view. Their ids are ids of the layout
//! at unit edges, bigints it cannot hold (negative ones, ones above its bits) and NULLs. One test
//! per layout, each in a server started with it (the layout is fixed at start).
//!
//! `make test` runs the fixed seeds (`FIXED_SEEDS`); `make fuzz SEED=n CASES=n [LAYOUT=name]`
//! runs one seed for longer (`TIME_RANGES_SEED`, `TIME_RANGES_CASES`), and replays a failure.
//!
//! Then what the hook must not take away: partition pruning, the expression index, a single
//! call of a volatile argument, and views for grantees without rights on the extension's schema.
#![cfg(not(feature = "pg_test"))]

use common::*;
use postgres::SimpleQueryMessage;
use std::collections::BTreeMap;
use testkit as common;

/// The layouts, as their settings; `custom` has odd widths and a 7 ms unit.
const LAYOUTS: &[(&str, &[&str])] = &[
    ("twitter", &[]),
    ("discord", &["snowflake.layout = discord"]),
    ("sonyflake", &["snowflake.layout = sonyflake"]),
    ("instagram", &["snowflake.layout = instagram"]),
    ("js53", &["snowflake.layout = js53"]),
    (
        "custom",
        &[
            "snowflake.layout = custom",
            "snowflake.epoch = '2020-01-01 00:00:00+00'",
            "snowflake.time_unit = '7ms'",
            "snowflake.time_bits = 44",
            "snowflake.worker_bits = 5",
            "snowflake.sequence_bits = 3",
        ],
    ),
];

/// The seeds `make test` runs on every layout, each with its own tables.
const FIXED_SEEDS: [u64; 2] = [20_261_126, 7_919];

/// Statements per fixed seed and layout: 3,600 in all, on every major. They took 11 s of make
/// test's run on 15 (2026-11-27, with JIT off: see `hook_on_and_off_agree`), 118 s to 193 s
/// before, when each major but 15 ran the first seed alone; `make fuzz` runs more. The FULL JOIN
/// rewrite of 0.4.0 fails the first seed at statement 265.
const FIXED_CASES: u64 = 300;

/// Statements per seed for `make fuzz` when CASES is not given.
const FUZZ_CASES: u64 = 2000;

/// What the test needs to know of a layout, read from `snowflake_stats()`.
struct Layout {
    epoch_us: i64,
    unit_us: i64,
    time_bits: u32,
    worker_bits: u32,
    sequence_bits: u32,
    sequence_first: bool,
}

impl Layout {
    fn of(c: &mut Client) -> Layout {
        let s = stats(c);
        let l = &s["layout"];
        let epoch: f64 = c
            .query_one(
                "SELECT extract(epoch FROM $1::text::timestamptz)::float8",
                &[&l["epoch"].as_str().unwrap()],
            )
            .unwrap()
            .get(0);
        Layout {
            epoch_us: (epoch * 1_000_000.0).round() as i64,
            unit_us: l["time_unit_ms"].as_i64().unwrap() * 1000,
            time_bits: l["time_bits"].as_u64().unwrap() as u32,
            worker_bits: l["worker_bits"].as_u64().unwrap() as u32,
            sequence_bits: l["sequence_bits"].as_u64().unwrap() as u32,
            sequence_first: l["order"] == "time, sequence, worker",
        }
    }

    fn total_bits(&self) -> u32 {
        self.time_bits + self.worker_bits + self.sequence_bits
    }

    /// The last time unit an id can hold (its sign bit stays 0, except for 64-bit layouts).
    fn max_units(&self) -> u64 {
        (1u64 << self.time_bits) - 1
    }

    fn id(&self, units: u64, worker: u64, sequence: u64) -> i64 {
        let low = self.worker_bits + self.sequence_bits;
        let fields = if self.sequence_first {
            sequence << self.worker_bits | worker
        } else {
            worker << self.sequence_bits | sequence
        };
        ((units << low) | fields) as i64
    }

    /// The time `snowflake_timestamp` gives an id, in Unix microseconds; `None` (NULL) for a
    /// bigint the layout cannot hold.
    fn time_us(&self, id: i64) -> Option<i64> {
        let bits = self.total_bits();
        if bits < 64 && (id < 0 || (bits < 63 && id >= 1i64 << bits)) {
            return None;
        }
        let units = (id as u64 >> (self.worker_bits + self.sequence_bits)) as i64;
        Some(self.epoch_us + units * self.unit_us)
    }

    /// Ids the layout can hold: the first and last units, units near the epoch and now, random
    /// ones, each with the lowest and highest worker id and sequence (the first and last ids of
    /// the unit) and a random one.
    fn valid_ids(&self, rng: &mut Rng) -> Vec<i64> {
        let (max_w, max_s) = ((1u64 << self.worker_bits) - 1, (1u64 << self.sequence_bits) - 1);
        // A 64-bit layout's units past the sign bit make negative ids: its whole range.
        let last = self.max_units();
        // The start of this hour stands for now: a seed's ids are the same for an hour, and
        // near enough to what now()-relative values compare with (an hour to a year).
        let hour_us =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros()
                as i64
                / 3_600_000_000
                * 3_600_000_000;
        let now_units = ((hour_us - self.epoch_us) / self.unit_us) as u64;
        let mut units = vec![0, 1, 2, last, last - 1, now_units, now_units + 1];
        units.extend((0..12).map(|_| rng.below(last + 1)));
        // Within a day or so of now (1,000,000 units: 17 minutes of 1 ms, 2.8 hours of 10 ms),
        // where now()-relative values fall.
        units.extend((0..12).map(|_| now_units.saturating_sub(rng.below(1_000_000))));
        let mut ids = Vec::new();
        for u in units {
            for (w, s) in [(0, 0), (max_w, max_s), (rng.below(max_w + 1), rng.below(max_s + 1))] {
                ids.push(self.id(u, w, s));
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Bigints it cannot hold: negative ones (in layouts of 63 bits or fewer), and ones above its
    /// bits (for narrower layouts: 2^53 and up for js53).
    fn invalid_ids(&self, rng: &mut Rng) -> Vec<i64> {
        if self.total_bits() >= 64 {
            return vec![];
        }
        let mut ids = vec![-1, i64::MIN, -(rng.below(1 << 40) as i64) - 1];
        if self.total_bits() < 63 {
            let above = 1i64 << self.total_bits();
            ids.extend([above, above + 1, i64::MAX, above + rng.below(1 << 20) as i64]);
        }
        ids
    }

    /// A time literal to compare with: the start of the time unit of one of `ids`, a
    /// microsecond either side of it, half a unit on, the unit's last microsecond, a day before
    /// the epoch, past the end of the layout, the first and last microseconds PostgreSQL holds
    /// (with `extremes`: not in a column, where `ts + interval` would overflow), infinity,
    /// -infinity, NULL.
    fn value(&self, rng: &mut Rng, ids: &[i64], extremes: bool) -> String {
        let id = *rng.pick(ids) as u64;
        let units = (id >> (self.worker_bits + self.sequence_bits)) as i64;
        let start = self.epoch_us + units * self.unit_us;
        let us = match rng.below(10) {
            0 => start - 1,
            1 => start + 1,
            2 => start + self.unit_us / 2,
            3 => start + self.unit_us - 1,
            4 => self.epoch_us - 86_400_000_000,
            5 => self.epoch_us + (self.max_units() as i64 + 2) * self.unit_us,
            6 => return rng.pick(&["'infinity'", "'-infinity'", "NULL"]).to_string(),
            7 if extremes && rng.chance(30) => {
                return rng
                    .pick(&["'4714-11-24 00:00:00+00 BC'", "'294276-12-31 23:59:59.999999+00'"])
                    .to_string()
            }
            _ => start,
        };
        format!("'{}'", iso_us(us))
    }
}

fn set_hook(c: &mut Client, on: bool) {
    c.batch_execute(&format!("SET snowflake.time_ranges = {}", if on { "on" } else { "off" }))
        .unwrap();
}

/// The ids the tables of one seed hold, drawn from few values so that joins on them match.
struct Data {
    /// Ids of the layout, whose time units give the literals compared with.
    valid: Vec<i64>,
    /// Every id in the tables but NULL, for conditions on the id itself.
    all: Vec<i64>,
}

/// Rows of each table.
const ROWS: usize = 30;

/// The tables of a seed, in schema `fz`, made afresh. Every one has the columns n (unique
/// across all of them, for a determined order), id, g (0 to 3), ts (a time like those compared
/// with) and ref (another id):
/// - `pk`: a bigint primary key (no NULL id); `heap`: no index; `expr`: an index on
///   `snowflake_timestamp(id)`;
/// - `prange`: partitioned by range of id (negative, low, high, and NULL in the default);
///   `pts`: by range of `snowflake_timestamp(id)` (old, middle, new, and NULL in the default:
///   NULL ids and bigints the layout cannot hold);
/// - `inh` with two children by INHERITS, `inh_a` with a CHECK on `snowflake_timestamp(id)`
///   (constraint exclusion) and `inh_b` with an expression index;
/// - `dom`: id of a domain over bigint;
/// - `v_pk`: a view of `pk` (auto-updatable), `v_sb` a security barrier view of `heap`, `mv` a
///   materialized view of `pk`.
fn make_tables(c: &mut Client, layout: &Layout, seed: u64) -> Data {
    let mut rng = Rng::split(seed, u64::MAX);
    let valid = layout.valid_ids(&mut rng);
    // 40 of them, and the layout's first and last ids, shared by every table.
    let mut pool: Vec<i64> = (0..40).map(|_| *rng.pick(&valid)).collect();
    pool.extend([valid[0], valid[valid.len() - 1]]);
    pool.sort_unstable();
    pool.dedup();
    let invalid = layout.invalid_ids(&mut rng);
    let id = |rng: &mut Rng, nullable: bool| -> Option<i64> {
        match rng.below(20) {
            0..=1 if nullable => None,
            2..=4 if !invalid.is_empty() => Some(*rng.pick(&invalid)),
            _ => Some(*rng.pick(&pool)),
        }
    };
    // Partition bounds: the times of two ids of the pool, a unit apart at least.
    let times: Vec<i64> = (0..2).map(|_| layout.time_us(*rng.pick(&pool)).unwrap()).collect();
    let (a, b) = (
        times[0].min(times[1]),
        times[0].max(times[1]).max(times[0].min(times[1]) + layout.unit_us),
    );
    let mid = (*rng.pick(&pool)).max(1);
    let mut n = 0;
    let mut all = Vec::new();
    let mut rows = |rng: &mut Rng, nullable: bool, unique: bool| -> Vec<(i64, Option<i64>)> {
        let mut out: Vec<(i64, Option<i64>)> = Vec::new();
        while out.len() < ROWS {
            let mut i = id(rng, nullable);
            // The pool may hold fewer distinct ids than a unique column needs: then others of
            // the layout (about 90).
            while unique && out.iter().any(|(_, o)| *o == i) {
                i = Some(*rng.pick(&valid));
            }
            n += 1;
            out.push((n, i));
        }
        all.extend(out.iter().filter_map(|(_, i)| *i));
        out
    };
    let sql_id = |i: Option<i64>| i.map_or("NULL".to_string(), |i| i.to_string());
    let values = |rng: &mut Rng, rows: &[(i64, Option<i64>)]| -> String {
        rows.iter()
            .map(|(n, i)| {
                format!(
                    "({n}, {}, {}, {}, {})",
                    sql_id(*i),
                    rng.below(4),
                    if rng.chance(10) {
                        "NULL".to_string()
                    } else {
                        layout.value(rng, &pool, false)
                    },
                    sql_id(id(rng, true)),
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut inserts = Vec::new();
    for (table, nullable, unique) in [
        ("pk", false, true),
        ("heap", true, false),
        ("expr", true, false),
        ("prange", true, false),
        ("pts", true, false),
        ("dom", true, false),
    ] {
        let r = rows(&mut rng, nullable, unique);
        inserts.push(format!("INSERT INTO fz.{table} VALUES {}", values(&mut rng, &r)));
    }
    // The inherited tables: inh_a takes only what its CHECK lets in.
    let r = rows(&mut rng, true, false);
    let (mut parent, mut child_a, mut child_b) = (vec![], vec![], vec![]);
    for row in r {
        let fits_a = row.1.is_none_or(|i| layout.time_us(i).is_none_or(|t| t >= a));
        match rng.below(3) {
            0 if fits_a => child_a.push(row),
            1 => child_b.push(row),
            _ => parent.push(row),
        }
    }
    for (table, r) in [("inh", parent), ("inh_a", child_a), ("inh_b", child_b)] {
        if !r.is_empty() {
            inserts.push(format!("INSERT INTO fz.{table} VALUES {}", values(&mut rng, &r)));
        }
    }
    let (a, b) = (iso_us(a), iso_us(b));
    c.batch_execute(&format!(
        "DROP SCHEMA IF EXISTS fz CASCADE;
         CREATE SCHEMA fz;
         CREATE DOMAIN fz.snowid AS bigint;
         CREATE TABLE fz.pk (n int NOT NULL, id bigint PRIMARY KEY, g int, ts timestamptz,
                             ref bigint);
         CREATE TABLE fz.heap (n int NOT NULL, id bigint, g int, ts timestamptz, ref bigint);
         CREATE TABLE fz.expr (LIKE fz.heap);
         CREATE INDEX ON fz.expr (snowflake_timestamp(id));
         CREATE TABLE fz.prange (LIKE fz.heap) PARTITION BY RANGE (id);
         CREATE TABLE fz.prange_neg PARTITION OF fz.prange FOR VALUES FROM (MINVALUE) TO (0);
         CREATE TABLE fz.prange_low PARTITION OF fz.prange FOR VALUES FROM (0) TO ({mid});
         CREATE TABLE fz.prange_high PARTITION OF fz.prange FOR VALUES FROM ({mid}) TO (MAXVALUE);
         CREATE TABLE fz.prange_null PARTITION OF fz.prange DEFAULT;
         CREATE INDEX ON fz.prange (id);
         CREATE TABLE fz.pts (LIKE fz.heap) PARTITION BY RANGE (snowflake_timestamp(id));
         CREATE TABLE fz.pts_old PARTITION OF fz.pts FOR VALUES FROM (MINVALUE) TO ('{a}');
         CREATE TABLE fz.pts_mid PARTITION OF fz.pts FOR VALUES FROM ('{a}') TO ('{b}');
         CREATE TABLE fz.pts_new PARTITION OF fz.pts FOR VALUES FROM ('{b}') TO (MAXVALUE);
         CREATE TABLE fz.pts_none PARTITION OF fz.pts DEFAULT;
         CREATE INDEX ON fz.pts (id);
         CREATE TABLE fz.inh (LIKE fz.heap);
         CREATE INDEX ON fz.inh (id);
         CREATE TABLE fz.inh_a (CHECK (snowflake_timestamp(id) IS NULL
                                       OR snowflake_timestamp(id) >= '{a}')) INHERITS (fz.inh);
         CREATE TABLE fz.inh_b (note text) INHERITS (fz.inh);
         CREATE INDEX ON fz.inh_b (snowflake_timestamp(id));
         CREATE TABLE fz.dom (n int NOT NULL, id fz.snowid, g int, ts timestamptz, ref bigint);
         CREATE INDEX ON fz.dom (id);
         CREATE VIEW fz.v_pk AS SELECT n, id, g, ts, ref FROM fz.pk WHERE g <> 3;
         CREATE VIEW fz.v_sb WITH (security_barrier) AS
             SELECT n, id, g, ts, ref FROM fz.heap WHERE g <> 0;
         {};
         CREATE MATERIALIZED VIEW fz.mv AS SELECT * FROM fz.pk;
         CREATE INDEX ON fz.mv (id);
         ANALYZE fz.mv, fz.pk, fz.heap, fz.expr, fz.prange, fz.pts, fz.inh, fz.inh_a, fz.inh_b, fz.dom",
        inserts.join(";\n")
    ))
    .unwrap_or_else(|e| panic!("seed {seed}: the tables: {}", why(&e)));
    all.sort_unstable();
    all.dedup();
    Data { valid: pool, all }
}

/// What generated statements read: every one has the columns n, id, g, ts and ref.
const READ: &[&str] = &[
    "fz.pk",
    "fz.heap",
    "fz.expr",
    "fz.prange",
    "fz.pts",
    "fz.inh",
    "ONLY fz.inh",
    "fz.inh_a",
    "fz.dom",
    "fz.v_pk",
    "fz.v_sb",
    "fz.mv",
];

/// What INSERT and MERGE write into (MERGE on 17 and later into the view fz.v_pk too).
const WRITTEN: &[&str] =
    &["fz.pk", "fz.heap", "fz.expr", "fz.prange", "fz.pts", "fz.inh", "fz.inh_a", "fz.dom"];

/// What UPDATE and DELETE change, and whether an UPDATE may change the id (no unique key on it).
const CHANGE: &[(&str, bool)] = &[
    ("fz.pk", false),
    ("fz.heap", true),
    ("fz.expr", true),
    ("fz.prange", true),
    ("fz.pts", true),
    ("fz.inh", true),
    ("ONLY fz.inh", true),
    ("fz.inh_a", true),
    ("fz.dom", true),
    ("fz.v_pk", false),
];

/// A FROM item in scope, by its alias.
#[derive(Clone)]
struct Src {
    alias: String,
    /// Whether n is unique among its rows (one table's rows), so that ORDER BY n orders them.
    unique: bool,
}

/// A generated statement.
struct Case {
    kind: &'static str,
    sql: String,
    /// Its rows come in a determined order (ORDER BY a unique key of every source).
    ordered: bool,
    /// What is compared after it, in the same transaction (the table a MERGE changed).
    after: Option<String>,
    /// `Some` for a prepared statement: the values of $1, $2, ... for EXECUTE.
    params: Option<Vec<String>>,
    /// Read through a scroll cursor, forward then backward (planned for a cursor, which must
    /// scan backward too).
    cursor: bool,
    /// SET LOCAL settings it runs with, on and off alike (plans of another shape).
    settings: Vec<String>,
}

/// Makes random statements over the tables of `make_tables`.
struct Gen<'a> {
    rng: Rng,
    layout: &'a Layout,
    data: &'a Data,
    /// `Some` while a prepared statement is made: the values of its parameters so far.
    params: Option<Vec<String>>,
    /// The CTEs of the statement, with whether n is unique in each.
    ctes: Vec<(String, bool)>,
    /// Whether the statement has a data-modifying CTE already (two on one table would make
    /// the result depend on the plan, as PostgreSQL documents).
    modifying_cte: bool,
    /// FULL JOINs made so far.
    full_joins: u32,
    aliases: u32,
    /// server_version_num: MERGE ... RETURNING, WHEN NOT MATCHED BY SOURCE and MERGE into a
    /// view need 17.
    version: i32,
}

impl Gen<'_> {
    fn chance(&mut self, percent: u64) -> bool {
        self.rng.chance(percent)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    fn alias(&mut self) -> String {
        self.aliases += 1;
        format!("a{}", self.aliases)
    }

    fn src(&mut self, scope: &[Src]) -> String {
        self.rng.pick(scope).alias.clone()
    }

    fn table(&mut self) -> &'static str {
        self.rng.pick(READ)
    }

    fn literal(&mut self) -> String {
        self.layout.value(&mut self.rng, &self.data.valid, true)
    }

    /// A literal with its type, for places where an untyped one would be text.
    fn typed_literal(&mut self) -> String {
        let v = self.literal();
        if v == "NULL" {
            "NULL::timestamptz".into()
        } else if self.chance(50) {
            format!("timestamptz {v}")
        } else {
            format!("{v}::timestamptz")
        }
    }

    fn id_literal(&mut self) -> String {
        format!("'{}'", self.rng.pick(&self.data.all))
    }

    fn interval(&mut self) -> &'static str {
        self.rng.pick(&[
            "1 millisecond",
            "7 milliseconds",
            "1 second",
            "1 minute",
            "10 minutes",
            "1 hour",
            "6 hours",
            "1 day",
            "30 days",
            "1 year",
        ])
    }

    /// A timestamptz to compare `snowflake_timestamp(...)` with, which may refer to `scope`.
    fn value(&mut self, scope: &[Src]) -> String {
        let columns = !scope.is_empty();
        match self.below(100) {
            0..=34 => self.literal(),
            35..=39 => self.typed_literal(),
            40..=49 if self.params.is_some() => {
                let v = self.literal();
                let params = self.params.as_mut().unwrap();
                params.push(v);
                format!("${}", params.len())
            }
            50..=61 if columns => format!("{}.ts", self.src(scope)),
            62..=69 if columns => {
                let col = *self.rng.pick(&["id", "id", "ref"]);
                format!("snowflake_timestamp({}.{col})", self.src(scope))
            }
            70..=79 => self.now_relative(),
            80..=84 => self.scalar_subquery(scope),
            85..=91 if columns => self.expression_of_column(scope),
            // Another type: compared through a cross-type operator, which the hook leaves.
            92..=95 => {
                let v = self.typed_literal();
                format!("({v})::{}", self.rng.pick(&["date", "timestamp"]))
            }
            _ => self.literal(),
        }
    }

    /// A stable expression relative to now(), the same in both runs of one transaction.
    fn now_relative(&mut self) -> String {
        let base = *self.rng.pick(&[
            "now()",
            "current_timestamp",
            "transaction_timestamp()",
            "date_trunc('hour', now())",
            "date_trunc('day', now())",
            "current_date::timestamptz",
            // In parentheses: BETWEEN's operands cannot be AT TIME ZONE.
            "((now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')",
        ]);
        match self.below(3) {
            0 => base.to_string(),
            1 => format!("({base} - interval '{}')", self.interval()),
            _ => format!("({base} + interval '{}')", self.interval()),
        }
    }

    fn scalar_subquery(&mut self, scope: &[Src]) -> String {
        let t = self.table();
        let b = self.alias();
        match self.below(4) {
            0 => format!("(SELECT max({b}.ts) FROM {t} {b})"),
            1 => format!(
                "(SELECT snowflake_timestamp(min({b}.id)) FROM {t} {b} WHERE {b}.g = {})",
                self.below(4)
            ),
            2 if !scope.is_empty() => {
                let x = self.src(scope);
                format!("(SELECT min({b}.ts) FROM {t} {b} WHERE {b}.g = {x}.g)")
            }
            _ => {
                format!("(SELECT snowflake_timestamp({b}.id) FROM {t} {b} ORDER BY {b}.n LIMIT 1)")
            }
        }
    }

    fn expression_of_column(&mut self, scope: &[Src]) -> String {
        let x = self.src(scope);
        match self.below(5) {
            0 => format!("{x}.ts + interval '{}'", self.interval()),
            1 => format!("COALESCE({x}.ts, {})", self.typed_literal()),
            2 => format!("GREATEST({}, {x}.ts)", self.typed_literal()),
            3 => format!("LEAST({x}.ts, snowflake_timestamp({x}.ref))"),
            _ => format!("CASE WHEN {x}.g > 1 THEN {} ELSE {x}.ts END", self.typed_literal()),
        }
    }

    /// `snowflake_timestamp` of a column in `scope`: mostly of a plain column, which the hook
    /// rewrites, sometimes of an expression, which it leaves.
    fn ts_call(&mut self, scope: &[Src]) -> String {
        let x = self.src(scope);
        let col = if self.chance(20) { "ref" } else { "id" };
        match self.below(20) {
            0 => format!("snowflake_timestamp(COALESCE({x}.{col}, -1))"),
            1 => format!("public.snowflake_timestamp({x}.{col})"),
            _ => format!("snowflake_timestamp({x}.{col})"),
        }
    }

    fn comparison(&mut self, scope: &[Src], values: &[Src]) -> String {
        let call = self.ts_call(scope);
        let value = self.value(values);
        let op = *self.rng.pick(&["<", "<=", ">=", ">", "<", ">", "<=", ">=", "=", "<>"]);
        if self.chance(50) {
            format!("{call} {op} {value}")
        } else {
            format!("{value} {op} {call}")
        }
    }

    /// A condition without AND, OR or NOT at its top.
    fn atom(&mut self, scope: &[Src], depth: u32) -> String {
        match self.below(100) {
            0..=49 => self.comparison(scope, scope),
            50..=57 => {
                let call = self.ts_call(scope);
                let not = if self.chance(30) { "NOT " } else { "" };
                let symmetric = if self.chance(20) { "SYMMETRIC " } else { "" };
                let (low, high) = (self.value(scope), self.value(scope));
                format!("{call} {not}BETWEEN {symmetric}{low} AND {high}")
            }
            // Comparisons of other node types, which the hook leaves as written.
            58..=62 => {
                let call = self.ts_call(scope);
                match self.below(7) {
                    0 => format!("{call} IS {}NULL", if self.chance(50) { "NOT " } else { "" }),
                    1 => format!("{call} IS DISTINCT FROM {}", self.value(scope)),
                    2 => format!("{call} IS NOT DISTINCT FROM {}", self.value(scope)),
                    3 => format!("{call} IN ({}, {})", self.value(scope), self.value(scope)),
                    4 => {
                        let x = self.src(scope);
                        let v = self.typed_literal();
                        format!("({call}, {x}.n) > ({v}, {})", self.below(300))
                    }
                    _ => format!(
                        "{call} {} (ARRAY[{}, {}])",
                        self.rng.pick(&["= ANY", "> ANY", "<= ALL", "<> ALL"]),
                        self.typed_literal(),
                        self.typed_literal()
                    ),
                }
            }
            63..=80 => self.plain_atom(scope),
            81..=88 if depth > 0 => self.sublink(scope, depth - 1),
            _ => self.comparison(scope, scope),
        }
    }

    /// A condition on other columns; of two sources where it compares columns (the same one
    /// twice, `a.g <> a.g`, would keep nothing).
    fn plain_atom(&mut self, scope: &[Src]) -> String {
        let x = self.src(scope);
        let others: Vec<Src> = scope.iter().filter(|s| s.alias != x).cloned().collect();
        let y = if others.is_empty() { None } else { Some(self.src(&others)) };
        match (self.below(10), y) {
            (1, Some(y)) => format!("{x}.g <> {y}.g"),
            (4, Some(y)) => format!("{x}.id > {y}.id"),
            (5, Some(y)) => format!("{x}.ref = {y}.id"),
            (1 | 4 | 5, None) => format!("{x}.ref IS NOT NULL"),
            (0, _) => format!("{x}.g = {}", self.below(4)),
            (2, _) => format!("{x}.n % 3 <> {}", self.below(3)),
            (3, _) => format!("{x}.id IS {}NULL", if self.chance(50) { "NOT " } else { "" }),
            (6, _) => format!("{x}.id >= 0"),
            (7, _) => format!("{x}.ts IS NOT NULL"),
            (8, _) => format!("{x}.id <> {}", self.id_literal()),
            _ => {
                let (a, b) = (self.id_literal(), self.id_literal());
                format!("{x}.id BETWEEN SYMMETRIC {a} AND {b}")
            }
        }
    }

    /// A sub-select in a condition (the hook does not look inside: it runs as written).
    fn sublink(&mut self, scope: &[Src], depth: u32) -> String {
        let t = self.table();
        let b = self.alias();
        let mut inner = vec![Src { alias: b.clone(), unique: true }];
        inner.extend_from_slice(scope);
        let cond = self.condition(&inner, depth);
        match self.below(4) {
            0 => format!("EXISTS (SELECT 1 FROM {t} {b} WHERE {cond})"),
            1 => format!("NOT EXISTS (SELECT 1 FROM {t} {b} WHERE {cond})"),
            2 => format!("{}.id IN (SELECT {b}.id FROM {t} {b} WHERE {cond})", self.src(scope)),
            _ => format!("{}.g >= (SELECT count(*) FROM {t} {b} WHERE {cond})", self.src(scope)),
        }
    }

    fn condition(&mut self, scope: &[Src], depth: u32) -> String {
        if depth == 0 || self.chance(40) {
            return self.atom(scope, depth);
        }
        let d = depth - 1;
        match self.below(4) {
            0 => format!("({} AND {})", self.condition(scope, d), self.condition(scope, d)),
            1 => format!("({} OR {})", self.condition(scope, d), self.condition(scope, d)),
            2 => format!("NOT ({})", self.condition(scope, d)),
            _ => format!(
                "({} AND {} AND {})",
                self.condition(scope, d),
                self.condition(scope, d),
                self.condition(scope, d)
            ),
        }
    }

    /// The conditions of a WHERE: one to three AND-ed, the top level the hook looks at.
    fn conjunction(&mut self, scope: &[Src]) -> String {
        let mut parts = Vec::new();
        for _ in 0..*self.rng.pick(&[1, 1, 1, 1, 2, 2, 3]) {
            let depth = *self.rng.pick(&[0, 0, 1, 2]);
            parts.push(self.condition(scope, depth));
        }
        parts.join(" AND ")
    }

    /// The ON of a join of `left` and `right`. A FULL JOIN's starts with an equality it can hash
    /// or merge (else PostgreSQL refuses it, with the hook or without); three in four of those
    /// compare `snowflake_timestamp`, which the hook must leave there.
    fn join_on(&mut self, left: &[Src], right: &[Src], up: &[Src], full: bool) -> String {
        let (l, r) = (self.src(left), self.src(right));
        let pick = if full { *self.rng.pick(&[0, 1, 2, 3, 3, 4, 4, 5]) } else { self.below(6) };
        let key = match pick {
            0 => format!("{l}.g = {r}.g"),
            1 => format!("{l}.ref = {r}.id"),
            2 => format!("{l}.id = {r}.id"),
            3 => format!("snowflake_timestamp({r}.id) = {l}.ts"),
            4 => format!("snowflake_timestamp({l}.id) = snowflake_timestamp({r}.id)"),
            _ => format!("{l}.ts = snowflake_timestamp({r}.ref)"),
        };
        let mut both = left.to_vec();
        both.extend_from_slice(right);
        both.extend_from_slice(up);
        let mut parts = Vec::new();
        if full || self.chance(60) {
            parts.push(key);
        }
        // A comparison of one side's time with the other's, the shape of issue 33's query.
        if parts.is_empty() || self.chance(40) {
            let mut values = left.to_vec();
            values.extend_from_slice(up);
            parts.push(self.comparison(right, &values));
        }
        if self.chance(30) {
            parts.push(self.condition(&both, 1));
        }
        parts.join(" AND ")
    }

    /// A FROM item that is not a join: a table, a sub-query (LATERAL when `lateral`, the items
    /// to its left it may refer to, is not empty), a CTE, a VALUES list.
    fn leaf(&mut self, up: &[Src], lateral: &[Src]) -> (String, Vec<Src>) {
        let pick = self.below(100);
        let (sql, unique) = match pick {
            0..=44 => (self.table().to_string(), true),
            45..=84 => self.derived(up, lateral),
            85..=96 if !self.ctes.is_empty() => {
                let (name, unique) = self.rng.pick(&self.ctes).clone();
                (name, unique)
            }
            _ => {
                let rows: Vec<String> = (0..3)
                    .map(|i| {
                        let id = self.id_literal();
                        // A column's time: none at PostgreSQL's limits (see `Layout::value`).
                        let ts = self.layout.value(&mut self.rng, &self.data.valid, false);
                        format!(
                            "({}, {id}::bigint, {}, {ts}::timestamptz, NULL::bigint)",
                            1_000_000 + i,
                            self.below(4),
                        )
                    })
                    .collect();
                (format!("(VALUES {})", rows.join(", ")), true)
            }
        };
        let alias = self.alias();
        let sql = if sql.starts_with("(VALUES") {
            format!("{sql} {alias}(n, id, g, ts, ref)")
        } else {
            format!("{sql} {alias}")
        };
        (sql, vec![Src { alias, unique }])
    }

    /// A sub-query in FROM with the columns n, id, g, ts and ref; whether n is unique in it.
    fn derived(&mut self, up: &[Src], lateral: &[Src]) -> (String, bool) {
        let t = self.table();
        let b = self.alias();
        let mut scope = vec![Src { alias: b.clone(), unique: true }];
        scope.extend_from_slice(up);
        let lat = if !lateral.is_empty() && self.chance(60) {
            scope.extend_from_slice(lateral);
            "LATERAL "
        } else {
            ""
        };
        let cols = format!("{b}.n, {b}.id, {b}.g, {b}.ts, {b}.ref");
        let w = if self.chance(75) { self.conjunction(&scope) } else { "true".to_string() };
        match self.below(5) {
            0 | 1 => {
                // n is unique in a table: ORDER BY n LIMIT k takes determined rows.
                let limit = if self.chance(30) {
                    format!(" ORDER BY {b}.n LIMIT {}", 1 + self.below(5))
                } else {
                    String::new()
                };
                (format!("{lat}(SELECT {cols} FROM {t} {b} WHERE {w}{limit})"), true)
            }
            2 => {
                // Window functions over the rows the WHERE keeps, ordered by a unique key or
                // by peers (ties count together), so that their values are determined.
                let g = match self.below(4) {
                    0 => format!("row_number() OVER (PARTITION BY {b}.g ORDER BY {b}.n)"),
                    1 => format!("count(*) OVER (PARTITION BY {b}.g)"),
                    2 => format!("rank() OVER (ORDER BY {b}.ts)"),
                    _ => format!("sum({b}.g) OVER (ORDER BY snowflake_timestamp({b}.id))"),
                };
                (
                    format!(
                        "{lat}(SELECT {b}.n, {b}.id, ({g})::int AS g, {b}.ts, \
                         lag({b}.id) OVER (ORDER BY {b}.n) AS ref FROM {t} {b} WHERE {w})"
                    ),
                    true,
                )
            }
            3 => (
                format!(
                    "{lat}(SELECT min({b}.n) AS n, max({b}.id) AS id, {b}.g, max({b}.ts) AS ts, \
                     min({b}.ref) AS ref FROM {t} {b} WHERE {w} GROUP BY {b}.g)"
                ),
                true,
            ),
            _ => {
                // Mostly the same table twice: INTERSECT and EXCEPT of two tables, whose n
                // differ, would keep nothing or everything.
                let t2 = if self.chance(70) { t } else { self.table() };
                let c = self.alias();
                let mut scope2 = vec![Src { alias: c.clone(), unique: true }];
                scope2.extend_from_slice(&scope[1..]);
                let w2 = self.conjunction(&scope2);
                let op = *self.rng.pick(&[
                    "UNION",
                    "UNION ALL",
                    "INTERSECT",
                    "INTERSECT ALL",
                    "EXCEPT",
                    "EXCEPT ALL",
                ]);
                (
                    format!(
                        "{lat}(SELECT {cols} FROM {t} {b} WHERE {w} {op} \
                         SELECT {c}.n, {c}.id, {c}.g, {c}.ts, {c}.ref FROM {t2} {c} WHERE {w2})"
                    ),
                    false,
                )
            }
        }
    }

    /// A join tree of `leaves` FROM items. `lateral`: the items before it in the FROM list,
    /// which a LATERAL sub-query in it may refer to.
    fn join_tree(&mut self, up: &[Src], lateral: &[Src], leaves: u64) -> (String, Vec<Src>) {
        if leaves <= 1 {
            return self.leaf(up, lateral);
        }
        let left_leaves = 1 + self.below(leaves - 1);
        let (l, mut sources) = self.join_tree(up, lateral, left_leaves);
        let kind = *self.rng.pick(&[
            "JOIN",
            "INNER JOIN",
            "LEFT JOIN",
            "LEFT OUTER JOIN",
            "RIGHT JOIN",
            "RIGHT OUTER JOIN",
            "FULL JOIN",
            "FULL OUTER JOIN",
            "FULL JOIN",
            "CROSS JOIN",
        ]);
        // The right side of an inner or left join may refer to its left side (LATERAL).
        let mut sees = lateral.to_vec();
        if !kind.starts_with("RIGHT") && !kind.starts_with("FULL") {
            sees.extend(sources.iter().cloned());
        }
        let right_leaves = leaves - left_leaves;
        let (r, right) = if right_leaves == 1 {
            self.leaf(up, &sees)
        } else {
            let (r, right) = self.join_tree(up, lateral, right_leaves);
            (format!("({r})"), right)
        };
        if kind.starts_with("FULL") {
            self.full_joins += 1;
        }
        let sql = if kind == "CROSS JOIN" {
            format!("{l} CROSS JOIN {r}")
        } else if left_leaves == 1 && right_leaves == 1 && self.chance(10) {
            let column = *self.rng.pick(&["id", "g"]);
            format!("{l} {kind} {r} USING ({column})")
        } else {
            let on = self.join_on(&sources, &right, up, kind.starts_with("FULL"));
            format!("{l} {kind} {r} ON {on}")
        };
        sources.extend(right);
        (sql, sources)
    }

    /// A FROM list of join trees, of at most `most` items in all: 3 at the top of a SELECT,
    /// 2 elsewhere (a CTE or sub-select of a join, read in a join of three, made 600,000 rows).
    fn join_list(&mut self, up: &[Src], most: u64) -> (String, Vec<Src>) {
        let mut remaining = (*self.rng.pick(&[1, 1, 1, 2, 2, 2, 2, 3, 3])).min(most);
        let (mut items, mut sources) = (Vec::new(), Vec::new());
        while remaining > 0 {
            let leaves = 1 + self.below(remaining);
            let (sql, s) = self.join_tree(up, &sources.clone(), leaves);
            items.push(sql);
            sources.extend(s);
            remaining -= leaves;
        }
        (items.join(", "), sources)
    }

    /// A WHERE, always over two FROM items or more (three tables of 30 rows crossed are 27,000
    /// rows, 0.6 s a statement).
    fn where_clause(&mut self, scope: &[Src]) -> String {
        if scope.len() > 1 || self.chance(80) {
            format!(" WHERE {}", self.conjunction(scope))
        } else {
            String::new()
        }
    }

    /// A SELECT, and whether its rows come in a determined order.
    fn select(&mut self, up: &[Src]) -> (String, bool) {
        let full_joins = self.full_joins;
        let (from, sources) = self.join_list(up, 3);
        let mut scope = sources.clone();
        scope.extend_from_slice(up);
        // A WHERE that rejects the NULLs of both sides makes a FULL JOIN an inner one
        // (reduce_outer_joins), whose conditions need not hash: half go without.
        let where_ = if self.full_joins > full_joins && self.chance(50) {
            String::new()
        } else {
            self.where_clause(&scope)
        };
        let unique = sources.iter().all(|s| s.unique);
        let key = sources.iter().map(|s| format!("{}.n", s.alias)).collect::<Vec<_>>().join(", ");
        let (x, y) = (self.src(&sources), self.src(&sources));
        match self.below(10) {
            0 => {
                let having = if self.chance(40) {
                    format!(" HAVING max(snowflake_timestamp({y}.id)) > {}", self.typed_literal())
                } else {
                    String::new()
                };
                (
                    format!(
                        "SELECT {x}.g, count(*), min({y}.id), max({y}.ts) FROM {from}{where_} \
                         GROUP BY {x}.g{having}"
                    ),
                    false,
                )
            }
            1 => {
                let numbered = if unique {
                    format!("row_number() OVER (ORDER BY {key})")
                } else {
                    format!("rank() OVER (ORDER BY {x}.ts)")
                };
                (
                    format!(
                        "SELECT {key}, {numbered}, count(*) OVER (PARTITION BY {x}.g), \
                         sum({y}.g) OVER (ORDER BY {y}.id) FROM {from}{where_}"
                    ),
                    false,
                )
            }
            2 => (
                format!("SELECT DISTINCT {x}.g, snowflake_timestamp({y}.id) FROM {from}{where_}"),
                false,
            ),
            _ => {
                let cols = sources
                    .iter()
                    .map(|s| {
                        let a = &s.alias;
                        format!("{a}.n, {a}.id, snowflake_timestamp({a}.id)")
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                if unique && self.chance(50) {
                    let limit = if self.chance(40) {
                        format!(" LIMIT {} OFFSET {}", 1 + self.below(10), self.below(3))
                    } else {
                        String::new()
                    };
                    (format!("SELECT {cols} FROM {from}{where_} ORDER BY {key}{limit}"), true)
                } else {
                    (format!("SELECT {cols} FROM {from}{where_}"), false)
                }
            }
        }
    }

    /// Two or three SELECTs of (n, id) joined by UNION, INTERSECT or EXCEPT (with ALL or not).
    fn set_operation(&mut self) -> String {
        let mut sql = String::new();
        let first = self.table();
        for i in 0..2 + self.below(2) {
            if i > 0 {
                let op = *self.rng.pick(&["UNION", "INTERSECT", "EXCEPT"]);
                let all = if self.chance(50) { " ALL" } else { "" };
                sql.push_str(&format!(" {op}{all} "));
            }
            // Mostly one table read in every arm, for INTERSECT and EXCEPT to keep some rows.
            let (from, sources) = if i > 0 && self.chance(60) {
                let a = self.alias();
                let from = format!("{first} {a}");
                (from, vec![Src { alias: a, unique: true }])
            } else {
                self.join_list(&[], 2)
            };
            let x = self.src(&sources);
            let where_ = self.where_clause(&sources);
            sql.push_str(&format!("(SELECT {x}.n, {x}.id FROM {from}{where_})"));
        }
        sql
    }

    /// WITH and one or two CTEs, which later FROM items may read: a filtered table, a join,
    /// a recursive one, or (at the top of a SELECT, once) an UPDATE or DELETE ... RETURNING.
    /// `modifying`: it may hold an UPDATE or DELETE; `recursive`: it may be WITH RECURSIVE
    /// (which MERGE refuses).
    fn with_clause(&mut self, modifying: bool, recursive_ok: bool) -> String {
        let mut defs = Vec::new();
        let mut recursive = false;
        for _ in 0..1 + self.below(2) {
            let name = format!("c{}", self.ctes.len() + 1);
            let mut materialized = *self.rng.pick(&["", "MATERIALIZED ", "NOT MATERIALIZED "]);
            let t = self.table();
            let b = self.alias();
            let me = [Src { alias: b.clone(), unique: true }];
            let cols = format!("{b}.n, {b}.id, {b}.g, {b}.ts, {b}.ref");
            let (body, unique) = match self.below(6) {
                0 | 1 => {
                    let w = self.conjunction(&me);
                    (format!("SELECT {cols} FROM {t} {b} WHERE {w}"), true)
                }
                2 => {
                    // At most 20 rows: ordered by every column, which rows those are is
                    // determined (rows alike in all are the same).
                    let (from, sources) = self.join_list(&[], 2);
                    let x = self.src(&sources);
                    let w = self.where_clause(&sources);
                    (
                        format!(
                            "SELECT {x}.n, {x}.id, {x}.g, {x}.ts, {x}.ref FROM {from}{w} \
                             ORDER BY 1, 2, 3, 4, 5 LIMIT 20"
                        ),
                        false,
                    )
                }
                3 if recursive_ok => {
                    // Follows n up from the rows it starts with (UNION: it ends).
                    recursive = true;
                    let w = self.conjunction(&me);
                    let c = self.alias();
                    let w2 = self.conjunction(&[Src { alias: c.clone(), unique: true }]);
                    (
                        format!(
                            "SELECT {cols} FROM {t} {b} WHERE {w} UNION SELECT {c}.n, {c}.id, \
                             {c}.g, {c}.ts, {c}.ref FROM {name} JOIN {t} {c} \
                             ON {c}.n = {name}.n + 1 WHERE {w2}"
                        ),
                        false,
                    )
                }
                _ if modifying && !self.modifying_cte => {
                    self.modifying_cte = true;
                    if materialized == "NOT MATERIALIZED " {
                        materialized = "";
                    }
                    let (target, _) = *self.rng.pick(CHANGE);
                    let w = self.conjunction(&me);
                    if self.chance(50) {
                        (format!("DELETE FROM {target} {b} WHERE {w} RETURNING {cols}"), true)
                    } else {
                        (
                            format!(
                                "UPDATE {target} {b} SET g = {b}.g + 1 WHERE {w} RETURNING {cols}"
                            ),
                            true,
                        )
                    }
                }
                _ => {
                    let w = self.conjunction(&me);
                    (format!("SELECT {cols} FROM {t} {b} WHERE {w}"), true)
                }
            };
            defs.push(format!("{name} AS {materialized}({body})"));
            self.ctes.push((name, unique));
        }
        format!("WITH {}{} ", if recursive { "RECURSIVE " } else { "" }, defs.join(", "))
    }

    fn maybe_with(&mut self, percent: u64, modifying: bool) -> String {
        if self.chance(percent) {
            self.with_clause(modifying, true)
        } else {
            String::new()
        }
    }

    /// UPDATE ... [FROM] ... RETURNING the target's columns. SET and RETURNING use the
    /// target's columns only: with FROM, which joined row updates it is not determined.
    fn update(&mut self) -> String {
        let with = self.maybe_with(15, false);
        let (target, id_free) = *self.rng.pick(CHANGE);
        let t = self.alias();
        let me = vec![Src { alias: t.clone(), unique: true }];
        let (from, mut scope) = if self.chance(35) {
            let (f, s) = self.join_list(&[], 2);
            (format!(" FROM {f}"), s)
        } else {
            (String::new(), vec![])
        };
        scope.push(me[0].clone());
        let mut sets = vec![format!("g = {t}.g + 1")];
        if self.chance(30) {
            sets.push(format!("ts = {}", self.value(&me)));
        }
        // Moves rows between partitions (prange, pts), may leave inh_a's CHECK (23514) or
        // overflow (22003): errors the same with and without the hook.
        if id_free && self.chance(25) {
            let step = *self.rng.pick(&["+ 1", "- 1", "+ 1000000"]);
            sets.push(format!("id = {t}.id {step}"));
        }
        let where_ = format!(" WHERE {}", self.conjunction(&scope));
        format!(
            "{with}UPDATE {target} {t} SET {}{from}{where_} RETURNING {t}.n, {t}.id, {t}.g, {t}.ts",
            sets.join(", ")
        )
    }

    fn delete(&mut self) -> String {
        let with = self.maybe_with(15, false);
        let (target, _) = *self.rng.pick(CHANGE);
        let t = self.alias();
        let (using, mut scope) = if self.chance(35) {
            let (f, s) = self.join_list(&[], 2);
            (format!(" USING {f}"), s)
        } else {
            (String::new(), vec![])
        };
        scope.push(Src { alias: t.clone(), unique: true });
        let where_ = format!(" WHERE {}", self.conjunction(&scope));
        format!("{with}DELETE FROM {target} {t}{using}{where_} RETURNING {t}.n, {t}.id")
    }

    /// INSERT ... SELECT ... RETURNING; into pk with ON CONFLICT DO NOTHING (which of two
    /// equal ids goes in depends on the order: RETURNING only the id).
    fn insert(&mut self) -> String {
        let with = self.maybe_with(15, false);
        let (from, sources) = self.join_list(&[], 2);
        let x = self.src(&sources);
        let where_ = self.where_clause(&sources);
        let target = *self.rng.pick(WRITTEN);
        let select =
            format!("SELECT {x}.n + 1000000, {x}.id, {x}.g, {x}.ts, {x}.ref FROM {from}{where_}");
        if target == "fz.pk" {
            format!(
                "{with}INSERT INTO fz.pk (n, id, g, ts, ref) {select} \
                 ON CONFLICT (id) DO NOTHING RETURNING id"
            )
        } else {
            format!(
                "{with}INSERT INTO {target} (n, id, g, ts, ref) {select} RETURNING n, id, g, ts"
            )
        }
    }

    /// `AND condition` or nothing, for a WHEN of MERGE; `last`: the last WHEN of its kind, which
    /// may go without (an unconditional WHEN before another of its kind is an error).
    fn when_and(&mut self, scope: &[Src], last: bool) -> String {
        if !last || self.chance(50) {
            format!(" AND {}", self.condition(scope, 1))
        } else {
            String::new()
        }
    }

    /// MERGE, and the query of the table it changed. Which WHEN runs, and the 21000 of a row
    /// matched twice, follow from the rows matched, whatever order the plan gives them.
    fn merge(&mut self) -> (String, String) {
        let with = if self.chance(15) { self.with_clause(false, false) } else { String::new() };
        let seventeen = self.version >= 170_000;
        let mut targets = WRITTEN.to_vec();
        if seventeen {
            targets.push("fz.v_pk");
        }
        let target = *self.rng.pick(&targets);
        let (t, s) = (self.alias(), self.alias());
        let source = if self.chance(40) {
            format!("{} {s}", self.table())
        } else {
            let (b, table) = (self.alias(), self.table());
            let w = self.conjunction(&[Src { alias: b.clone(), unique: true }]);
            format!("(SELECT {b}.n, {b}.id, {b}.g, {b}.ts, {b}.ref FROM {table} {b} WHERE {w}) {s}")
        };
        let src = |alias: &str| Src { alias: alias.to_string(), unique: true };
        let (ts_, ss, both) = ([src(&t)], [src(&s)], [src(&t), src(&s)]);
        let key = match self.below(5) {
            0 => format!("{t}.id = {s}.id"),
            1 => format!("snowflake_timestamp({t}.id) = {s}.ts"),
            2 => format!("snowflake_timestamp({t}.id) = snowflake_timestamp({s}.id)"),
            3 => format!("{t}.n = {s}.n"),
            _ => format!("{t}.ref = {s}.id"),
        };
        let mut on = vec![key];
        for _ in 0..self.below(3) {
            on.push(self.condition(&both, 1));
        }
        let mut whens = Vec::new();
        let kinds = if seventeen { 3 } else { 2 };
        for kind in 0..kinds {
            let n = self.below(3);
            for i in 0..n {
                let last = i + 1 == n;
                let when = match kind {
                    0 => {
                        let and = self.when_and(&both, last);
                        match self.below(3) {
                            0 => format!(
                                "WHEN MATCHED{and} THEN UPDATE SET g = {t}.g + 1, ts = {s}.ts"
                            ),
                            1 => format!("WHEN MATCHED{and} THEN DELETE"),
                            _ => format!("WHEN MATCHED{and} THEN DO NOTHING"),
                        }
                    }
                    1 => {
                        let and = self.when_and(&ss, last);
                        if self.chance(80) {
                            format!(
                                "WHEN NOT MATCHED{and} THEN INSERT (n, id, g, ts, ref) \
                                 VALUES ({s}.n + 1000000, {s}.id, {s}.g, {s}.ts, {s}.ref)"
                            )
                        } else {
                            format!("WHEN NOT MATCHED{and} THEN DO NOTHING")
                        }
                    }
                    _ => {
                        let and = self.when_and(&ts_, last);
                        if self.chance(50) {
                            format!("WHEN NOT MATCHED BY SOURCE{and} THEN DELETE")
                        } else {
                            format!("WHEN NOT MATCHED BY SOURCE{and} THEN UPDATE SET g = {t}.g - 1")
                        }
                    }
                };
                whens.push(when);
            }
        }
        if whens.is_empty() {
            whens.push(format!("WHEN MATCHED THEN UPDATE SET g = {t}.g + 1"));
        }
        let returning = if seventeen && self.chance(50) {
            format!(" RETURNING merge_action(), {t}.n, {t}.id")
        } else {
            String::new()
        };
        (
            format!(
                "{with}MERGE INTO {target} {t} USING {source} ON {} {}{returning}",
                on.join(" AND "),
                whens.join(" ")
            ),
            format!("SELECT n, id, g, ts, ref FROM {target}"),
        )
    }

    /// Settings for the statement's plans (the same with the hook and without): scans and
    /// joins turned off, parallel workers forced, and for a prepared statement its plan mode.
    fn settings(&mut self) -> Vec<String> {
        let mut settings = Vec::new();
        if self.params.is_some() {
            settings.push(
                self.rng
                    .pick(&[
                        "plan_cache_mode = force_generic_plan",
                        "plan_cache_mode = force_generic_plan",
                        "plan_cache_mode = force_custom_plan",
                    ])
                    .to_string(),
            );
        }
        for (percent, setting) in [
            (15, "enable_seqscan = off"),
            (10, "enable_hashjoin = off"),
            (10, "enable_mergejoin = off"),
            (10, "enable_nestloop = off"),
            (5, "enable_indexscan = off"),
            (5, "enable_bitmapscan = off"),
            (5, "enable_partition_pruning = off"),
        ] {
            if self.chance(percent) {
                settings.push(setting.to_string());
            }
        }
        if self.chance(8) {
            // Renamed in PostgreSQL 16.
            let force =
                if self.version < 160_000 { "force_parallel_mode" } else { "debug_parallel_query" };
            settings.extend(
                [
                    &format!("{force} = on"),
                    "parallel_setup_cost = 0",
                    "parallel_tuple_cost = 0",
                    "min_parallel_table_scan_size = 0",
                ]
                .map(|s| s.to_string()),
            );
        }
        settings
    }
}

/// Statement `n` of `seed`: it depends on nothing else, so that it replays alone.
fn case(layout: &Layout, data: &Data, version: i32, seed: u64, n: u64) -> Case {
    let mut g = Gen {
        rng: Rng::split(seed, n),
        layout,
        data,
        params: None,
        ctes: Vec::new(),
        modifying_cte: false,
        full_joins: 0,
        aliases: 0,
        version,
    };
    if g.chance(20) {
        g.params = Some(Vec::new());
    }
    let (kind, sql, ordered, after) = match g.below(100) {
        0..=44 => {
            let with = g.maybe_with(25, true);
            let (sql, ordered) = g.select(&[]);
            ("SELECT", format!("{with}{sql}"), ordered, None)
        }
        45..=54 => {
            let with = g.maybe_with(15, false);
            ("set operation", format!("{with}{}", g.set_operation()), false, None)
        }
        55..=66 => ("UPDATE", g.update(), false, None),
        67..=76 => ("DELETE", g.delete(), false, None),
        77..=81 => ("INSERT", g.insert(), false, None),
        _ => {
            let (sql, after) = g.merge();
            ("MERGE", sql, false, Some(after))
        }
    };
    let settings = g.settings();
    // DECLARE takes neither parameters nor a WITH that changes data.
    let cursor = matches!(kind, "SELECT" | "set operation")
        && g.params.is_none()
        && !g.modifying_cte
        && g.chance(15);
    Case { kind, sql, ordered, after, params: g.params, cursor, settings }
}

/// What a statement gave: its rows as text (sorted unless its order is determined) and the
/// count of its command tag, or the SQLSTATE it failed with (and the message, which is shown
/// but not compared).
#[derive(Debug)]
enum Outcome {
    Rows(Vec<Vec<Option<String>>>, u64),
    Failed(String, String),
}

/// Rows equal, or the same SQLSTATE. Of two rows that fail differently (a MERGE that inserts a
/// repeated id, 23505, and matches another row twice, 21000), the one met first fails the
/// statement: that depends on the order of the plan, with the hook or without, so any two of
/// `EXPECTED_ERRORS` count as one.
impl PartialEq for Outcome {
    fn eq(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Rows(a, n), Outcome::Rows(b, m)) => a == b && n == m,
            (Outcome::Failed(a, _), Outcome::Failed(b, _)) => {
                a == b
                    || (EXPECTED_ERRORS.contains(&a.as_str())
                        && EXPECTED_ERRORS.contains(&b.as_str()))
            }
            _ => false,
        }
    }
}

impl Outcome {
    fn of(c: &mut Client, sql: &str, ordered: bool) -> Outcome {
        match c.simple_query(sql) {
            Ok(messages) => {
                let (mut rows, mut count) = (Vec::new(), 0);
                for m in messages {
                    match m {
                        SimpleQueryMessage::Row(r) => {
                            rows.push((0..r.len()).map(|i| r.get(i).map(String::from)).collect())
                        }
                        SimpleQueryMessage::CommandComplete(n) => count = n,
                        _ => {}
                    }
                }
                if !ordered {
                    rows.sort();
                }
                Outcome::Rows(rows, count)
            }
            Err(e) => match e.as_db_error() {
                Some(db) => Outcome::Failed(db.code().code().to_string(), db.message().into()),
                // The server went away: a crash (see the server log printed below).
                None => panic!("{sql}: {e}"),
            },
        }
    }

    fn describe(&self) -> String {
        match self {
            Outcome::Failed(state, message) => format!("error {state} ({message})"),
            Outcome::Rows(rows, count) => format!("{} rows (tag {count})", rows.len()),
        }
    }
}

/// The rows of `a` that `b` lacks (as multisets), at most 5.
fn missing(a: &Outcome, b: &Outcome) -> Vec<String> {
    let (Outcome::Rows(a, _), Outcome::Rows(b, _)) = (a, b) else {
        return vec![];
    };
    let mut left: BTreeMap<&Vec<Option<String>>, i64> = BTreeMap::new();
    for r in b {
        *left.entry(r).or_default() += 1;
    }
    let mut out = Vec::new();
    for r in a {
        let n = left.entry(r).or_default();
        *n -= 1;
        if *n < 0 && out.len() < 5 {
            out.push(format!("{r:?}"));
        }
    }
    out
}

/// The outcomes of a statement (and of what follows it) in the current transaction.
fn run(c: &mut Client, case: &Case, on: bool) -> (Outcome, Option<Outcome>) {
    exec(c, &format!("SET LOCAL snowflake.time_ranges = {on}"));
    let main = match &case.params {
        // Closed by the rollback to the savepoint.
        None if case.cursor => Outcome::of(
            c,
            &format!(
                "DECLARE c SCROLL CURSOR FOR {}; FETCH ALL FROM c; FETCH BACKWARD ALL FROM c",
                case.sql
            ),
            case.ordered,
        ),
        None => Outcome::of(c, &case.sql, case.ordered),
        // PREPARE plans nothing: EXECUTE plans it now, with the hook as set (a plan made
        // before would be reused).
        Some(params) => {
            let types = if params.is_empty() {
                String::new()
            } else {
                format!("({})", vec!["timestamptz"; params.len()].join(", "))
            };
            let args =
                if params.is_empty() { String::new() } else { format!("({})", params.join(", ")) };
            exec(c, "DEALLOCATE ALL");
            match Outcome::of(c, &format!("PREPARE q{types} AS {}", case.sql), false) {
                Outcome::Rows(..) => Outcome::of(c, &format!("EXECUTE q{args}"), case.ordered),
                failed => failed,
            }
        }
    };
    let after = match (&main, &case.after) {
        (Outcome::Rows(..), Some(sql)) => Some(Outcome::of(c, sql, false)),
        _ => None,
    };
    (main, after)
}

fn exec(c: &mut Client, sql: &str) {
    c.batch_execute(sql).unwrap_or_else(|e| panic!("{sql}: {}", why(&e)));
}

/// SQLSTATEs a generated statement may fail with, the same way with the hook and without:
/// a row matched twice by MERGE or ON CONFLICT (21000), a NULL or repeated primary key
/// (23502, 23505), inh_a's CHECK (23514), an id + 1 past the largest bigint (22003). Any other
/// error with the hook off is a statement the generator should not make.
const EXPECTED_ERRORS: &[&str] = &["21000", "23502", "23505", "23514", "22003"];

/// The seeds to run and the statements of each: `make fuzz`'s (TIME_RANGES_SEED, or one from
/// the clock with TIME_RANGES_FUZZ, and TIME_RANGES_CASES), else the fixed ones.
fn seeds() -> (Vec<u64>, u64) {
    if std::env::var_os("TIME_RANGES_SEED").is_some()
        || std::env::var_os("TIME_RANGES_FUZZ").is_some()
    {
        let cases = std::env::var("TIME_RANGES_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(FUZZ_CASES);
        (vec![seed("TIME_RANGES_SEED", "time ranges")], cases)
    } else {
        (FIXED_SEEDS.to_vec(), FIXED_CASES)
    }
}

/// Every statement of the seeds, with the hook off and then on, in one transaction (now() is
/// the same in both), each run rolled back to a savepoint before the next.
fn hook_on_and_off_agree(name: &str) {
    let conf = LAYOUTS.iter().find(|(n, _)| *n == name).unwrap().1;
    let cluster = Cluster::start_new(&format!("ranges_{name}"), conf);
    let mut c = cluster.connect_ext();
    // jit = off: Debian's 15 is built with LLVM, and a plan with a node type switched off
    // (enable_seqscan = off adds 1e10 to its cost) passes jit_above_cost, so each such statement
    // compiled its expressions: 30 s for a layout's 600 statements on 15, 27 s of it in those
    // compilations, against 0.7 s for 300 on 16 (built without LLVM). JIT runs the plan the
    // hook made; which rows it returns is not the hook's to change.
    exec(
        &mut c,
        "SET TimeZone = 'UTC'; SET statement_timeout = '60s'; SET lock_timeout = '10s'; \
         SET jit = off",
    );
    let layout = Layout::of(&mut c);
    let version: i32 = c.scalar("SELECT current_setting('server_version_num')::int");
    let (seeds, cases) = seeds();
    let mut tally: BTreeMap<String, u64> = BTreeMap::new();
    let started = std::time::Instant::now();
    // (milliseconds, seed, statement): what to look at when the suite grows slow.
    let mut slowest = (0, 0, 0);
    for seed in seeds {
        let data = make_tables(&mut c, &layout, seed);
        // The hook is there: a comparison on pk's id becomes a range (except on 64-bit
        // layouts), else every statement below would compare the same plan twice.
        let plan: String = c
            .simple_query(
                "EXPLAIN (COSTS OFF) SELECT * FROM fz.pk \
                 WHERE snowflake_timestamp(id) >= '2021-01-01+00'",
            )
            .unwrap()
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(r) => r.get(0).map(String::from),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(
            plan.contains("snowflake_timestamp"),
            layout.total_bits() == 64,
            "{name}: the hook did not rewrite as expected:\n{plan}"
        );
        for n in 0..cases {
            let case = case(&layout, &data, version, seed, n);
            let settings: String =
                case.settings.iter().map(|s| format!("SET LOCAL {s}; ")).collect();
            let t0 = std::time::Instant::now();
            exec(&mut c, &format!("BEGIN; {settings}SAVEPOINT before"));
            let off = run(&mut c, &case, false);
            exec(&mut c, "ROLLBACK TO SAVEPOINT before");
            let on = run(&mut c, &case, true);
            exec(&mut c, "ROLLBACK");
            let context = || {
                format!(
                    "seed {seed}, layout {name}, statement {n} ({}{}), replay with \
                     `make fuzz PG={} SEED={seed} LAYOUT={name} CASES={}`\n\
                     settings: {}\nparameters: {:?}\n{}",
                    case.kind,
                    if case.cursor { ", through a scroll cursor" } else { "" },
                    version / 10_000,
                    n + 1,
                    case.settings.join(", "),
                    case.params,
                    case.sql
                )
            };
            if off != on {
                let (a, b) = match (&off.1, &on.1) {
                    (Some(a), Some(b)) if off.0 == on.0 => (a, b),
                    _ => (&off.0, &on.0),
                };
                panic!(
                    "{}\nhook off: {}{}\nhook on: {}{}\nonly with the hook off: {:?}\n\
                     only with it on: {:?}",
                    context(),
                    off.0.describe(),
                    off.1.as_ref().map_or(String::new(), |o| format!(", then {}", o.describe())),
                    on.0.describe(),
                    on.1.as_ref().map_or(String::new(), |o| format!(", then {}", o.describe())),
                    missing(a, b),
                    missing(b, a),
                );
            }
            let what = match &off.0 {
                Outcome::Rows(_, 0) => "nothing".to_string(),
                Outcome::Rows(..) => "rows".to_string(),
                Outcome::Failed(state, message) => {
                    assert!(
                        EXPECTED_ERRORS.contains(&state.as_str()),
                        "{}\nfailed with {state} ({message}) with the hook off too: a statement \
                         the generator should not make",
                        context()
                    );
                    state.clone()
                }
            };
            slowest = slowest.max((t0.elapsed().as_millis(), seed, n));
            *tally.entry(format!("{} {what}", case.kind)).or_default() += 1;
        }
    }
    eprintln!(
        "time ranges, {name}: {} statements in {:.1} s (the slowest: {} ms, seed {} statement \
         {}), the same with the hook and without: {tally:?}",
        tally.values().sum::<u64>(),
        started.elapsed().as_secs_f64(),
        slowest.0,
        slowest.1,
        slowest.2,
    );
}

#[test]
fn hook_on_and_off_agree_on_twitter() {
    hook_on_and_off_agree("twitter");
}

#[test]
fn hook_on_and_off_agree_on_discord() {
    hook_on_and_off_agree("discord");
}

#[test]
fn hook_on_and_off_agree_on_sonyflake() {
    hook_on_and_off_agree("sonyflake");
}

/// Never rewritten (its ids fill 64 bits), and still the same.
#[test]
fn hook_on_and_off_agree_on_instagram() {
    hook_on_and_off_agree("instagram");
}

#[test]
fn hook_on_and_off_agree_on_js53() {
    hook_on_and_off_agree("js53");
}

#[test]
fn hook_on_and_off_agree_on_custom() {
    hook_on_and_off_agree("custom");
}

/// The plan of a query, all lines.
fn plan(c: &mut Client, sql: &str) -> String {
    c.query(&format!("EXPLAIN (COSTS OFF) {sql}"), &[])
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn pruning_expression_indexes_volatile_arguments_and_views_keep_working() {
    let cluster = Cluster::start_new("ranges_capabilities", &[]);
    let mut c = cluster.connect_ext();
    c.batch_execute(
        "SET TimeZone = 'UTC';
         CREATE TABLE t_part (id bigint) PARTITION BY RANGE (snowflake_timestamp(id));
         CREATE TABLE t_part_2025 PARTITION OF t_part
             FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
         CREATE TABLE t_part_2026 PARTITION OF t_part
             FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
         CREATE TABLE t_expr (id bigint PRIMARY KEY);
         CREATE INDEX t_expr_ts ON t_expr (snowflake_timestamp(id));
         INSERT INTO t_expr SELECT snowflake_min_id('2025-06-01'::timestamptz + g * interval '1 min')
                            FROM generate_series(1, 20000) g;
         INSERT INTO t_part SELECT id FROM t_expr;
         ANALYZE",
    )
    .unwrap();
    // Partition pruning: one partition, with the hook as without it.
    let range =
        "snowflake_timestamp(id) >= '2025-07-01' AND snowflake_timestamp(id) < '2025-08-01'";
    for on in [false, true] {
        set_hook(&mut c, on);
        let p = plan(&mut c, &format!("SELECT count(*) FROM t_part WHERE {range}"));
        assert!(
            p.contains("t_part_2025") && !p.contains("t_part_2026"),
            "hook {on}: not pruned:\n{p}"
        );
    }
    // The expression index answers an equality on the time, with the hook as without it.
    c.batch_execute("SET enable_seqscan = off").unwrap();
    for on in [false, true] {
        set_hook(&mut c, on);
        let p = plan(
            &mut c,
            "SELECT * FROM t_expr WHERE snowflake_timestamp(id) = '2025-07-01 00:00:00+00'",
        );
        assert!(p.contains("t_expr_ts"), "hook {on}: the expression index is not used:\n{p}");
    }
    c.batch_execute("RESET enable_seqscan").unwrap();
    // A volatile argument is called once per row: the hook does not copy it into bounds.
    let ids = |c: &mut Client| -> i64 { stats(c)["ids_since_start"].as_i64().unwrap() };
    for op in ["=", ">=", "<"] {
        let before = ids(&mut c);
        c.query(
            &format!(
                "SELECT count(*) FROM generate_series(1, 100) g
                 WHERE snowflake_timestamp(snowflake_next()) {op} now()"
            ),
            &[],
        )
        .unwrap();
        assert_eq!(ids(&mut c) - before, 100, "{op}: snowflake_next() called more than once a row");
    }
    // A view over the extension in a schema its grantee cannot use.
    c.batch_execute("CREATE DATABASE views").unwrap();
    c.batch_execute("CREATE ROLE app LOGIN").unwrap();
    let conninfo = cluster.conninfo("postgres").replace("dbname=postgres", "dbname=views");
    let mut v = Client::connect(&conninfo, NoTls).unwrap();
    v.batch_execute(
        "CREATE SCHEMA ext;
         CREATE EXTENSION pg_snowflake SCHEMA ext;
         CREATE TABLE public.ev (id bigint PRIMARY KEY);
         INSERT INTO public.ev VALUES (ext.snowflake_min_id(now()));
         CREATE VIEW public.recent AS
             SELECT id FROM public.ev
             WHERE ext.snowflake_timestamp(id) > now() - interval '1 day';
         GRANT SELECT ON public.recent TO app",
    )
    .unwrap();
    let mut app =
        Client::connect(&cluster.conninfo("app").replace("dbname=postgres", "dbname=views"), NoTls)
            .unwrap();
    let ServerError { code: state, .. } =
        expect_error(&mut app, "SELECT ext.snowflake_timestamp(1)");
    assert_eq!(state, "42501", "app must not have USAGE on ext");
    let n = app.query("SELECT * FROM public.recent", &[]).unwrap().len();
    assert_eq!(n, 1);
}

/// PostgreSQL 19 gives the planner hook the `ExplainState` of an `EXPLAIN`, which the hook must
/// pass on: 19's `pg_plan_advice`, loaded before pg_snowflake (so that pg_snowflake's hook runs
/// first, and standard_planner then gets whatever it was passed), writes its advice into the
/// EXPLAIN through it. With the rewrite in the same plan, so both ran. Before 19 the hook has
/// four arguments and there is no `pg_plan_advice`: 15 to 18 say so.
#[test]
fn an_explain_state_passes_through_the_hook_to_pg_plan_advice() {
    let major: u32 = major_under_test().parse().unwrap();
    if major < 19 {
        eprintln!(
            "pg_plan_advice and the planner's ExplainState are 19's (PostgreSQL {major} here)"
        );
        return;
    }
    let cluster = Cluster::start_new(
        "ranges_plan_advice",
        &["shared_preload_libraries = 'pg_plan_advice, pg_snowflake'"],
    );
    let mut c = cluster.connect_ext();
    c.batch_execute(
        "CREATE TABLE e (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int);
         INSERT INTO e (v) SELECT g FROM generate_series(1, 1000) g;
         ANALYZE e",
    )
    .unwrap();
    let p: String = c
        .query(
            "EXPLAIN (COSTS OFF, PLAN_ADVICE)
             SELECT * FROM e WHERE snowflake_timestamp(id) > now() - interval '1 hour'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        p.contains("snowflake_id_bound") && p.contains("Generated Plan Advice:"),
        "the rewrite and pg_plan_advice's advice, both:\n{p}"
    );
}
