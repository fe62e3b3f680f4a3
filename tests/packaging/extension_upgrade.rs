//! ALTER EXTENSION pg_snowflake UPDATE from every earlier release: a database created at 0.1.0,
//! 0.2.0, 0.3.0, 0.4.0 or 0.5.0, with a table that takes its ids from the default, is updated in place; old and new
//! functions work, the table keeps its rows and its default, and the database then holds
//! exactly the objects (definitions, flags, privileges, settings, comments; a table's columns,
//! indexes and triggers) of a fresh install of the current version.
#![cfg(not(feature = "pg_test"))]

use common::*;
use testkit as common;

/// Every object of the extension, with what defines it, one line each, sorted. A dropped column
/// (0.4.0's update drops `snowflake_registry.layout`) stays in the catalog as a placeholder that
/// no query sees, so neither a table's nor its row type's columns count it: on 17 and 18 the row
/// types are listed as members too, and the placeholder failed this comparison there.
fn extension_objects(c: &mut Client) -> Vec<String> {
    c.query(
        "SELECT pg_describe_object(d.classid, d.objid, 0) || ' | ' || coalesce(
                 (SELECT concat_ws(' ', p.prorettype::regtype, p.provolatile, p.proisstrict,
                                   p.proparallel, p.prosecdef, p.proacl::text, p.proconfig::text,
                                   p.probin, md5(p.prosrc), obj_description(p.oid, 'pg_proc'))
                  FROM pg_proc p WHERE d.classid = 'pg_proc'::regclass AND p.oid = d.objid),
                 (SELECT concat_ws(' ', obj_description(t.oid, 'pg_type'),
                                   (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, NULL), ', '
                                                      ORDER BY a.attnum)
                                    FROM pg_attribute a
                                    WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped))
                  FROM pg_type t WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid),
                 (SELECT concat_ws(' ', c.relkind, c.relacl::text,
                                   (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                                                      || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
                                                      ', ' ORDER BY a.attnum)
                                    FROM pg_attribute a
                                    WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                                   (SELECT string_agg(pg_get_indexdef(i.indexrelid), '; '
                                                      ORDER BY pg_get_indexdef(i.indexrelid))
                                    FROM pg_index i WHERE i.indrelid = c.oid),
                                   (SELECT string_agg(pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text, '; '
                                                      ORDER BY t.tgname)
                                    FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
                                   CASE WHEN c.relkind = 'v' THEN md5(pg_get_viewdef(c.oid)) END)
                  FROM pg_class c WHERE d.classid = 'pg_class'::regclass AND c.oid = d.objid),
                 '?')
         FROM pg_depend d
         WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
           AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_snowflake')
         ORDER BY 1",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn version(c: &mut Client) -> String {
    c.scalar("SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'")
}

/// A database created at `from`, with a table that takes its ids from the default, updated to
/// the current version: the rows and the default stay, the ids go on above the old ones, old and
/// new functions work, and the database then holds exactly the objects of a fresh install.
fn update_keeps_the_data_and_matches_a_fresh_install(from: &str, setup: &str) {
    let cluster = Cluster::start_new(&format!("ext_update_{}", from.replace('.', "_")), &[]);
    let mut c = cluster.connect();
    c.batch_execute(&format!("CREATE EXTENSION pg_snowflake VERSION '{from}'")).unwrap_or_else(
        |e| panic!("{e}: is sql/pg_snowflake--{from}.sql installed (make install copies it)?"),
    );
    c.batch_execute(
        "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text);
         INSERT INTO orders (item) SELECT 'before ' || g FROM generate_series(1, 1000) g",
    )
    .unwrap();
    c.batch_execute(setup).unwrap();
    assert_eq!(version(&mut c), from);
    let before = extension_objects(&mut c);

    c.batch_execute("ALTER EXTENSION pg_snowflake UPDATE").unwrap();
    let current = version(&mut c);
    assert_ne!(current, from);
    // The table, its rows and its default are untouched, and the default goes on above them.
    let old_max: i64 = c.scalar("SELECT max(id) FROM orders");
    let new = ids(&mut c, "INSERT INTO orders (item) VALUES ('after') RETURNING id");
    assert!(new[0] > old_max);
    let rows: i64 = c.scalar("SELECT count(*) FROM orders");
    assert_eq!(rows, 1001);
    // Old and new functions.
    let text: String = c.query_one("SELECT snowflake_to_base62($1)", &[&new[0]]).unwrap().get(0);
    let back: i64 = c.query_one("SELECT snowflake_from_base62($1)", &[&text]).unwrap().get(0);
    assert_eq!(back, new[0]);
    let worker: i32 =
        c.query_one("SELECT (snowflake_decode($1)).worker_id", &[&new[0]]).unwrap().get(0);
    assert_eq!(worker, 1);
    c.batch_execute(
        "SELECT snowflake_stats();
         SELECT snowflake_claim();
         CREATE TABLE legacy (id bigserial PRIMARY KEY);
         SELECT snowflake_adopt('legacy', 'id')",
    )
    .unwrap();
    let updated = extension_objects(&mut c);
    assert!(updated.len() >= before.len());

    // A fresh install of the current version, in another database of the same cluster.
    c.batch_execute("CREATE DATABASE fresh").unwrap();
    let mut f = postgres::Client::connect(
        &cluster.conninfo("postgres").replace("dbname=postgres", "dbname=fresh"),
        NoTls,
    )
    .unwrap();
    f.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    assert_eq!(version(&mut f), current);
    let fresh = extension_objects(&mut f);
    assert_eq!(
        updated, fresh,
        "a database updated from {from} differs from a fresh install of {current}"
    );
}

