-- Which cluster each Citus node speaks for, as this node's claims worker learned it
-- (src/claims/citus.rs): the first node to answer for a cluster keeps it, and a node's cluster
-- changes at most once an hour. Kept here, not in the worker's memory, so that a restart of the
-- worker (or of the server) forgets nothing: 0.6.0's review restarted it and a forging node took
-- another node's cluster. `node_id` is pg_dist_node.nodeid, which a node keeps when its host or
-- port changes; a node removed from the Citus cluster loses its row.
CREATE TABLE snowflake.snowflake_claims_nodes (
    node_id integer PRIMARY KEY,
    system_identifier bigint NOT NULL,
    since timestamptz NOT NULL
);
