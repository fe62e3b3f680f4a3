//! Hostile roles. What pg_snowflake runs with other roles' rights (the claims worker and
//! `snowflake_claim()` as the bootstrap superuser, the claims trigger as whoever writes a claim,
//! `snowflake_adopt()`, the install and upgrade scripts) must never run code that a less
//! privileged role planted, and superuser-only functions must stay so whatever is granted.
//!
//! Mallory owns a database (so she has CREATE on its `public` schema) and has CREATE on the
//! schema the extension is installed in. She plants, in both, a function or operator for every
//! name those statements use, with argument types that match better than the catalog's
//! (`format(text, name)` against `pg_catalog.format(text, VARIADIC "any")`), a domain named
//! `interval`, and aggregates, and she sets her database's search_path so that her schemas come
//! before `pg_catalog`. Each planted object records who called it when that is not Mallory, and
//! makes her a superuser if it can. None may ever run.
#![cfg(not(feature = "pg_test"))]

use common::mallory::{self, Mallory};
use common::*;
use std::time::Duration;
use testkit as common;

/// The objects Mallory plants in `schema`: (signature, result, SQL that computes the result
/// with the catalog's own function, for arguments a, b, ...).
const FUNCTIONS: &[(&str, &str, &str)] = &[
    ("format(a text)", "text", "pg_catalog.format(a)"),
    ("format(a text, b name)", "text", "pg_catalog.format(a, b)"),
    ("format(a text, b text)", "text", "pg_catalog.format(a, b)"),
    ("format(a text, b text, c text)", "text", "pg_catalog.format(a, b, c)"),
    ("format(a text, b regprocedure)", "text", "pg_catalog.format(a, b)"),
    ("format(a text, b regclass)", "text", "pg_catalog.format(a, b)"),
    (
        "format(a text, b bigint, c bigint, d text, e integer, f timestamptz)",
        "text",
        "pg_catalog.format(a, b, c, d, e, f)",
    ),
    ("now()", "timestamptz", "pg_catalog.now()"),
    ("to_regprocedure(a text)", "regprocedure", "pg_catalog.to_regprocedure(a)"),
    ("quote_ident(a text)", "text", "pg_catalog.quote_ident(a)"),
    ("pg_has_role(a name, b oid, c text)", "boolean", "pg_catalog.pg_has_role(a, b, c)"),
    ("format_type(a oid, b integer)", "text", "pg_catalog.format_type(a, b)"),
    ("pg_get_serial_sequence(a text, b text)", "text", "pg_catalog.pg_get_serial_sequence(a, b)"),
];

/// (operator, left type, right type, the catalog's operator).
const OPERATORS: &[(&str, &str, &str)] = &[
    ("=", "integer", "integer"),
    ("=", "bigint", "bigint"),
    ("=", "text", "text"),
    ("=", "name", "text"),
    ("=", "name", "name"),
    ("=", "oid", "oid"),
    ("=", "oid", "integer"),
    ("<>", "bigint", "bigint"),
    ("<>", "oid", "oid"),
    ("<", "timestamptz", "timestamptz"),
    (">", "timestamptz", "timestamptz"),
    (">", "text", "text"),
    (">", "bigint", "bigint"),
];

