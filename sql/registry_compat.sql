-- Members of pg_snowflake 0.3.0 during a rolling upgrade (the registry first, then the members):
-- they call snowflake_registry_lease() in the extension's schema with their layout's name and
-- learn what happened from the message of an error. These two functions answer them as 0.3.0's
-- registry did, through the registry of this release.

-- The fields of a layout as pg_snowflake 0.3.0 named it (its Layout::describe): a preset's name,
-- or `custom (41 bits of 1 ms since 2010-11-04T01:42:54.657Z, 10 worker bits, 12 sequence bits)`.
-- All NULL for any other text. The presets' fields are those of core/src/layout.rs (a #[pg_test]
-- checks that they agree).
CREATE FUNCTION snowflake.snowflake_registry_layout_fields(layout text,
    OUT epoch_ms bigint, OUT unit_ms integer, OUT time_bits integer, OUT worker_bits integer,
    OUT sequence_bits integer, OUT worker_last boolean)
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fields$
#variable_conflict use_variable
DECLARE
    m text[];
BEGIN
    CASE layout
        WHEN 'twitter' THEN
            SELECT 1288834974657, 1, 41, 10, 12, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'discord' THEN
            SELECT 1420070400000, 1, 41, 10, 12, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'sonyflake' THEN
            SELECT 1409529600000, 10, 39, 16, 8, true
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'instagram' THEN
            SELECT 1314220021721, 1, 41, 13, 10, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'js53' THEN
            SELECT 1735689600000, 10, 38, 6, 9, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        ELSE
            m := pg_catalog.regexp_match(layout,
                '^custom \((\d{1,2}) bits of (\d{1,4}) ms since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z), (\d{1,2}) worker bits, (\d{1,2}) sequence bits\)$');
            IF m IS NOT NULL THEN
                time_bits := m[1]::pg_catalog.int4;
                unit_ms := m[2]::pg_catalog.int4;
                epoch_ms := pg_catalog.round(pg_catalog.date_part('epoch',
                                m[3]::pg_catalog.timestamptz) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8;
                worker_bits := m[4]::pg_catalog.int4;
                sequence_bits := m[5]::pg_catalog.int4;
                worker_last := false;
            END IF;
    END CASE;
END
$fields$;

-- 0.3.0's signature and answers: a lease as four columns; a held worker id and a full namespace
-- as errors 55000 whose messages hold the words its members look for ("leased to another
-- cluster", "is free"); a namespace of another layout as an error 55000 that says so. Runs as
-- its owner, so that the members' role needs EXECUTE on this function only, as it did.
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
AS $compat$
#variable_conflict use_variable
DECLARE
    f record;
    a record;
BEGIN
    f := snowflake.snowflake_registry_layout_fields(layout);
    IF f.epoch_ms IS NULL
       OR ((1::pg_catalog.int8 OPERATOR(pg_catalog.<<) f.worker_bits) OPERATOR(pg_catalog.-) 1)
          OPERATOR(pg_catalog.<>) max_worker_id THEN
        RAISE EXCEPTION 'layout "%" is not one that pg_snowflake 0.3.0 describes', layout
            USING ERRCODE = '22023',
                  HINT = 'Update this member to the registry''s release of pg_snowflake.';
    END IF;
    SELECT l.* INTO STRICT a FROM snowflake.snowflake_registry_lease(namespace,
        pg_catalog.split_part(layout, ' ', 1), f.epoch_ms, f.unit_ms, f.time_bits,
        f.worker_bits, f.sequence_bits, f.worker_last, wanted, system_identifier, node_name,
        lease_ms, covered_until_ms) l;
    CASE a.outcome
        WHEN 'granted' THEN
            RETURN QUERY SELECT a.worker_id, a.expires, a.start_above_ms, a.recorded_until_ms;
        WHEN 'held' THEN
            RAISE EXCEPTION 'worker id % of namespace "%" is leased to another cluster',
                    wanted, namespace
                USING ERRCODE = '55000',
                      HINT = 'Give this server another snowflake.worker_id, or leave it unset to lease a free one.';
        WHEN 'full' THEN
            RAISE EXCEPTION 'no worker id of namespace "%" is free', namespace
                USING ERRCODE = '55000',
                      HINT = 'Use another snowflake.registry_namespace, a layout with more worker bits, or wait for a lease to run out.';
        ELSE
            RAISE EXCEPTION 'namespace "%" makes ids of layout %, not of layout %', namespace,
                    a.namespace_layout, layout
                USING ERRCODE = '55000',
                      HINT = 'Give the servers of each layout a namespace of their own (snowflake.registry_namespace).';
    END CASE;
END
$compat$;
COMMENT ON FUNCTION @extschema@.snowflake_registry_lease(text, text, integer, integer, bigint, text, bigint, bigint) IS
    'Leases a worker id to a member of pg_snowflake 0.3.0 (members of later releases call snowflake.snowflake_registry_lease)';

-- Who may call them: only those the administrator grants. Taken back from everyone else,
-- whatever default privileges granted, as they are created (an update from 0.3.0 grants the
-- members' roles again). The old signature lives in the extension's schema, found here by its
-- membership in the extension; the script pinned that schema's name (pin_schema.sql).
DO $privileges$
DECLARE
    grant_ record;
BEGIN
    FOR grant_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS object,
               a.grantee, p.proowner AS owner
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
          LEFT JOIN LATERAL pg_catalog.aclexplode(p.proacl) a ON true
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                  WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')
           AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND ((p.proname OPERATOR(pg_catalog.=) 'snowflake_registry_lease'
                 AND p.pronargs OPERATOR(pg_catalog.=) 8)
                OR p.proname OPERATOR(pg_catalog.=) 'snowflake_registry_layout_fields')
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', grant_.object);
        IF grant_.grantee OPERATOR(pg_catalog.<>) ALL (ARRAY[0, grant_.owner]) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
                                      grant_.grantee::pg_catalog.regrole);
        END IF;
    END LOOP;
END
$privileges$;
