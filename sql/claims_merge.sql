-- A claim that arrives by logical replication for a key this table already holds updates that
-- row, when it was seen later, instead of failing on the primary key. Two publishers can send
-- one key: a copy of a data directory (an image, a backup) or a promoted standby carries its
-- original's rows in its own table, so a hub subscribed to both received the original's claim
-- twice, and in 0.5.0 the second subscription's initial copy failed on snowflake_claims_pkey
-- every 5 s, for ever, and brought none of its claims.
--
-- Likewise a replicated update that is not newer than the row (`last_seen`) changes nothing: a
-- claim that two servers publish to each other without a row filter came back to its writer
-- and went out again, endlessly (0.6.0's review: 27 updates a second on each side), and a late
-- copy of an old claim would otherwise overwrite a newer one.
--
-- Only in apply workers (session_replication_role = replica, hence ENABLE ALWAYS): a server's
-- own writes keep their INSERT ... ON CONFLICT, which keeps a claim's `since` while it runs.
-- Runs as the apply worker's superuser: names by schema, as the check trigger (claims_check.sql).
-- mutant: claims_merge
CREATE FUNCTION snowflake.snowflake_claims_merge() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $merge$
BEGIN
    IF pg_catalog.current_setting('session_replication_role') OPERATOR(pg_catalog.<>) 'replica' THEN
        RETURN NEW;
    END IF;
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        -- mutant: claims_echo
        IF NEW.last_seen OPERATOR(pg_catalog.<=) OLD.last_seen THEN
            RETURN NULL;
        END IF;
        RETURN NEW;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n
                     JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                    WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake' AND r.rolsuper) THEN
        RAISE EXCEPTION 'schema "snowflake" is not owned by a superuser'
            USING ERRCODE = '42501',
                  DETAIL = 'Its owner could rename it between a lookup and its use.',
                  HINT = 'ALTER SCHEMA snowflake OWNER TO a superuser.';
    END IF;
    -- Two subscriptions may bring one new key at once (an original and its copy both publish
    -- the original's claim): the second waits for the first's row, and updates it.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended(pg_catalog.format(
                'pg_snowflake claim %s %s %s %s', NEW.system_identifier, NEW.worker_id,
                NEW.layout, NEW.place), 0));
    PERFORM FROM snowflake.snowflake_claims c
      WHERE (c.system_identifier, c.worker_id, c.layout, c.place) OPERATOR(pg_catalog.=)
            (NEW.system_identifier, NEW.worker_id, NEW.layout, NEW.place)
      FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NEW;
    END IF;
    UPDATE snowflake.snowflake_claims c
       SET node_name = NEW.node_name, since = NEW.since, last_seen = NEW.last_seen,
           expires = NEW.expires
     WHERE (c.system_identifier, c.worker_id, c.layout, c.place) OPERATOR(pg_catalog.=)
           (NEW.system_identifier, NEW.worker_id, NEW.layout, NEW.place)
       AND c.last_seen OPERATOR(pg_catalog.<) NEW.last_seen;
    RETURN NULL;
END
$merge$;

CREATE TRIGGER snowflake_claims_merge BEFORE INSERT OR UPDATE ON snowflake.snowflake_claims
FOR EACH ROW EXECUTE FUNCTION snowflake.snowflake_claims_merge();
ALTER TABLE snowflake.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_merge;
