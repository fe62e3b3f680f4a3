-- Worker-id claims (see claims.rs). One row per cluster (system identifier), worker id and
-- layout: the cluster generated ids with that worker id from `since` and may go on until
-- `expires`, which each renewal moves on. Publish this table beside your data and the claims of
-- every node meet at the subscriber, where the trigger warns of a shared worker id and
-- snowflake_clashes lists every one.
CREATE TABLE snowflake_claims (
    system_identifier bigint NOT NULL,
    worker_id integer NOT NULL,
    layout text NOT NULL,
    node_name text NOT NULL,
    since timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (system_identifier, worker_id, layout)
);

-- Two clusters clash when they claim the same worker id of the same layout at overlapping
-- times. A worker id reused after its first cluster stopped (a replaced server, a pg_upgrade,
-- which gives a new system identifier) does not clash: the claims do not overlap. A clash stays
-- listed after it ended (ids of that time may be equal), with ongoing false: monitoring alerts
-- on `WHERE ongoing`, and deleting a stale claim clears its history.
CREATE VIEW snowflake_clashes AS
SELECT a.worker_id, a.layout,
       a.node_name, a.system_identifier,
       b.node_name AS other_node_name, b.system_identifier AS other_system_identifier,
       greatest(a.since, b.since) AS since,
       least(a.expires, b.expires) AS until,
       least(a.expires, b.expires) > now() AS ongoing
  FROM snowflake_claims a
  JOIN snowflake_claims b
    ON b.worker_id = a.worker_id AND b.layout = a.layout
   -- Each pair once, in the order of the node names.
   AND (b.node_name, b.system_identifier) > (a.node_name, a.system_identifier)
   AND a.since < b.expires AND b.since < a.expires;

-- Warns of a clash when it starts, as the claim that makes it is written: by snowflake_claim()
-- on this server, or by a logical replication apply worker bringing another server's claim
-- (ENABLE ALWAYS below: apply workers run with session_replication_role = replica, which skips
-- ordinary triggers). Once per clash, not at every renewal: snowflake_clashes lists it for as
-- long as it lasts. A WARNING, not an error: an error would stop the subscription, and with it
-- the rows of servers that do not clash.
CREATE FUNCTION snowflake_claims_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = @extschema@, pg_catalog, pg_temp
AS $check$
DECLARE
    other record;
BEGIN
    FOR other IN
        SELECT o.* FROM snowflake_claims o
         WHERE o.worker_id = NEW.worker_id AND o.layout = NEW.layout
           AND o.system_identifier <> NEW.system_identifier
           AND o.since < NEW.expires AND NEW.since < o.expires
           AND (TG_OP = 'INSERT' OR NOT (o.since < OLD.expires AND OLD.since < o.expires))
    LOOP
        RAISE WARNING 'worker id % is claimed by two clusters: "%" and "%"',
                NEW.worker_id, NEW.node_name, other.node_name
            USING ERRCODE = '01000',
                  DETAIL = format('Clusters %s and %s both make %s ids with worker id %s since %s; '
                                  'ids they make in the same time unit can be equal.',
                                  NEW.system_identifier, other.system_identifier, NEW.layout,
                                  NEW.worker_id, greatest(NEW.since, other.since)),
                  HINT = 'Give one of them another snowflake.worker_id and restart it; '
                         'SELECT * FROM snowflake_clashes lists every clash.';
    END LOOP;
    RETURN NULL;
END
$check$;

CREATE TRIGGER snowflake_claims_check AFTER INSERT OR UPDATE ON snowflake_claims
FOR EACH ROW EXECUTE FUNCTION snowflake_claims_check();
ALTER TABLE snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;

-- Claims name servers (host names, system identifiers): readable by monitoring, written by
-- superusers (and the apply workers of their subscriptions) only.
REVOKE ALL ON snowflake_claims, snowflake_clashes FROM PUBLIC;
GRANT SELECT ON snowflake_claims, snowflake_clashes TO pg_monitor;
REVOKE ALL ON FUNCTION snowflake_claim() FROM PUBLIC;
