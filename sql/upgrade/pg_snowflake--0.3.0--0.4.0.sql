\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.4.0'" to load this file. \quit
-- 0.4.0: what code with other roles' rights reaches lives in a schema of the extension's own,
-- `snowflake`, owned by the superuser who runs the script (see docs/security.md).
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
\ir ../privileges.sql
