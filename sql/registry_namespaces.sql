-- The worker-id registry (see src/registry/ and docs/many-servers.md), in whichever database the
-- fleet's servers reach through snowflake.registry. A namespace is one id space: the servers
-- whose ids meet (in one table, or at one subscriber) lease from one namespace, and all of them
-- make ids of one layout. Its layout is known by what decides its ids (epoch, time unit, field
-- widths and order), never by its name: `twitter` and a custom layout of Twitter's epoch and
-- widths are the same layout, `discord` (Twitter's widths, another epoch) is another. The first
-- member of a namespace decides it; a member of another layout is refused, whatever the race.
-- A namespace's row is kept for good, as its worker ids' rows are.
CREATE TABLE snowflake.snowflake_registry_namespaces (
    namespace text PRIMARY KEY,
    -- How its first member named the layout, for messages.
    layout text NOT NULL,
    epoch_ms bigint NOT NULL,
    unit_ms integer NOT NULL,
    time_bits integer NOT NULL,
    worker_bits integer NOT NULL,
    sequence_bits integer NOT NULL,
    -- The worker id in the lowest bits (Sonyflake's), else between the time and the sequence.
    worker_last boolean NOT NULL,
    since timestamptz NOT NULL
);

-- pg_dump keeps the rows (see registry_table.sql).
SELECT pg_catalog.pg_extension_config_dump('snowflake.snowflake_registry_namespaces', '');
