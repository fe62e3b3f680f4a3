//! Mallory, a hostile database owner, for the hostile suites. She owns a database, and so its
//! schema `public` (on 15 and later), where a plain `CREATE EXTENSION` puts pg_snowflake. She
//! plants look-alikes of the extension's objects in a schema of hers, `evil` (and, in
//! `evil_snowflake`, of what lives in the extension's own schema `snowflake`), and swaps the
//! names in a loop, thousands of times a second:
//!
//! ```sql
//! ALTER SCHEMA public RENAME TO swap_tmp; ALTER SCHEMA evil RENAME TO public;
//! ALTER SCHEMA swap_tmp RENAME TO evil; COMMIT;
//! ```
//!
//! so that a name resolved twice by privileged code (looked up, then used) leads to her objects
//! about half the time. She swaps `snowflake` with `evil_snowflake` too whenever she may (never,
//! unless its owner is a role she belongs to). Every look-alike calls `m.trap()`, which records
//! who ran it and, for a superuser, makes her one.

use super::*;

/// The columns of the objects she imitates (those of 0.3.0 too): tables a privileged statement
/// writes get a statement trigger (it runs as the writer, even when no row is written), names it
/// only reads are views over a trap.
const LOOK_ALIKES: &str = "
    CREATE TABLE snowflake_claims (system_identifier bigint, worker_id integer, layout text,
        node_name text, since timestamptz, last_seen timestamptz, expires timestamptz,
        PRIMARY KEY (system_identifier, worker_id, layout));
    CREATE TRIGGER trap BEFORE INSERT OR UPDATE OR DELETE ON snowflake_claims
        FOR EACH STATEMENT EXECUTE FUNCTION m.trap_row();
    CREATE TABLE snowflake_registry (namespace text, layout text, worker_id integer,
        system_identifier bigint, node_name text, since timestamptz, renewed timestamptz,
        expires timestamptz, covered_until_ms bigint, start_above_ms bigint,
        PRIMARY KEY (namespace, layout, worker_id));
    CREATE TRIGGER trap BEFORE INSERT OR UPDATE OR DELETE ON snowflake_registry
        FOR EACH STATEMENT EXECUTE FUNCTION m.trap_row();
    CREATE TABLE snowflake_registry_namespaces (namespace text PRIMARY KEY, layout text,
        epoch_ms bigint, unit_ms integer, time_bits integer, worker_bits integer,
        sequence_bits integer, worker_last boolean, since timestamptz);
    CREATE TRIGGER trap BEFORE INSERT OR UPDATE OR DELETE ON snowflake_registry_namespaces
        FOR EACH STATEMENT EXECUTE FUNCTION m.trap_row();
    CREATE VIEW snowflake_clashes AS
        SELECT 1 AS worker_id WHERE m.trap('view snowflake_clashes');
    CREATE VIEW legacy AS SELECT 1::bigint AS id WHERE m.trap('view legacy');
    CREATE FUNCTION snowflake_claim() RETURNS integer LANGUAGE plpgsql AS $f$
        BEGIN PERFORM m.trap('function snowflake_claim()'); RETURN 0; END $f$;
    CREATE FUNCTION snowflake_claims_check() RETURNS trigger LANGUAGE plpgsql AS $f$
        BEGIN PERFORM m.trap('function snowflake_claims_check()'); RETURN NULL; END $f$;
    CREATE FUNCTION snowflake_next() RETURNS bigint LANGUAGE plpgsql AS $f$
        BEGIN PERFORM m.trap('function snowflake_next()'); RETURN 1; END $f$;
    CREATE FUNCTION snowflake_advance_past(id bigint) RETURNS void LANGUAGE plpgsql AS $f$
        BEGIN PERFORM m.trap('function snowflake_advance_past(bigint)'); END $f$;
    CREATE FUNCTION snowflake_stats() RETURNS jsonb LANGUAGE plpgsql AS $f$
        BEGIN PERFORM m.trap('function snowflake_stats()'); RETURN '{}'; END $f$;
    -- What a member is told: worker id 0 for a day, whoever asks.
    CREATE FUNCTION snowflake_registry_lease(namespace text, layout text,
        max_worker_id integer, wanted integer, system_identifier bigint, node_name text,
        lease_ms bigint, covered_until_ms bigint)
    RETURNS TABLE (worker_id integer, expires timestamptz, start_above_ms bigint,
                   recorded_until_ms bigint)
    LANGUAGE plpgsql AS $f$
    BEGIN
        PERFORM m.trap('function snowflake_registry_lease (0.3.0)');
        RETURN QUERY SELECT 0, now() + interval '1 day', 0::bigint,
                            covered_until_ms;
    END $f$;
    CREATE FUNCTION snowflake_registry_lease(namespace text, layout text, epoch_ms bigint,
        unit_ms integer, time_bits integer, worker_bits integer, sequence_bits integer,
        worker_last boolean, wanted integer, system_identifier bigint, node_name text,
        lease_ms bigint, covered_until_ms bigint)
    RETURNS TABLE (outcome text, worker_id integer, expires timestamptz, start_above_ms bigint,
                   recorded_until_ms bigint, namespace_layout text, holder text)
    LANGUAGE plpgsql AS $f$
    BEGIN
        PERFORM m.trap('function snowflake_registry_lease');
        RETURN QUERY SELECT 'granted', 0, now() + interval '1 day', 0::bigint,
                            covered_until_ms, NULL::text, NULL::text;
    END $f$;
    CREATE FUNCTION snowflake_registry_hold(namespace text, layout text, epoch_ms bigint,
        unit_ms integer, time_bits integer, worker_bits integer, sequence_bits integer,
        worker_last boolean, wanted integer, preferred integer, system_identifier bigint,
        node_name text, lease_ms bigint, covered_until_ms bigint, place text, secret text,
        next_secret text)
    RETURNS TABLE (outcome text, worker_id integer, expires timestamptz, start_above_ms bigint,
                   recorded_until_ms bigint, namespace_layout text, holder text, copy_of text)
    LANGUAGE plpgsql AS $f$
    BEGIN
        PERFORM m.trap('function snowflake_registry_hold');
        RETURN QUERY SELECT 'granted', 0, now() + interval '1 day', 0::bigint,
                            covered_until_ms, NULL::text, NULL::text, NULL::text;
    END $f$;
    CREATE FUNCTION snowflake_registry_take(namespace text, candidate integer,
        system_identifier bigint, node_name text, lease_for interval, asked bigint,
        OUT worker_id integer, OUT expires timestamptz, OUT start_above_ms bigint,
        OUT covered_until_ms bigint)
    LANGUAGE plpgsql AS $f$
    BEGIN PERFORM m.trap('function snowflake_registry_take'); worker_id := 0;
          expires := now() + interval '1 day'; start_above_ms := 0; covered_until_ms := asked;
    END $f$;
    CREATE FUNCTION snowflake_registry_layout_fields(layout text, OUT epoch_ms bigint,
        OUT unit_ms integer, OUT time_bits integer, OUT worker_bits integer,
        OUT sequence_bits integer, OUT worker_last boolean)
    LANGUAGE plpgsql AS $f$
    BEGIN PERFORM m.trap('function snowflake_registry_layout_fields'); END $f$;
