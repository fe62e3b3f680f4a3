//! The schema-rename race against every path that runs with rights other than its caller's.
//! Mallory (tests/common/mallory.rs) owns the database, and so `public`, where the extension is
//! installed; for 10 s she swaps `public` with a schema of look-alikes, thousands of times a
//! second, while the path runs as often as it can. 0.3.0 lost every one of these races (the
//! claims worker within 0.03 s: it looked the extension's schema up by OID, then resolved its
//! name again). Each test fails if any look-alike ran, or if the path did not run while she
//! swapped.
#![cfg(not(feature = "pg_test"))]

use common::mallory::Mallory;
use common::registry::{grant_lease, leased_worker_id, member_in};
use common::*;
use std::time::{Duration, Instant};
use testkit as common;

/// How long each race lasts.
const RACE_S: f64 = 10.0;
/// Fewer swaps than this and the race did not really run (a few thousand a second are seen).
const MIN_SWAPS: i64 = 1000;

/// Runs `step` over and over until `race` ends; returns how many steps succeeded, and the
/// errors of the others by SQLSTATE (a name that led to a look-alike that does not exist, or a
/// check of the extension's that saw the rename, are expected).
fn while_racing(
    race: &std::thread::JoinHandle<i64>,
    mut step: impl FnMut() -> Result<(), postgres::Error>,
) -> (u64, std::collections::BTreeMap<String, u64>) {
    let mut ok = 0;
    let mut errors = std::collections::BTreeMap::new();
    while !race.is_finished() {
        match step() {
            Ok(()) => ok += 1,
            Err(e) => {
                let code = e
                    .as_db_error()
                    .map(|d| format!("{} {}", d.code().code(), d.message()))
                    .unwrap_or_else(|| e.to_string());
                *errors.entry(code).or_insert(0) += 1;
            }
        }
    }
    (ok, errors)
}

/// The claims worker (every second, as the bootstrap superuser), the claims trigger (on its
/// writes and on a superuser's) and `snowflake_claim()` (called by a superuser in a loop).
#[test]
fn the_claims_worker_trigger_and_snowflake_claim_follow_no_renamed_schema() {
    let (_cluster, mallory, mut su) = Mallory::start_with_claims("race_claims");
    // Her look-alike of snowflake_claim() would be what the superuser's own call below finds
    // half the time: that is the caller's name, not the extension's, so it goes (the worker of
    // 0.3.0 called the function by a name it had looked up: such a worker would now fail, and
    // renew nothing, below).
    mallory.connect().batch_execute("DROP FUNCTION evil.snowflake_claim()").unwrap();
    let last_seen = |c: &mut Client| -> Option<String> {
        c.query_opt(
            "SELECT last_seen::text FROM snowflake.snowflake_claims
              WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())",
            &[],
        )
        .unwrap()
        .map(|r| r.get(0))
    };
    let mut watcher = mallory.connect_admin();
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        last_seen(&mut watcher).map(|_| ()).ok_or("the claims worker wrote no claim".into())
    });
    let race = mallory.race(RACE_S, MIN_SWAPS);
    let mut renewals = std::collections::BTreeSet::new();
    let (claims, errors) = while_racing(&race, || {
        renewals.extend(last_seen(&mut watcher));
        // The superuser's own writes fire the trigger; its call runs snowflake_claim() when
        // the name it resolves is the extension's (else 42883: she planted none for callers).
        su.batch_execute(
            "INSERT INTO snowflake.snowflake_claims
             VALUES (42, 1, 'twitter', 'other', now(), now(), now() + interval '1 hour', '')
             ON CONFLICT (system_identifier, worker_id, layout, place)
             DO UPDATE SET last_seen = now()",
        )?;
        su.query_one("SELECT public.snowflake_claim()", &[]).map(|_| ())
    });
    let swaps = race.join().unwrap();
    eprintln!("{swaps} swaps; {claims} calls went through; {errors:?}");
    assert!(
        renewals.len() >= 5,
        "the claims worker renewed {} times during the race",
        renewals.len()
    );
    assert!(claims >= 20, "snowflake_claim() ran {claims} times: {errors:?}");
    mallory.assert_nothing_caught(swaps, MIN_SWAPS);
}