/// Mallory's traps in `schema`, as she runs them.
fn traps(schema: &str) -> String {
    let mut sql = String::new();
    for (signature, result, body) in FUNCTIONS {
        sql += &format!(
            "CREATE FUNCTION {schema}.{signature} RETURNS {result} LANGUAGE plpgsql AS $f$
             BEGIN PERFORM public.capture('{schema}.{signature}'); RETURN {body}; END $f$;\n"
        );
    }
    for (i, (op, left, right)) in OPERATORS.iter().enumerate() {
        let f = format!("{schema}.trap_op_{i}");
        // The catalog's operator for the same types, so that results stay right.
        let cast = if *left == "oid" && *right == "integer" { "b::oid" } else { "b" };
        sql += &format!(
            "CREATE FUNCTION {f}(a {left}, b {right}) RETURNS boolean LANGUAGE plpgsql AS $f$
             BEGIN PERFORM public.capture('{schema}.{op}({left}, {right})');
                   RETURN a OPERATOR(pg_catalog.{op}) {cast}; END $f$;
             CREATE OPERATOR {schema}.{op} (LEFTARG = {left}, RIGHTARG = {right}, FUNCTION = {f});\n"
        );
    }
    sql += &format!(
        "CREATE FUNCTION {schema}.trap_plus(a timestamptz, b interval) RETURNS timestamptz
         LANGUAGE plpgsql AS $f$ BEGIN PERFORM public.capture('{schema}.+');
         RETURN a OPERATOR(pg_catalog.+) b; END $f$;
         CREATE OPERATOR {schema}.+ (LEFTARG = timestamptz, RIGHTARG = interval,
                                     FUNCTION = {schema}.trap_plus);
         CREATE FUNCTION {schema}.trap_count(s bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
         BEGIN PERFORM public.capture('{schema}.count(*)'); RETURN s OPERATOR(pg_catalog.+) 1; END $f$;
         CREATE AGGREGATE {schema}.count(*) (SFUNC = {schema}.trap_count, STYPE = bigint,
                                             INITCOND = '0');
         CREATE FUNCTION {schema}.trap_max(s bigint, v bigint) RETURNS bigint LANGUAGE plpgsql AS $f$
         BEGIN PERFORM public.capture('{schema}.max(bigint)');
               RETURN GREATEST(s, v); END $f$;
         CREATE AGGREGATE {schema}.max(bigint) (SFUNC = {schema}.trap_max, STYPE = bigint);
         CREATE DOMAIN {schema}.interval AS text CHECK (public.capture('{schema}.interval'));
         CREATE TABLE {schema}.pg_extension (extname name, extnamespace oid);\n"
    );
    sql
}

/// A cluster whose claims worker runs every second in `shop`, the database Mallory owns.
fn mallorys_database(name: &str) -> Cluster {
    let cluster = Cluster::start_new(
        name,
        &["snowflake.claims_database = 'shop'", "snowflake.claims_interval = 1"],
    );
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE ROLE mallory LOGIN").unwrap();
    admin.batch_execute("CREATE DATABASE shop OWNER mallory").unwrap();
    cluster
}

/// The cluster: a claims worker in Mallory's database `shop`, every second.
fn hostile_cluster(name: &str) -> Cluster {
    let cluster = mallorys_database(name);
    let mut shop = cluster.connect_db("postgres", "shop");
    shop.batch_execute(
        "CREATE SCHEMA ext;
         GRANT CREATE, USAGE ON SCHEMA ext TO mallory",
    )
    .unwrap();
    // Mallory: her record of calls, her traps in both schemas, and her database's path.
    let mut mallory = cluster.connect_db("mallory", "shop");
    mallory
        .batch_execute(&format!(
            "{CAPTURE} ALTER DATABASE shop SET search_path = public, ext, pg_catalog"
        ))
        .unwrap();
    mallory.batch_execute(&traps("public")).unwrap();
    mallory.batch_execute(&traps("ext")).unwrap();
    cluster
}

/// What Mallory caught in her database, and whether she became a superuser.
fn caught(cluster: &Cluster) -> (Vec<String>, bool) {
    let shop = cluster.conninfo("postgres").replace("dbname=postgres", "dbname=shop");
    mallory::caught_in(&shop, "public.captured", "called by")
}

/// The traps are armed: `sql`, run by a superuser through `c`, runs one of them, which records
/// `trap` ("... called by postgres") and makes Mallory a superuser.
fn assert_armed(cluster: &Cluster, c: &mut Client, sql: &str, trap: &str) {
    c.batch_execute(sql).unwrap();
    let (what, superuser) = caught(cluster);
    assert_eq!(what, vec![trap]);
    assert!(superuser, "the trap could not make Mallory a superuser");
}

/// Claims the worker wrote for this cluster (it runs every second).
fn worker_renewals(cluster: &Cluster, n: usize) {
    let conninfo = cluster.conninfo("postgres").replace("dbname=postgres", "dbname=shop")
        + " options='-c search_path=pg_catalog'";
    let mut c = Client::connect(&conninfo, NoTls).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    poll(Duration::from_secs(60), Duration::from_millis(100), || {
        let last: Option<String> = c
            .query_opt(
                "SELECT last_seen::text FROM snowflake.snowflake_claims
                  WHERE system_identifier OPERATOR(pg_catalog.=)
                        (SELECT system_identifier FROM pg_control_system())",
                &[],
            )
            .unwrap()
            .map(|r| r.get(0));
        seen.extend(last);
        (seen.len() >= n)
            .then_some(())
            .ok_or(format!("the claims worker renewed {} times", seen.len()))
    });
}

/// Mallory's record: `public.capture(what)` records who called her trap (never herself), and
/// makes her a superuser when a superuser did.
const CAPTURE: &str =
    "CREATE TABLE public.captured (what text, by_whom name, at timestamptz DEFAULT now());
             GRANT INSERT ON public.captured TO PUBLIC;
             CREATE FUNCTION public.capture(what text) RETURNS boolean LANGUAGE plpgsql AS $f$
             BEGIN
                 -- Her own operators must not catch her own record.
                 IF current_user OPERATOR(pg_catalog.<>) 'mallory' THEN
                     INSERT INTO public.captured (what, by_whom) VALUES (what, current_user);
                     IF pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on'
                     THEN
                         EXECUTE 'ALTER ROLE mallory SUPERUSER';
                     END IF;
                 END IF;
                 RETURN true;
             END $f$;";

#[test]
fn planted_functions_and_operators_never_run_in_the_extensions_privileged_statements() {
    let cluster = hostile_cluster("hostile");
    // The superuser works in Mallory's database: its sessions take her search_path.
    let mut su = cluster.connect_db("postgres", "shop");
    let path: String = su.scalar("SHOW search_path");
    assert_eq!(path, "public, ext, pg_catalog", "the hostile path did not apply");
    // Both ways a database reaches this release: its install script, and the path of an
    // existing 0.2.0 database (its install script and every upgrade script since). Each is run
    // through: the update from the last release re-creates only what changed, so some objects
    // (0.5.0's claims trigger) are made by the install script alone, and a test of the update
    // path alone did not see a mutant trigger.
    for create in [
        "CREATE EXTENSION pg_snowflake SCHEMA ext",
        "CREATE EXTENSION pg_snowflake SCHEMA ext VERSION '0.2.0';
         ALTER EXTENSION pg_snowflake UPDATE",
    ] {
        su.batch_execute(create).unwrap();
        // The claims worker, twice with everything in place.
        worker_renewals(&cluster, 2);
        // What superusers and apply workers run: a claim, another cluster's claim through the
        // trigger, the clashes view, adopting a column, moving the generator, a layout reset.
        su.batch_execute(
            "SELECT ext.snowflake_claim();
             INSERT INTO snowflake.snowflake_claims
             VALUES (42, 1, 'twitter', 'other', '2020-01-01', '2020-01-01', 'infinity');
             UPDATE snowflake.snowflake_claims SET last_seen = '2020-01-02'
              WHERE system_identifier OPERATOR(pg_catalog.=) 42;
             SELECT * FROM snowflake.snowflake_clashes;
             CREATE TABLE public.legacy (id bigserial PRIMARY KEY);
             INSERT INTO public.legacy DEFAULT VALUES;
             SELECT ext.snowflake_adopt('public.legacy', 'id');
             SELECT ext.snowflake_advance_past(1);
             SELECT ext.snowflake_reset_layout();
             SELECT ext.snowflake_stats()",
        )
        .unwrap();
        // Ids through the default, as the application does.
        su.batch_execute("INSERT INTO public.legacy DEFAULT VALUES").unwrap();
        let (what, superuser) = caught(&cluster);
        assert_eq!(what, Vec::<String>::new(), "Mallory's traps ran after {create}");
        assert!(!superuser, "Mallory became a superuser after {create}");
        su.batch_execute("DROP TABLE public.legacy; DROP EXTENSION pg_snowflake").unwrap();
    }
    // The traps are armed: the same calls, unqualified, as the superuser with her path, run
    // them (else the test above could pass because they were never reachable).
    let sql = "SELECT format('%I', 'x'::name)";
    assert_armed(&cluster, &mut su, sql, "public.format(a text, b name) called by postgres");
}

#[test]
fn default_privileges_do_not_open_the_administrators_functions_and_tables() {
    let cluster = Cluster::start_new("default_privileges", &[]);
    let mut su = cluster.connect();
    su.batch_execute(
        "CREATE ROLE app LOGIN;
         ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT EXECUTE ON FUNCTIONS TO app;
         ALTER DEFAULT PRIVILEGES FOR ROLE postgres GRANT ALL ON TABLES TO app;
         CREATE EXTENSION pg_snowflake",
    )
    .unwrap();
    let check = |su: &mut Client| {
        let mut app = cluster.connect_as("app");
        for (sql, state) in [
            ("SELECT snowflake_reset_layout()", "42501"),
            ("SELECT snowflake_claim()", "42501"),
            ("SELECT snowflake_advance_past(1)", "42501"),
            ("SELECT snowflake_stats()", "42501"),
            (
                "INSERT INTO snowflake.snowflake_claims VALUES (1, 1, 'twitter', 'x', now(), now(), now())",
                "42501",
            ),
            ("SELECT * FROM snowflake.snowflake_claims", "42501"),
            ("SELECT * FROM snowflake.snowflake_clashes", "42501"),
        ] {
            let ServerError { code: got, message, .. } = expect_error(&mut app, sql);
            assert_eq!(got, state, "{sql}: {message}");
        }
        // What applications need stays open.
        app.query_one("SELECT snowflake_next(), snowflake_decode(1)", &[]).unwrap();
        // A grant opens snowflake_advance_past() (meant to be granted), but never the
        // superuser-only functions.
        su.batch_execute(
            "GRANT EXECUTE ON FUNCTION snowflake_advance_past(bigint), snowflake_reset_layout(),
                                     snowflake_claim() TO app",
        )
        .unwrap();
        app.query_one("SELECT snowflake_advance_past(1)", &[]).unwrap();
        for sql in ["SELECT snowflake_reset_layout()", "SELECT snowflake_claim()"] {
            let ServerError { code: state, message, hint, .. } = expect_error(&mut app, sql);
            assert_eq!(state, "42501", "{sql}: {message}");
            assert!(message.starts_with("permission denied for function"), "{message}");
            assert_eq!(hint, "Run it as a superuser.");
        }
        su.batch_execute(
            "REVOKE EXECUTE ON FUNCTION snowflake_advance_past(bigint), snowflake_reset_layout(),
                                      snowflake_claim() FROM app",
        )
        .unwrap();
    };
    check(&mut su);
    // The same after an update from 0.2.0, whose script also runs with the default privileges.
    su.batch_execute(
        "DROP EXTENSION pg_snowflake;
         CREATE EXTENSION pg_snowflake VERSION '0.2.0';
         ALTER EXTENSION pg_snowflake UPDATE",
    )
    .unwrap();
    check(&mut su);
}

/// The owner of the schema the extension lives in can rename it: on 15 and later the database
/// owner owns `public`, where a plain `CREATE EXTENSION` puts it. Mallory owns the database,
/// renames `public` to `public_old` and makes a new `public` with a view and functions of the
/// extension's names (the view over a function of hers), so that any body that kept the schema's
/// name from the install finds hers:
/// the claims trigger (run by the worker as the bootstrap superuser) reading `snowflake_claims`,
/// and `snowflake_adopt()` (run by a superuser) calling `snowflake_advance_past()` and binding
/// `snowflake_next()` as the column's default. She also makes her database read-only by
/// default, which must not stop the worker.
#[test]
fn a_renamed_extension_schema_leads_no_privileged_statement_to_the_new_one() {
    let cluster = mallorys_database("hostile_rename");
    let mut admin = cluster.connect();
    let mut su = cluster.connect_db("postgres", "shop");
    su.batch_execute(
        "CREATE EXTENSION pg_snowflake;
         CREATE TABLE public.legacy (id bigserial PRIMARY KEY);
         INSERT INTO public.legacy DEFAULT VALUES",
    )
    .unwrap();
    let mut mallory = cluster.connect_db("mallory", "shop");
    mallory
        .batch_execute(&format!(
            "ALTER SCHEMA public RENAME TO public_old;
             CREATE SCHEMA public;
             GRANT USAGE ON SCHEMA public TO PUBLIC;
             {CAPTURE}
             CREATE FUNCTION public.claims() RETURNS TABLE (system_identifier bigint,
                 worker_id integer, layout text, node_name text, since timestamptz,
                 last_seen timestamptz, expires timestamptz) LANGUAGE plpgsql AS $f$
             BEGIN PERFORM public.capture('public.snowflake_claims'); END $f$;
             CREATE VIEW public.snowflake_claims AS SELECT * FROM public.claims();
             CREATE FUNCTION public.snowflake_advance_past(b bigint) RETURNS bigint
             LANGUAGE plpgsql AS $f$
             BEGIN PERFORM public.capture('public.snowflake_advance_past'); RETURN b; END $f$;
             CREATE FUNCTION public.snowflake_next() RETURNS bigint LANGUAGE plpgsql AS $f$
             BEGIN PERFORM public.capture('public.snowflake_next'); RETURN 1; END $f$;
             ALTER DATABASE shop SET default_transaction_read_only = on"
        ))
        .unwrap();
    // The worker connects again (a new connection takes the database's defaults): it must
    // still renew, through the trigger, twice.
    admin
        .batch_execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE backend_type = 'pg_snowflake claims'",
        )
        .unwrap();
    let conninfo = cluster.conninfo("postgres").replace("dbname=postgres", "dbname=shop")
        + " options='-c search_path=pg_catalog -c default_transaction_read_only=off'";
    let mut c = Client::connect(&conninfo, NoTls).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    poll(Duration::from_secs(60), Duration::from_millis(100), || {
        let last: Option<String> = c
            .query_opt("SELECT last_seen::text FROM snowflake.snowflake_claims", &[])
            .unwrap()
            .map(|r| r.get(0));
        seen.extend(last);
        // The first may be from before the worker was ended.
        (seen.len() >= 3).then_some(()).ok_or(format!(
            "the claims worker renewed {} times after it reconnected",
            seen.len().saturating_sub(1)
        ))
    });
    // A superuser adopts the table through the extension's schema as it is now named.
    c.batch_execute("SELECT public_old.snowflake_adopt('public_old.legacy', 'id')").unwrap();
    let default: String = c.scalar(
        "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef
              WHERE adrelid OPERATOR(pg_catalog.=) 'public_old.legacy'::regclass",
    );
    assert_eq!(default, "public_old.snowflake_next()");
    let (what, superuser) = caught(&cluster);
    assert_eq!(what, Vec::<String>::new(), "Mallory's traps ran");
    assert!(!superuser, "Mallory became a superuser");
    // The traps are armed: a superuser who names them runs them.
    let sql = "SELECT count(*) FROM public.snowflake_claims";
    assert_armed(&cluster, &mut c, sql, "public.snowflake_claims called by postgres");
}

