//! `make bench`: pg_snowflake against nextval(), bigserial and gen_random_uuid() in one cluster,
//! and against uuidv7() on PostgreSQL 18 and later; one run, candidates alternated and repeated
//! so that noise shows. Prints a table, writes the run (with the machine, the date, the commit
//! and how long it took) into docs/benchmarks.json as the run of the server's major NN, renders
//! the tables of docs/benchmarks.md from that file (tests/common/benchmarks.rs), and writes a
//! chart of the ratios to target/bench/ratios-pgNN.svg and docs/bench-pgNN.svg.
//!
//! Then, where scripts/build-citus.sh installed Citus into the server, the same default on a
//! Citus cluster (a coordinator and two workers on this machine, tests/common/citus.rs) against
//! Citus's own bigserial: inserts through the coordinator and from every node at once.
//!
//! Environment: BENCH_REPS (bulk and INSERT repetitions, default 7), BENCH_PGBENCH_SECONDS
//! (default 5), BENCH_PGBENCH_REPS (default 3). BENCH_ONLY=citus measures the Citus part alone
//! and writes it into the major's run, leaving its other figures as they are.

use testkit as common;

use common::*;
use serde_json::{json, Value};
use std::time::Instant;

const BULK_IDS: i64 = 2_000_000;
const INSERT_ROWS: i64 = 1_000_000;
/// The physical limit of one generator in the default layout: 4096 ids per millisecond.
const LAYOUT_IDS_PER_S: f64 = 4_096_000.0;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn spread(xs: &[f64]) -> (f64, f64) {
    let lo = xs.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

fn timed(c: &mut Client, sql: &str) -> f64 {
    let t = Instant::now();
    c.batch_execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    t.elapsed().as_secs_f64()
}

/// Round-robin order that starts at a different candidate each repetition.
fn rotated<T: Clone>(items: &[T], rep: usize) -> Vec<T> {
    let k = rep % items.len();
    items[k..].iter().chain(&items[..k]).cloned().collect()
}

struct Goal {
    name: String,
    value: f64,
    target: f64,
    at_least: bool,
}

impl Goal {
    fn met(&self) -> bool {
        if self.at_least {
            self.value >= self.target
        } else {
            self.value <= self.target
        }
    }
}

fn bulk(c: &mut Client, reps: usize, v7: bool) -> (Value, Vec<Goal>) {
    let mut candidates = vec![
        ("empty series", "count(*)"),
        ("snowflake_next()", "count(snowflake_next())"),
        ("nextval()", "count(nextval('bench_seq'))"),
        ("gen_random_uuid()", "count(gen_random_uuid())"),
    ];
    if v7 {
        candidates.push(("uuidv7()", "count(uuidv7())"));
    }
    // As docs/benchmarks.md's table names them.
    let labels = [
        "(empty series)",
        "`snowflake_next()`",
        "`nextval('s')`",
        "`gen_random_uuid()`",
        "`uuidv7()`",
    ];
    let sql = |expr: &str| format!("SELECT {expr} FROM generate_series(1, {BULK_IDS})");
    for (_, expr) in &candidates {
        timed(c, &sql(expr)); // warm-up
    }
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for rep in 0..reps {
        for i in rotated(&(0..candidates.len()).collect::<Vec<_>>(), rep) {
            secs[i].push(timed(c, &sql(candidates[i].1)));
        }
    }
    // Per-id cost of each repetition over the same repetition's empty series.
    let per_id_ns = |i: usize| -> Vec<f64> {
        (0..reps).map(|r| (secs[i][r] - secs[0][r]) / BULK_IDS as f64 * 1e9).collect()
    };
    let (sf, nv, uu) = (per_id_ns(1), per_id_ns(2), per_id_ns(3));
    let ratio_nv: Vec<f64> = sf.iter().zip(&nv).map(|(a, b)| a / b).collect();
    let ratio_uu: Vec<f64> = sf.iter().zip(&uu).map(|(a, b)| a / b).collect();
    let ids_per_s: Vec<f64> = secs[1].iter().map(|s| BULK_IDS as f64 / s).collect();
    println!("\nBulk: SELECT count(f) FROM generate_series(1, {BULK_IDS}), {reps} alternated runs");
    println!(
        "{:<20} {:>12} {:>14} {:>20}",
        "candidate", "median s", "min..max s", "per id over empty"
    );
    for (i, (name, _)) in candidates.iter().enumerate() {
        let (lo, hi) = spread(&secs[i]);
        let per = if i == 0 { "-".to_string() } else { format!("{:.1} ns", median(&per_id_ns(i))) };
        println!(
            "{name:<20} {:>12.3} {:>14} {per:>20}",
            median(&secs[i]),
            format!("{lo:.3}..{hi:.3}")
        );
    }
    println!(
        "snowflake_next() per id / nextval(): {:.3} (median of per-run ratios)\n\
         snowflake_next() per id / gen_random_uuid(): {:.3}\n\
         one backend: {:.2} M ids/s = {:.0}% of the layout's 4.096 M ids/s",
        median(&ratio_nv),
        median(&ratio_uu),
        median(&ids_per_s) / 1e6,
        median(&ids_per_s) / LAYOUT_IDS_PER_S * 100.0
    );
    let v7_ratio = v7.then(|| {
        let ratio: Vec<f64> = sf.iter().zip(&per_id_ns(4)).map(|(a, b)| a / b).collect();
        println!("snowflake_next() per id / uuidv7(): {:.3}", median(&ratio));
        (median(&per_id_ns(4)), median(&ratio))
    });
    let goals = vec![
        Goal {
            name: "bulk: per-id cost vs nextval()".into(),
            value: median(&ratio_nv),
            target: 0.25,
            at_least: false,
        },
        Goal {
            name: "bulk: one backend vs 4.096 M ids/s".into(),
            value: median(&ids_per_s) / LAYOUT_IDS_PER_S,
            target: 0.95,
            at_least: true,
        },
    ];
    let value = json!({
        "ids_per_run": BULK_IDS,
        "runs": reps,
        "candidates": candidates.iter().enumerate().map(|(i, (name, expr))| {
            let (lo, hi) = spread(&secs[i]);
            // Per id over the same run's empty series, and snowflake's per-id cost over this
            // one's, as medians of the per-run values.
            let per_id = (i > 0).then(|| median(&per_id_ns(i)));
            let snowflake_over = (i > 1).then(|| {
                median(&sf.iter().zip(&per_id_ns(i)).map(|(a, b)| a / b).collect::<Vec<_>>())
            });
            json!({"name": name, "label": labels[i], "sql": format!("SELECT {expr} FROM generate_series(1, {BULK_IDS})"),
                   "seconds": secs[i], "median_s": median(&secs[i]), "min_s": lo, "max_s": hi,
                   "per_id_ns": per_id, "snowflake_over": snowflake_over})
        }).collect::<Vec<_>>(),
        "one_backend_ids_per_s": median(&ids_per_s),
        "layout_ids_per_s": LAYOUT_IDS_PER_S,
    });
    let mut goals = goals;
    if let Some((_, r)) = v7_ratio {
        goals.push(Goal {
            name: "bulk: per-id cost vs uuidv7()".into(),
            value: r,
            target: 1.0,
            at_least: false,
        });
    }
    (value, goals)
}

/// A one-day count out of 30 days of rows, three ways: the time condition as people write it
/// (`snowflake_timestamp(id)`, which the planner hook turns into a primary key range), the raw
/// id range (`snowflake_min_id`/`snowflake_max_id`), and an expression index on
/// `(snowflake_decode(id)).ts`, which the first two need not build or maintain.
fn time_range(c: &mut Client, reps: usize) -> (Value, Vec<Goal>) {
    c.batch_execute(&format!(
        "DROP TABLE IF EXISTS bench_range;
         CREATE TABLE bench_range (id bigint PRIMARY KEY, v int NOT NULL);
         INSERT INTO bench_range
         SELECT snowflake_min_id(timestamptz '2026-01-01 00:00:00+00'
                                 + g * (interval '30 days' / {INSERT_ROWS})) + (1 << 12), g
         FROM generate_series(1, {INSERT_ROWS}) g;
         CREATE INDEX bench_range_ts ON bench_range (((snowflake_decode(id)).ts))"
    ))
    .unwrap();
    // Index-only scans need the visibility map, which VACUUM sets (outside a transaction).
    c.batch_execute("VACUUM ANALYZE bench_range").unwrap();
    let (day, next) = ("'2026-01-15 00:00:00+00'", "'2026-01-16 00:00:00+00'");
    // As docs/benchmarks.md's table names them.
    let labels = [
        "`snowflake_timestamp(id) >= day AND snowflake_timestamp(id) < next day`",
        "`id BETWEEN snowflake_min_id(day) AND snowflake_min_id(next day) - 1`",
        "`(snowflake_decode(id)).ts >= day AND ... < next day`, expression index",
    ];
    let candidates = [
        (
            "snowflake_timestamp(id)",
            format!("snowflake_timestamp(id) >= {day} AND snowflake_timestamp(id) < {next}"),
        ),
        (
            "id range",
            format!(
                "id BETWEEN snowflake_min_id({day}) \
                 AND snowflake_min_id({next}) - 1"
            ),
        ),
        (
            "expression index",
            format!("(snowflake_decode(id)).ts >= {day} AND (snowflake_decode(id)).ts < {next}"),
        ),
    ];
    let sql = |cond: &str| format!("SELECT count(*) FROM bench_range WHERE {cond}");
    let counts: Vec<i64> =
        candidates.iter().map(|(_, cond)| c.query_one(&sql(cond), &[]).unwrap().get(0)).collect();
    assert!(counts.iter().all(|&n| n == counts[0]), "different counts: {counts:?}");
    let plans: Vec<String> = candidates
        .iter()
        .map(|(_, cond)| {
            c.query(&format!("EXPLAIN (COSTS OFF) {}", sql(cond)), &[])
                .unwrap()
                .iter()
                .map(|r| r.get::<_, String>(0))
                .collect::<Vec<_>>()
                .join(" / ")
        })
        .collect();
    // 20 queries per timing, so that one timing is a few milliseconds, not a round trip.
    let batch = |cond: &str| vec![sql(cond); 20].join(";\n");
    let mut secs: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    for (_, cond) in &candidates {
        timed(c, &batch(cond));
    }
    for rep in 0..reps * 3 {
        for i in rotated(&(0..candidates.len()).collect::<Vec<_>>(), rep) {
            secs[i].push(timed(c, &batch(&candidates[i].1)) / 20.0);
        }
    }
    let ratio_to = |i: usize, to: usize| -> f64 {
        median(&secs[i].iter().zip(&secs[to]).map(|(a, b)| a / b).collect::<Vec<_>>())
    };
    let ratio = |i: usize| ratio_to(i, 1);
    println!(
        "\nTime range: count of one day ({} rows) out of {INSERT_ROWS} rows over 30 days, {} alternated runs",
        counts[0],
        reps * 3
    );
    println!("{:<26} {:>12} {:>14}  plan", "condition", "median ms", "vs id range");
    for (i, (name, _)) in candidates.iter().enumerate() {
        println!("{name:<26} {:>12.3} {:>14.3}  {}", median(&secs[i]) * 1e3, ratio(i), plans[i]);
    }
    c.batch_execute("DROP TABLE bench_range").unwrap();
    let goals = vec![Goal {
        name: "time range: snowflake_timestamp(id) vs id range".into(),
        value: ratio(0),
        target: 1.1,
        at_least: false,
    }];
    // The scan of each plan, as the table shows it.
    let scan = |plan: &str| -> String {
        plan.split(" / ")
            .find(|node| node.contains("Scan"))
            .map(|node| format!("`{}`", node.trim().trim_start_matches("->").trim()))
            .unwrap_or_else(|| format!("`{plan}`"))
    };
    let value = json!({
        "rows": INSERT_ROWS,
        "rows_in_range": counts[0],
        "runs": reps * 3,
        "queries_per_timing": 20,
        "candidates": candidates.iter().enumerate().map(|(i, (name, cond))| json!({
            "name": name, "label": labels[i], "sql": sql(cond), "seconds_per_query": secs[i],
            "median_ms": median(&secs[i]) * 1e3, "over_id_range": ratio(i),
            "over_expression_index": (i != 2).then(|| ratio_to(i, 2)),
            "plan": scan(&plans[i]), "explain": plans[i],
        })).collect::<Vec<_>>(),
    });
    (value, goals)
}

fn insert(c: &mut Client, reps: usize, v7: bool) -> (Value, Vec<Goal>) {
    let mut candidates = vec![
        ("snowflake", "id bigint PRIMARY KEY DEFAULT snowflake_next()"),
        ("bigserial", "id bigserial PRIMARY KEY"),
        ("uuid v4", "id uuid PRIMARY KEY DEFAULT gen_random_uuid()"),
    ];
    if v7 {
        candidates.push(("uuid v7", "id uuid PRIMARY KEY DEFAULT uuidv7()"));
    }
    // As docs/benchmarks.md's table names them.
    let labels = [
        "`bigint DEFAULT snowflake_next()`",
        "`bigserial`",
        "`uuid DEFAULT gen_random_uuid()`",
        "`uuid DEFAULT uuidv7()`",
    ];
    let insert =
        format!("INSERT INTO bench_insert (v) SELECT g FROM generate_series(1, {INSERT_ROWS}) g");
    // [candidate][rep]: the first million rows into an empty table, and the second million into
    // the same table after a CHECKPOINT, as a table that already holds data sees them (random
    // keys then touch old pages, each costing a full-page image in WAL after a checkpoint).
    let mut first: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    let mut second: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    let mut index_bytes = vec![0i64; candidates.len()];
    for rep in 0..reps {
        for i in rotated(&(0..candidates.len()).collect::<Vec<_>>(), rep) {
            c.batch_execute(&format!(
                "DROP TABLE IF EXISTS bench_insert; CREATE TABLE bench_insert ({}, v int NOT NULL); CHECKPOINT",
                candidates[i].1
            ))
            .unwrap();
            first[i].push(timed(c, &insert));
            index_bytes[i] =
                c.query_one("SELECT pg_relation_size('bench_insert_pkey')", &[]).unwrap().get(0);
            c.batch_execute("CHECKPOINT").unwrap();
            second[i].push(timed(c, &insert));
        }
    }
    c.batch_execute("DROP TABLE bench_insert").unwrap();
    let ratio = |secs: &[Vec<f64>], a: usize, b: usize| -> f64 {
        median(&(0..reps).map(|r| secs[a][r] / secs[b][r]).collect::<Vec<_>>())
    };
    println!(
        "\nINSERT of {INSERT_ROWS} rows through the primary key's default, {reps} alternated runs"
    );
    println!(
        "{:<12} {:>14} {:>14} {:>14} {:>14}",
        "key", "empty table s", "min..max", "pkey index", "2nd million s"
    );
    for (i, (name, _)) in candidates.iter().enumerate() {
        let (lo, hi) = spread(&first[i]);
        println!(
            "{name:<12} {:>14.3} {:>14} {:>11.1} MB {:>14.3}",
            median(&first[i]),
            format!("{lo:.3}..{hi:.3}"),
            index_bytes[i] as f64 / 1048576.0,
            median(&second[i])
        );
    }
    let (sf_bs, uu_sf) = (ratio(&first, 0, 1), ratio(&first, 2, 0));
    let (sf_bs2, uu_sf2) = (ratio(&second, 0, 1), ratio(&second, 2, 0));
    println!(
        "empty table: snowflake / bigserial {sf_bs:.3}, uuid v4 / snowflake {uu_sf:.2} (medians of per-run ratios)\n\
         2nd million after a CHECKPOINT: snowflake / bigserial {sf_bs2:.3}, uuid v4 / snowflake {uu_sf2:.2}"
    );
    let v7_ratios = v7.then(|| {
        let (first_r, second_r) = (ratio(&first, 3, 0), ratio(&second, 3, 0));
        println!(
            "uuid v7 / snowflake: {first_r:.2} into the empty table, {second_r:.2} for the 2nd million; \
             pkey {:.1} MB against {:.1} MB",
            index_bytes[3] as f64 / 1048576.0,
            index_bytes[0] as f64 / 1048576.0
        );
        (first_r, second_r)
    });
    let mut goals = vec![
        Goal {
            name: "INSERT: snowflake time / bigserial".into(),
            value: sf_bs,
            target: 1.0,
            at_least: false,
        },
        Goal {
            name: "INSERT: pkey size snowflake / bigserial".into(),
            value: index_bytes[0] as f64 / index_bytes[1] as f64,
            target: 1.0,
            at_least: false,
        },
        Goal {
            name: "INSERT: uuid v4 time / snowflake".into(),
            value: uu_sf,
            target: 3.0,
            at_least: true,
        },
        Goal {
            name: "INSERT 2nd million: uuid v4 / snowflake".into(),
            value: uu_sf2,
            target: 3.0,
            at_least: true,
        },
    ];
    // Each candidate against snowflake, both ways, as medians of the per-run ratios (the
    // median of a ratio is not the inverse of the median of its inverse).
    let value = json!({
        "rows": INSERT_ROWS,
        "runs": reps,
        "candidates": candidates.iter().enumerate().map(|(i, (key, column))| {
            let other = i > 0;
            json!({
                "key": key, "label": labels[i], "column": column,
                "seconds_empty": first[i], "median_empty_s": median(&first[i]),
                "seconds_second": second[i], "median_second_s": median(&second[i]),
                "pkey_bytes": index_bytes[i],
                "snowflake_over": other.then(|| ratio(&first, 0, i)),
                "over_snowflake": other.then(|| ratio(&first, i, 0)),
                "snowflake_over_second": other.then(|| ratio(&second, 0, i)),
                "over_snowflake_second": other.then(|| ratio(&second, i, 0)),
                "pkey_over_snowflake": other.then(|| index_bytes[i] as f64 / index_bytes[0] as f64),
            })
        }).collect::<Vec<_>>(),
    });
    if let Some((first_r, _)) = v7_ratios {
        goals.push(Goal {
            name: "INSERT: uuid v7 time / snowflake".into(),
            value: first_r,
            target: 1.0,
            at_least: true,
        });
        goals.push(Goal {
            name: "INSERT: pkey size uuid v7 / snowflake".into(),
            value: index_bytes[3] as f64 / index_bytes[0] as f64,
            target: 1.0,
            at_least: true,
        });
    }
    (value, goals)
}

fn pgbench_tps(cluster: &Cluster, script: &std::path::Path, clients: u32, seconds: u64) -> f64 {
    let out = check(
        cluster
            .client_cmd("pgbench")
            .args([
                "-n",
                "-M",
                "prepared",
                "-c",
                &clients.to_string(),
                "-j",
                &clients.min(2).to_string(),
            ])
            .args(["-T", &seconds.to_string(), "-f"])
            .arg(script)
            .output()
            .unwrap(),
        "pgbench",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no tps in pgbench output:\n{text}"))
}

fn pgbench(
    cluster: &Cluster,
    c: &mut Client,
    seconds: u64,
    reps: usize,
    v7: bool,
) -> (Value, Vec<Goal>) {
    c.batch_execute(
        "CREATE TABLE pgb_snowflake (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int);
         CREATE TABLE pgb_bigserial (id bigserial PRIMARY KEY, v int);
         CREATE TABLE pgb_uuid (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), v int)",
    )
    .unwrap();
    // As docs/benchmarks.md's table names them (by name below).
    let label = |name: &str| -> String {
        match name.strip_prefix("INSERT ") {
            Some(key) => format!("`INSERT INTO t (v) VALUES (1);`, {key} key"),
            None if name.ends_with("(control)") => "`SELECT 1;` (control)".into(),
            None => format!("`{name};`"),
        }
    };
    let mut scripts = vec![
        ("SELECT snowflake_next()", "SELECT snowflake_next();"),
        ("SELECT nextval('s')", "SELECT nextval('bench_seq');"),
        ("INSERT snowflake", "INSERT INTO pgb_snowflake (v) VALUES (1);"),
        ("INSERT bigserial", "INSERT INTO pgb_bigserial (v) VALUES (1);"),
        // The ceiling of pgbench and the machine: a round trip that does nothing.
        ("SELECT 1 (control)", "SELECT 1;"),
        ("SELECT gen_random_uuid()", "SELECT gen_random_uuid();"),
        ("INSERT uuid v4", "INSERT INTO pgb_uuid (v) VALUES (1);"),
    ];
    if v7 {
        c.batch_execute("CREATE TABLE pgb_uuidv7 (id uuid PRIMARY KEY DEFAULT uuidv7(), v int)")
            .unwrap();
        scripts.push(("SELECT uuidv7()", "SELECT uuidv7();"));
        scripts.push(("INSERT uuid v7", "INSERT INTO pgb_uuidv7 (v) VALUES (1);"));
    }
    let truncate = if v7 {
        "TRUNCATE pgb_snowflake, pgb_bigserial, pgb_uuid, pgb_uuidv7"
    } else {
        "TRUNCATE pgb_snowflake, pgb_bigserial, pgb_uuid"
    };
    let files: Vec<std::path::PathBuf> = scripts
        .iter()
        .enumerate()
        .map(|(i, (_, sql))| {
            let f = cluster.dir.join(format!("script{i}.sql"));
            std::fs::write(&f, format!("{sql}\n")).unwrap();
            f
        })
        .collect();
    let client_counts = [1u32, 2, 8];
    let mut tps = vec![vec![Vec::<f64>::new(); scripts.len()]; client_counts.len()];
    for rep in 0..reps {
        for (ci, &clients) in client_counts.iter().enumerate() {
            for si in rotated(&(0..scripts.len()).collect::<Vec<_>>(), rep) {
                c.batch_execute(truncate).unwrap();
                tps[ci][si].push(pgbench_tps(cluster, &files[si], clients, seconds));
            }
        }
    }
    println!("\npgbench -M prepared, {seconds} s per run, {reps} alternated runs (median tps)");
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>10}",
        "script", "1 client", "2 clients", "8 clients", "8c / 1c"
    );
    for (si, (name, _)) in scripts.iter().enumerate() {
        let m: Vec<f64> = (0..client_counts.len()).map(|ci| median(&tps[ci][si])).collect();
        println!("{name:<26} {:>10.0} {:>10.0} {:>10.0} {:>10.2}", m[0], m[1], m[2], m[2] / m[0]);
    }
    let mut goals = Vec::new();
    let mut ratios = serde_json::Map::new();
    for (ci, &clients) in client_counts.iter().enumerate() {
        for (a, b, what) in [(0, 1, "SELECT"), (2, 3, "INSERT")] {
            let r: Vec<f64> = (0..reps).map(|k| tps[ci][a][k] / tps[ci][b][k]).collect();
            ratios.insert(
                format!("{what} snowflake / sequence, {clients} clients"),
                json!(median(&r)),
            );
            goals.push(Goal {
                name: format!("pgbench {what}: snowflake / sequence tps, {clients}c"),
                value: median(&r),
                target: 1.0,
                at_least: true,
            });
        }
        // Against the uuids: reported, not goals (a round trip hides a generator's cost).
        let mut versus = vec![(0, 5, "SELECT", "uuid v4"), (2, 6, "INSERT", "uuid v4")];
        if v7 {
            versus.extend([(0, 7, "SELECT", "uuid v7"), (2, 8, "INSERT", "uuid v7")]);
        }
        for (a, b, what, other) in versus {
            let r: Vec<f64> = (0..reps).map(|k| tps[ci][a][k] / tps[ci][b][k]).collect();
            ratios.insert(
                format!("{what} snowflake / {other}, {clients} clients"),
                json!(median(&r)),
            );
        }
    }
    println!("median ratios of tps per run:");
    for (name, r) in &ratios {
        println!("  {name}: {:.3}", r.as_f64().unwrap());
    }
    let scaling = median(&tps[2][0]) / median(&tps[0][0]);
    let control_scaling = median(&tps[2][4]) / median(&tps[0][4]);
    goals.push(Goal {
        name: "pgbench SELECT snowflake: 8 clients / 1".into(),
        value: scaling,
        target: 1.8,
        at_least: true,
    });
    ratios.insert("SELECT snowflake, 8 clients over 1".into(), json!(scaling));
    ratios.insert("SELECT 1 (control), 8 clients over 1".into(), json!(control_scaling));
    // The table's order: the SELECTs, the control, then the INSERTs.
    let mut order: Vec<usize> = (0..scripts.len()).collect();
    order.sort_by_key(|&si| {
        (scripts[si].0.starts_with("INSERT"), scripts[si].0.contains("(control)"))
    });
    let value = json!({
        "seconds_per_run": seconds,
        "runs": reps,
        "clients": client_counts,
        "scripts": order.iter().map(|&si| json!({
            "name": scripts[si].0, "label": label(scripts[si].0), "sql": scripts[si].1,
            "tps": client_counts.iter().enumerate().map(|(ci, _)| json!(tps[ci][si])).collect::<Vec<_>>(),
            "median_tps": client_counts.iter().enumerate().map(|(ci, _)| median(&tps[ci][si])).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "ratios": ratios,
    });
    (value, goals)
}

/// Whether scripts/build-citus.sh installed Citus into the server under test.
fn citus_installed() -> bool {
    let pg_config_path = default_pg_config();
    pg_config(&pg_config_path, "--pkglibdir").join("citus.so").exists()
        && pg_config(&pg_config_path, "--sharedir")
            .join("extension/citus.pg_snowflake-build")
            .exists()
}

/// The sum of the tps of pgbench runs started at once, one per node, each with `clients`.
fn pgbench_together(
    nodes: &[&Cluster],
    script: &std::path::Path,
    clients: u32,
    seconds: u64,
) -> f64 {
    std::thread::scope(|s| {
        let runs: Vec<_> = nodes
            .iter()
            .map(|n| s.spawn(move || pgbench_tps(n, script, clients, seconds)))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).sum()
    })
}

/// pg_snowflake on Citus against Citus's own bigserial, both the distribution column and the
/// primary key of a distributed table: one INSERT ... SELECT of `CITUS_ROWS` rows through the
/// coordinator (the coordinator makes every id), and single-row INSERTs (pgbench) through the
/// coordinator, and on every node at once. Candidates alternate within each repetition.
fn citus(reps: usize, seconds: u64, pg_reps: usize) -> (Value, Vec<Goal>) {
    const CITUS_ROWS: i64 = 200_000;
    let (started, load_at_start) = (Instant::now(), load_average());
    let citus = common::citus::Citus::start("bench_citus", 2, &[]);
    let mut c = citus.coordinator.connect();
    c.batch_execute(
        "CREATE TABLE citus_snowflake (id bigint PRIMARY KEY DEFAULT snowflake_next(), v int);
         SELECT create_distributed_table('citus_snowflake', 'id');
         CREATE TABLE citus_bigserial (id bigserial PRIMARY KEY, v int);
         SELECT create_distributed_table('citus_bigserial', 'id');",
    )
    .unwrap();
    let keys = [("snowflake", "citus_snowflake"), ("bigserial", "citus_bigserial")];
    let bulk =
        |t: &str| format!("INSERT INTO {t} (v) SELECT g FROM generate_series(1, {CITUS_ROWS}) g");
    for (_, t) in keys {
        timed(&mut c, &bulk(t));
    }
    let mut secs = vec![Vec::new(); keys.len()];
    for rep in 0..reps {
        for i in rotated(&[0usize, 1], rep) {
            c.batch_execute(&format!("TRUNCATE {}", keys[i].1)).unwrap();
            secs[i].push(timed(&mut c, &bulk(keys[i].1)));
        }
    }
    let files: Vec<std::path::PathBuf> = keys
        .iter()
        .map(|(key, t)| {
            let f = citus.coordinator.dir.join(format!("citus-{key}.sql"));
            std::fs::write(&f, format!("INSERT INTO {t} (v) VALUES (1);\n")).unwrap();
            f
        })
        .collect();
    let nodes = citus.nodes();
    let clients = 2;
    let (mut coordinator_tps, mut every_node_tps) = (vec![Vec::new(); 2], vec![Vec::new(); 2]);
    for rep in 0..pg_reps {
        for i in rotated(&[0usize, 1], rep) {
            coordinator_tps[i].push(pgbench_tps(&citus.coordinator, &files[i], clients, seconds));
            every_node_tps[i].push(pgbench_together(&nodes, &files[i], clients, seconds));
        }
    }
    let ratio = |xs: &[Vec<f64>]| -> f64 {
        median(&xs[0].iter().zip(&xs[1]).map(|(a, b)| a / b).collect::<Vec<_>>())
    };
    let (bulk_ratio, coordinator_ratio, every_node_ratio) =
        (ratio(&secs), ratio(&coordinator_tps), ratio(&every_node_tps));
    let version: String = c
        .query_one("SELECT extversion FROM pg_extension WHERE extname = 'citus'", &[])
        .unwrap()
        .get(0);
    println!(
        "\nCitus {version}, a coordinator and two workers: snowflake_next() against bigserial\n\
         INSERT ... SELECT of {CITUS_ROWS} rows through the coordinator: {:.3} s against {:.3} s (ratio {bulk_ratio:.3})\n\
         single-row INSERTs through the coordinator, {clients} clients: {:.0} tps against {:.0} (ratio {coordinator_ratio:.3})\n\
         single-row INSERTs on every node at once, {clients} clients each: {:.0} tps against {:.0} (ratio {every_node_ratio:.3})",
        median(&secs[0]),
        median(&secs[1]),
        median(&coordinator_tps[0]),
        median(&coordinator_tps[1]),
        median(&every_node_tps[0]),
        median(&every_node_tps[1]),
    );
    let goals = vec![
        Goal {
            name: "Citus INSERT ... SELECT: snowflake time / bigserial".into(),
            value: bulk_ratio,
            target: 1.0,
            at_least: false,
        },
        Goal {
            name: "Citus INSERT on every node: snowflake / bigserial tps".into(),
            value: every_node_ratio,
            target: 1.0,
            at_least: true,
        },
    ];
    let rows = |label: &str, unit: &str, xs: &[Vec<f64>], r: f64| {
        json!({"label": label, "unit": unit, "snowflake": xs[0], "bigserial": xs[1],
               "median_snowflake": median(&xs[0]), "median_bigserial": median(&xs[1]),
               "snowflake_over_bigserial": r})
    };
    let value = json!({
        "citus": version,
        "pg_snowflake": format!("{} ({})", env!("CARGO_PKG_VERSION"), commit()),
        "load_average": {"at_start": load_at_start, "at_end": load_average()},
        "duration_s": started.elapsed().as_secs_f64().round(),
        "nodes": nodes.len(),
        "rows": CITUS_ROWS,
        "runs": reps,
        "pgbench_runs": pg_reps,
        "pgbench_seconds": seconds,
        "clients_per_node": clients,
        "candidates": [
            rows(&format!("one `INSERT ... SELECT` of {CITUS_ROWS} rows through the coordinator"), "s", &secs, bulk_ratio),
            rows(&format!("single-row `INSERT`s through the coordinator, {clients} clients"), "tps", &coordinator_tps, coordinator_ratio),
            rows(&format!("single-row `INSERT`s on every node at once, {clients} clients each"), "tps", &every_node_tps, every_node_ratio),
        ],
    });
    (value, goals)
}

/// A horizontal bar per goal: the measured ratio, the goal as a line, green when met.
fn svg(goals: &[Goal], machine: &str) -> String {
    let (left, width, row, top) = (330.0, 420.0, 30.0, 56.0);
    let max = goals.iter().map(|g| g.value.max(g.target)).fold(1.0, f64::max) * 1.1;
    let x = |v: f64| left + v / max * width;
    let height = top + row * goals.len() as f64 + 40.0;
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="15" font-weight="bold">pg_snowflake: ratios from one `make bench` run</text>
<text x="10" y="38" fill="#555">{machine}. Bar: measured; black line: goal; green: goal met.</text>
"##,
        w = left + width + 90.0
    );
    for (i, g) in goals.iter().enumerate() {
        let y = top + row * i as f64;
        let color = if g.met() { "#2e9d50" } else { "#d64541" };
        let cmp = if g.at_least { "≥" } else { "≤" };
        s += &format!(
            r##"<text x="{tx}" y="{ty}" text-anchor="end">{name}</text>
<rect x="{left}" y="{y}" width="{bw:.1}" height="18" fill="{color}"/>
<line x1="{gx:.1}" x2="{gx:.1}" y1="{y1}" y2="{y2}" stroke="black" stroke-width="2"/>
<text x="{vx:.1}" y="{ty}">{value:.3} (goal {cmp} {target})</text>
"##,
            tx = left - 8.0,
            ty = y + 13.0,
            name = g.name,
            bw = x(g.value) - left,
            gx = x(g.target),
            y1 = y - 3.0,
            y2 = y + 21.0,
            vx = x(g.value).max(x(g.target)) + 6.0,
            value = g.value,
            target = g.target,
        );
    }
    s += "</svg>\n";
    s
}

