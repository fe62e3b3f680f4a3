-- The worker-id registry (see src/registry/ and docs/many-servers.md), in whichever database the
-- fleet's servers reach through snowflake.registry. One row per worker id of a namespace and
-- layout, kept for good: `system_identifier` and `node_name` name its last holder, which holds
-- it until `expires`; `covered_until_ms` (Unix ms) is the time every id ever made with it lies
-- below, as its holders reported before using it; `start_above_ms` is the coverage of the
-- previous holder that the current one starts above. Deleting a row forgets that coverage:
-- the next holder of that worker id could then repeat ids, so nothing here ever deletes one.
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
-- (src/registry/worker.rs). With `wanted` NULL any free worker id of the namespace and layout,
-- the lowest first; else exactly that one. The primary key decides between clusters asking at
-- once: an INSERT of a new worker id waits for the other's, and the update of an expired one
-- takes its row lock and checks the expiry again, so a worker id is never granted twice.
--
-- Runs with the caller's rights (the role in snowflake.registry needs SELECT, INSERT and UPDATE
-- on the table), its search_path holds only pg_catalog, and it names everything by schema.
CREATE FUNCTION @extschema@.snowflake_registry_lease(
    namespace text,
    layout text,
    max_worker_id integer,
    wanted integer,
    system_identifier bigint,
    node_name text,
    lease_ms bigint,
    covered_until_ms bigint)
RETURNS TABLE (worker_id integer, expires timestamptz, start_above_ms bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $lease$
DECLARE
    r @extschema@.snowflake_registry;
    candidate integer;
    lease_for pg_catalog.interval;
BEGIN
    IF namespace IS NULL OR layout IS NULL OR max_worker_id IS NULL
       OR system_identifier IS NULL OR node_name IS NULL OR lease_ms IS NULL
       OR covered_until_ms IS NULL THEN
        RAISE EXCEPTION 'only the worker id may be null'
            USING ERRCODE = '22004',
                  HINT = 'snowflake_registry_lease() is called by the registry worker of each member.';
    END IF;
    IF lease_ms OPERATOR(pg_catalog.<) 1000 OR max_worker_id OPERATOR(pg_catalog.<) 0
       OR (wanted IS NOT NULL AND (wanted OPERATOR(pg_catalog.<) 0
                                   OR wanted OPERATOR(pg_catalog.>) max_worker_id)) THEN
        RAISE EXCEPTION 'worker id % or lease of % ms is out of range', wanted, lease_ms
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('Worker ids run from 0 to %s; leases last 1 s or more.',
                                           max_worker_id);
    END IF;
    lease_for := pg_catalog.make_interval(secs => lease_ms::pg_catalog.float8
                                                  OPERATOR(pg_catalog./) 1000);

    -- This cluster's lease, renewed (also one that ran out while no other cluster took it).
    SELECT g.* INTO r FROM @extschema@.snowflake_registry g
     WHERE g.namespace OPERATOR(pg_catalog.=) snowflake_registry_lease.namespace
       AND g.layout OPERATOR(pg_catalog.=) snowflake_registry_lease.layout
       AND g.system_identifier OPERATOR(pg_catalog.=) snowflake_registry_lease.system_identifier
       AND g.worker_id OPERATOR(pg_catalog.<=) max_worker_id
       AND (wanted IS NULL OR g.worker_id OPERATOR(pg_catalog.=) wanted)
     ORDER BY g.expires DESC
     LIMIT 1
       FOR UPDATE;
    IF FOUND THEN
        UPDATE @extschema@.snowflake_registry g
           SET node_name = snowflake_registry_lease.node_name,
               renewed = pg_catalog.now(),
               expires = pg_catalog.now() OPERATOR(pg_catalog.+) lease_for,
               covered_until_ms = GREATEST(g.covered_until_ms,
                                                      snowflake_registry_lease.covered_until_ms)
         WHERE g.namespace OPERATOR(pg_catalog.=) r.namespace
           AND g.layout OPERATOR(pg_catalog.=) r.layout
           AND g.worker_id OPERATOR(pg_catalog.=) r.worker_id
        RETURNING g.* INTO r;
        RETURN QUERY SELECT r.worker_id, r.expires, r.start_above_ms;
        RETURN;
    END IF;

    -- A worker id of its own: one never leased (the lowest first), else the one whose lease
    -- ran out longest ago (a server that was down briefly may still come back for its own),
    -- whose next holder starts above everything its previous holders covered.
    FOR candidate IN
        SELECT c.id
          FROM pg_catalog.generate_series(0, max_worker_id) c(id)
          LEFT JOIN @extschema@.snowflake_registry g
            ON g.namespace OPERATOR(pg_catalog.=) snowflake_registry_lease.namespace
           AND g.layout OPERATOR(pg_catalog.=) snowflake_registry_lease.layout
           AND g.worker_id OPERATOR(pg_catalog.=) c.id
         WHERE (wanted IS NULL OR c.id OPERATOR(pg_catalog.=) wanted)
           AND (g.expires IS NULL OR g.expires OPERATOR(pg_catalog.<) pg_catalog.now())
         ORDER BY g.expires NULLS FIRST, c.id
    LOOP
        INSERT INTO @extschema@.snowflake_registry AS g
        VALUES (snowflake_registry_lease.namespace, snowflake_registry_lease.layout, candidate,
                snowflake_registry_lease.system_identifier, snowflake_registry_lease.node_name,
                pg_catalog.now(), pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) lease_for,
                snowflake_registry_lease.covered_until_ms, 0)
        ON CONFLICT ON CONSTRAINT snowflake_registry_pkey DO UPDATE
           SET system_identifier = excluded.system_identifier,
               node_name = excluded.node_name,
               since = excluded.since,
               renewed = excluded.renewed,
               expires = excluded.expires,
               start_above_ms = g.covered_until_ms,
               covered_until_ms = GREATEST(g.covered_until_ms, excluded.covered_until_ms)
         WHERE g.expires OPERATOR(pg_catalog.<) pg_catalog.now()
        RETURNING g.* INTO r;
        IF FOUND THEN
            RETURN QUERY SELECT r.worker_id, r.expires, r.start_above_ms;
            RETURN;
        END IF;
    END LOOP;

    IF wanted IS NOT NULL THEN
        SELECT g.* INTO r FROM @extschema@.snowflake_registry g
         WHERE g.namespace OPERATOR(pg_catalog.=) snowflake_registry_lease.namespace
           AND g.layout OPERATOR(pg_catalog.=) snowflake_registry_lease.layout
           AND g.worker_id OPERATOR(pg_catalog.=) wanted;
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
