//! Worker-id claims in one server: what snowflake_claim() writes, when claims clash, and who may
//! read and write them. (Claims meeting through logical replication, the background worker and
//! the WARNING are in tests/replication/multinode.rs.)

#[pgrx::pg_schema]
mod tests {
    use crate::pg_tests::{column, one};
    use pgrx::prelude::*;

    /// Another cluster's claim to `worker` (Twitter layout), from `since` to `expires`, given
    /// as SQL expressions.
    fn other_claim(system_identifier: i64, worker: i32, since: &str, expires: &str) {
        Spi::run(&format!(
            "INSERT INTO snowflake.snowflake_claims VALUES
             ({system_identifier}, {worker}, 'twitter', 'other{system_identifier}',
              {since}, {since}, {expires})"
        ))
        .unwrap();
    }

    #[pg_test]
    fn a_claim_names_this_cluster_and_its_worker_id_and_is_renewed() {
        assert_eq!(one::<i32>("SELECT snowflake_claim()"), 0);
        let (sysid, worker, layout): (i64, i32, String) = (
            one("SELECT system_identifier FROM snowflake.snowflake_claims"),
            one("SELECT worker_id FROM snowflake.snowflake_claims"),
            one("SELECT layout FROM snowflake.snowflake_claims"),
        );
        assert_eq!(sysid, one::<i64>("SELECT system_identifier FROM pg_control_system()"));
        assert_eq!((worker, layout.as_str()), (42, "twitter"));
        // Valid for three intervals (10 s by default) and twice a Citus node's bound (5 s).
        assert_eq!(
            one::<String>("SELECT (expires - last_seen)::text FROM snowflake.snowflake_claims"),
            "00:00:40"
        );
        // A second renewal (in the same transaction, as every statement of a #[pg_test]) keeps
        // `since`: one row per cluster and worker id.
        Spi::run("UPDATE snowflake.snowflake_claims SET since = since - interval '1 minute'")
            .unwrap();
        assert_eq!(one::<i32>("SELECT snowflake_claim()"), 0);
        assert_eq!(one::<i64>("SELECT count(*) FROM snowflake.snowflake_claims"), 1);
        assert!(one::<bool>(
            "SELECT since <= last_seen - interval '1 minute' FROM snowflake.snowflake_claims"
        ));
        // A claim that had expired starts again.
        Spi::run("UPDATE snowflake.snowflake_claims SET expires = now() - interval '1 s'").unwrap();
        snowflake_claim_ok();
        assert!(one::<bool>("SELECT since = last_seen FROM snowflake.snowflake_claims"));
    }

    fn snowflake_claim_ok() {
        Spi::run("SELECT snowflake_claim()").unwrap();
    }

    #[pg_test]
    fn claims_clash_only_with_the_same_worker_id_at_overlapping_times() {
        // This server (worker id 42) claims from now on.
        snowflake_claim_ok();
        // A live claim to 42: a clash.
        other_claim(1, 42, "now() - interval '1 hour'", "now() + interval '1 hour'");
        // 42 used by a cluster that stopped an hour ago (a replaced server): no clash.
        other_claim(2, 42, "now() - interval '1 day'", "now() - interval '1 hour'");
        // Another worker id, live: no clash.
        other_claim(3, 7, "now() - interval '1 hour'", "now() + interval '1 hour'");
        // 42 of another layout: no clash.
        Spi::run(
            "INSERT INTO snowflake.snowflake_claims SELECT 4, 42, 'discord', 'd', now(), now(),
             now() + interval '1 hour'",
        )
        .unwrap();
        // Two other clusters sharing 7 an hour ago, for ten minutes: a clash that ended.
        other_claim(5, 7, "now() - interval '70 minutes'", "now() - interval '1 hour'");
        other_claim(6, 7, "now() - interval '2 hours'", "now() - interval '61 minutes'");
        assert_eq!(one::<i32>("SELECT snowflake_claim()"), 1);
        let listed: Vec<String> = column(
            "SELECT format('%s %s %s %s', worker_id, least(node_name, other_node_name),
                           greatest(node_name, other_node_name), ongoing::text)
             FROM snowflake.snowflake_clashes ORDER BY worker_id",
        );
        let me: String = one("SELECT node_name FROM snowflake.snowflake_claims WHERE worker_id = 42 AND
                              system_identifier = (SELECT system_identifier FROM pg_control_system())");
        let (low, high) = (me.clone().min("other1".into()), me.max("other1".into()));
        assert_eq!(
            listed,
            vec!["7 other5 other6 false".to_string(), format!("42 {low} {high} true"),]
        );
    }

    #[pg_test]
    fn claims_are_for_superusers_and_monitoring_only() {
        let acl = |object: &str, privilege: &str| -> bool {
            one(&format!("SELECT has_table_privilege('pg_monitor', '{object}', '{privilege}')"))
        };
        assert!(acl("snowflake.snowflake_claims", "SELECT"));
        assert!(acl("snowflake.snowflake_clashes", "SELECT"));
        assert!(!acl("snowflake.snowflake_claims", "INSERT"));
        assert!(!one::<bool>(
            "SELECT has_function_privilege('public', 'snowflake_claim()', 'EXECUTE')"
        ));
        // The trigger fires in logical replication's apply workers too.
        assert_eq!(
            one::<String>(
                "SELECT tgenabled::text FROM pg_trigger
                 WHERE tgrelid = 'snowflake.snowflake_claims'::regclass AND NOT tgisinternal"
            ),
            "A"
        );
    }
}
