-- One row per worker id of a namespace (registry_namespaces.sql), kept for good:
-- `system_identifier` and `node_name` name its last holder, which holds it until `expires`;
-- `covered_until_ms` (Unix ms) is the time every id ever made with it lies below, as its holders
-- recorded before using it; `start_above_ms` is the coverage of the previous holders that the
-- current one starts above. Deleting a row forgets that coverage: the next holder of that worker
-- id could then repeat ids, so nothing here ever deletes one. A row with
-- `expires = 'infinity'` reserves a worker id for a server outside the registry.
-- Which start holds it (0.6.0, src/registry/identity.rs): `place`, a hash of the hash of where
-- its data directory runs (boot, host, directory), `secret`, a hash of the secret it presents at
-- its next renewal, both NULL for a member of 0.5.0 or 0.4.0, and `copy_of`, the other start of
-- its cluster that held the worker id it asked for, when one did (a copy, a split brain).
-- `resumed_above_ms`, for a start that resumed its data directory's lease in place, is the
-- coverage the starts before it were granted: a lease given back never records less (whoever
-- knows a place can resume its lease, and must not lower the coverage of the start it cut off).
-- mutant: registry_negative
CREATE TABLE snowflake.snowflake_registry (
    namespace text NOT NULL,
    worker_id integer NOT NULL CHECK (worker_id OPERATOR(pg_catalog.>=) 0),
    system_identifier bigint NOT NULL,
    node_name text NOT NULL,
    since timestamptz NOT NULL,
    renewed timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    covered_until_ms bigint NOT NULL CHECK (covered_until_ms OPERATOR(pg_catalog.>=) 0),
    start_above_ms bigint NOT NULL CHECK (start_above_ms OPERATOR(pg_catalog.>=) 0),
    PRIMARY KEY (namespace, worker_id),
    place text,
    secret text,
    copy_of text,
    resumed_above_ms bigint
);

-- pg_dump keeps the rows (the coverage must survive a dump and restore of the registry).
SELECT pg_catalog.pg_extension_config_dump('snowflake.snowflake_registry', '');
