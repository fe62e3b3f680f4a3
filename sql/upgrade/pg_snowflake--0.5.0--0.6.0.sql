\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.6.0'" to load this file. \quit
-- 0.6.0: the objects this release changes are listed below (see CHANGELOG.md). The privileges
-- are set again and every object is checked to be in one of the extension's two schemas, as
-- after every update.
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
\ir ../pin_schema.sql
-- The claims trigger warns of a clash at most three times a minute for each pair of clusters,
-- counted in shared memory by snowflake_clash_warning_due().
\ir ../clash_log.sql
\ir-replace ../claims_check.sql
-- Which cluster each Citus node speaks for, kept across restarts of the claims worker.
\ir ../claims_nodes.sql
-- Claims looked up by worker id.
\ir ../claims_index.sql
\ir ../privileges.sql
