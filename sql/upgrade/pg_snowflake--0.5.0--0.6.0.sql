\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.6.0'" to load this file. \quit
-- 0.6.0: the objects this release changes are listed below (see CHANGELOG.md). The privileges
-- are set again and every object is checked to be in one of the extension's two schemas, as
-- after every update.
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
\ir ../pin_schema.sql
-- The claims trigger warns of a clash at most three times a minute for each pair of clusters,
-- counted in shared memory by snowflake_clash_warning_due(), and of two servers of one cluster
-- (a copy, a split brain) as a clash of their own.
\ir ../clash_log.sql
-- A claim names its place (host and directory): a copy of a data directory, which has its
-- original's system identifier, claims apart, and the two clash.
ALTER TABLE snowflake.snowflake_claims
    ADD COLUMN place text NOT NULL DEFAULT '',
    DROP CONSTRAINT snowflake_claims_pkey,
    ADD PRIMARY KEY (system_identifier, worker_id, layout, place);
\ir-replace ../claims_check.sql
-- Which cluster each Citus node speaks for, kept across restarts of the claims worker.
\ir ../claims_nodes.sql
-- Claims looked up by worker id.
\ir ../claims_index.sql
-- A claim that arrives by logical replication for a key this table holds updates that row.
\ir ../claims_merge.sql
\ir-replace ../clashes.sql
-- The registry knows which start of a cluster holds a lease (its place and secret), so that a
-- copy of a data directory never shares its original's worker id: snowflake_registry_hold() for
-- members of 0.6.0; snowflake_registry_lease() of 0.5.0 becomes its wrapper, for members of
-- 0.5.0 and 0.4.0 during a rolling upgrade. Whoever may call the old one may call the new one.
ALTER TABLE snowflake.snowflake_registry
    ADD COLUMN place text, ADD COLUMN secret text, ADD COLUMN copy_of text,
    ADD COLUMN resumed_above_ms bigint;
DROP FUNCTION snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint);
\ir-replace ../registry_lease.sql
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_hold(text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_decide(boolean, text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint, text, text, text) FROM PUBLIC;
DO $grants$
DECLARE
    grant_ record;
BEGIN
    -- Default privileges may have granted the new functions to someone at creation.
    FOR grant_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS object,
               a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   'snowflake.snowflake_registry_hold(text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text)'::pg_catalog.regprocedure,
                   'snowflake.snowflake_registry_decide(boolean, text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text)'::pg_catalog.regprocedure,
                   'snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint, text, text, text)'::pg_catalog.regprocedure])
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
            CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
            END);
    END LOOP;
    FOR grant_ IN
        SELECT DISTINCT a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=)
               'snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer, integer, boolean, integer, bigint, text, bigint, bigint)'::pg_catalog.regprocedure
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
           AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
    LOOP
        EXECUTE pg_catalog.format(
            'GRANT EXECUTE ON FUNCTION snowflake.snowflake_registry_hold(text, text, bigint, '
            'integer, integer, integer, integer, boolean, integer, integer, bigint, text, '
            'bigint, bigint, text, text, text) TO %s',
            CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
            END);
    END LOOP;
END
$grants$;
\ir ../privileges.sql