#[test]
fn update_from_0_1_0_keeps_the_data_and_matches_a_fresh_install() {
    update_keeps_the_data_and_matches_a_fresh_install(
        "0.1.0",
        // 0.1.0 has no base62 functions: the update adds them.
        "DO $$ BEGIN
             PERFORM snowflake_to_base62(1);
             RAISE EXCEPTION 'snowflake_to_base62 exists at 0.1.0';
         EXCEPTION WHEN undefined_function THEN NULL;
         END $$",
    );
}

#[test]
fn update_from_0_3_0_keeps_the_claims_and_matches_a_fresh_install() {
    update_keeps_the_data_and_matches_a_fresh_install(
        "0.3.0",
        "SELECT snowflake_registry_lease('default', 'twitter', 1023, NULL, 7, 'n', 60000, 1);
         INSERT INTO snowflake_claims
         VALUES (42, 1, 'twitter', 'other', now(), now(), now() + interval '1 hour')",
    );
}

/// 0.4.0's install script as pgrx 0.18.1 generated it (sql/), on every major this release
/// supports: 19 included, which 0.4.0's library never ran on.
#[test]
fn update_from_0_4_0_keeps_the_registry_and_matches_a_fresh_install() {
    update_keeps_the_data_and_matches_a_fresh_install(
        "0.4.0",
        "SELECT snowflake_registry_lease('default', 'twitter', 1023, NULL, 7, 'n', 60000, 1);
         INSERT INTO snowflake.snowflake_claims
         VALUES (42, 1, 'twitter', 'other', now(), now(), now() + interval '1 hour')",
    );
}

/// A lease of the registry by its layout's fields and a claim of another cluster, in the
/// `snowflake` schema: the data of a database at 0.4.0 or 0.5.0.
const LEASE_AND_CLAIM_IN_SCHEMA_SNOWFLAKE: &str =
    "SELECT snowflake.snowflake_registry_lease('default', 'twitter', 1288834974657, 1, 41, 10,
                                               12, false, NULL, 7, 'n', 60000, 1);
     INSERT INTO snowflake.snowflake_claims
     VALUES (42, 1, 'twitter', 'other', now(), now(), now() + interval '1 hour')";

#[test]
fn update_from_0_4_0_keeps_the_claims_and_the_registry_and_matches_a_fresh_install() {
    update_keeps_the_data_and_matches_a_fresh_install("0.4.0", LEASE_AND_CLAIM_IN_SCHEMA_SNOWFLAKE);
}

/// 0.5.0's install script as pgrx 0.19.3 generated it (sql/).
#[test]
fn update_from_0_5_0_keeps_the_claims_and_the_registry_and_matches_a_fresh_install() {
    update_keeps_the_data_and_matches_a_fresh_install("0.5.0", LEASE_AND_CLAIM_IN_SCHEMA_SNOWFLAKE);
}

#[test]
fn update_from_0_2_0_keeps_the_claims_and_matches_a_fresh_install() {
    update_keeps_the_data_and_matches_a_fresh_install(
        "0.2.0",
        "INSERT INTO snowflake_claims
         VALUES (42, 1, 'twitter', 'other', now(), now(), now() + interval '1 hour')",
    );
}

