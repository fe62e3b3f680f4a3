\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.5.0'" to load this file. \quit
-- 0.5.0: no SQL object changed; the library did (see CHANGELOG.md). The privileges are set again
-- and every object is checked to be in one of the extension's two schemas, as after every
-- update.
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
\ir ../pin_schema.sql
\ir ../privileges.sql
