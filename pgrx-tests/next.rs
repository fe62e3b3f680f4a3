//! snowflake_next(): uniqueness, order, worker id, time, column defaults, parallel workers.

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{bigints, one};
    use pgrx::prelude::*;

    #[pg_test]
    fn ids_strictly_increase_within_a_statement() {
        let ids = bigints("SELECT snowflake_next() FROM generate_series(1, 20000)");
        assert_eq!(ids.len(), 20000);
        for pair in ids.windows(2) {
            assert!(pair[1] > pair[0], "{} then {}", pair[0], pair[1]);
        }
    }

    #[pg_test]
    fn ids_carry_the_configured_worker_id() {
        let others: i64 = one(
            "SELECT count(*) FROM (SELECT snowflake_next() AS id FROM generate_series(1, 5000)) s
             WHERE (snowflake_decode(id)).worker_id <> 42",
        );
        assert_eq!(others, 0);
    }

    #[pg_test]
    fn a_fresh_id_is_within_a_second_of_clock_timestamp() {
        let gap: f64 = one("SELECT abs(extract(epoch FROM (snowflake_decode(snowflake_next())).ts
                                          - clock_timestamp()))::float8");
        assert!(gap < 1.0, "decoded time is {gap} s away from clock_timestamp()");
    }

    #[pg_test]
    fn low_traffic_ids_do_not_all_end_in_zero_bits() {
        // One id every 2 ms: Twitter's rule restarts the sequence at 0 in every millisecond,
        // so every such id would be a multiple of 4096.
        let mut ids = Vec::new();
        for _ in 0..20 {
            Spi::run("SELECT pg_sleep(0.002)").unwrap();
            ids.push(one::<i64>("SELECT snowflake_next()"));
        }
        let distinct_low_bits: std::collections::BTreeSet<i64> =
            ids.iter().map(|id| id & 0xfff).collect();
        assert!(distinct_low_bits.len() >= 19, "low 12 bits: {distinct_low_bits:?}");
    }

    #[pg_test]
    fn column_default_gives_distinct_ids_in_insert_order() {
        Spi::run(
            "CREATE TEMP TABLE t (id bigint PRIMARY KEY DEFAULT snowflake_next(), n int);
             INSERT INTO t (n) SELECT g FROM generate_series(1, 10000) g",
        )
        .unwrap();
        let (rows, distinct): (i64, i64) =
            (one("SELECT count(*) FROM t"), one("SELECT count(DISTINCT id) FROM t"));
        assert_eq!((rows, distinct), (10000, 10000));
        let out_of_order: i64 =
            one("SELECT count(*) FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev FROM t) s
             WHERE id <= prev");
        assert_eq!(out_of_order, 0);
    }

    #[pg_test]
    fn parallel_workers_draw_from_the_shared_generator() {
        Spi::run(&format!(
            "SET LOCAL {} = on;
             SET LOCAL parallel_setup_cost = 0;
             SET LOCAL parallel_tuple_cost = 0",
            crate::pg_tests::FORCE_PARALLEL
        ))
        .unwrap();
        // Each row says which kind of process computed it, so the ids checked below are known
        // to come from a parallel worker, not only a plan that could have used one.
        let rows = Spi::connect(|client| {
            client
                .select(
                    "SELECT snowflake_next(), tests.in_parallel_worker()
                     FROM generate_series(1, 1000)",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| {
                    (row.get::<i64>(1).unwrap().unwrap(), row.get::<bool>(2).unwrap().unwrap())
                })
                .collect::<Vec<_>>()
        });
        assert_eq!(rows.len(), 1000);
        assert!(
            rows.iter().all(|&(_, in_worker)| in_worker),
            "some ids were not made in a parallel worker"
        );
        let from_worker: Vec<i64> = rows.iter().map(|&(id, _)| id).collect();
        Spi::run(&format!("SET LOCAL {} = off", crate::pg_tests::FORCE_PARALLEL)).unwrap();
        let (from_leader, leader_in_worker): (i64, bool) =
            (one("SELECT snowflake_next()"), one("SELECT tests.in_parallel_worker()"));
        assert!(!leader_in_worker);
        assert!(from_worker.windows(2).all(|p| p[1] > p[0]));
        assert!(from_leader > *from_worker.last().unwrap());
        let (others, total): (i64, i64) = (
            one(&format!(
                "SELECT count(*) FROM unnest('{{{}}}'::bigint[]) AS id
                 WHERE (snowflake_decode(id)).worker_id <> 42",
                from_worker.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
            )),
            from_worker.len() as i64,
        );
        assert_eq!((others, total), (0, 1000), "ids from the worker carry worker id 42");
    }

    #[pg_test]
    fn next_is_volatile_and_parallel_safe() {
        let (volatility, parallel): (String, String) = (
            one("SELECT provolatile::text FROM pg_proc WHERE proname = 'snowflake_next'"),
            one("SELECT proparallel::text FROM pg_proc WHERE proname = 'snowflake_next'"),
        );
        assert_eq!((volatility.as_str(), parallel.as_str()), ("v", "s"));
    }
}