";

/// Mallory in database `db` of `cluster`.
pub struct Mallory {
    conninfo: String,
    admin: String,
    pub db: String,
}

impl Mallory {
    /// Makes role mallory (once per cluster) and database `db`, owned by her, with her tools in
    /// schema `m` and her look-alikes in `evil` and `evil_snowflake`.
    pub fn new(cluster: &Cluster, db: &str) -> Mallory {
        let mut admin = cluster.connect();
        admin
            .batch_execute(
                "DO $$ BEGIN
                     IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mallory') THEN
                         CREATE ROLE mallory LOGIN;
                     END IF;
                 END $$",
            )
            .unwrap();
        admin.batch_execute(&format!("CREATE DATABASE {db} OWNER mallory")).unwrap();
        let mallory = Mallory {
            conninfo: cluster
                .conninfo("mallory")
                .replace("dbname=postgres", &format!("dbname={db}")),
            admin: cluster.conninfo("postgres").replace("dbname=postgres", &format!("dbname={db}")),
            db: db.into(),
        };
        let mut c = mallory.connect();
        c.batch_execute(
            "CREATE SCHEMA m;
             GRANT USAGE ON SCHEMA m TO PUBLIC;
             CREATE TABLE m.captured (what text, by_whom name,
                                      at timestamptz DEFAULT clock_timestamp());
             GRANT INSERT ON m.captured TO PUBLIC;
             CREATE TABLE m.swaps (n bigint);
             CREATE FUNCTION m.trap(what text) RETURNS boolean LANGUAGE plpgsql AS $f$
             BEGIN
                 IF current_user OPERATOR(pg_catalog.<>) 'mallory' THEN
                     INSERT INTO m.captured (what, by_whom) VALUES (what, current_user);
                     -- current_user: a SECURITY DEFINER function's owner counts
                     -- (is_superuser says only what the session's user is).
                     IF (SELECT rolsuper FROM pg_catalog.pg_roles
                          WHERE rolname OPERATOR(pg_catalog.=) current_user)
                     THEN
                         EXECUTE 'ALTER ROLE mallory SUPERUSER';
                     END IF;
                 END IF;
                 RETURN true;
             END $f$;
             CREATE FUNCTION m.trap_row() RETURNS trigger LANGUAGE plpgsql AS $f$
             BEGIN
                 PERFORM m.trap('table ' || TG_TABLE_NAME);
                 RETURN NULL;
             END $f$;
             -- Exchanges the names of `public` and `evil` (and of `snowflake` and
             -- `evil_snowflake` with `both_`).
             CREATE PROCEDURE m.exchange(both_ boolean) LANGUAGE plpgsql AS $f$
             BEGIN
                 ALTER SCHEMA public RENAME TO swap_tmp;
                 ALTER SCHEMA evil RENAME TO public;
                 ALTER SCHEMA swap_tmp RENAME TO evil;
                 IF both_ THEN
                     ALTER SCHEMA snowflake RENAME TO swap_tmp;
                     ALTER SCHEMA evil_snowflake RENAME TO snowflake;
                     ALTER SCHEMA swap_tmp RENAME TO evil_snowflake;
                 END IF;
             END $f$;
             -- Swaps `public` with `evil` (and `snowflake` with `evil_snowflake`, when she may)
             -- until `seconds` are over and she has swapped `at_least` times (for three times
             -- `seconds` at most: on a loaded machine 10 s once gave 512 swaps, where a few
             -- thousand a second are usual); a rename that fails (a concurrent DDL) is skipped.
             CREATE PROCEDURE m.swap(seconds float8, at_least bigint) LANGUAGE plpgsql AS $f$
             DECLARE
                 stop timestamptz := clock_timestamp() + seconds * interval '1 second';
                 last timestamptz := clock_timestamp() + 3 * seconds * interval '1 second';
                 n bigint := 0;
                 both_ boolean := EXISTS (SELECT FROM pg_namespace
                                           WHERE nspname = 'snowflake'
                                             AND pg_has_role(current_user, nspowner, 'USAGE'));
             BEGIN
                 WHILE clock_timestamp() < stop
                       OR (n < at_least AND clock_timestamp() < last) LOOP
                     BEGIN
                         CALL m.exchange(both_);
                         n := n + 1;
                     EXCEPTION WHEN OTHERS THEN NULL;
                     END;
                     COMMIT;
                 END LOOP;
                 -- Each swap exchanges the names: an even count leaves them as they were.
                 IF n % 2 = 1 THEN
                     CALL m.exchange(both_);
                 END IF;
                 INSERT INTO m.swaps VALUES (n);
                 COMMIT;
             END $f$;
             -- Swaps `public` with `evil` for a moment, then back, at random moments `gap` s
             -- apart on average, for `seconds` and on until `at_least` pulses (three times
             -- `seconds` at most: 10 s once gave 195 where 200 were asked): most statements
             -- then find the real names, and one of a script's statements now and then finds
             -- hers.
             CREATE PROCEDURE m.pulse(seconds float8, gap float8, at_least bigint)
             LANGUAGE plpgsql AS $f$
             DECLARE
                 stop timestamptz := clock_timestamp() + seconds * interval '1 second';
                 last timestamptz := clock_timestamp() + 3 * seconds * interval '1 second';
                 n bigint := 0;
             BEGIN
                 WHILE clock_timestamp() < stop
                       OR (n < at_least AND clock_timestamp() < last) LOOP
                     PERFORM pg_sleep(2 * gap * random());
                     BEGIN
                         CALL m.exchange(false);
                     EXCEPTION WHEN OTHERS THEN CONTINUE;
                     END;
                     COMMIT;
                     CALL m.exchange(false);
                     COMMIT;
                     n := n + 1;
                 END LOOP;
                 INSERT INTO m.swaps VALUES (n);
                 COMMIT;
             END $f$;
             CREATE SCHEMA evil;
             CREATE SCHEMA evil_snowflake;",
        )
        .unwrap();
        for schema in ["evil", "evil_snowflake"] {
            mallory.plant_in(schema);
        }
        mallory
    }

    /// Plants her look-alikes in `schema` (hers, or one she may create objects in).
    pub fn plant_in(&self, schema: &str) {
        self.connect()
            .batch_execute(&format!(
                "SET search_path = {schema}; {LOOK_ALIKES}; RESET search_path;
                 GRANT USAGE ON SCHEMA {schema} TO PUBLIC;
                 GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO PUBLIC;"
            ))
            .unwrap();
    }

    /// A new server (`Cluster::start_new(name, conf)`) with Mallory in its database `db`;
    /// returns the server, her, and a superuser's connection to her database.
    pub fn start(name: &str, conf: &[&str], db: &str) -> (Cluster, Mallory, Client) {
        let cluster = Cluster::start_new(name, conf);
        let mallory = Mallory::new(&cluster, db);
        let su = mallory.connect_admin();
        (cluster, mallory, su)
    }

    /// As `start`, with the claims in her database `shop` (`snowflake.claims_interval = 1`: the
    /// claims worker writes every second) and pg_snowflake created there by the superuser.
    pub fn start_with_claims(name: &str) -> (Cluster, Mallory, Client) {
        let conf = ["snowflake.claims_database = 'shop'", "snowflake.claims_interval = 1"];
        let (cluster, mallory, mut su) = Mallory::start(name, &conf, "shop");
        su.batch_execute("CREATE EXTENSION pg_snowflake").unwrap();
        (cluster, mallory, su)
    }

    /// A connection as Mallory.
    pub fn connect(&self) -> Client {
        Client::connect(&self.conninfo, NoTls).unwrap()
    }

    /// A connection as the superuser to her database.
    pub fn connect_admin(&self) -> Client {
        Client::connect(&self.admin, NoTls).unwrap()
    }

    /// Swaps the schemas for `seconds`, and on until she has swapped `at_least` times (three
    /// times `seconds` at most), in a thread of its own; `join` returns how many swaps she made.
    pub fn race(&self, seconds: f64, at_least: i64) -> std::thread::JoinHandle<i64> {
        let conninfo = self.conninfo.clone();
        std::thread::spawn(move || {
            let mut c = Client::connect(&conninfo, NoTls).unwrap();
            c.batch_execute(&format!("CALL m.swap({seconds}, {at_least})")).unwrap();
            c.scalar("SELECT max(n) FROM m.swaps")
        })
    }

    /// Swaps the schemas for a moment and back, `gap` s apart on average, for `seconds` and on
    /// until `at_least` times (three times `seconds` at most), in a thread of its own; `join`
    /// returns how many times.
    pub fn pulse(&self, seconds: f64, gap: f64, at_least: i64) -> std::thread::JoinHandle<i64> {
        let conninfo = self.conninfo.clone();
        std::thread::spawn(move || {
            let mut c = Client::connect(&conninfo, NoTls).unwrap();
            c.batch_execute(&format!("CALL m.pulse({seconds}, {gap}, {at_least})")).unwrap();
            c.scalar("SELECT max(n) FROM m.swaps")
        })
    }

    /// What her traps caught (what, by whom), and whether she is a superuser now.
    pub fn caught(&self) -> (Vec<String>, bool) {
        caught_in(&self.admin, "m.captured", "run by")
    }

    /// Asserts that the race ran (at least `min_swaps`) and that no trap ran; then that the traps
    /// are armed: a superuser who names one runs it (else the test could pass because none was
    /// ever reachable).
    pub fn assert_nothing_caught(&self, swaps: i64, min_swaps: i64) {
        assert!(
            swaps >= min_swaps,
            "Mallory swapped the schemas only {swaps} times (wanted {min_swaps})"
        );
        let (what, superuser) = self.caught();
        assert_eq!(what, Vec::<String>::new(), "Mallory's traps ran");
        assert!(!superuser, "Mallory became a superuser");
        let mut c =
            Client::connect(&format!("{} options='-c search_path=pg_catalog'", self.admin), NoTls)
                .unwrap();
        c.batch_execute("SELECT * FROM evil.snowflake_clashes").unwrap();
        let (what, superuser) = self.caught();
        assert_eq!(what, vec!["view snowflake_clashes run by postgres"]);
        assert!(superuser, "the trap could not make Mallory a superuser");
    }
}

/// What a trap recorded in `table` (`what`, `by_whom`, `at`), as "WHAT VERB ROLE" in order,
/// read with a search_path that holds pg_catalog alone; and whether Mallory became a superuser.
pub fn caught_in(conninfo: &str, table: &str, verb: &str) -> (Vec<String>, bool) {
    let options = format!("{conninfo} options='-c search_path=pg_catalog'");
    let mut c = Client::connect(&options, NoTls).unwrap();
    let sql = format!("SELECT what || ' {verb} ' || by_whom FROM {table} ORDER BY at");
    let what = c.query(&sql, &[]).unwrap().iter().map(|r| r.get(0)).collect();
    let superuser: bool = c.scalar("SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'");
    (what, superuser)
}
