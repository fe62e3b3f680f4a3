\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.3.0'" to load this file. \quit
-- 0.3.0: statements that run with other roles' rights name every function and operator by
-- schema (the claims trigger, which also gets search_path = pg_catalog, pg_temp; the clashes
-- view; snowflake_claim(), which checks for a superuser and gets the same search_path), and
-- the privileges are set again whatever default privileges granted; the claims trigger and
-- snowflake_adopt() find the extension's objects by OID, not by a schema name fixed at install
-- (the schema's owner could rename it); snowflake_compose() and the worker-id registry (snowflake_registry, snowflake_registry_lease()) are new.
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
-- ../claims_check.sql
-- Warns of a clash when it starts, as the claim that makes it is written: by snowflake_claim()
-- on this server, or by a logical replication apply worker bringing another server's claim
-- (ENABLE ALWAYS below: apply workers run with session_replication_role = replica, which skips
-- ordinary triggers). Once per clash, not at every renewal: snowflake_clashes lists it for as
-- long as it lasts. A WARNING, not an error: an error would stop the subscription, and with it
-- the rows of servers that do not clash.
--
-- It runs as whoever writes a claim (the claims worker and apply workers are superusers): its
-- search_path holds pg_catalog alone (pg_temp last, where PostgreSQL never looks for functions
-- or operators), and every function and operator it names is named by schema anyway. The table
-- it reads is the one it fires on (TG_RELID), not a schema name fixed at install: whoever owns
-- the extension's schema (on 15 and later, the database owner owns public) could rename it and
-- put a view of their own under the old name, which a superuser writing a claim would then run.
CREATE OR REPLACE FUNCTION @extschema@.snowflake_claims_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $check$
DECLARE
    other record;
BEGIN
    FOR other IN EXECUTE pg_catalog.format(
        'SELECT o.* FROM %s o
          WHERE o.worker_id OPERATOR(pg_catalog.=) $1
            AND o.layout OPERATOR(pg_catalog.=) $2
            AND o.system_identifier OPERATOR(pg_catalog.<>) $3
            AND o.since OPERATOR(pg_catalog.<) $4
            AND $5 OPERATOR(pg_catalog.<) o.expires
            AND ($6 OR NOT (o.since OPERATOR(pg_catalog.<) $7
                            AND $8 OPERATOR(pg_catalog.<) o.expires))',
        TG_RELID::pg_catalog.regclass)
      USING NEW.worker_id, NEW.layout, NEW.system_identifier, NEW.expires, NEW.since,
            TG_OP OPERATOR(pg_catalog.=) 'INSERT', OLD.expires, OLD.since
    LOOP
        RAISE WARNING 'worker id % is claimed by two clusters: "%" and "%"',
                NEW.worker_id, NEW.node_name, other.node_name
            USING ERRCODE = '01000',
                  DETAIL = pg_catalog.format(
                      'Clusters %s and %s both make %s ids with worker id %s since %s; '
                      'ids they make in the same time unit can be equal.',
                      NEW.system_identifier, other.system_identifier, NEW.layout,
                      NEW.worker_id, greatest(NEW.since, other.since)),
                  HINT = 'Give one of them another snowflake.worker_id and restart it; '
                         'SELECT * FROM snowflake_clashes lists every clash.';
    END LOOP;
    RETURN NULL;
END
$check$;

CREATE OR REPLACE TRIGGER snowflake_claims_check AFTER INSERT OR UPDATE ON @extschema@.snowflake_claims
FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_claims_check();
ALTER TABLE @extschema@.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;
-- ../adopt.sql
-- snowflake_adopt(tbl, col): switches a bigserial or identity column to DEFAULT snowflake_next()
-- in the caller's transaction, and moves the generator above the column's largest value. DDL
-- orchestration, so PL/pgSQL: every step is an ordinary ALTER TABLE with its usual locks and
-- checks, and an error anywhere rolls all of it back. (The generator's floor cannot roll back;
-- it only ever moves up, which is harmless.) It runs with the caller's rights, and its
-- search_path is pg_catalog alone (pg_temp last): nothing a role created elsewhere is found.
-- The extension's own functions are found through its schema's OID when it runs, not by a
-- schema name fixed at install: the schema's owner could rename it and plant functions of the
-- same names under the old one, which a superuser adopting a table would then call (and bind
-- as the column's default).
CREATE OR REPLACE FUNCTION @extschema@.snowflake_adopt(tbl regclass, col name) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $adopt$
DECLARE
    rel record;
    att record;
    seq regclass;
    top bigint;
    changed text;
    ext name;
BEGIN
    SELECT n.nspname INTO ext FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_snowflake';
    SELECT c.relkind, c.relowner INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', tbl USING ERRCODE = 'wrong_object_type';
    END IF;
    IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Run snowflake_adopt() as the owner of the table, or as a superuser.';
    END IF;
    SELECT a.atttypid, a.attidentity, pg_get_expr(d.adbin, d.adrelid) AS def INTO att
      FROM pg_attribute a
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation % does not exist', col, tbl
            USING ERRCODE = 'undefined_column';
    END IF;
    IF att.atttypid <> 'bigint'::regtype THEN
        RAISE EXCEPTION 'column "%" of % is %, not bigint', col, tbl, format_type(att.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = 'Snowflake ids need all 64 bits of a bigint.',
                  HINT = format('Change the type first: ALTER TABLE %s ALTER COLUMN %I TYPE bigint;',
                                tbl, col);
    END IF;

    IF att.attidentity <> '' THEN
        -- Dropping the identity drops its sequence too.
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', tbl, col);
        changed := 'dropped its identity';
    ELSIF att.def LIKE 'nextval(%' THEN
        seq := pg_get_serial_sequence(tbl::text, col);
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', tbl, col);
        IF seq IS NOT NULL THEN
            -- The column's own sequence (bigserial): nothing else can use it once it is gone.
            changed := format('dropped its sequence %s', seq);
            EXECUTE format('DROP SEQUENCE %s', seq);
        ELSE
            changed := format('dropped its default %s', att.def);
        END IF;
    ELSIF att.def IS NULL THEN
        changed := 'it had no default';
    ELSIF att.def NOT LIKE '%snowflake_next()' THEN
        RAISE EXCEPTION 'column "%" of % has a default that is not a sequence: %', col, tbl, att.def
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('If ids from snowflake_next() should replace it, drop it first: '
                                'ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT;', tbl, col);
    ELSE
        changed := 'it already had this default';
    END IF;
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.snowflake_next()', tbl, col, ext);

    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO top;
    IF top IS NOT NULL THEN
        EXECUTE format('SELECT %I.snowflake_advance_past($1)', ext) USING top;
    END IF;
    RAISE NOTICE 'column % of % now takes its ids from snowflake_next() (%)', quote_ident(col), tbl, changed
        USING DETAIL = CASE WHEN top IS NULL THEN 'The table is empty.'
                       ELSE format('Every new id is above %s, the largest one in the column.', top) END;
END
$adopt$;
COMMENT ON FUNCTION @extschema@.snowflake_adopt(regclass, name) IS
    'Switches a bigserial or identity column to DEFAULT snowflake_next(), above its largest value';
-- ../clashes.sql
-- Two clusters clash when they claim the same worker id of the same layout at overlapping
-- times. A worker id reused after its first cluster stopped (a replaced server, a pg_upgrade,
-- which gives a new system identifier) does not clash: the claims do not overlap. A clash stays
-- listed after it ended (ids of that time may be equal), with ongoing false: monitoring alerts
-- on `WHERE ongoing`, and deleting a stale claim clears its history.
--
-- A view runs with its owner's rights and binds its operators when it is created: every one is
-- named by schema, so that none can be one a less privileged role planted on the search_path.
CREATE OR REPLACE VIEW @extschema@.snowflake_clashes AS
SELECT a.worker_id, a.layout,
       a.node_name, a.system_identifier,
       b.node_name AS other_node_name, b.system_identifier AS other_system_identifier,
       greatest(a.since, b.since) AS since,
       least(a.expires, b.expires) AS until,
       least(a.expires, b.expires) OPERATOR(pg_catalog.>) pg_catalog.now() AS ongoing
  FROM @extschema@.snowflake_claims a
  JOIN @extschema@.snowflake_claims b
    ON b.worker_id OPERATOR(pg_catalog.=) a.worker_id
   AND b.layout OPERATOR(pg_catalog.=) a.layout
   -- Each pair once, in the order of the node names.
   AND (b.node_name, b.system_identifier) OPERATOR(pg_catalog.>) (a.node_name, a.system_identifier)
   AND a.since OPERATOR(pg_catalog.<) b.expires
   AND b.since OPERATOR(pg_catalog.<) a.expires;
-- src/claims.rs:113
-- pg_snowflake::claims::snowflake_claim
CREATE OR REPLACE FUNCTION "snowflake_claim"(

) RETURNS INT /* i32 */
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_claim_wrapper';
-- New in 0.3.0.
-- src/compose.rs:17
-- pg_snowflake::compose::snowflake_compose
CREATE  FUNCTION "snowflake_compose"(
	"ts" timestamp with time zone, /* TimestampWithTimeZone */
	"worker_id" INT, /* i32 */
	"sequence" INT /* i32 */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_compose_wrapper';

-- src/compose.rs:23
-- pg_snowflake::compose::snowflake_compose
CREATE  FUNCTION "snowflake_compose"(
	"ts" timestamp with time zone, /* TimestampWithTimeZone */
	"worker_id" INT, /* i32 */
	"sequence" INT, /* i32 */
	"layout" TEXT /* TextArg */
) RETURNS bigint /* i64 */
IMMUTABLE STRICT PARALLEL SAFE 
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_compose_layout_wrapper';
-- ../registry.sql
-- The worker-id registry (see src/registry/ and docs/many-servers.md), in whichever database the
-- fleet's servers reach through snowflake.registry. One row per worker id of a namespace and
-- layout, kept for good: `system_identifier` and `node_name` name its last holder, which holds
-- it until `expires`; `covered_until_ms` (Unix ms) is the time every id ever made with it lies
-- below, as its holders recorded before using it; `start_above_ms` is the coverage of the
-- previous holders that the current one starts above. Deleting a row forgets that coverage:
-- the next holder of that worker id could then repeat ids, so nothing here ever deletes one.
-- A row with `expires = 'infinity'` reserves a worker id for a server outside the registry.
CREATE TABLE @extschema@.snowflake_registry (
    namespace text NOT NULL,
    layout text NOT NULL,
    worker_id integer NOT NULL CHECK (worker_id OPERATOR(pg_catalog.>=) 0),
    system_identifier bigint NOT NULL,
    node_name text NOT NULL,
    since timestamptz NOT NULL,
    renewed timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    covered_until_ms bigint NOT NULL,
    start_above_ms bigint NOT NULL,
    PRIMARY KEY (namespace, layout, worker_id)
);

-- pg_dump keeps the rows (the coverage must survive a dump and restore of the registry).
SELECT pg_catalog.pg_extension_config_dump('@extschema@.snowflake_registry', '');

-- Leases a worker id to a cluster, or renews its lease; called by each member's registry worker
-- (src/registry/worker.rs). With `wanted` NULL any free worker id of the namespace and layout:
-- the lowest never leased, else the one whose lease ran out longest ago; else exactly `wanted`.
-- The primary key decides between clusters asking at once: an INSERT of a new worker id waits
-- for the other's, and the update of an expired one takes its row lock and checks the expiry
-- again, so a worker id is never granted twice.
--
-- SECURITY DEFINER, so that the role members connect as needs EXECUTE only and can change the
-- registry only as this function does: never lowering a coverage, never taking a held worker
-- id. Its search_path holds only pg_catalog, and it finds its table by the extension's
-- membership (pg_depend), not by a schema name fixed at install: the schema's owner could
-- rename it and put a table of their own under the old name.
--
-- The recorded coverage is capped at the registry's clock plus the lease and a minute: a member
-- whose clock runs far ahead cannot make a worker id unusable for later holders (it gets less
-- than it asked, and refuses ids once its clock passes that).
CREATE FUNCTION @extschema@.snowflake_registry_lease(
    namespace text,
    layout text,
    max_worker_id integer,
    wanted integer,
    system_identifier bigint,
    node_name text,
    lease_ms bigint,
    covered_until_ms bigint)
RETURNS TABLE (worker_id integer, expires timestamptz, start_above_ms bigint,
               recorded_until_ms bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $lease$
DECLARE
    registry pg_catalog.regclass;
    r record;
    candidate integer;
    lease_for pg_catalog.interval;
    asked bigint;
    found_one boolean;
    -- The statements below, with the table (%1$s) put in by OID.
    renew constant text := $q$
        UPDATE %1$s g
           SET node_name = $2, renewed = pg_catalog.now(),
               expires = pg_catalog.now() OPERATOR(pg_catalog.+) $3,
               covered_until_ms = GREATEST(g.covered_until_ms, $4)
         WHERE (g.namespace, g.layout, g.worker_id) OPERATOR(pg_catalog.=)
               (SELECT o.namespace, o.layout, o.worker_id FROM %1$s o
                 WHERE o.namespace OPERATOR(pg_catalog.=) $5
                   AND o.layout OPERATOR(pg_catalog.=) $6
                   AND o.system_identifier OPERATOR(pg_catalog.=) $1
                   AND o.worker_id OPERATOR(pg_catalog.<=) $7
                   AND ($8 IS NULL OR o.worker_id OPERATOR(pg_catalog.=) $8)
                 ORDER BY o.expires DESC LIMIT 1 FOR UPDATE)
        RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms$q$;
    take constant text := $q$
        INSERT INTO %1$s AS g
        VALUES ($5, $6, $7, $1, $2, pg_catalog.now(), pg_catalog.now(),
                pg_catalog.now() OPERATOR(pg_catalog.+) $3, $4, 0)
        ON CONFLICT (namespace, layout, worker_id) DO UPDATE
           SET system_identifier = excluded.system_identifier,
               node_name = excluded.node_name,
               since = excluded.since,
               renewed = excluded.renewed,
               expires = excluded.expires,
               start_above_ms = g.covered_until_ms,
               covered_until_ms = GREATEST(g.covered_until_ms, excluded.covered_until_ms)
         WHERE g.expires OPERATOR(pg_catalog.<) pg_catalog.now()
        RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms$q$;
    -- The lowest worker id up to $3 that has no row: 0, or one past a row's.
    never_leased constant text := $q$
        SELECT c.id FROM (
            SELECT 0 AS id
            UNION ALL
            SELECT g.worker_id OPERATOR(pg_catalog.+) 1 FROM %1$s g
             WHERE g.namespace OPERATOR(pg_catalog.=) $1
               AND g.layout OPERATOR(pg_catalog.=) $2
               AND g.worker_id OPERATOR(pg_catalog.<) $3) c
         WHERE NOT EXISTS (
               SELECT FROM %1$s g
                WHERE g.namespace OPERATOR(pg_catalog.=) $1
                  AND g.layout OPERATOR(pg_catalog.=) $2
                  AND g.worker_id OPERATOR(pg_catalog.=) c.id)
         ORDER BY c.id LIMIT 1$q$;
BEGIN
    IF namespace IS NULL OR layout IS NULL OR max_worker_id IS NULL
       OR system_identifier IS NULL OR node_name IS NULL OR lease_ms IS NULL
       OR covered_until_ms IS NULL THEN
        RAISE EXCEPTION 'only the worker id may be null'
            USING ERRCODE = '22004',
                  HINT = 'snowflake_registry_lease() is called by the registry worker of each member.';
    END IF;
    IF lease_ms OPERATOR(pg_catalog.<) 1000 OR lease_ms OPERATOR(pg_catalog.>) 86400000
       OR max_worker_id OPERATOR(pg_catalog.<) 0
       OR (wanted IS NOT NULL AND (wanted OPERATOR(pg_catalog.<) 0
                                   OR wanted OPERATOR(pg_catalog.>) max_worker_id)) THEN
        RAISE EXCEPTION 'worker id % or lease of % ms is out of range', wanted, lease_ms
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('Worker ids run from 0 to %s; leases last 1 s to 1 day.',
                                           max_worker_id);
    END IF;
    SELECT d.objid::pg_catalog.regclass INTO registry
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.objid
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.deptype OPERATOR(pg_catalog.=) 'e'
       AND e.extname OPERATOR(pg_catalog.=) 'pg_snowflake'
       AND c.relname OPERATOR(pg_catalog.=) 'snowflake_registry';
    lease_for := pg_catalog.make_interval(secs => lease_ms::pg_catalog.float8
                                                  OPERATOR(pg_catalog./) 1000);
    asked := LEAST(covered_until_ms,
        (pg_catalog.date_part('epoch', pg_catalog.now()) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8
        OPERATOR(pg_catalog.+) lease_ms OPERATOR(pg_catalog.+) 60000);

    -- This cluster's lease, renewed (also one that ran out while no other cluster took it).
    EXECUTE pg_catalog.format(renew, registry) INTO r
      USING system_identifier, node_name, lease_for, asked, namespace, layout, max_worker_id,
            wanted;
    IF r IS NOT NULL THEN
        RETURN QUERY SELECT r.worker_id, r.expires, r.start_above_ms, r.covered_until_ms;
        RETURN;
    END IF;

    -- A worker id of its own, never leased (the lowest first); then, in the loop below, one
    -- whose lease ran out longest ago (a server that was down briefly may still come back for
    -- its own), whose next holder starts above everything its previous holders covered.
    IF wanted IS NULL THEN
        LOOP
            EXECUTE pg_catalog.format(never_leased, registry) INTO candidate
              USING namespace, layout, max_worker_id;
            EXIT WHEN candidate IS NULL;
            EXECUTE pg_catalog.format(take, registry) INTO r
              USING system_identifier, node_name, lease_for, asked, namespace, layout, candidate;
            IF r IS NOT NULL THEN
                RETURN QUERY SELECT r.worker_id, r.expires, r.start_above_ms, r.covered_until_ms;
                RETURN;
            END IF;
        END LOOP;
    END IF;
    FOR candidate IN EXECUTE pg_catalog.format($q$
        SELECT w FROM (SELECT $3 AS w WHERE $3 IS NOT NULL
                       UNION ALL
                       SELECT g.worker_id FROM %1$s g
                        WHERE $3 IS NULL
                          AND g.namespace OPERATOR(pg_catalog.=) $1
                          AND g.layout OPERATOR(pg_catalog.=) $2
                          AND g.worker_id OPERATOR(pg_catalog.<=) $4
                          AND g.expires OPERATOR(pg_catalog.<) pg_catalog.now()) c
         ORDER BY (SELECT g.expires FROM %1$s g
                    WHERE g.namespace OPERATOR(pg_catalog.=) $1
                      AND g.layout OPERATOR(pg_catalog.=) $2
                      AND g.worker_id OPERATOR(pg_catalog.=) c.w) NULLS FIRST, w$q$, registry)
      USING namespace, layout, wanted, max_worker_id
    LOOP
        EXECUTE pg_catalog.format(take, registry) INTO r
          USING system_identifier, node_name, lease_for, asked, namespace, layout, candidate;
        IF r IS NOT NULL THEN
            RETURN QUERY SELECT r.worker_id, r.expires, r.start_above_ms, r.covered_until_ms;
            RETURN;
        END IF;
    END LOOP;

    IF wanted IS NOT NULL THEN
        EXECUTE pg_catalog.format($q$
            SELECT g.system_identifier, g.node_name, g.expires FROM %1$s g
             WHERE g.namespace OPERATOR(pg_catalog.=) $1
               AND g.layout OPERATOR(pg_catalog.=) $2
               AND g.worker_id OPERATOR(pg_catalog.=) $3$q$, registry)
          INTO r USING namespace, layout, wanted;
        RAISE EXCEPTION 'worker id % of namespace "%" is leased to another cluster', wanted, namespace
            USING ERRCODE = '55000',
                  DETAIL = pg_catalog.format('Cluster %s (%s) holds it until %s.',
                                             r.system_identifier, r.node_name, r.expires),
                  HINT = 'Give this server another snowflake.worker_id, or leave it unset to lease a free one.';
    END IF;
    RAISE EXCEPTION 'no worker id of namespace "%" is free', namespace
        USING ERRCODE = '55000',
              DETAIL = pg_catalog.format('All %s worker ids of layout %s are leased.',
                                         max_worker_id OPERATOR(pg_catalog.+) 1, layout),
              HINT = 'Use another snowflake.registry_namespace, a layout with more worker bits, or wait for a lease to run out.';
END
$lease$;

-- Who may lease is the administrator's choice (GRANT EXECUTE ... TO the members' role): nobody
-- else, whatever default privileges granted at creation. Monitoring may read which cluster holds
-- which worker id. Not in privileges.sql, which every upgrade script runs: it would take the
-- members' grants back, and they would stop leasing.
DO $privileges$
DECLARE
    grant_ record;
BEGIN
    FOR grant_ IN
        SELECT 'FUNCTION @extschema@.snowflake_registry_lease(text, text, integer, integer, bigint, text, bigint, bigint)' AS object,
               a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=) '@extschema@.snowflake_registry_lease(text, text, integer, integer, bigint, text, bigint, bigint)'::pg_catalog.regprocedure
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT 'TABLE @extschema@.snowflake_registry', a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.snowflake_registry'::pg_catalog.regclass
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
            CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
            END);
    END LOOP;
END
$privileges$;
REVOKE ALL ON FUNCTION @extschema@.snowflake_registry_lease(text, text, integer, integer, bigint, text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON @extschema@.snowflake_registry FROM PUBLIC;
GRANT SELECT ON @extschema@.snowflake_registry TO pg_monitor;
-- ../privileges.sql
-- Who may call and read what (docs/security.md). Run at the end of the install
-- script and of every upgrade script, so that a database ends with exactly these privileges
-- whatever path it took.
--
-- First every grant of these objects to anyone but their owner is taken back: default
-- privileges (ALTER DEFAULT PRIVILEGES ... GRANT EXECUTE ON FUNCTIONS TO app, or ON TABLES)
-- would otherwise have given them to roles at CREATE EXTENSION, and a REVOKE FROM PUBLIC does
-- not take such a grant back. Then what is meant to be granted is granted. An administrator
-- may grant more afterwards; snowflake_reset_layout() and snowflake_claim() check for a
-- superuser themselves, whatever is granted.
DO $privileges$
DECLARE
    grant_ record;
BEGIN
    FOR grant_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS object,
               a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   '@extschema@.snowflake_stats()'::pg_catalog.regprocedure,
                   '@extschema@.snowflake_advance_past(bigint)'::pg_catalog.regprocedure,
                   '@extschema@.snowflake_reset_layout()'::pg_catalog.regprocedure,
                   '@extschema@.snowflake_claim()'::pg_catalog.regprocedure,
                   '@extschema@.snowflake_adopt(pg_catalog.regclass, pg_catalog.name)'::pg_catalog.regprocedure])
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass), a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   '@extschema@.snowflake_claims'::pg_catalog.regclass,
                   '@extschema@.snowflake_clashes'::pg_catalog.regclass])
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        -- regrole prints a role's name quoted where it needs to be; 0 is PUBLIC.
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
            CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
            END);
    END LOOP;
END
$privileges$;

REVOKE ALL ON FUNCTION @extschema@.snowflake_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowflake_stats() TO pg_monitor;
REVOKE ALL ON FUNCTION @extschema@.snowflake_advance_past(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowflake_reset_layout() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowflake_claim() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.snowflake_adopt(pg_catalog.regclass, pg_catalog.name) FROM PUBLIC;
-- Claims name servers (host names, system identifiers): readable by monitoring, written by
-- superusers (and the apply workers of their subscriptions) only.
REVOKE ALL ON @extschema@.snowflake_claims, @extschema@.snowflake_clashes FROM PUBLIC;
GRANT SELECT ON @extschema@.snowflake_claims, @extschema@.snowflake_clashes TO pg_monitor;
