//! The toolkit: base62 text ids, snowflake_stats(), snowflake_advance_past(), and the flags and
//! privileges of each function. (Adopting columns, privileges through real roles, and
//! durability across a crash are in tests/ids/toolkit.rs.)

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{column, error_of, one};
    use pgrx::prelude::*;
    use pgrx::JsonB;

    /// 100 000 ids with every one of the 63 bits random (xorshift64, seed printed on failure).
    fn random_ids(seed: u64) -> Vec<i64> {
        let mut x = seed;
        (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 1) as i64
            })
            .collect()
    }

    #[pg_test]
    fn base62_sorts_like_the_numbers_and_round_trips_in_sql() {
        let seed: u64 = 0x6262_0123_4567;
        let mut ids = random_ids(seed);
        ids.extend([0, 1, 61, 62, i64::MAX]);
        let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        Spi::run(&format!(
            "CREATE TEMP TABLE b62 AS
             SELECT id, snowflake_to_base62(id) AS t FROM unnest('{{{list}}}'::bigint[]) AS id"
        ))
        .unwrap();
        let bad_round_trips: i64 =
            one("SELECT count(*) FROM b62 WHERE snowflake_from_base62(t) <> id");
        let not_eleven: i64 = one("SELECT count(*) FROM b62 WHERE length(t) <> 11");
        // Text order under COLLATE "C" is the numeric order: the ranks agree row by row.
        let out_of_order: i64 = one("SELECT count(*) FROM (
                 SELECT rank() OVER (ORDER BY id) AS by_number,
                        rank() OVER (ORDER BY t COLLATE \"C\") AS by_text
                 FROM b62) r
             WHERE by_number <> by_text");
        assert_eq!((bad_round_trips, not_eleven, out_of_order), (0, 0, 0), "seed {seed:#x}");
        assert_eq!(one::<String>("SELECT snowflake_to_base62(0)"), "00000000000");
        assert_eq!(one::<String>("SELECT snowflake_to_base62(9223372036854775807)"), "AzL8n0Y58m7");
    }

    #[pg_test]
    fn base62_errors_say_what_is_wrong() {
        for (sql, state, message) in [
            (
                "SELECT snowflake_from_base62('0000000000')",
                "22P02",
                "invalid input syntax for a base62 snowflake id: \"0000000000\"",
            ),
            (
                "SELECT snowflake_from_base62('00000-00000')",
                "22P02",
                "invalid input syntax for a base62 snowflake id: \"00000-00000\"",
            ),
            (
                "SELECT snowflake_from_base62('AzL8n0Y58m8')",
                "22003",
                "base62 snowflake id \"AzL8n0Y58m8\" is out of range for type bigint",
            ),
            ("SELECT snowflake_to_base62(-1)", "22003", "snowflake id -1 is out of range"),
        ] {
            let err = error_of(sql).unwrap_or_else(|| panic!("{sql} succeeded"));
            assert_eq!((err.sqlstate.as_str(), err.message.as_str()), (state, message), "{sql}");
        }
        assert!(one::<bool>("SELECT snowflake_from_base62(NULL) IS NULL"));
    }

    #[pg_test]
    fn stats_describe_the_generator() {
        let before: JsonB = one("SELECT snowflake_stats()");
        Spi::run("SELECT snowflake_next() FROM generate_series(1, 1000)").unwrap();
        let after: JsonB = one("SELECT snowflake_stats()");
        let (before, after) = (before.0, after.0);
        assert_eq!(after["worker_id"], 42);
        assert_eq!(after["layout"]["name"], "twitter");
        assert_eq!(after["layout"]["epoch"], "2010-11-04T01:42:54.657Z");
        assert_eq!(after["layout"]["ends"], "2080-07-10T17:30:30.208Z");
        assert_eq!(
            (
                &after["layout"]["time_bits"],
                &after["layout"]["worker_bits"],
                &after["layout"]["sequence_bits"]
            ),
            (&41.into(), &10.into(), &12.into())
        );
        // This backend's own ids count before its transaction ends.
        let counted = after["ids_since_start"].as_u64().unwrap()
            - before["ids_since_start"].as_u64().unwrap();
        assert!(counted >= 1000, "{counted}");
        let last = after["last_id"].as_i64().unwrap();
        let next: i64 = one("SELECT snowflake_next()");
        assert!(next > last, "{next} <= {last}");
        assert!(after["lease"]["renewals"].as_u64().unwrap() >= 1);
        assert!(after["lease"]["covered_until"].is_string());
        let ahead = after["ahead_of_clock_ms"].as_i64().unwrap();
        assert!(ahead.abs() < 10_000, "{ahead}");
        for key in ["steps_back", "largest_step_back_ms", "waits_ms", "failures", "paced_ms"] {
            assert!(after["clock"][key].is_u64(), "clock.{key}: {after}");
        }
    }

    #[pg_test]
    fn advance_past_moves_later_ids_above_the_given_one() {
        // An id 2 s ahead of the clock, of another worker, near the end of its millisecond.
        let ahead: i64 =
            one("SELECT (((extract(epoch FROM clock_timestamp())::numeric * 1000)::bigint
                      + 2000 - 1288834974657) << 22) | (7 << 12) | 4000");
        Spi::run(&format!("SELECT snowflake_advance_past({ahead})")).unwrap();
        let next: i64 = one("SELECT snowflake_next()");
        assert!(next > ahead, "{next} <= {ahead}");
        // Going back is a no-op, not an error.
        Spi::run("SELECT snowflake_advance_past(1)").unwrap();
        assert!(one::<i64>("SELECT snowflake_next()") > next);
    }

    #[pg_test]
    fn advance_past_refuses_what_it_cannot_do() {
        let hour_ahead: i64 =
            one("SELECT ((extract(epoch FROM clock_timestamp())::numeric * 1000)::bigint
                     + 3600000 - 1288834974657) << 22");
        let err = error_of(&format!("SELECT snowflake_advance_past({hour_ahead})")).unwrap();
        assert_eq!(err.sqlstate, "22023", "{err:?}");
        assert_eq!(err.message, format!("snowflake id {hour_ahead} is too far ahead of the clock"));
        let err = error_of("SELECT snowflake_advance_past(-5)").unwrap();
        assert_eq!(
            (err.sqlstate.as_str(), err.message.as_str()),
            ("22003", "snowflake id -5 is out of range")
        );
    }

    #[pg_test]
    fn flags_and_privileges_of_the_toolkit() {
        let rows: Vec<String> = column(
            "SELECT proname || ' ' || provolatile::text || proisstrict::text || proparallel::text
                            || ' public:' || has_function_privilege('public', oid, 'EXECUTE')
                            || ' pg_monitor:' || has_function_privilege('pg_monitor', oid, 'EXECUTE')
                     FROM pg_proc
                     WHERE proname IN ('snowflake_to_base62', 'snowflake_from_base62',
                                       'snowflake_stats', 'snowflake_advance_past',
                                       'snowflake_adopt')
                     ORDER BY proname",
        );
        assert_eq!(
            rows,
            [
                "snowflake_adopt vtrueu public:false pg_monitor:false",
                "snowflake_advance_past vtrueu public:false pg_monitor:false",
                "snowflake_from_base62 itrues public:true pg_monitor:true",
                "snowflake_stats vtrues public:false pg_monitor:true",
                "snowflake_to_base62 itrues public:true pg_monitor:true",
            ]
        );
    }
}
