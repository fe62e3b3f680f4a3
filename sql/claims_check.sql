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
-- it reads is snowflake.snowflake_claims, in the extension's own schema, which only a superuser
-- can rename (schema.sql); should a superuser hand that schema to another role, the trigger
-- refuses to read through it. Nobody but the table's trigger may call it: a role that attached
-- it to a table of its own would have a superuser's writes run it there.
--
-- At most three lines a minute for each pair of clusters (snowflake_clash_warning_due(), in
-- shared memory: src/claims/clash_log.rs), with the count of those left out on the next line:
-- one forging Citus node had two other nodes log 111,000 lines each in 10 s in 0.5.0. A writer
-- that is no superuser (none of the documented ones) is not counted: every line is logged.
-- mutant: claims_trigger_path
-- mutant: claims_trigger_owner
-- mutant: claims_followed
CREATE FUNCTION snowflake.snowflake_claims_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $check$
DECLARE
    other record;
    skipped bigint;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n
                     JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                    WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake' AND r.rolsuper) THEN
        RAISE EXCEPTION 'schema "snowflake" is not owned by a superuser'
            USING ERRCODE = '42501',
                  DETAIL = 'Its owner could rename it between a lookup and its use.',
                  HINT = 'ALTER SCHEMA snowflake OWNER TO a superuser.';
    END IF;
    FOR other IN
        SELECT o.* FROM snowflake.snowflake_claims o
         WHERE o.worker_id OPERATOR(pg_catalog.=) NEW.worker_id
           AND o.layout OPERATOR(pg_catalog.=) NEW.layout
           AND (o.system_identifier, o.place) OPERATOR(pg_catalog.<>)
               (NEW.system_identifier, NEW.place)
           AND o.since OPERATOR(pg_catalog.<) NEW.expires
           AND NEW.since OPERATOR(pg_catalog.<) o.expires
           -- Two servers of one cluster clash only when each was seen after the other began:
           -- a standby promoted after its primary's last claim follows it.
           AND (o.system_identifier OPERATOR(pg_catalog.<>) NEW.system_identifier
                OR (o.last_seen OPERATOR(pg_catalog.>) NEW.since
                    AND NEW.last_seen OPERATOR(pg_catalog.>) o.since))
           AND (TG_OP OPERATOR(pg_catalog.=) 'INSERT'
                OR NOT (o.since OPERATOR(pg_catalog.<) OLD.expires
                        AND OLD.since OPERATOR(pg_catalog.<) o.expires
                        AND (o.system_identifier OPERATOR(pg_catalog.<>) OLD.system_identifier
                             OR (o.last_seen OPERATOR(pg_catalog.>) OLD.since
                                 AND OLD.last_seen OPERATOR(pg_catalog.>) o.since))))
    LOOP
        skipped := 0;
        IF pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on' THEN
            skipped := snowflake.snowflake_clash_warning_due(NEW.system_identifier,
                                                             other.system_identifier);
        END IF;
        CONTINUE WHEN skipped IS NULL;
        IF other.system_identifier OPERATOR(pg_catalog.=) NEW.system_identifier THEN
            -- One cluster at two places: a copy of its data directory (an image, a backup, a
            -- snapshot) or a standby promoted while its primary went on.
            RAISE WARNING 'worker id % is claimed by two servers of one cluster: "%" and "%"',
                    NEW.worker_id, NEW.node_name, other.node_name
                USING ERRCODE = '01000',
                      DETAIL = pg_catalog.format(
                          'Cluster %s makes %s ids with worker id %s at %s and at %s since %s: '
                          'a copy of its data directory, or a split brain; ids they make in the '
                          'same time unit can be equal.%s',
                          NEW.system_identifier, NEW.layout, NEW.worker_id, NEW.place,
                          other.place, greatest(NEW.since, other.since),
                          CASE WHEN skipped OPERATOR(pg_catalog.>) 0
                               THEN pg_catalog.format(
                                   ' %s more warnings of these two were left out of the log (at '
                                   'most 3 a minute).', skipped)
                               ELSE '' END),
                      HINT = 'Stop one of them, or give it another snowflake.worker_id and '
                             'restart it; SELECT * FROM snowflake.snowflake_clashes lists every '
                             'clash.';
            CONTINUE;
        END IF;
        RAISE WARNING 'worker id % is claimed by two clusters: "%" and "%"',
                NEW.worker_id, NEW.node_name, other.node_name
            USING ERRCODE = '01000',
                  DETAIL = pg_catalog.format(
                      'Clusters %s and %s both make %s ids with worker id %s since %s; '
                      'ids they make in the same time unit can be equal.%s',
                      NEW.system_identifier, other.system_identifier, NEW.layout,
                      NEW.worker_id, greatest(NEW.since, other.since),
                      CASE WHEN skipped OPERATOR(pg_catalog.>) 0
                           THEN pg_catalog.format(
                               ' %s more warnings of these two clusters were left out of the '
                               'log (at most 3 a minute).', skipped)
                           ELSE '' END),
                  HINT = 'Give one of them another snowflake.worker_id and restart it; '
                         'SELECT * FROM snowflake.snowflake_clashes lists every clash.';
    END LOOP;
    RETURN NULL;
END
$check$;

CREATE TRIGGER snowflake_claims_check AFTER INSERT OR UPDATE ON snowflake.snowflake_claims
FOR EACH ROW EXECUTE FUNCTION snowflake.snowflake_claims_check();
-- mutant: claims_always
ALTER TABLE snowflake.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;
