-- The schema `snowflake`, the extension's own, owned by the superuser who runs this script: it
-- holds every object that code running with other roles' rights reaches by name (the claims
-- table and its trigger, the clashes view, the registry's tables and lease function). Only its
-- owner can rename it, drop it or create objects in it, so `snowflake.x` names the same object
-- from lookup to use. The schema of `CREATE EXTENSION ... SCHEMA s` (public by default) keeps
-- what applications call; on 15 and later the database owner owns `public` and can rename it at
-- any moment, so nothing privileged ever reaches an object through that schema's name (see
-- docs/security.md).
--
-- A schema of that name that someone else made first is refused, never adopted: whoever owns it
-- could rename it, or plant objects in it, under a superuser's feet. (`CREATE EXTENSION
-- pg_snowflake SCHEMA snowflake` into a schema a superuser owns puts everything in it.)
-- mutant: own_schema_owner
-- mutant: own_schema_taken
DO $schema$
DECLARE
    found_owner pg_catalog.oid;
BEGIN
    SELECT n.nspowner INTO found_owner FROM pg_catalog.pg_namespace n
     WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake';
    IF NOT FOUND THEN
        CREATE SCHEMA snowflake;
    ELSIF '@extschema@' OPERATOR(pg_catalog.<>) 'snowflake'
          OR NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                   WHERE r.oid OPERATOR(pg_catalog.=) found_owner) THEN
        RAISE EXCEPTION 'schema "snowflake" already exists'
            USING ERRCODE = '42P06',
                  DETAIL = pg_catalog.format('pg_snowflake keeps what its workers, triggers and '
                      'SECURITY DEFINER functions use in a schema of its own named snowflake, '
                      'which it makes itself, owned by the superuser who creates it; one exists '
                      'already, owned by %s.',
                      found_owner::pg_catalog.regrole),
                  HINT = 'Rename or drop the existing schema snowflake, then create the extension again (or, if a superuser made it, create the extension in it: CREATE EXTENSION pg_snowflake SCHEMA snowflake).';
    END IF;
END
$schema$;
-- Any role may look into it (monitoring reads the claims, members call the lease function);
-- each object's privileges say who may use it (privileges.sql, registry.sql).
GRANT USAGE ON SCHEMA snowflake TO PUBLIC;
