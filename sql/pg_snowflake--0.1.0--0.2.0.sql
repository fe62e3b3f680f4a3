-- pg_snowflake 0.1.0 -> 0.2.0: adds layouts (decoding by layout name, the time helpers, a
-- layout reset) and the toolkit (sortable base62 text ids, generator stats, a durable floor,
-- adopting serial and identity columns) and worker-id claims. Nothing of 0.1.0 changes. The
-- objects below must match what `CREATE EXTENSION pg_snowflake` makes at 0.2.0:
-- tests/packaging/extension_upgrade.rs compares an updated database with a fresh one.
\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.2.0'" to load this file. \quit
-- Hardened in 0.3.0, with the same objects: every function, operator and object that a
-- statement run with other roles' rights uses is named by schema, and the claims trigger
-- searches pg_catalog alone (see sql/privileges.sql and the README's "Security").

CREATE FUNCTION snowflake_decode("id" bigint, "layout" text) RETURNS @extschema@.snowflake_parts
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_decode_layout_wrapper';

CREATE FUNCTION snowflake_timestamp("id" bigint) RETURNS timestamp with time zone
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_timestamp_wrapper';

CREATE FUNCTION snowflake_min_id("ts" timestamp with time zone) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_min_id_wrapper';

CREATE FUNCTION snowflake_max_id("ts" timestamp with time zone) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_max_id_wrapper';

CREATE FUNCTION snowflake_id_bound("ts" timestamp with time zone, "strategy" integer) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_id_bound_wrapper';

CREATE FUNCTION snowflake_reset_layout() RETURNS bool
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_reset_layout_wrapper';

REVOKE ALL ON FUNCTION @extschema@.snowflake_reset_layout() FROM PUBLIC;

CREATE FUNCTION snowflake_to_base62("id" bigint) RETURNS text
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_to_base62_wrapper';

CREATE FUNCTION snowflake_from_base62("base62" text) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_from_base62_wrapper';

CREATE FUNCTION snowflake_stats() RETURNS jsonb
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_stats_wrapper';

CREATE FUNCTION snowflake_advance_past("id" bigint) RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_advance_past_wrapper';

REVOKE ALL ON FUNCTION @extschema@.snowflake_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.snowflake_stats() TO pg_monitor;
REVOKE ALL ON FUNCTION @extschema@.snowflake_advance_past(bigint) FROM PUBLIC;

-- snowflake_adopt(tbl, col): switches a bigserial or identity column to DEFAULT snowflake_next()
-- in the caller's transaction, and moves the generator above the column's largest value. DDL
-- orchestration, so PL/pgSQL: every step is an ordinary ALTER TABLE with its usual locks and
-- checks, and an error anywhere rolls all of it back. (The generator's floor cannot roll back;
-- it only ever moves up, which is harmless.)
CREATE FUNCTION @extschema@.snowflake_adopt(tbl regclass, col name) RETURNS void
LANGUAGE plpgsql VOLATILE STRICT
SET search_path = pg_catalog, pg_temp
AS $adopt$
DECLARE
    rel record;
    att record;
    seq regclass;
    top bigint;
    changed text;
BEGIN
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
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT @extschema@.snowflake_next()', tbl, col);

    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO top;
    IF top IS NOT NULL THEN
        PERFORM @extschema@.snowflake_advance_past(top);
    END IF;
    RAISE NOTICE 'column % of % now takes its ids from snowflake_next() (%)', quote_ident(col), tbl, changed
        USING DETAIL = CASE WHEN top IS NULL THEN 'The table is empty.'
                       ELSE format('Every new id is above %s, the largest one in the column.', top) END;
END
$adopt$;
COMMENT ON FUNCTION @extschema@.snowflake_adopt(regclass, name) IS
    'Switches a bigserial or identity column to DEFAULT snowflake_next(), above its largest value';
REVOKE ALL ON FUNCTION @extschema@.snowflake_adopt(regclass, name) FROM PUBLIC;

-- Worker-id claims (src/claims.sql).
CREATE FUNCTION snowflake_claim() RETURNS integer
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_claim_wrapper';
-- Worker-id claims (see claims.rs). One row per cluster (system identifier), worker id and
-- layout: the cluster generated ids with that worker id from `since` and may go on until
-- `expires`, which each renewal moves on. Publish this table beside your data and the claims of
-- every node meet at the subscriber, where the trigger (claims_check.sql) warns of a shared
-- worker id and snowflake_clashes (clashes.sql) lists every one.
CREATE TABLE @extschema@.snowflake_claims (
    system_identifier bigint NOT NULL,
    worker_id integer NOT NULL,
    layout text NOT NULL,
    node_name text NOT NULL,
    since timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (system_identifier, worker_id, layout)
);

-- Two clusters clash when they claim the same worker id of the same layout at overlapping
-- times. A worker id reused after its first cluster stopped (a replaced server, a pg_upgrade,
-- which gives a new system identifier) does not clash: the claims do not overlap. A clash stays
-- listed after it ended (ids of that time may be equal), with ongoing false: monitoring alerts
-- on `WHERE ongoing`, and deleting a stale claim clears its history.
--
-- A view runs with its owner's rights and binds its operators when it is created: every one is
-- named by schema, so that none can be one a less privileged role planted on the search_path.
CREATE VIEW @extschema@.snowflake_clashes AS
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

-- Warns of a clash when it starts, as the claim that makes it is written: by snowflake_claim()
-- on this server, or by a logical replication apply worker bringing another server's claim
-- (ENABLE ALWAYS below: apply workers run with session_replication_role = replica, which skips
-- ordinary triggers). Once per clash, not at every renewal: snowflake_clashes lists it for as
-- long as it lasts. A WARNING, not an error: an error would stop the subscription, and with it
-- the rows of servers that do not clash.
--
-- It runs as whoever writes a claim (the claims worker and apply workers are superusers): its
-- search_path holds pg_catalog alone (pg_temp last, where PostgreSQL never looks for functions
-- or operators), and every function, operator and table it names is named by schema anyway.
CREATE FUNCTION @extschema@.snowflake_claims_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $check$
DECLARE
    other record;
BEGIN
    FOR other IN
        SELECT o.* FROM @extschema@.snowflake_claims o
         WHERE o.worker_id OPERATOR(pg_catalog.=) NEW.worker_id
           AND o.layout OPERATOR(pg_catalog.=) NEW.layout
           AND o.system_identifier OPERATOR(pg_catalog.<>) NEW.system_identifier
           AND o.since OPERATOR(pg_catalog.<) NEW.expires
           AND NEW.since OPERATOR(pg_catalog.<) o.expires
           AND (TG_OP OPERATOR(pg_catalog.=) 'INSERT'
                OR NOT (o.since OPERATOR(pg_catalog.<) OLD.expires
                        AND OLD.since OPERATOR(pg_catalog.<) o.expires))
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

CREATE TRIGGER snowflake_claims_check AFTER INSERT OR UPDATE ON @extschema@.snowflake_claims
FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_claims_check();
ALTER TABLE @extschema@.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;

-- Claims name servers (host names, system identifiers): readable by monitoring, written by
-- superusers (and the apply workers of their subscriptions) only.
REVOKE ALL ON @extschema@.snowflake_claims, @extschema@.snowflake_clashes FROM PUBLIC;
GRANT SELECT ON @extschema@.snowflake_claims, @extschema@.snowflake_clashes TO pg_monitor;
REVOKE ALL ON FUNCTION @extschema@.snowflake_claim() FROM PUBLIC;
