-- Warns of a clash when it starts, as the claim that makes it is written: by snowflake_claim()
-- on this server, or by a logical replication apply worker bringing another server's claim
-- (ENABLE ALWAYS below: apply workers run with session_replication_role = replica, which skips
-- ordinary triggers). Once per clash, not at every renewal: snowflake_clashes lists it for as
-- long as it lasts. A WARNING, not an error: an error would stop the subscription, and with it
-- the rows of servers that do not clash.
--
-- It runs as whoever writes a claim (the claims worker and apply workers are superusers): its
-- search_path holds pg_catalog alone (pg_temp last, where PostgreSQL never looks for functions
-- or operators), and every function and operator it names is named by schema anyway. The table
-- it reads is the one it fires on (TG_RELID), not a schema name fixed at install: whoever owns
-- the extension's schema (on 15 and later, the database owner owns public) could rename it and
-- put a view of their own under the old name, which a superuser writing a claim would then run.
CREATE FUNCTION @extschema@.snowflake_claims_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $check$
DECLARE
    other record;
BEGIN
    FOR other IN EXECUTE pg_catalog.format(
        'SELECT o.* FROM %s o
          WHERE o.worker_id OPERATOR(pg_catalog.=) $1
            AND o.layout OPERATOR(pg_catalog.=) $2
            AND o.system_identifier OPERATOR(pg_catalog.<>) $3
            AND o.since OPERATOR(pg_catalog.<) $4
            AND $5 OPERATOR(pg_catalog.<) o.expires
            AND ($6 OR NOT (o.since OPERATOR(pg_catalog.<) $7
                            AND $8 OPERATOR(pg_catalog.<) o.expires))',
        TG_RELID::pg_catalog.regclass)
      USING NEW.worker_id, NEW.layout, NEW.system_identifier, NEW.expires, NEW.since,
            TG_OP OPERATOR(pg_catalog.=) 'INSERT', OLD.expires, OLD.since
    LOOP
        RAISE WARNING 'worker id % is claimed by two clusters: "%" and "%"',
                NEW.worker_id, NEW.node_name, other.node_name
            USING ERRCODE = '01000',
                  DETAIL = pg_catalog.format(
                      'Clusters %s and %s both make %s ids with worker id %s since %s; '
                      'ids they make in the same time unit can be equal.',
                      NEW.system_identifier, other.system_identifier, NEW.layout,
                      NEW.worker_id, greatest(NEW.since, other.since)),
                  HINT = 'Give one of them another snowflake.worker_id and restart it; '
                         'SELECT * FROM snowflake_clashes lists every clash.';
    END LOOP;
    RETURN NULL;
END
$check$;

CREATE TRIGGER snowflake_claims_check AFTER INSERT OR UPDATE ON @extschema@.snowflake_claims
FOR EACH ROW EXECUTE FUNCTION @extschema@.snowflake_claims_check();
ALTER TABLE @extschema@.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;
