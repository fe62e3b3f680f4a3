//! The planner hook that turns comparisons of `snowflake_timestamp(id)` into id ranges never
//! changes a result and never costs a capability.
//!
//! A seeded differential test (the seed is printed; `TIME_RANGES_SEED` replays one): random
//! conditions (every operator, both operand orders, `BETWEEN`, `AND`/`OR`/`NOT`, values at and
//! around time unit edges, before the epoch, past the end, infinity, NULL, and parameters of
//! generic plans) on every layout and on four table shapes (a primary key, no index, an
//! expression index on `snowflake_timestamp(id)`, a table partitioned by it) give the same rows
//! with the hook and without it (`snowflake.time_ranges = off`). A fifth table also holds ids the
//! layout cannot hold, on which `snowflake_timestamp` raises an error: with the hook such a
//! query either fails the same way or returns exactly the rows of the valid ids.
//!
//! Then what the hook must not take away: partition pruning, the expression index, a single
//! call of a volatile argument, and views for grantees without rights on the extension's schema.
#![cfg(not(feature = "pg_test"))]

mod common;
use common::*;

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

/// The conditions per layout and table.
const CONDITIONS: usize = 120;

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

    /// Ids the layout can hold: the first and last units, units near the epoch and now, random
    /// ones, each with the lowest and highest worker id and sequence.
    fn valid_ids(&self, rng: &mut Rng) -> Vec<i64> {
        let (max_w, max_s) = (
            (1u64 << self.worker_bits) - 1,
            (1u64 << self.sequence_bits) - 1,
        );
        // A 64-bit layout's units past the sign bit make negative ids: its whole range.
        let last = self.max_units();
        let now_units = ((std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as i64
            - self.epoch_us)
            / self.unit_us) as u64;
        let mut units = vec![0, 1, 2, last, last - 1, now_units, now_units + 1];
        units.extend((0..60).map(|_| rng.below(last + 1)));
        units.extend((0..30).map(|_| now_units.saturating_sub(rng.below(1_000_000))));
        let mut ids = Vec::new();
        for u in units {
            for (w, s) in [
                (0, 0),
                (max_w, max_s),
                (rng.below(max_w + 1), rng.below(max_s + 1)),
            ] {
                ids.push(self.id(u, w, s));
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Ids it cannot hold: negative ones (in layouts of 63 bits or fewer), and ones above its
    /// bits (for narrower layouts).
    fn invalid_ids(&self, rng: &mut Rng) -> Vec<i64> {
        if self.total_bits() >= 64 {
            return vec![];
        }
        let mut ids = vec![-1, i64::MIN, -(rng.below(1 << 40) as i64) - 1];
        if self.total_bits() < 63 {
            let above = 1i64 << self.total_bits();
            ids.extend([
                above,
                above + 1,
                i64::MAX,
                above + rng.below(1 << 20) as i64,
            ]);
        }
        ids
    }

    /// Values to compare with: unit edges of the ids' times, a microsecond either side, half a
    /// unit on, before the epoch, past the end, infinity, NULL.
    fn value(&self, rng: &mut Rng, ids: &[i64]) -> String {
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
            _ => start,
        };
        format!("'{}'", iso_us(us))
    }
}

/// ISO 8601 with microseconds, in UTC, of Unix microseconds (proleptic Gregorian).
fn iso_us(us: i64) -> String {
    let (days, rest) = (us.div_euclid(86_400_000_000), us.rem_euclid(86_400_000_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06}+00",
        rest / 3_600_000_000,
        rest / 60_000_000 % 60,
        rest / 1_000_000 % 60,
        rest % 1_000_000
    )
}

/// A random condition on `snowflake_timestamp(id)`: an atom, or AND/OR/NOT of conditions.
fn condition(rng: &mut Rng, layout: &Layout, ids: &[i64], depth: u32) -> String {
    let ts = "snowflake_timestamp(id)";
    match rng.below(if depth == 0 { 10 } else { 14 }) {
        10 => format!(
            "({} AND {})",
            condition(rng, layout, ids, depth - 1),
            condition(rng, layout, ids, depth - 1)
        ),
        11 => format!(
            "({} OR {})",
            condition(rng, layout, ids, depth - 1),
            condition(rng, layout, ids, depth - 1)
        ),
        12 => format!("NOT ({})", condition(rng, layout, ids, depth - 1)),
        13 => format!(
            "({} AND {} AND {})",
            condition(rng, layout, ids, depth - 1),
            condition(rng, layout, ids, depth - 1),
            condition(rng, layout, ids, depth - 1)
        ),
        8 => format!(
            "{ts} BETWEEN {} AND {}",
            layout.value(rng, ids),
            layout.value(rng, ids)
        ),
        9 => format!(
            "{ts} NOT BETWEEN {} AND {}",
            layout.value(rng, ids),
            layout.value(rng, ids)
        ),
        _ => {
            let op = rng.pick(&["<", "<=", "=", ">=", ">", "<>"]);
            let value = layout.value(rng, ids);
            if rng.below(2) == 0 {
                format!("{ts} {op} {value}")
            } else {
                format!("{value} {op} {ts}")
            }
        }
    }
}

/// The condition with its first quoted value made the parameter $1, and that value.
fn parameterized(condition: &str) -> Option<(String, String)> {
    let start = condition.find('\'')?;
    let end = start + 1 + condition[start + 1..].find('\'')?;
    let value = condition[start..=end].to_string();
    let param = format!("{}$1{}", &condition[..start], &condition[end + 1..]);
    Some((param, value))
}

/// The sorted ids a query returns, or the SQLSTATE it fails with.
fn rows(c: &mut Client, sql: &str) -> Result<Vec<i64>, String> {
    match c.query(sql, &[]) {
        Ok(rows) => {
            let mut ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
            ids.sort_unstable();
            Ok(ids)
        }
        Err(e) => Err(db_error(&e).0),
    }
}

fn set_hook(c: &mut Client, on: bool) {
    c.batch_execute(&format!(
        "SET snowflake.time_ranges = {}",
        if on { "on" } else { "off" }
    ))
    .unwrap();
}

/// The five tables, filled: the valid ids in each of the first four, and the valid and invalid
/// ids in the fifth.
fn tables(c: &mut Client, valid: &[i64], invalid: &[i64], partition_at: [&str; 2]) {
    let list = |ids: &[i64]| ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    c.batch_execute(&format!(
        "CREATE TABLE t_pk (id bigint PRIMARY KEY);
         CREATE TABLE t_heap (id bigint);
         CREATE TABLE t_expr (id bigint);
         CREATE INDEX t_expr_ts ON t_expr (snowflake_timestamp(id));
         CREATE TABLE t_part (id bigint) PARTITION BY RANGE (snowflake_timestamp(id));
         CREATE TABLE t_part_old PARTITION OF t_part FOR VALUES FROM (MINVALUE) TO ({a});
         CREATE TABLE t_part_mid PARTITION OF t_part FOR VALUES FROM ({a}) TO ({b});
         CREATE TABLE t_part_new PARTITION OF t_part FOR VALUES FROM ({b}) TO (MAXVALUE);
         CREATE TABLE t_bad (id bigint PRIMARY KEY);
         INSERT INTO t_pk SELECT unnest('{{{v}}}'::bigint[]);
         INSERT INTO t_heap SELECT id FROM t_pk;
         INSERT INTO t_expr SELECT id FROM t_pk;
         INSERT INTO t_part SELECT id FROM t_pk;
         INSERT INTO t_bad SELECT id FROM t_pk UNION SELECT unnest('{{{i}}}'::bigint[]);
         ANALYZE",
        a = partition_at[0],
        b = partition_at[1],
        v = list(valid),
        i = list(invalid),
    ))
    .unwrap();
}

#[test]
fn the_hook_never_changes_rows_on_any_layout_or_table() {
    let seed = seed("TIME_RANGES_SEED", "time ranges");
    let mut rng = Rng(seed);
    let mut cases = 0;
    for (name, conf) in LAYOUTS {
        let cluster = Cluster::start_new(&format!("ranges_{name}"), conf);
        let mut c = cluster.connect_ext();
        c.batch_execute("SET TimeZone = 'UTC'").unwrap();
        let layout = Layout::of(&mut c);
        let valid = layout.valid_ids(&mut rng);
        let invalid = layout.invalid_ids(&mut rng);
        let (a, b) = (
            layout.value(&mut Rng(seed ^ 1), &valid),
            layout.value(&mut Rng(seed ^ 2), &valid),
        );
        let mut bounds = [a, b];
        // Partition bounds must be finite timestamps, in order.
        for (i, v) in bounds.iter_mut().enumerate() {
            if v.contains("infinity") || v == "NULL" {
                *v = format!(
                    "'{}'",
                    iso_us(layout.epoch_us + (i as i64 + 1) * 86_400_000_000)
                );
            }
        }
        bounds.sort();
        if bounds[0] == bounds[1] {
            bounds[1] = format!("'{}'", iso_us(layout.epoch_us + 3 * 86_400_000_000_000));
        }
        tables(&mut c, &valid, &invalid, [&bounds[0], &bounds[1]]);
        for i in 0..CONDITIONS {
            let condition = condition(&mut rng, &layout, &valid, 2);
            for table in ["t_pk", "t_heap", "t_expr", "t_part"] {
                let sql = format!("SELECT id FROM {table} WHERE {condition}");
                set_hook(&mut c, false);
                let without = rows(&mut c, &sql);
                set_hook(&mut c, true);
                let with = rows(&mut c, &sql);
                assert_eq!(with, without, "seed {seed}, {name}, case {i}: {sql}");
                cases += 1;
            }
            // With ids the layout cannot hold: the same error, or the rows of the valid ids.
            let sql = format!("SELECT id FROM t_bad WHERE {condition}");
            let with = rows(&mut c, &sql);
            set_hook(&mut c, false);
            let valid_rows = rows(&mut c, &format!("SELECT id FROM t_pk WHERE {condition}"));
            set_hook(&mut c, true);
            assert!(
                with == Err("22003".into()) || with == valid_rows,
                "seed {seed}, {name}, case {i}: {sql}: {with:?} against {valid_rows:?}"
            );
            cases += 1;
            // A generic plan, with the condition's first value as its parameter.
            if let Some((param, value)) = parameterized(&condition) {
                c.batch_execute("SET plan_cache_mode = force_generic_plan")
                    .unwrap();
                let mut results = Vec::new();
                for on in [false, true] {
                    set_hook(&mut c, on);
                    c.batch_execute(&format!(
                        "DEALLOCATE ALL;
                         PREPARE q(timestamptz) AS SELECT id FROM t_pk WHERE {param}"
                    ))
                    .unwrap();
                    results.push(rows(&mut c, &format!("EXECUTE q({value})")));
                }
                assert_eq!(
                    results[1], results[0],
                    "seed {seed}, {name}, case {i}, generic plan: {param} with {value}"
                );
                c.batch_execute("RESET plan_cache_mode; DEALLOCATE ALL")
                    .unwrap();
                cases += 1;
            }
        }
    }
    eprintln!(
        "time ranges: {cases} cases on {} layouts, all the same rows",
        LAYOUTS.len()
    );
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
        let p = plan(
            &mut c,
            &format!("SELECT count(*) FROM t_part WHERE {range}"),
        );
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
        assert!(
            p.contains("t_expr_ts"),
            "hook {on}: the expression index is not used:\n{p}"
        );
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
        assert_eq!(
            ids(&mut c) - before,
            100,
            "{op}: snowflake_next() called more than once a row"
        );
    }
    // A view over the extension in a schema its grantee cannot use.
    c.batch_execute("CREATE DATABASE views").unwrap();
    c.batch_execute("CREATE ROLE app LOGIN").unwrap();
    let conninfo = cluster
        .conninfo("postgres")
        .replace("dbname=postgres", "dbname=views");
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
    let mut app = Client::connect(
        &cluster
            .conninfo("app")
            .replace("dbname=postgres", "dbname=views"),
        NoTls,
    )
    .unwrap();
    let (state, ..) = expect_error(&mut app, "SELECT ext.snowflake_timestamp(1)");
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