/// The extension's own schema is made by its script, never taken over: a schema named
/// `snowflake` that another role made first (with look-alikes in it) fails CREATE EXTENSION,
/// while one that a superuser made may hold the whole extension.
#[test]
fn a_schema_named_snowflake_that_another_role_made_is_refused() {
    let cluster = Cluster::start_new("hostile_own_schema", &[]);
    let mallory = Mallory::new(&cluster, "shop");
    mallory.connect().batch_execute("CREATE SCHEMA snowflake").unwrap();
    mallory.plant_in("snowflake");
    let mut su = mallory.connect_admin();
    expect_refusal(
        &mut su,
        "CREATE EXTENSION pg_snowflake",
        "42P06: schema \"snowflake\" already exists",
        "Rename or drop",
    );
    let (what, superuser) = mallory.caught();
    assert_eq!(what, Vec::<String>::new());
    assert!(!superuser);
    // A superuser's schema of that name: everything goes there.
    let mut c = cluster.connect();
    c.batch_execute(
        "CREATE SCHEMA snowflake;
         CREATE EXTENSION pg_snowflake SCHEMA snowflake;
         SELECT snowflake.snowflake_claim();
         SELECT snowflake.snowflake_next();",
    )
    .unwrap();
}

/// Should a superuser hand the schema `snowflake` to another role, nothing that runs with a
/// superuser's rights uses it: `snowflake_claim()`, the claims worker, the claims trigger and
/// the lease function refuse (42501), and while its new owner swaps it with her look-alikes,
/// none of them runs.
#[test]
fn a_snowflake_schema_handed_to_another_role_is_used_by_nothing_privileged() {
    let (cluster, mallory, mut su) = Mallory::start_with_claims("hostile_handed");
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        let n: i64 = su.scalar("SELECT count(*) FROM snowflake.snowflake_claims");
        (n > 0).then_some(()).ok_or("no claim yet".into())
    });
    su.batch_execute("ALTER SCHEMA snowflake OWNER TO mallory").unwrap();
    for sql in [
        "SELECT snowflake_claim()",
        "INSERT INTO snowflake.snowflake_claims
         VALUES (42, 1, 'twitter', 'other', now(), now(), now() + interval '1 hour')",
        "SELECT * FROM snowflake.snowflake_registry_lease('x', 'twitter', 1288834974657, 1, 41,
             10, 12, false, NULL, 1, 'n', 10000, 0)",
    ] {
        let ServerError { code: state, message, .. } = expect_error(&mut su, sql);
        assert_eq!(state, "42501", "{sql}: {message}");
        assert!(message.contains("snowflake"), "{message}");
    }
    poll(Duration::from_secs(30), Duration::from_millis(100), || {
        cluster
            .log()
            .contains("no worker id claim is written: its schema snowflake cannot be used: it belongs to mallory")
            .then_some(())
            .ok_or(cluster.log())
    });
    // Now she may swap it too: the worker renews nothing through it, and runs nothing of hers.
    let swaps = mallory.race(3.0, 101).join().unwrap();
    assert!(swaps > 100, "{swaps} swaps");
    let (what, superuser) = mallory.caught();
    assert_eq!(what, Vec::<String>::new());
    assert!(!superuser);
}