/// `snowflake_adopt()`, called by a superuser in a loop on a bigserial table: it must bind the
/// extension's `snowflake_next()`, move the generator above the column, and read the column of
/// that very table, never her view of the same name, nor call her functions.
#[test]
fn adopt_follows_no_renamed_schema() {
    let (_cluster, mallory, mut su) = Mallory::start("race_adopt", &[], "shop");
    su.batch_execute(
        "CREATE EXTENSION pg_snowflake;
         CREATE TABLE public.legacy (id bigserial PRIMARY KEY);
         INSERT INTO public.legacy SELECT FROM generate_series(1, 100);",
    )
    .unwrap();
    let (table, next): (u32, u32) = {
        let row = su
            .query_one(
                "SELECT 'public.legacy'::regclass::oid, 'public.snowflake_next()'::regprocedure::oid",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    // The table is named by OID below: only what adopt itself resolves is raced.
    let race = mallory.race(RACE_S, MIN_SWAPS);
    let (adopted, errors) = while_racing(&race, || {
        su.query_one("SELECT public.snowflake_adopt($1::oid::regclass, 'id')", &[&table])
            .map(|_| ())
    });
    let swaps = race.join().unwrap();
    eprintln!("{swaps} swaps; {adopted} adopts went through; {errors:?}");
    assert!(adopted >= 20, "snowflake_adopt() ran {adopted} times: {errors:?}");
    // Only the extension's errors and a name of the caller's that led nowhere.
    for error in errors.keys() {
        assert!(
            error.starts_with("42883") || error.starts_with("55000") || error.starts_with("3F000"),
            "{error}"
        );
    }
    // The default calls the extension's snowflake_next(), by OID, and new ids are above.
    let bound: bool = su.scalar_with(
        "SELECT EXISTS (SELECT FROM pg_attrdef d JOIN pg_depend p ON p.objid = d.oid
                             WHERE p.classid = 'pg_attrdef'::regclass AND d.adrelid = $1
                               AND p.refclassid = 'pg_proc'::regclass AND p.refobjid = $2)",
        &[&table, &next],
    );
    assert!(bound, "the default does not call the extension's snowflake_next()");
    let id: i64 = su.scalar("INSERT INTO public.legacy DEFAULT VALUES RETURNING id");
    assert!(id > 100);
    mallory.assert_nothing_caught(swaps, MIN_SWAPS);
}

/// The registry's SECURITY DEFINER lease function, in a registry database that Mallory owns,
/// called by the members' role in a loop and by two members' workers, while she swaps.
#[test]
fn the_registry_lease_function_and_its_members_follow_no_renamed_schema() {
    let (hub, mallory, mut su) = Mallory::start("race_hub", &[], "reg");
    su.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    grant_lease(&mut su, "fleet");
    let members: Vec<Cluster> = (0..2)
        .map(|i| member_in(&format!("race_member{i}"), hub.port, "fleet", "reg", &[]))
        .collect();
    for m in &members {
        m.start();
        m.connect_ext();
    }
    let before: Vec<i64> = members.iter().map(leased_worker_id).collect();
    let mut fleet = hub.connect_db("fleet", "reg");
    let race = mallory.race(RACE_S, MIN_SWAPS);
    let started = Instant::now();
    let mut cluster_id = 1_000_i64;
    let (leases, errors) = while_racing(&race, || {
        cluster_id += 1;
        fleet
            .query_one(
                "SELECT outcome FROM snowflake.snowflake_registry_hold('race', 'twitter',
                     1288834974657, 1, 41, 10, 12, false, NULL, NULL, $1, 'loop', 10000,
                     (extract(epoch FROM now()) * 1000)::bigint, repeat('a', 64), NULL,
                     md5(random()::text) || md5(random()::text))",
                &[&(cluster_id % 2000)],
            )
            .map(|_| ())
    });
    let swaps = race.join().unwrap();
    eprintln!("{swaps} swaps in {:?}; {leases} leases went through; {errors:?}", started.elapsed());
    assert!(leases >= 100, "the lease function ran {leases} times: {errors:?}");
    assert!(errors.is_empty(), "{errors:?}");
    // The members kept their worker ids and renewed through the race, and each holds its own.
    let after: Vec<i64> = members.iter().map(leased_worker_id).collect();
    assert_eq!(before, after);
    assert_ne!(after[0], after[1]);
    for m in &members {
        let r = stats(&mut m.connect())["registry"].clone();
        let renewed = r["renewed"].as_str().unwrap_or_default().to_string();
        assert!(!renewed.is_empty(), "{r}");
    }
    let held: i64 = su.scalar(
        "SELECT count(*) FROM snowflake.snowflake_registry
              WHERE namespace = 'default' AND expires > now()",
    );
    assert_eq!(held, 2);
    mallory.assert_nothing_caught(swaps, MIN_SWAPS);
}

