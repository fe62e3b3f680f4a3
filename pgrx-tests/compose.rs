//! snowflake_compose(): the inverse of snowflake_decode() in SQL, in the server's layout and in
//! every preset, with time units rounded down, and an error for every field out of range.

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{error_of, one};
    use pgrx::prelude::*;

    /// Random ids of every width (every bit random, xorshift64; 64 bits: negative ones too):
    /// `{...}` for a bigint[].
    fn random_ids(seed: u64, bits: u32, n: usize) -> String {
        let mut x = seed;
        let ids: Vec<String> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ((x >> (64 - bits)) as i64).to_string()
            })
            .collect();
        format!("{{{}}}", ids.join(","))
    }

    #[pg_test]
    fn compose_of_decode_is_the_id_in_the_servers_layout() {
        let ids = random_ids(0x5eed_c0de_0000_0001, 63, 10_000);
        let wrong: i64 = one(&format!(
            "SELECT count(*) FROM unnest('{ids}'::bigint[]) AS id, snowflake_decode(id) AS d
             WHERE snowflake_compose(d.ts, d.worker_id, d.sequence) IS DISTINCT FROM id"
        ));
        assert_eq!(wrong, 0);
        // The edges: the first and the last id.
        for id in ["0", "9223372036854775807"] {
            let back: i64 = one(&format!(
                "SELECT snowflake_compose(d.ts, d.worker_id, d.sequence)
                 FROM snowflake_decode({id}) AS d"
            ));
            assert_eq!(back.to_string(), id);
        }
    }

    #[pg_test]
    fn compose_of_decode_is_the_id_in_every_preset() {
        for (layout, bits) in [
            ("twitter", 63),
            ("discord", 63),
            ("sonyflake", 63),
            // Every id of its 64 bits: those after 2046 are negative, and come back too.
            ("instagram", 64),
            ("js53", 53),
        ] {
            let ids = random_ids(0x5eed_c0de_0000_0002, bits, 5_000);
            let wrong: i64 = one(&format!(
                "SELECT count(*) FROM unnest('{ids}'::bigint[]) AS id,
                     snowflake_decode(id, '{layout}') AS d
                 WHERE snowflake_compose(d.ts, d.worker_id, d.sequence, '{layout}')
                       IS DISTINCT FROM id"
            ));
            assert_eq!(wrong, 0, "{layout}");
        }
        let back: i64 = one("SELECT snowflake_compose(d.ts, d.worker_id, d.sequence, 'instagram')
             FROM snowflake_decode(-1, 'instagram') AS d");
        assert_eq!(back, -1);
    }

    #[pg_test]
    fn a_time_inside_a_unit_rounds_down_to_its_start() {
        // 2020-01-01T00:00:00Z, worker 5, sequence 7 is 1212161512043466759 (decode's known
        // answer); 0.9 ms later is the same millisecond, 10 ms of sonyflake the same unit.
        let id: i64 = one("SELECT snowflake_compose('2020-01-01 00:00:00.0009+00', 5, 7)");
        assert_eq!(id, 1212161512043466759);
        let same: bool =
            one("SELECT snowflake_compose('2020-01-01 00:00:00.009+00', 5, 7, 'sonyflake')
                  = snowflake_compose('2020-01-01 00:00:00+00', 5, 7, 'sonyflake')");
        assert!(same);
    }

    #[pg_test]
    fn fields_out_of_range_are_errors() {
        for (sql, state, message) in [
            (
                "SELECT snowflake_compose(now(), 1024, 0)",
                "22003",
                "worker id 1024 is out of range for the twitter layout",
            ),
            (
                "SELECT snowflake_compose(now(), -1, 0)",
                "22003",
                "worker id -1 is out of range for the twitter layout",
            ),
            (
                "SELECT snowflake_compose(now(), 0, 4096)",
                "22003",
                "sequence 4096 is out of range for the twitter layout",
            ),
            (
                "SELECT snowflake_compose(now(), 0, -1)",
                "22003",
                "sequence -1 is out of range for the twitter layout",
            ),
            (
                "SELECT snowflake_compose(now(), 64, 0, 'js53')",
                "22003",
                "worker id 64 is out of range for the js53 layout",
            ),
            (
                "SELECT snowflake_compose(now(), 0, 256, 'sonyflake')",
                "22003",
                "sequence 256 is out of range for the sonyflake layout",
            ),
            (
                "SELECT snowflake_compose('2010-11-04 01:42:54.656+00', 0, 0)",
                "22008",
                "timestamp out of range for snowflake ids",
            ),
            (
                "SELECT snowflake_compose('2080-07-10 17:30:30.209+00', 0, 0)",
                "22008",
                "timestamp out of range for snowflake ids",
            ),
            // Instagram's 41 bits of time end in 2081 (its ids are negative from 2046 on).
            (
                "SELECT snowflake_compose('2081-04-30 12:54:37.273+00', 0, 0, 'instagram')",
                "22008",
                "timestamp out of range for snowflake ids",
            ),
            (
                "SELECT snowflake_compose('infinity', 0, 0)",
                "22008",
                "timestamp out of range for snowflake ids",
            ),
            (
                "SELECT snowflake_compose(now(), 0, 0, 'uuid')",
                "22023",
                "unknown snowflake layout \"uuid\"",
            ),
        ] {
            let err = error_of(sql).unwrap_or_else(|| panic!("no error from {sql}"));
            assert_eq!((err.sqlstate.as_str(), err.message.as_str()), (state, message), "{sql}");
        }
        // The last moment of a layout is still an id: the largest bigint (twitter), and for
        // instagram, whose 64 bits would set the sign bit later, the last positive one.
        let last: i64 = one("SELECT snowflake_compose('2080-07-10 17:30:30.208+00', 1023, 4095)");
        assert_eq!(last, i64::MAX);
        let last: i64 =
            one("SELECT snowflake_compose('2046-06-27 17:00:49.496+00', 8191, 1023, 'instagram')");
        assert_eq!(last, i64::MAX);
    }

    #[pg_test]
    fn compose_is_null_for_any_null() {
        assert!(one::<bool>(
            "SELECT snowflake_compose(NULL, 1, 1) IS NULL
                AND snowflake_compose(now(), NULL, 1) IS NULL
                AND snowflake_compose(now(), 1, 1, NULL) IS NULL"
        ));
    }
}
