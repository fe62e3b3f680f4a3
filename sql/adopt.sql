-- snowflake_adopt(tbl, col): switches a bigserial or identity column to DEFAULT snowflake_next()
-- in the caller's transaction, and moves the generator above the column's largest value (see
-- src/adopt.rs, where it is written: pgrx cannot declare an argument of type name). It runs with
-- the caller's rights; its search_path is pg_catalog alone (pg_temp last), and row_security is
-- off, so that a row-level security policy that would hide some of the column's values from the
-- caller makes it fail instead of advancing past too small a value.
CREATE FUNCTION @extschema@.snowflake_adopt(tbl regclass, col name) RETURNS void
LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS 'MODULE_PATHNAME', 'snowflake_adopt_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_adopt(regclass, name) IS
    'Switches a bigserial or identity column to DEFAULT snowflake_next(), above its largest value';
