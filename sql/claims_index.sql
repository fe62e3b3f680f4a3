-- The clash trigger (claims_check.sql) and snowflake_clashes look claims up by worker id, and
-- the primary key leads with the cluster: without this index each written claim read the whole
-- table. A Citus node's claims worker writes up to 64 claims of each node a gathering, so on
-- 100 nodes a gathering read 6,400 rows for each of its 6,400 writes.
CREATE INDEX snowflake_claims_worker_id ON snowflake.snowflake_claims (worker_id);
