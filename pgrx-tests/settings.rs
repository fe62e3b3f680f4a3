//! The snowflake.* settings: values, contexts, and that a session cannot change them (but
//! `snowflake.time_ranges`, which only changes plans).

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{column, error_of, one};
    use pgrx::prelude::*;

    #[pg_test]
    fn worker_id_shows_the_configured_value() {
        assert_eq!(one::<String>("SHOW snowflake.worker_id"), "42");
    }

    #[pg_test]
    fn a_session_cannot_change_any_setting() {
        for sql in [
            "SET snowflake.worker_id = 5",
            "SELECT set_config('snowflake.worker_id', '5', false)",
            "SET snowflake.max_drift = '1min'",
            "SET snowflake.drift_wait = 0",
        ] {
            let err = error_of(sql).unwrap_or_else(|| panic!("{sql} succeeded"));
            assert_eq!(err.sqlstate, "55P02", "{sql}: {err:?}");
        }
        assert_eq!(one::<String>("SHOW snowflake.worker_id"), "42");
        Spi::run("SET snowflake.time_ranges = off").unwrap();
        assert_eq!(one::<String>("SHOW snowflake.time_ranges"), "off");
        Spi::run("RESET snowflake.time_ranges").unwrap();
    }

    #[pg_test]
    fn the_snowflake_prefix_is_reserved() {
        let err = error_of("SET snowflake.workerid = 5").expect("a typo must not pass silently");
        assert_eq!(err.sqlstate, "42602", "{err:?}");
    }

    #[pg_test]
    fn settings_have_their_documented_ranges_and_contexts() {
        let rows: Vec<String> = column(
            "SELECT concat_ws(' ', name, context, coalesce(min_val, '-'),
                                      coalesce(max_val, '-'), coalesce(unit, '-'),
                                      coalesce(boot_val, '-'),
                                      array_to_string(enumvals, ','))
                     FROM pg_settings WHERE name LIKE 'snowflake.%' ORDER BY name",
        );
        assert_eq!(
            rows,
            [
                "snowflake.claims_database postmaster - - - -",
                "snowflake.claims_interval sighup 1 3600 s 10",
                "snowflake.drift_wait sighup 0 60000 ms 100",
                "snowflake.epoch postmaster - - - -",
                "snowflake.layout postmaster - - - twitter \
                 twitter,discord,sonyflake,instagram,js53,custom",
                "snowflake.max_drift sighup 0 2147483647 ms 10000",
                "snowflake.registry postmaster - - - -",
                "snowflake.registry_lease postmaster 10 86400 s 300",
                "snowflake.registry_namespace postmaster - - - default",
                "snowflake.sequence_bits postmaster 0 31 - 12",
                "snowflake.time_bits postmaster 1 63 - 41",
                "snowflake.time_ranges user - - - on",
                "snowflake.time_unit postmaster 1 1000 ms 1",
                "snowflake.worker_bits postmaster 0 31 - 10",
                "snowflake.worker_id postmaster -1 1023 - -1",
                "snowflake.worker_id_network postmaster - - - -",
            ]
        );
    }
}
