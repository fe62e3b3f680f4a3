-- Pins the extension's schema for the rest of this script. The script names it as
-- @extschema@, a name, and its owner (on 15 and later the database owner owns `public`) can rename
-- it and give the name to a schema of theirs, with look-alikes in it, between two statements:
-- CREATEs and GRANTs would then reach their objects. So the first statement locks the schema's
-- row in pg_namespace, found by the OID that CREATE EXTENSION (or ALTER EXTENSION) recorded, and
-- checks that it still bears the name the script uses: a rename waits for that lock until the
-- script's transaction ends (on 16 and later nothing else makes it wait), and while the schema
-- has the name, no other schema can take it. A rename that came first fails the script, and the
-- whole CREATE EXTENSION or ALTER EXTENSION with it: run it again.
-- mutant: pin_schema
DO $pin$
DECLARE
    pinned pg_catalog.name;
BEGIN
    SELECT n.nspname INTO pinned
      FROM pg_catalog.pg_namespace n
     WHERE n.oid OPERATOR(pg_catalog.=) (
           SELECT e.extnamespace FROM pg_catalog.pg_extension e
            WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')
       FOR UPDATE;
    IF pinned IS NULL
       OR pg_catalog.quote_ident(pinned) OPERATOR(pg_catalog.<>) '@extschema@' THEN
        RAISE EXCEPTION 'the schema of pg_snowflake was renamed while its script started'
            USING ERRCODE = '55000',
                  DETAIL = pg_catalog.format('The script names it %s; it is now named %s.',
                                             '@extschema@', pinned),
                  HINT = 'Find out who renames it, then run the command again.';
    END IF;
END
$pin$;