/// A rename of the extension's schema just before an install or upgrade script's first CREATE
/// would send the script's objects into another schema, whose owner may replace them: every
/// script checks by OID, at its end, that each object of the extension is in one of its own
/// schemas, and fails otherwise. Here a superuser leaves a function where such a rename would,
/// and the update refuses, changing nothing: from 0.3.0 and 0.4.0, whose updates start with
/// released scripts of their own, and from the release before this one, whose update is the
/// current script alone (sql/privileges.sql holds its check: from the older ones a released
/// script refuses first, and a current check removed went unseen, once 0.5.0 was released).
#[test]
fn a_script_that_leaves_an_object_outside_the_extensions_schemas_fails() {
    let cluster = Cluster::start_new("hostile_stray_object", &[]);
    // The one release whose update to this one is a single step: the current script.
    let previous: String = cluster.connect().scalar(
        "SELECT u.source FROM pg_extension_update_paths('pg_snowflake') u
           JOIN pg_available_extensions a ON a.name = 'pg_snowflake'
          WHERE u.target = a.default_version AND u.path = u.source || '--' || u.target",
    );
    for from in ["0.3.0", "0.4.0", &previous] {
        let db = format!("stray_{}", from.replace('.', "_"));
        cluster.connect().batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
        let mut c = cluster.connect_db("postgres", &db);
        c.batch_execute(&format!(
            "CREATE EXTENSION pg_snowflake VERSION '{from}';
             CREATE SCHEMA elsewhere;
             ALTER FUNCTION snowflake_to_base62(bigint) SET SCHEMA elsewhere;"
        ))
        .unwrap();
        expect_error_is(
            &mut c,
            "ALTER EXTENSION pg_snowflake UPDATE",
            "42501: pg_snowflake's objects are outside its schemas: function elsewhere.snowflake_to_base62(bigint)",
        );
        let version: String =
            c.scalar("SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'");
        assert_eq!(version, from);
    }
}

