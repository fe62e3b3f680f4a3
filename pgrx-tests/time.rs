//! Layouts from SQL on the test server (Twitter's layout): decoding ids of other layouts by
//! name, the time helpers, and time ranges answered by the primary key index.

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{error_of, one};
    use pgrx::prelude::*;

    fn decoded(sql: &str) -> String {
        one(&format!(
            "SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.MS') || ' '
                    || worker_id || ' ' || sequence FROM {sql}"
        ))
    }

    #[pg_test]
    fn ids_of_other_systems_decode_by_layout_name() {
        // Discord's documented example id: 2016-04-30 11:18:25.796 UTC, worker 1 and process 0
        // (worker id 32 in our 10-bit field), increment 7.
        assert_eq!(
            decoded("snowflake_decode(175928847299117063, 'discord')"),
            "2016-04-30 11:18:25.796 32 7"
        );
        // Sonyflake, from sony/sonyflake's Decompose: time 12345678 ten-ms units after
        // 2014-09-01, sequence 3, machine id 4242.
        assert_eq!(
            decoded(&format!(
                "snowflake_decode({}, 'Sonyflake')",
                12_345_678i64 << 24 | 3 << 16 | 4242
            )),
            "2014-09-02 10:17:36.780 4242 3"
        );
        // Instagram: shifts 23 and 10, epoch 2011-08-24 21:07:01.721 UTC.
        assert_eq!(
            decoded(&format!("snowflake_decode({}, 'instagram')", 1_000i64 << 23 | 1341 << 10 | 1)),
            "2011-08-24 21:07:02.721 1341 1"
        );
        assert_eq!(decoded("snowflake_decode(0, 'js53')"), "2025-01-01 00:00:00.000 0 0");
        assert_eq!(
            decoded("snowflake_decode(1212161512043466759, 'twitter')"),
            decoded("snowflake_decode(1212161512043466759)")
        );
    }

    #[pg_test]
    fn unknown_layouts_and_ids_outside_a_layout_are_errors() {
        let err = error_of("SELECT snowflake_decode(1, 'snowflake')").unwrap();
        assert_eq!(err.sqlstate, "22023", "{err:?}");
        assert_eq!(err.message, "unknown snowflake layout \"snowflake\"");
        let err = error_of("SELECT snowflake_decode(1, 'custom')").unwrap();
        assert_eq!(err.sqlstate, "22023", "{err:?}");
        let err = error_of(&format!("SELECT snowflake_decode({}, 'js53')", 1i64 << 53)).unwrap();
        assert_eq!(err.sqlstate, "22003", "{err:?}");
        let err = error_of("SELECT snowflake_decode(-5)").unwrap();
        assert_eq!(err.sqlstate, "22003", "{err:?}");
        // A bigint the layout cannot hold carries no time: NULL, as the planner's id ranges
        // select none of them.
        assert!(!one::<bool>("SELECT snowflake_timestamp(-5) IS NOT NULL"));
        // Instagram's ids turn negative in 2046, and still decode.
        assert_eq!(
            decoded("snowflake_decode(-1, 'instagram')"),
            "2081-04-30 12:54:37.272 8191 1023"
        );
    }

    #[pg_test]
    fn timestamp_min_id_and_max_id_agree_with_decode() {
        let bad: i64 =
            one("WITH ids AS (SELECT snowflake_next() AS id FROM generate_series(1, 5000))
             SELECT count(*) FROM ids
             WHERE snowflake_timestamp(id) IS DISTINCT FROM (snowflake_decode(id)).ts
                OR id NOT BETWEEN snowflake_min_id(snowflake_timestamp(id))
                              AND snowflake_max_id(snowflake_timestamp(id))
                OR snowflake_timestamp(snowflake_min_id(snowflake_timestamp(id)) - 1)
                   <> snowflake_timestamp(id) - interval '1 ms'
                OR snowflake_timestamp(snowflake_max_id(snowflake_timestamp(id)) + 1)
                   <> snowflake_timestamp(id) + interval '1 ms'");
        assert_eq!(bad, 0);
        // Every worker's ids of one millisecond lie between the two.
        let (lo, hi) = Spi::get_two::<i64, i64>(
            "SELECT snowflake_min_id('2020-01-01 00:00:00+00'), \
                    snowflake_max_id('2020-01-01 00:00:00.000999+00')",
        )
        .unwrap();
        assert_eq!(lo.unwrap(), 1_212_161_512_043_446_272);
        assert_eq!(hi.unwrap(), 1_212_161_512_043_446_272 + (1 << 22) - 1);
        let err = error_of("SELECT snowflake_min_id('2000-01-01')").unwrap();
        assert_eq!(err.sqlstate, "22008", "{err:?}");
        let err = error_of("SELECT snowflake_max_id('infinity')").unwrap();
        assert_eq!(err.sqlstate, "22008", "{err:?}");
    }

    /// `ev`: one row a minute for 20 000 minutes from 2026-01-01, as worker 42 would have made
    /// them, plus `extra` SQL.
    fn minutes_table(extra: &str) {
        Spi::run(&format!(
            "CREATE TEMP TABLE ev (id bigint PRIMARY KEY, n int);
             INSERT INTO ev
             SELECT snowflake_min_id(timestamptz '2026-01-01 00:00:00+00'
                                     + g * interval '1 minute') + (42 << 12), g
             FROM generate_series(1, 20000) g;
             {extra}
             ANALYZE ev"
        ))
        .unwrap();
    }

    #[pg_test]
    fn a_time_range_is_an_index_range_scan_on_the_primary_key() {
        minutes_table("");
        let range = "id BETWEEN snowflake_min_id('2026-01-05 00:00:00+00')
                            AND snowflake_max_id('2026-01-05 23:59:59.999+00')";
        let plan = plan_of(&format!("SELECT count(*) FROM ev WHERE {range}"));
        assert!(
            plan.contains("Index Only Scan using ev_pkey") && plan.contains("Index Cond"),
            "{plan}"
        );
        let n: i64 = one(&format!("SELECT count(*) FROM ev WHERE {range}"));
        let by_time: i64 = one("SELECT count(*) FROM ev
             WHERE snowflake_timestamp(id) >= '2026-01-05 00:00:00+00'
               AND snowflake_timestamp(id) < '2026-01-06 00:00:00+00'");
        assert_eq!((n, by_time), (1440, 1440));
    }

    /// `snowflake_timestamp(id) op value`, written the way people think, becomes a range scan
    /// on the primary key with nothing left to filter (through `planner`), and selects exactly
    /// the rows that the same condition selects when the planner cannot see it (wrapped in
    /// `= true`), for every operator, both operand orders, values inside a millisecond, and
    /// values before the epoch and past the end.
    #[pg_test]
    fn time_conditions_become_index_ranges_with_the_same_rows() {
        minutes_table(
            "-- The edges of two milliseconds: the smallest and the largest id of each.
             INSERT INTO ev VALUES
                 (snowflake_min_id('2026-01-05 00:00:00+00'), -1),
                 (snowflake_max_id('2026-01-05 00:00:00+00'), -2),
                 (snowflake_min_id('2026-01-05 00:00:00.001+00'), -3),
                 (snowflake_max_id('2026-01-05 00:00:00.001+00'), -4);",
        );
        let ts = "snowflake_timestamp(id)";
        let conditions = [
            format!("{ts} >= '2026-01-05 00:00:00+00' AND {ts} < '2026-01-06 00:00:00+00'"),
            format!("{ts} > '2026-01-05 00:00:00+00' AND {ts} <= '2026-01-05 12:00:00+00'"),
            format!("{ts} BETWEEN '2026-01-05 00:00:00.0005+00' AND '2026-01-05 06:00:00.0005+00'"),
            format!(
                "{ts} > '2026-01-04 23:59:59.9995+00' AND {ts} < '2026-01-05 00:00:00.0015+00'"
            ),
            format!("{ts} = '2026-01-05 00:00:00+00'"),
            format!("{ts} = '2026-01-05 00:00:00.0005+00'"),
            format!("'2026-01-05 00:00:00.001+00' <= {ts} AND '2026-01-05 01:00:00+00' > {ts}"),
            format!("{ts} < '2000-01-01 00:00:00+00'"),
            // Every row: a sequential scan is the right plan, with the comparison replaced.
            format!("{ts} > '2000-01-01 00:00:00+00' AND {ts} <= 'infinity'"),
            format!("{ts} >= '2090-01-01 00:00:00+00'"),
            format!("{ts} >= now() - interval '1 hour' AND n > 0"),
        ];
        for condition in &conditions {
            let plan = plan_of(&format!("SELECT id FROM ev WHERE {condition}"));
            let everything = condition.contains("infinity");
            assert!(
                everything
                    || plan.contains("Index")
                        && plan.contains("ev_pkey")
                        && plan.contains("Index Cond")
                    || plan.contains("One-Time Filter: false"),
                "{condition}:\n{plan}"
            );
            assert!(
                !plan.contains("snowflake_timestamp"),
                "{condition}: the comparison was not replaced:\n{plan}"
            );
            let hidden = format!("({condition}) = true");
            let plan = plan_of(&format!("SELECT id FROM ev WHERE {hidden}"));
            assert!(plan.contains("Seq Scan"), "{hidden}:\n{plan}");
            // Two top-level queries: a sub-select (as in `array(SELECT ...)`) is not rewritten.
            let ids = |condition: &str| -> Vec<i64> {
                Spi::get_one::<Vec<i64>>(&format!(
                    "SELECT coalesce(array_agg(id ORDER BY id), '{{}}') FROM ev WHERE {condition}"
                ))
                .unwrap()
                .unwrap()
            };
            let same = ids(condition) == ids(&hidden);
            assert!(same, "{condition}: other rows than a sequential scan");
        }
        // Known counts: a day of minutes plus the three edge rows after midnight; the one
        // millisecond holds its two edge ids and worker 42's row.
        let count =
            |condition: &str| -> i64 { one(&format!("SELECT count(*) FROM ev WHERE {condition}")) };
        assert_eq!(count(&conditions[0]), 1440 + 4);
        assert_eq!(count(&conditions[4]), 3);
        assert_eq!(count(&conditions[5]), 0);
        assert_eq!(count(&conditions[3]), 5);
    }

    /// The plan of a query, all lines.
    fn plan_of(sql: &str) -> String {
        Spi::run(
            "CREATE OR REPLACE FUNCTION pg_temp.plan(q text) RETURNS SETOF text
             LANGUAGE plpgsql AS $$
             BEGIN RETURN QUERY EXECUTE 'EXPLAIN (COSTS OFF) ' || q; END $$",
        )
        .unwrap();
        Spi::get_one_with_args::<String>(
            "SELECT string_agg(line, E'\\n') FROM pg_temp.plan($1) line",
            &[sql.into()],
        )
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn reset_layout_has_nothing_to_reset() {
        assert!(!one::<bool>("SELECT snowflake_reset_layout()"));
    }

    /// PUBLIC may not execute it, and a role granted EXECUTE is refused all the same (42501):
    /// the function checks for a superuser itself, whatever a grant (or default privileges)
    /// opened.
    #[pg_test]
    fn reset_layout_refuses_a_role_granted_execute() {
        let public: bool =
            one("SELECT has_function_privilege('public', 'snowflake_reset_layout()', 'EXECUTE')");
        assert!(!public);
        Spi::run(
            "CREATE ROLE granted_reset;
             GRANT EXECUTE ON FUNCTION snowflake_reset_layout() TO granted_reset",
        )
        .unwrap();
        let granted: bool = one(
            "SELECT has_function_privilege('granted_reset', 'snowflake_reset_layout()', 'EXECUTE')",
        );
        assert!(granted);
        // SET LOCAL ends with the subtransaction error_of runs it in.
        let e = error_of("SET LOCAL ROLE granted_reset; SELECT snowflake_reset_layout()")
            .expect("a role granted EXECUTE ran snowflake_reset_layout()");
        assert_eq!(e.sqlstate, "42501", "{}", e.message);
        assert!(e.message.contains("snowflake_reset_layout"), "{}", e.message);
    }
}
