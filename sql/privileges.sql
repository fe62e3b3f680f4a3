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
