//! snowflake_decode(): known answers, edges, agreement with plain SQL bit arithmetic, NULL,
//! errors, and use in WHERE clauses and expression indexes.

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{error_of, one};
    use pgrx::prelude::*;

    fn decoded(id: &str) -> (String, i32, i32) {
        let (ts, worker, seq) = Spi::get_three::<String, i32, i32>(&format!(
            "SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS'), worker_id, sequence
             FROM snowflake_decode({id})"
        ))
        .unwrap();
        (ts.unwrap(), worker.unwrap(), seq.unwrap())
    }

    #[pg_test]
    fn zero_is_the_twitter_epoch() {
        assert_eq!(decoded("0"), ("2010-11-04 01:42:54.657".into(), 0, 0));
    }

    #[pg_test]
    fn the_largest_bigint_is_the_end_of_the_layout() {
        assert_eq!(decoded("9223372036854775807"), ("2080-07-10 17:30:30.208".into(), 1023, 4095));
    }

    #[pg_test]
    fn known_answer() {
        // 2020-01-01T00:00:00Z, worker 5, sequence 7, computed independently.
        assert_eq!(decoded("1212161512043466759"), ("2020-01-01 00:00:00.000".into(), 5, 7));
    }

    #[pg_test]
    fn agrees_with_sql_bit_arithmetic_on_random_ids() {
        // Every one of the 63 bits random (xorshift64, seed printed on failure), so that each
        // field sees every bit pattern; `random() * 2^63` would leave the low bits all zero.
        let seed: u64 = 0x5eed_0f5a_0f1a_4e00;
        let mut x = seed;
        let ids: Vec<String> = (0..10_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 1).to_string()
            })
            .collect();
        let low_bits: std::collections::BTreeSet<u64> =
            ids.iter().map(|id| id.parse::<u64>().unwrap() & 0xfff).collect();
        assert!(low_bits.len() > 3000, "the ids are not random enough");
        let mismatches: i64 = one(&format!(
            "SELECT count(*) FROM unnest('{{{}}}'::bigint[]) AS id
             WHERE (snowflake_decode(id)).ts
                       IS DISTINCT FROM to_timestamp(((id >> 22) + 1288834974657) / 1000.0)
                OR (snowflake_decode(id)).worker_id IS DISTINCT FROM ((id >> 12) & 1023)::int
                OR (snowflake_decode(id)).sequence IS DISTINCT FROM (id & 4095)::int",
            ids.join(",")
        ));
        assert_eq!(mismatches, 0, "seed {seed:#x}");
    }

    #[pg_test]
    fn null_in_null_out() {
        assert!(one::<bool>("SELECT snowflake_decode(NULL) IS NULL"));
    }

    #[pg_test]
    fn negative_ids_are_out_of_range() {
        for id in ["-1", "-9223372036854775808"] {
            let err = error_of(&format!("SELECT snowflake_decode({id})")).expect("an error");
            assert_eq!(err.sqlstate, "22003", "{err:?}");
            assert_eq!(err.message, format!("snowflake id {id} is out of range"));
        }
    }

    #[pg_test]
    fn fields_work_in_where_clauses_and_expression_indexes() {
        Spi::run(
            "CREATE TEMP TABLE ev (id bigint PRIMARY KEY DEFAULT snowflake_next(), n int);
             CREATE INDEX ev_ts ON ev (((snowflake_decode(id)).ts));
             INSERT INTO ev (n) SELECT g FROM generate_series(1, 2000) g;
             ANALYZE ev",
        )
        .unwrap();
        let mine: i64 = one("SELECT count(*) FROM ev WHERE (snowflake_decode(id)).worker_id = 42");
        assert_eq!(mine, 2000);
        Spi::run("SET LOCAL enable_seqscan = off").unwrap();
        let plan: String = one("EXPLAIN (COSTS OFF) SELECT * FROM ev
             WHERE (snowflake_decode(id)).ts > now() - interval '1 hour'");
        assert!(plan.contains("ev_ts"), "the expression index is not used: {plan}");
        let recent: i64 = one(
            "SELECT count(*) FROM ev WHERE (snowflake_decode(id)).ts > now() - interval '1 hour'",
        );
        assert_eq!(recent, 2000);
    }

    #[pg_test]
    fn decode_is_immutable_strict_parallel_safe() {
        let flags: String = one("SELECT string_agg(DISTINCT provolatile::text || proisstrict::text
                                        || proparallel::text, ' ')
             FROM pg_proc WHERE proname IN ('snowflake_decode', 'snowflake_timestamp',
                                            'snowflake_min_id', 'snowflake_max_id')");
        assert_eq!(flags, "itrues");
        let overloads: i64 = one("SELECT count(*) FROM pg_proc WHERE proname = 'snowflake_decode'");
        assert_eq!(overloads, 2);
    }
}
