\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.3.0'" to load this file. \quit
-- 0.3.0: statements that run with other roles' rights name every function and operator by
-- schema (the claims trigger, which also gets search_path = pg_catalog, pg_temp; the clashes
-- view; snowflake_claim(), which checks for a superuser and gets the same search_path), and
-- the privileges are set again whatever default privileges granted; the claims trigger and
-- snowflake_adopt() find the extension's objects by OID, not by a schema name fixed at install
-- (the schema's owner could rename it); snowflake_compose() and the worker-id registry (snowflake_registry, snowflake_registry_lease()) are new.
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
\ir-replace ../claims_check.sql
\ir-replace ../adopt.sql
\ir-replace ../clashes.sql
\generated-replace snowflake_claim
-- New in 0.3.0.
\generated snowflake_compose
\ir ../registry.sql
\ir ../privileges.sql