/// The install and upgrade scripts, run by a superuser in a loop in her database while she
/// swaps `public` away for a moment now and then: every run either ends with every object of
/// the extension in its own schemas and exactly the privileges it sets, checked here by OID,
/// or fails; nothing of hers runs. (On 16 and later a schema can be renamed while a transaction
/// that created objects in it is open: without the script's pin on its schema, one install in
/// five here left the administrators' functions open to PUBLIC.)
#[test]
fn install_and_upgrade_scripts_follow_no_renamed_schema() {
    let (_cluster, mallory, mut su) = Mallory::start("race_scripts", &[], "shop");
    let check = |su: &mut Client| {
        let stray: Vec<String> = su
            .query(
                "SELECT pg_describe_object(d.classid, d.objid, 0)
                   FROM pg_depend d, pg_extension e
                  WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                    AND d.refobjid = e.oid AND e.extname = 'pg_snowflake'
                    AND COALESCE(
                          (SELECT p.pronamespace FROM pg_proc p
                            WHERE d.classid = 'pg_proc'::regclass AND p.oid = d.objid),
                          (SELECT c.relnamespace FROM pg_class c
                            WHERE d.classid = 'pg_class'::regclass AND c.oid = d.objid),
                          (SELECT t.typnamespace FROM pg_type t
                            WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid),
                          e.extnamespace)
                        NOT IN (e.extnamespace,
                                (SELECT oid FROM pg_namespace WHERE nspname = 'snowflake'))
                 UNION ALL
                 SELECT p.oid::regprocedure::text FROM pg_proc p, pg_depend d, pg_extension e
                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                    AND d.refobjid = e.oid AND e.extname = 'pg_snowflake'
                    AND p.proname IN ('snowflake_stats', 'snowflake_advance_past',
                                      'snowflake_reset_layout', 'snowflake_claim',
                                      'snowflake_adopt', 'snowflake_registry_lease',
                                      'snowflake_registry_take', 'snowflake_claims_check',
                                      'snowflake_registry_layout_fields')
                    AND has_function_privilege('public', p.oid, 'EXECUTE')",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(stray, Vec::<String>::new(), "objects out of place or open");
    };
    let race = mallory.pulse(RACE_S, 0.005, 200);
    let mut round = 0;
    let (done, errors) = while_racing(&race, || {
        round += 1;
        su.batch_execute("DROP EXTENSION IF EXISTS pg_snowflake")?;
        if round % 2 == 0 {
            su.batch_execute("CREATE EXTENSION pg_snowflake")?;
        } else {
            su.batch_execute("CREATE EXTENSION pg_snowflake VERSION '0.3.0'")?;
            su.batch_execute("ALTER EXTENSION pg_snowflake UPDATE")?;
        }
        check(&mut su);
        Ok(())
    });
    let swaps = race.join().unwrap();
    eprintln!("{swaps} swaps; {done} installs went through; {errors:?}");
    assert!(done >= 50, "{done} installs went through: {errors:?}");
    mallory.assert_nothing_caught(swaps, 200);
}
