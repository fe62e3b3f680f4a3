-- Who may call and read what (docs/security.md), and where everything is. Run at the end of the
-- install script and of every upgrade script, so that a database ends with exactly these
-- privileges whatever path it took.
--
-- Every object is found by its membership in the extension (pg_depend, by OID), never through a
-- schema's name: the owner of the extension's schema (on 15 and later the database owner owns
-- `public`) can rename it while this script runs, and a statement that names `public` would then
-- reach objects of theirs. GRANT and REVOKE take names (printed here from the OIDs): by now this
-- transaction has created or replaced objects in the extension's schema, and PostgreSQL lets
-- nobody rename a schema while another transaction that created objects in it is open, so the
-- names lead where the OIDs do. What a rename before that could do, send the script's first
-- CREATEs into another schema, is checked at the end, by OID: every object of the extension must
-- be in one of its schemas, or the script fails, and with it the whole CREATE EXTENSION or ALTER
-- EXTENSION.
--
-- First every grant of the administrators' objects to anyone but their owner is taken back:
-- default privileges (ALTER DEFAULT PRIVILEGES ... GRANT EXECUTE ON FUNCTIONS TO app, or ON
-- TABLES) would otherwise have given them to roles at CREATE EXTENSION, and a REVOKE FROM PUBLIC
-- does not take such a grant back. Then what is meant to be granted is granted. An administrator
-- may grant more afterwards; snowflake_reset_layout() and snowflake_claim() check for a superuser
-- themselves, whatever is granted. (The registry's functions and tables keep the grants the
-- administrator gave the members: registry_lease.sql sets them at creation only.)
-- mutant: default_privileges
-- mutant: own_schema_taken
-- mutant: scripts_check
DO $privileges$
DECLARE
    ext pg_catalog.oid;
    home pg_catalog.oid;
    own pg_catalog.oid;
    object_ record;
    grant_ record;
    stray text;
BEGIN
    SELECT e.oid, e.extnamespace INTO ext, home FROM pg_catalog.pg_extension e
     WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake';
    SELECT n.oid INTO own FROM pg_catalog.pg_namespace n
      JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake' AND r.rolsuper
       AND (n.oid OPERATOR(pg_catalog.=) home OR EXISTS (
            SELECT FROM pg_catalog.pg_depend d
             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
               AND d.objid OPERATOR(pg_catalog.=) n.oid
               AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=) ext
               AND d.deptype OPERATOR(pg_catalog.=) 'e'));
    IF own IS NULL THEN
        RAISE EXCEPTION 'the schema snowflake of pg_snowflake is missing or not owned by a superuser'
            USING ERRCODE = '42501',
                  HINT = 'Was it renamed while the script ran? Run the script again.';
    END IF;

    -- The administrators' functions and the claims.
    FOR object_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS name,
               p.proname AS short, p.proacl AS acl, p.proowner AS owner
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_stats',
                   'snowflake_advance_past', 'snowflake_reset_layout', 'snowflake_claim',
                   'snowflake_adopt', 'snowflake_claims_check', 'snowflake_claims_merge',
                   'snowflake_clash_warning_due']::pg_catalog.name[])
        UNION ALL
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass), c.relname, c.relacl,
               c.relowner
          FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) c.oid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND c.relname OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_claims',
                   'snowflake_clashes', 'snowflake_claims_nodes']::pg_catalog.name[])
    LOOP
        FOR grant_ IN SELECT DISTINCT a.grantee FROM pg_catalog.aclexplode(object_.acl) a
                       WHERE a.grantee OPERATOR(pg_catalog.<>) object_.owner LOOP
            -- regrole prints a role's name quoted where it needs to be; 0 is PUBLIC.
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', object_.name,
                CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
                END);
        END LOOP;
        -- A function nobody was granted anything on has PUBLIC's EXECUTE all the same.
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', object_.name);
        -- Claims name servers (host names, system identifiers): readable by monitoring,
        -- written by superusers (and the apply workers of their subscriptions) only.
        IF object_.short OPERATOR(pg_catalog.=) 'snowflake_stats' THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON %s TO pg_monitor', object_.name);
        ELSIF object_.short OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_claims',
                  'snowflake_clashes', 'snowflake_claims_nodes']::pg_catalog.name[]) THEN
            EXECUTE pg_catalog.format('GRANT SELECT ON %s TO pg_monitor', object_.name);
        END IF;
    END LOOP;

    -- Every object of the extension in its schema or in a schema of its own (one it created,
    -- that a superuser owns: `snowflake`, and in the test build `tests`): a CREATE that a rename
    -- sent into another schema would leave it where another role may replace it.
    SELECT pg_catalog.string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, 0), ', ')
      INTO stray
      FROM pg_catalog.pg_depend d
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
       AND COALESCE(
             (SELECT p.pronamespace FROM pg_catalog.pg_proc p
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                 AND p.oid OPERATOR(pg_catalog.=) d.objid),
             (SELECT c.relnamespace FROM pg_catalog.pg_class c
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                 AND c.oid OPERATOR(pg_catalog.=) d.objid),
             (SELECT t.typnamespace FROM pg_catalog.pg_type t
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
                 AND t.oid OPERATOR(pg_catalog.=) d.objid),
             home) OPERATOR(pg_catalog.<>) ALL (ARRAY[home] OPERATOR(pg_catalog.||) ARRAY(
                 SELECT n.oid FROM pg_catalog.pg_namespace n
                   JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                   JOIN pg_catalog.pg_depend m ON m.objid OPERATOR(pg_catalog.=) n.oid
                  WHERE m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                    AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                    AND m.refobjid OPERATOR(pg_catalog.=) ext
                    AND m.deptype OPERATOR(pg_catalog.=) 'e'
                    AND r.rolsuper));
    IF stray IS NOT NULL THEN
        RAISE EXCEPTION 'pg_snowflake''s objects are outside its schemas: %', stray
            USING ERRCODE = '42501',
                  HINT = 'Was a schema renamed while the script ran? Run the script again.';
    END IF;
END
$privileges$;