fn machine(c: &mut Client) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|m| m.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let version: String = c.query_one("SHOW server_version", &[]).unwrap().get(0);
    format!("{cpu}, {cores} cores, PostgreSQL {version}")
}

/// The first line of `/proc/loadavg` (1, 5 and 15 minutes): other work on the machine shows in
/// every timing, so a run records what there was.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The commit measured, `-dirty` when the tree had changes.
fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Renders the tables of docs/benchmarks.md from docs/benchmarks.json.
fn render_page() -> Result<(), String> {
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md");
    let markdown = std::fs::read_to_string(&page).map_err(|e| e.to_string())?;
    let rendered = benchmarks::render(&markdown, &benchmarks::load())?;
    std::fs::write(&page, rendered).map_err(|e| e.to_string())
}

fn main() {
    // `cargo run --example bench -- --render`: the tables of docs/benchmarks.md anew from
    // docs/benchmarks.json, measuring nothing (after adding a table to the page).
    if std::env::args().nth(1).as_deref() == Some("--render") {
        render_page().unwrap_or_else(|e| panic!("docs/benchmarks.md: {e}"));
        return;
    }
    let started = Instant::now();
    let load_at_start = load_average();
    let reps = env_or("BENCH_REPS", 7) as usize;
    let pg_seconds = env_or("BENCH_PGBENCH_SECONDS", 5);
    let pg_reps = env_or("BENCH_PGBENCH_REPS", 3) as usize;
    let cluster = Cluster::start_new(
        "bench",
        &[
            "shared_buffers = '512MB'",
            "max_wal_size = '8GB'",
            "checkpoint_timeout = '1h'",
            "autovacuum = off",
            "max_connections = 50",
        ],
    );
    let mut c = cluster.connect_ext();
    c.batch_execute("CREATE SEQUENCE bench_seq").unwrap();
    let machine = machine(&mut c);
    let major: i32 = c
        .query_one("SELECT current_setting('server_version_num')::int / 10000", &[])
        .unwrap()
        .get(0);
    let v7 = major >= 18;
    println!("pg_snowflake benchmark on {machine}");

    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    // BENCH_ONLY=citus: the Citus part alone, written into the major's run.
    if only == "citus" {
        assert!(
            citus_installed(),
            "Citus is not installed into this server: scripts/build-citus.sh {major}"
        );
        drop(c);
        drop(cluster);
        let (citus_v, _) = citus(reps, pg_seconds, pg_reps);
        let mut data = benchmarks::load();
        data["runs"][major.to_string()]["citus"] = citus_v;
        std::fs::write(benchmarks::path(), serde_json::to_string_pretty(&data).unwrap() + "\n")
            .unwrap();
        render_page().unwrap_or_else(|e| panic!("docs/benchmarks.md: {e}"));
        println!("wrote the Citus run into docs/benchmarks.json (run {major})");
        return;
    }
    // BENCH_ONLY=range: the time-range counts alone (results are not written).
    if only == "range" {
        time_range(&mut c, reps);
        return;
    }
    let (bulk_v, mut goals) = bulk(&mut c, reps, v7);
    // BENCH_ONLY=bulk: the per-id cost alone, in a minute (results are not written).
    if only == "bulk" {
        return;
    }
    let (range_v, g) = time_range(&mut c, reps);
    goals.extend(g);
    let (insert_v, g) = insert(&mut c, reps, v7);
    goals.extend(g);
    let (pgbench_v, g) = pgbench(&cluster, &mut c, pg_seconds, pg_reps, v7);
    goals.extend(g);
    let citus_v = if citus_installed() {
        let (v, g) = citus(reps, pg_seconds, pg_reps);
        goals.extend(g);
        v
    } else {
        println!(
            "\nCitus is not installed into this server: its part is left out of this run \
             (scripts/build-citus.sh {major} installs it)"
        );
        Value::Null
    };

    println!("\nGoals");
    for g in &goals {
        let cmp = if g.at_least { ">=" } else { "<=" };
        println!(
            "{:<48} {:>8.3}  goal {cmp} {:<5} {}",
            g.name,
            g.value,
            g.target,
            if g.met() { "met" } else { "NOT MET" }
        );
    }

    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&out).unwrap();
    let (date, version): (String, String) = {
        let r = c
            .query_one(
                "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI \"UTC\"'),
                        current_setting('server_version')",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    let run = json!({
        "date": date,
        "machine": machine,
        "postgresql": version,
        "pg_snowflake": format!("{} ({})", env!("CARGO_PKG_VERSION"), commit()),
        "load_average": {"at_start": load_at_start, "at_end": load_average()},
        "duration_s": started.elapsed().as_secs_f64().round(),
        "settings": {"BENCH_REPS": reps, "BENCH_PGBENCH_SECONDS": pg_seconds, "BENCH_PGBENCH_REPS": pg_reps},
        "bulk": bulk_v,
        "time_range": range_v,
        "insert": insert_v,
        "pgbench": pgbench_v,
        "citus": citus_v,
        "goals": goals.iter().map(|g| json!({"name": g.name, "value": g.value, "target": g.target,
            "at_least": g.at_least, "met": g.met()})).collect::<Vec<_>>(),
    });
    // docs/benchmarks.json keeps the run of each major (and the hot path's count, which
    // scripts/callgrind.sh writes); this run replaces the one of its major.
    let mut data = benchmarks::load();
    data["runs"][major.to_string()] = run;
    std::fs::write(benchmarks::path(), serde_json::to_string_pretty(&data).unwrap() + "\n")
        .unwrap();
    // The tables of docs/benchmarks.md, from the data (tests/docs/readme.rs checks them equal).
    if let Err(e) = render_page() {
        eprintln!("docs/benchmarks.md not rendered: {e}");
    }
    let chart = svg(&goals, &machine);
    std::fs::write(out.join(format!("ratios-pg{major}.svg")), &chart).unwrap();
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join(format!("bench-pg{major}.svg")), &chart).unwrap();
    println!(
        "\nwrote docs/benchmarks.json (run {major}), the tables of docs/benchmarks.md, \
         {}/ratios-pg{major}.svg and docs/bench-pg{major}.svg in {:.0} s; the figures the pages \
         quote are checked by tests/docs/readme.rs",
        out.display(),
        started.elapsed().as_secs_f64()
    );
}
