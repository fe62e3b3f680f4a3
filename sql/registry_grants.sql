-- Who may lease is the administrator's choice (GRANT EXECUTE ON FUNCTION
-- snowflake.snowflake_registry_hold TO the members' role): nobody else, whatever default
-- privileges granted at creation. Monitoring may read which cluster holds which worker id. At
-- CREATE EXTENSION only: not in privileges.sql, which every upgrade script runs, nor in an
-- upgrade (it would take the members' grants back, and they would stop leasing).
DO $privileges$
DECLARE
    grant_ record;
BEGIN
    FOR grant_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS object,
               a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   'snowflake.snowflake_registry_hold(text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text)'::pg_catalog.regprocedure,
                   'snowflake.snowflake_registry_decide(boolean, text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text)'::pg_catalog.regprocedure,
                   'snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer, integer, boolean, integer, bigint, text, bigint, bigint)'::pg_catalog.regprocedure,
                   'snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint, text, text, text)'::pg_catalog.regprocedure])
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass), a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   'snowflake.snowflake_registry'::pg_catalog.regclass,
                   'snowflake.snowflake_registry_namespaces'::pg_catalog.regclass])
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
            CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
            END);
    END LOOP;
END
$privileges$;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_hold(text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_decide(boolean, text, text, bigint, integer, integer, integer, integer, boolean, integer, integer, bigint, text, bigint, bigint, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer, integer, boolean, integer, bigint, text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint, text, text, text) FROM PUBLIC;
REVOKE ALL ON snowflake.snowflake_registry, snowflake.snowflake_registry_namespaces FROM PUBLIC;
GRANT SELECT ON snowflake.snowflake_registry, snowflake.snowflake_registry_namespaces TO pg_monitor;
