-- snowflake_adopt(tbl, col): switches a bigserial or identity column to DEFAULT snowflake_next()
-- in the caller's transaction, and moves the generator above the column's largest value. DDL
-- orchestration, so PL/pgSQL: every step is an ordinary ALTER TABLE with its usual locks and
-- checks, and an error anywhere rolls all of it back. (The generator's floor cannot roll back;
-- it only ever moves up, which is harmless.) It runs with the caller's rights, and its
-- search_path is pg_catalog alone (pg_temp last): nothing a role created elsewhere is found.
-- The extension's own functions are found through its schema's OID when it runs, not by a
-- schema name fixed at install: the schema's owner could rename it and plant functions of the
-- same names under the old one, which a superuser adopting a table would then call (and bind
-- as the column's default).
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
    ext name;
BEGIN
    SELECT n.nspname INTO ext FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_snowflake';
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
    EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %I.snowflake_next()', tbl, col, ext);

    EXECUTE format('SELECT max(%I) FROM %s', col, tbl) INTO top;
    IF top IS NOT NULL THEN
        EXECUTE format('SELECT %I.snowflake_advance_past($1)', ext) USING top;
    END IF;
    RAISE NOTICE 'column % of % now takes its ids from snowflake_next() (%)', quote_ident(col), tbl, changed
        USING DETAIL = CASE WHEN top IS NULL THEN 'The table is empty.'
                       ELSE format('Every new id is above %s, the largest one in the column.', top) END;
END
$adopt$;
COMMENT ON FUNCTION @extschema@.snowflake_adopt(regclass, name) IS
    'Switches a bigserial or identity column to DEFAULT snowflake_next(), above its largest value';