/// 0.3.0 keyed the registry by the layout's name: the update keys it by namespace, moves the
/// rows of a second layout (discord: Twitter's widths, another epoch) to a namespace of their
/// own, merges Twitter's rows with those of its custom twin (the same fields), and keeps the
/// grant of the members' role, now on the new function too.
#[test]
fn update_from_0_3_0_rekeys_the_registry_and_keeps_the_members_grant() {
    let cluster = Cluster::start_new("ext_update_0_3_0_registry", &[]);
    // What the client is told while the script runs (an extension script shows it WARNINGs and
    // above only).
    let warnings = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = warnings.clone();
    let mut c = cluster
        .conninfo("postgres")
        .parse::<postgres::Config>()
        .unwrap()
        .notice_callback(move |n| seen.lock().unwrap().push(n.message().to_string()))
        .connect(NoTls)
        .unwrap();
    c.batch_execute(
        "CREATE EXTENSION pg_snowflake VERSION '0.3.0';
         CREATE ROLE fleet LOGIN;
         GRANT EXECUTE ON FUNCTION snowflake_registry_lease TO fleet;
         SELECT snowflake_registry_lease('ns', 'twitter', 1023, NULL, 1, 'a', 60000, 1000);
         SELECT snowflake_registry_lease('ns', 'twitter', 1023, NULL, 2, 'b', 60000, 2000);
         SELECT snowflake_registry_lease('ns', 'custom (41 bits of 1 ms since 2010-11-04T01:42:54.657Z, 10 worker bits, 12 sequence bits)', 1023, NULL, 3, 'c', 120000, 3000);
         SELECT snowflake_registry_lease('ns', 'discord', 1023, NULL, 4, 'd', 60000, 4000);
         -- A long namespace: the moved one is cut to the 63 characters members can name.
         SELECT snowflake_registry_lease(repeat('x', 60), 'twitter', 1023, NULL, 5, 'e', 60000, 5000);",
    )
    .unwrap();
    // Renewed later (a transaction of its own): of two layouts with as many rows, it keeps the
    // namespace.
    c.batch_execute(
        "SELECT snowflake_registry_lease(repeat('x', 60), 'discord', 1023, NULL, 6, 'f', 60000, 6000);
         ALTER EXTENSION pg_snowflake UPDATE",
    )
    .unwrap();
    let rows: Vec<String> = c.column(
        "SELECT namespace || ' ' || worker_id || ' ' || system_identifier || ' '
                || covered_until_ms
           FROM snowflake.snowflake_registry WHERE namespace LIKE 'ns%' ORDER BY 1",
    );
    // Worker id 0 was held by clusters 1 (twitter) and 3 (its custom twin), each with its own
    // row: one row now, held by the lease that ends last (3's), covering both. Discord's moved
    // away.
    let mut expected = vec![
        "ns 0 3 3000".to_string(),
        "ns 1 2 2000".to_string(),
        "ns/discord 0 4 4000".to_string(),
    ];
    expected.sort();
    assert_eq!(rows, expected);
    let layouts: Vec<String> = c.column(
        "SELECT namespace || ' ' || layout || ' ' || epoch_ms
           FROM snowflake.snowflake_registry_namespaces WHERE namespace LIKE 'ns%'
          ORDER BY 1",
    );
    assert_eq!(layouts, ["ns twitter 1288834974657", "ns/discord discord 1420070400000"]);
    let long = format!("{}/twitter", "x".repeat(55));
    assert_eq!(
        warnings.lock().unwrap().as_slice(),
        [
            "the registry's worker ids of layout discord in namespace \"ns\" are now in \
             namespace \"ns/discord\""
                .to_string(),
            format!(
                "the registry's worker ids of layout twitter in namespace \"{}\" are now in \
                 namespace \"{long}\"",
                "x".repeat(60)
            )
        ]
    );
    let moved: i64 = c.scalar_with(
        "SELECT worker_id::bigint FROM snowflake.snowflake_registry WHERE namespace = $1",
        &[&long],
    );
    assert_eq!((long.len(), moved), (63, 0));
    let granted: bool = c.scalar(
        "SELECT has_function_privilege('fleet',
                 'snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer,
                  integer, boolean, integer, bigint, text, bigint, bigint)', 'EXECUTE')
                AND has_function_privilege('fleet',
                 'public.snowflake_registry_lease(text, text, integer, integer, bigint, text,
                  bigint, bigint)', 'EXECUTE')
                AND has_function_privilege('fleet',
                 'snowflake.snowflake_registry_hold(text, text, bigint, integer, integer, integer,
                  integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text,
                  text)', 'EXECUTE')
                AND NOT has_function_privilege('public',
                 'snowflake.snowflake_registry_hold(text, text, bigint, integer, integer, integer,
                  integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text,
                  text)', 'EXECUTE')
                AND NOT has_function_privilege('public',
                 'snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer,
                  integer, boolean, integer, bigint, text, bigint, bigint)', 'EXECUTE')",
    );
    assert!(
        granted,
        "the members' role keeps its grant, on every signature, and 0.6.0's function too"
    );
}
