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
