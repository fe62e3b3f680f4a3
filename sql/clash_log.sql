-- How often the claims trigger (claims_check.sql) may warn of a clash: NULL to leave this
-- warning out, else how many warnings of the two clusters were left out since the last one
-- logged (src/claims/clash_log.rs, which counts them in shared memory). In the schema
-- `snowflake`, where only a superuser creates functions: the trigger runs with the rights of
-- whoever writes a claim and calls it by this name. It checks for a superuser itself, whatever
-- is granted (privileges.sql revokes it from PUBLIC).
CREATE FUNCTION snowflake.snowflake_clash_warning_due(a bigint, b bigint) RETURNS bigint
VOLATILE STRICT PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_clash_warning_due_wrapper';
