//! ALTER EXTENSION pg_snowflake UPDATE from every earlier release: a database created at 0.1.0,
//! with a table that takes its ids from the default, is updated in place; old and new functions
//! work, the table keeps its rows and its default, and the database then holds exactly the
//! objects (definitions, flags, privileges, comments; a table's columns, indexes and triggers) of a fresh install of the current version.
#![cfg(not(feature = "pg_test"))]

mod common;
use common::*;

/// Every object of the extension, with what defines it, one line each, sorted.
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
                                    FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0))
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
    c.query_one(
        "SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'",
        &[],
    )
    .unwrap()
    .get(0)
}

#[test]
fn update_from_0_1_0_keeps_the_data_and_matches_a_fresh_install() {
    let cluster = Cluster::start_new("ext_update", &[]);
    let mut c = cluster.connect();
    c.batch_execute("CREATE EXTENSION pg_snowflake VERSION '0.1.0'")
        .unwrap_or_else(|e| {
            panic!("{e}: is sql/pg_snowflake--0.1.0.sql installed (make install copies it)?")
        });
    c.batch_execute(
        "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_next(), item text);
         INSERT INTO orders (item) SELECT 'before ' || g FROM generate_series(1, 1000) g",
    )
    .unwrap();
    assert_eq!(version(&mut c), "0.1.0");
    let (state, ..) = expect_error(&mut c, "SELECT snowflake_to_base62(1)");
    assert_eq!(state, "42883", "0.1.0 has no base62 functions");
    let before = extension_objects(&mut c);

    c.batch_execute("ALTER EXTENSION pg_snowflake UPDATE")
        .unwrap();
    let current = version(&mut c);
    assert_ne!(current, "0.1.0");
    // The table, its rows and its default are untouched, and the default goes on above them.
    let old_max: i64 = c
        .query_one("SELECT max(id) FROM orders", &[])
        .unwrap()
        .get(0);
    let new = ids(
        &mut c,
        "INSERT INTO orders (item) VALUES ('after') RETURNING id",
    );
    assert!(new[0] > old_max);
    let rows: i64 = c
        .query_one("SELECT count(*) FROM orders", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1001);
    // Old and new functions.
    let text: String = c
        .query_one("SELECT snowflake_to_base62($1)", &[&new[0]])
        .unwrap()
        .get(0);
    let back: i64 = c
        .query_one("SELECT snowflake_from_base62($1)", &[&text])
        .unwrap()
        .get(0);
    assert_eq!(back, new[0]);
    let worker: i32 = c
        .query_one("SELECT (snowflake_decode($1)).worker_id", &[&new[0]])
        .unwrap()
        .get(0);
    assert_eq!(worker, 1);
    c.batch_execute(
        "SELECT snowflake_stats();
         CREATE TABLE legacy (id bigserial PRIMARY KEY);
         SELECT snowflake_adopt('legacy', 'id')",
    )
    .unwrap();
    let updated = extension_objects(&mut c);
    assert!(updated.len() > before.len());

    // A fresh install of the current version, in another database of the same cluster.
    c.batch_execute("CREATE DATABASE fresh").unwrap();
    let mut f = postgres::Client::connect(
        &cluster
            .conninfo("postgres")
            .replace("dbname=postgres", "dbname=fresh"),
        NoTls,
    )
    .unwrap();
    f.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    assert_eq!(version(&mut f), current);
    let fresh = extension_objects(&mut f);
    assert_eq!(
        updated, fresh,
        "an updated database differs from a fresh install of {current}"
    );
}
