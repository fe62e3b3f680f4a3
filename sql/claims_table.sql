-- Worker-id claims (see claims.rs). One row per cluster (system identifier), worker id, layout
-- and place (0.6.0: a copy of a data directory has its original's system identifier, and the
-- place, host and directory, tells them apart; '' in a claim of an earlier release): the server
-- generated ids with that worker id from `since` and may go on until
-- `expires`, which each renewal moves on. Publish this table beside your data and the claims of
-- every node meet at the subscriber, where the trigger (claims_check.sql) warns of a shared
-- worker id and snowflake_clashes (clashes.sql) lists every one. In the extension's own schema
-- (schema.sql): the claims worker and apply workers write it as superusers.
CREATE TABLE snowflake.snowflake_claims (
    system_identifier bigint NOT NULL,
    worker_id integer NOT NULL,
    layout text NOT NULL,
    node_name text NOT NULL,
    since timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    place text NOT NULL DEFAULT '',
    PRIMARY KEY (system_identifier, worker_id, layout, place)
);