/// A superuser adopting a table that another role owns runs none of that role's code with a
/// superuser's rights: planning the query for the largest id folds an immutable function of an
/// expression index, which is the owner's (as a plain SELECT by a superuser would); adopt reads
/// it with the owner's rights, as a security-restricted operation, as VACUUM runs index
/// expressions.
#[test]
fn adopting_another_roles_table_runs_its_code_with_its_own_rights() {
    let cluster = Cluster::start_new("hostile_adopt_owner", &[]);
    let mallory = Mallory::new(&cluster, "shop");
    let mut su = mallory.connect_admin();
    su.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
    mallory
        .connect()
        .batch_execute(
            "CREATE TABLE m.orders (id bigserial PRIMARY KEY);
             INSERT INTO m.orders SELECT FROM generate_series(1, 10);
             CREATE FUNCTION m.folded() RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $f$
             BEGIN PERFORM m.trap('function folded() of an index'); RETURN 1; END $f$;
             CREATE INDEX ON m.orders ((id + m.folded()));
             GRANT ALL ON SCHEMA m TO PUBLIC;",
        )
        .unwrap();
    su.batch_execute("SELECT public.snowflake_adopt('m.orders', 'id')").unwrap();
    let (what, superuser) = mallory.caught();
    assert!(
        what.iter().all(|w| !w.ends_with("run by postgres")),
        "her code ran as the superuser: {what:?}"
    );
    assert!(!superuser, "Mallory became a superuser");
}
