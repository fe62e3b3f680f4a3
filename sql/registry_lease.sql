-- Holds a worker id of a namespace for one start of a member: takes one, or renews the one this
-- start holds; called by each member's registry worker (src/registry/worker.rs). A lease belongs
-- to one start of one data directory at one place (src/registry/identity.rs), never to a system
-- identifier, which every copy of a data directory carries:
-- - a renewal presents `secret`, which this registry gave the start at its last call, and
--   `next_secret`, which replaces it; the registry keeps their hashes only. A renewal with a
--   secret that no row holds is `lost`: another start holds the worker id now (this one was cut
--   off past its lease, or another server presented its secret: a clone of it, a split brain);
-- - a release (`lease_ms` 0, with the secret) gives the lease back at a member's clean shutdown:
--   it runs out now, and its coverage becomes `covered_until_ms`, below which the member's ids
--   all lie (never below what its previous holders covered), so that its next holder (the same
--   data directory elsewhere, a promoted standby, any member) starts above the ids actually
--   made instead of waiting out the lease and a coverage up to a lease ahead of the clock;
-- - a new start (no secret) resumes the worker id its data directory's last start held at the
--   same `place` (a hash of boot, host and directory: that start has ended, since two servers
--   cannot run one data directory at one place). Anywhere else it takes a worker id of its own
--   while the old holder's lease runs: `wanted` exactly, or `preferred` first when it is free,
--   or any free one (the lowest never leased, else the one whose lease ran out longest ago);
--   and `copy_of` names the other start of its cluster that held the one it asked for;
-- - members of 0.5.0 and 0.4.0 (`snowflake_registry_lease`, which calls this with `legacy`, no
--   place and no secret) renew by system identifier as before, but never a lease a start of
--   0.6.0 holds. Members of 0.6.0 call it through snowflake_registry_hold(), never `legacy`.
-- The primary key decides between starts asking at once: an INSERT of a new worker id waits for
-- the other's, and the update of an expired one takes its row lock and checks the expiry again,
-- so a worker id is never granted twice.
--
-- The answer is a row whose `outcome` says what happened, never a message to parse:
--   granted  worker_id, expires, start_above_ms (the previous holders' coverage, to start above)
--            and recorded_until_ms (the coverage recorded for this cluster, at most what it asked)
--   held     `wanted` is another start's; `holder` names it for superusers and pg_monitor only
--   lost     the secret is no row's any more
--   released the lease was given back: worker_id, expires (now) and recorded_until_ms
--   full     no worker id of the namespace is free
--   layout   the namespace makes ids of another layout: `namespace_layout` describes it
-- Calls it cannot answer (a null, a value out of range) are errors: 22004, 22023.
--
-- Called by the two SECURITY DEFINER functions below (as their owner), so that the role members
-- connect as needs EXECUTE on one of them only and can change the registry only as this does:
-- a coverage is never negative or further ahead than the registry's clock plus the lease and a
-- minute (a member whose clock runs far ahead gets less than it asked, and refuses ids once its
-- clock passes that), and only grows, but for a release by the start that holds the secret,
-- which never records less than its previous holders and its starts before in place were
-- granted; an expiry only moves later, but for that release; a held worker id is never taken,
-- and a start's lease is renewed or given back only for the secret it holds. Its search_path holds only pg_catalog, and its tables live in the extension's
-- own schema, which only a superuser can rename (schema.sql): it checks that a superuser still
-- owns that schema before it reads through its name.
-- mutant: registry_lock_wait
-- mutant: registry_owner
-- mutant: registry_negative
-- mutant: registry_shorten
-- mutant: registry_holder
-- mutant: registry_layout
-- mutant: registry_skip
-- mutant: registry_secret
-- mutant: registry_secret_rotated
-- mutant: registry_in_place
-- mutant: registry_copy_of
-- mutant: registry_release
-- mutant: registry_release_resumed
CREATE FUNCTION snowflake.snowflake_registry_decide(
    legacy boolean,
    namespace text,
    layout text,
    epoch_ms bigint,
    unit_ms integer,
    time_bits integer,
    worker_bits integer,
    sequence_bits integer,
    worker_last boolean,
    wanted integer,
    preferred integer,
    system_identifier bigint,
    node_name text,
    lease_ms bigint,
    covered_until_ms bigint,
    place text,
    secret text,
    next_secret text)
RETURNS TABLE (outcome text, worker_id integer, expires timestamptz, start_above_ms bigint,
               recorded_until_ms bigint, namespace_layout text, holder text, copy_of text)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $lease$
#variable_conflict use_variable
DECLARE
    space record;
    r record;
    candidate integer;
    max_worker integer;
    lease_for pg_catalog.interval;
    asked bigint;
    -- Worker ids whose row another transaction holds locked (a member's call still open): tried
    -- once, then passed over, so that no caller waits on another for long.
    skipped integer[] := '{}';
    -- The hashes of what the member sent: the registry keeps no place and no secret as sent.
    place_check text;
    secret_check text;
    next_check text;
    -- The other start of this cluster that holds the worker id asked for, if one does.
    other text;
    -- The worker id asked for or had before, taken first when it is free.
    first_choice integer := COALESCE(wanted, preferred);
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n
                     JOIN pg_catalog.pg_roles o ON o.oid OPERATOR(pg_catalog.=) n.nspowner
                    WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake' AND o.rolsuper) THEN
        RAISE EXCEPTION 'schema "snowflake" is not owned by a superuser'
            USING ERRCODE = '42501',
                  DETAIL = 'Its owner could rename it between a lookup and its use.',
                  HINT = 'ALTER SCHEMA snowflake OWNER TO a superuser.';
    END IF;
    IF namespace IS NULL OR layout IS NULL OR epoch_ms IS NULL OR unit_ms IS NULL
       OR time_bits IS NULL OR worker_bits IS NULL OR sequence_bits IS NULL
       OR worker_last IS NULL OR system_identifier IS NULL OR node_name IS NULL
       OR lease_ms IS NULL OR covered_until_ms IS NULL OR legacy IS NULL
       OR (NOT legacy AND (place IS NULL OR next_secret IS NULL))
       OR (legacy AND (place IS NOT NULL OR secret IS NOT NULL OR next_secret IS NOT NULL
                       OR preferred IS NOT NULL)) THEN
        RAISE EXCEPTION 'only the worker ids and the secret may be null'
            USING ERRCODE = '22004',
                  HINT = 'snowflake.snowflake_registry_hold() is called by the registry worker of each member.';
    END IF;
    IF NOT legacy AND (place OPERATOR(pg_catalog.!~) '^[0-9a-f]{64}$'
                       OR next_secret OPERATOR(pg_catalog.!~) '^[0-9a-f]{64}$'
                       OR secret OPERATOR(pg_catalog.!~) '^[0-9a-f]{64}$') THEN
        RAISE EXCEPTION 'a place or a secret is not 64 hexadecimal digits'
            USING ERRCODE = '22023',
                  HINT = 'snowflake.snowflake_registry_hold() is called by the registry worker of each member.';
    END IF;
    IF pg_catalog.octet_length(node_name) OPERATOR(pg_catalog.>) 255 THEN
        -- It goes into answers to other starts of the cluster (`copy_of`), which a member
        -- refuses past 512 bytes: 0.6.0's review had the members' role deny a member its
        -- renewals with a node name of 600 bytes.
        RAISE EXCEPTION 'a node name of % bytes is longer than 255', pg_catalog.octet_length(node_name)
            USING ERRCODE = '22023',
                  HINT = 'snowflake.snowflake_registry_hold() is called by the registry worker of each member, with cluster_name or host:port.';
    END IF;
    IF pg_catalog.length(namespace) OPERATOR(pg_catalog.<) 1
       OR pg_catalog.length(namespace) OPERATOR(pg_catalog.>) 63
       OR unit_ms OPERATOR(pg_catalog.<) 1 OR unit_ms OPERATOR(pg_catalog.>) 1000
       OR time_bits OPERATOR(pg_catalog.<) 1 OR time_bits OPERATOR(pg_catalog.>) 63
       OR worker_bits OPERATOR(pg_catalog.<) 0 OR worker_bits OPERATOR(pg_catalog.>) 31
       OR sequence_bits OPERATOR(pg_catalog.<) 0 OR sequence_bits OPERATOR(pg_catalog.>) 31
       OR time_bits OPERATOR(pg_catalog.+) worker_bits OPERATOR(pg_catalog.+) sequence_bits
          OPERATOR(pg_catalog.>) 64 THEN
        RAISE EXCEPTION 'namespace "%" or its layout is out of range', namespace
            USING ERRCODE = '22023',
                  HINT = 'Namespaces have 1 to 63 characters; layouts have a time unit of 1 to 1000 ms and fields that fit in 64 bits.';
    END IF;
    max_worker := ((1::pg_catalog.int8 OPERATOR(pg_catalog.<<) worker_bits)
                   OPERATOR(pg_catalog.-) 1)::pg_catalog.int4;
    IF (lease_ms OPERATOR(pg_catalog.<) 1000
        AND (legacy OR lease_ms OPERATOR(pg_catalog.<>) 0 OR secret IS NULL))
       OR lease_ms OPERATOR(pg_catalog.>) 86400000
       OR covered_until_ms OPERATOR(pg_catalog.<) 0
       OR (wanted IS NOT NULL AND (wanted OPERATOR(pg_catalog.<) 0
                                   OR wanted OPERATOR(pg_catalog.>) max_worker))
       OR (preferred IS NOT NULL AND (preferred OPERATOR(pg_catalog.<) 0
                                      OR preferred OPERATOR(pg_catalog.>) max_worker)) THEN
        RAISE EXCEPTION 'worker id %, lease of % ms or coverage until % ms is out of range',
                wanted, lease_ms, covered_until_ms
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('Worker ids run from 0 to %s; leases last 1 s to 1 day '
                                           '(0 gives back the lease of the secret sent); '
                                           'a coverage is a Unix time in ms, never negative.',
                                           max_worker);
    END IF;

    -- The namespace's layout: the first member's. Two first members racing both insert; the
    -- primary key makes the second wait for the first and then do nothing, and the next
    -- statement sees the first one's row.
    INSERT INTO snowflake.snowflake_registry_namespaces
           (namespace, layout, epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits,
            worker_last, since)
    VALUES (namespace, layout, epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits,
            worker_last, pg_catalog.now())
    ON CONFLICT DO NOTHING;
    SELECT s.* INTO STRICT space FROM snowflake.snowflake_registry_namespaces s
     WHERE s.namespace OPERATOR(pg_catalog.=) namespace;
    IF space.epoch_ms OPERATOR(pg_catalog.<>) epoch_ms
       OR space.unit_ms OPERATOR(pg_catalog.<>) unit_ms
       OR space.time_bits OPERATOR(pg_catalog.<>) time_bits
       OR space.worker_bits OPERATOR(pg_catalog.<>) worker_bits
       OR space.sequence_bits OPERATOR(pg_catalog.<>) sequence_bits
       OR space.worker_last OPERATOR(pg_catalog.<>) worker_last THEN
        RETURN QUERY SELECT 'layout'::pg_catalog.text, NULL::pg_catalog.int4,
            NULL::pg_catalog.timestamptz, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
            pg_catalog.format('%s (%s bits of %s ms since %s, %s worker bits, %s sequence bits%s)',
                space.layout, space.time_bits, space.unit_ms,
                pg_catalog.to_char(pg_catalog.to_timestamp(space.epoch_ms::pg_catalog.float8
                                                           OPERATOR(pg_catalog./) 1000)
                                   AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                space.worker_bits, space.sequence_bits,
                CASE WHEN space.worker_last THEN ', worker id last' ELSE '' END),
            NULL::pg_catalog.text, NULL::pg_catalog.text;
        RETURN;
    END IF;

    lease_for := pg_catalog.make_interval(secs => lease_ms::pg_catalog.float8
                                                  OPERATOR(pg_catalog./) 1000);
    -- No wait for another member's open transaction lasts: a member's role may hold one open
    -- on purpose. Local to this call's transaction.
    PERFORM pg_catalog.set_config('lock_timeout', '200ms', true);
    asked := LEAST(covered_until_ms,
        (pg_catalog.date_part('epoch', pg_catalog.now()) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8
        OPERATOR(pg_catalog.+) lease_ms OPERATOR(pg_catalog.+) 60000);

    IF NOT legacy THEN
        place_check := pg_catalog.encode(pg_catalog.sha256(
                           pg_catalog.convert_to(place, 'UTF8')), 'hex');
        next_check := pg_catalog.encode(pg_catalog.sha256(
                          pg_catalog.convert_to(next_secret, 'UTF8')), 'hex');
        secret_check := pg_catalog.encode(pg_catalog.sha256(
                            pg_catalog.convert_to(secret, 'UTF8')), 'hex');
    END IF;

    -- This start's lease, given back at its clean shutdown: it runs out now (the one change
    -- that moves an expiry earlier, made by the holder of the secret alone), and its coverage
    -- comes down to what the member made, never below its previous holders' (`start_above_ms`)
    -- nor what the starts before it in place were granted (`resumed_above_ms`): a caller that
    -- resumed another server's lease by its place (which local users of that machine can read)
    -- cannot lower the coverage that server's ids lie below. The secret becomes the next one
    -- the member sent: its worker, restarted alone, renews the lease again (a release needs the
    -- postmaster stopping, and a smart shutdown waits for sessions), and the same data
    -- directory resumes it in place, or any member takes it above that coverage.
    -- mutant: registry_release
    -- mutant: registry_release_resumed
    IF lease_ms OPERATOR(pg_catalog.=) 0 THEN
        UPDATE snowflake.snowflake_registry g
           SET renewed = pg_catalog.now(),
               expires = LEAST(g.expires, pg_catalog.now()),
               covered_until_ms = GREATEST(g.start_above_ms, g.resumed_above_ms,
                                           LEAST(g.covered_until_ms, covered_until_ms)),
               secret = next_check
         WHERE (g.namespace, g.worker_id) OPERATOR(pg_catalog.=)
               (SELECT o.namespace, o.worker_id FROM snowflake.snowflake_registry o
                 WHERE o.namespace OPERATOR(pg_catalog.=) namespace
                   AND o.system_identifier OPERATOR(pg_catalog.=) system_identifier
                   AND o.worker_id OPERATOR(pg_catalog.<=) max_worker
                   AND (wanted IS NULL OR o.worker_id OPERATOR(pg_catalog.=) wanted)
                   AND o.secret OPERATOR(pg_catalog.=) ANY (ARRAY[secret_check, next_check])
                 ORDER BY o.expires DESC LIMIT 1 FOR UPDATE)
        RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms INTO r;
        RETURN QUERY SELECT CASE WHEN r IS NULL THEN 'lost' ELSE 'released' END::pg_catalog.text,
            r.worker_id, r.expires, r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
            NULL::pg_catalog.text, NULL::pg_catalog.text;
        RETURN;
    END IF;

    -- This start's lease, renewed (also one that ran out while no other start took it): by the
    -- secret this registry gave it, or by the next one (the answer to its last call was lost
    -- after the registry had taken it), which replaces it. A member of 0.5.0 or 0.4.0 renews by
    -- its system identifier, where no start of 0.6.0 holds the lease. A renewal never moves the
    -- expiry earlier: a shorter lease asked for now applies from the time the current one ends.
    -- mutant: registry_secret
    -- mutant: registry_secret_rotated
    UPDATE snowflake.snowflake_registry g
       SET node_name = node_name, renewed = pg_catalog.now(),
           expires = GREATEST(g.expires, pg_catalog.now() OPERATOR(pg_catalog.+) lease_for),
           covered_until_ms = GREATEST(g.covered_until_ms, asked),
           secret = next_check, place = COALESCE(place_check, g.place)
     WHERE (g.namespace, g.worker_id) OPERATOR(pg_catalog.=)
           (SELECT o.namespace, o.worker_id FROM snowflake.snowflake_registry o
             WHERE o.namespace OPERATOR(pg_catalog.=) namespace
               AND o.system_identifier OPERATOR(pg_catalog.=) system_identifier
               AND o.worker_id OPERATOR(pg_catalog.<=) max_worker
               AND (wanted IS NULL OR o.worker_id OPERATOR(pg_catalog.=) wanted)
               AND CASE WHEN legacy THEN o.secret IS NULL
                        ELSE o.secret OPERATOR(pg_catalog.=) ANY (ARRAY[secret_check, next_check])
                   END
             ORDER BY o.expires DESC LIMIT 1 FOR UPDATE)
    RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms INTO r;
    IF r IS NULL AND secret IS NOT NULL THEN
        -- Not this start's any more: it was cut off past its lease and the worker id went to
        -- another start, or another server presented its secret (a clone, a split brain).
        RETURN QUERY SELECT 'lost'::pg_catalog.text, NULL::pg_catalog.int4,
            NULL::pg_catalog.timestamptz, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
            NULL::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.text;
        RETURN;
    END IF;

    IF r IS NULL AND NOT legacy THEN
        -- A new start at the place of its data directory's last start, which has ended (two
        -- servers cannot run one data directory at one place): that start's worker id, with its
        -- coverage and start (the new start goes on above its own ids, which its data directory
        -- records), after a stop, a crash or a crash loop alike.
        -- mutant: registry_in_place
        UPDATE snowflake.snowflake_registry g
           SET node_name = node_name, renewed = pg_catalog.now(),
               expires = GREATEST(g.expires, pg_catalog.now() OPERATOR(pg_catalog.+) lease_for),
               covered_until_ms = GREATEST(g.covered_until_ms, asked),
               resumed_above_ms = g.covered_until_ms,
               secret = next_check, copy_of = NULL
         WHERE (g.namespace, g.worker_id) OPERATOR(pg_catalog.=)
               (SELECT o.namespace, o.worker_id FROM snowflake.snowflake_registry o
                 WHERE o.namespace OPERATOR(pg_catalog.=) namespace
                   AND o.system_identifier OPERATOR(pg_catalog.=) system_identifier
                   AND o.place OPERATOR(pg_catalog.=) place_check
                   AND o.worker_id OPERATOR(pg_catalog.<=) max_worker
                   AND (wanted IS NULL OR o.worker_id OPERATOR(pg_catalog.=) wanted)
                 ORDER BY o.worker_id IS NOT DISTINCT FROM first_choice DESC, o.expires DESC
                 LIMIT 1 FOR UPDATE)
        RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms INTO r;
    END IF;
    IF r IS NOT NULL THEN
        -- Renewed or resumed in place. Another start of this cluster holding a worker id beside
        -- this one (a copy of its data directory, a standby promoted while it goes on): said to
        -- both, at every call (a start resumed in place learns it at once).
        IF NOT legacy THEN
            SELECT pg_catalog.format('%s (system identifier %s), which holds worker id %s',
                                     pg_catalog.left(g.node_name, 100), g.system_identifier,
                                     g.worker_id)
              INTO other
              FROM snowflake.snowflake_registry g
             WHERE g.namespace OPERATOR(pg_catalog.=) namespace
               AND g.system_identifier OPERATOR(pg_catalog.=) system_identifier
               AND g.place IS DISTINCT FROM place_check
               AND g.worker_id OPERATOR(pg_catalog.<>) r.worker_id
               AND g.expires OPERATOR(pg_catalog.>) pg_catalog.now()
             ORDER BY g.worker_id LIMIT 1;
        END IF;
        RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                            r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                            NULL::pg_catalog.text, other;
        RETURN;
    END IF;

    IF NOT legacy THEN
        -- The worker id it asks for, held by another start of this cluster elsewhere: this one
        -- is a copy of that one's data directory, or a standby promoted while it goes on. It
        -- gets another, and learns which server it did not take from (a server of its own
        -- cluster: its name tells it nothing it could not read of itself).
        -- mutant: registry_copy_of
        SELECT pg_catalog.format('%s (system identifier %s), which holds worker id %s',
                                 pg_catalog.left(g.node_name, 100), g.system_identifier,
                                 g.worker_id)
          INTO other
          FROM snowflake.snowflake_registry g
         WHERE g.namespace OPERATOR(pg_catalog.=) namespace
           AND g.worker_id OPERATOR(pg_catalog.=) first_choice
           AND g.system_identifier OPERATOR(pg_catalog.=) system_identifier
           AND g.expires OPERATOR(pg_catalog.>) pg_catalog.now();
    END IF;

    -- A worker id of its own, never leased (the lowest first); then, in the loop below, one
    -- whose lease ran out longest ago (a server that was down briefly may still come back for
    -- its own), whose next holder starts above everything its previous holders covered.
    -- The worker id it had before (in its cache), when it is free.
    IF wanted IS NULL AND preferred IS NOT NULL THEN
        BEGIN
            r := snowflake.snowflake_registry_take(namespace, preferred, system_identifier,
                                                   node_name, lease_for, asked, place_check,
                                                   next_check, other);
        EXCEPTION WHEN lock_not_available THEN
            r := NULL;
        END;
        skipped := skipped OPERATOR(pg_catalog.||) preferred;
        IF r IS NOT NULL THEN
            RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                                r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                                NULL::pg_catalog.text, other;
            RETURN;
        END IF;
    END IF;
    IF wanted IS NULL THEN
        LOOP
            SELECT c.id INTO candidate FROM (
                SELECT 0 AS id
                UNION ALL
                SELECT g.worker_id OPERATOR(pg_catalog.+) 1 FROM snowflake.snowflake_registry g
                 WHERE g.namespace OPERATOR(pg_catalog.=) namespace
                   AND g.worker_id OPERATOR(pg_catalog.<) max_worker
                UNION ALL
                -- One past a worker id passed over: its row, not committed, is not seen.
                SELECT k OPERATOR(pg_catalog.+) 1 FROM pg_catalog.unnest(skipped) k
                 WHERE k OPERATOR(pg_catalog.<) max_worker) c
             WHERE NOT EXISTS (
                   SELECT FROM snowflake.snowflake_registry g
                    WHERE g.namespace OPERATOR(pg_catalog.=) namespace
                      AND g.worker_id OPERATOR(pg_catalog.=) c.id)
               AND c.id OPERATOR(pg_catalog.<>) ALL (skipped)
             ORDER BY c.id LIMIT 1;
            EXIT WHEN candidate IS NULL;
            BEGIN
                r := snowflake.snowflake_registry_take(namespace, candidate, system_identifier,
                                                       node_name, lease_for, asked,
                                                       place_check, next_check, other);
            EXCEPTION WHEN lock_not_available THEN
                r := NULL;
            END;
            skipped := skipped OPERATOR(pg_catalog.||) candidate;
            IF r IS NOT NULL THEN
                RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                                    r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                                    NULL::pg_catalog.text, other;
                RETURN;
            END IF;
        END LOOP;
    END IF;
    FOR candidate IN
        SELECT c.w FROM (SELECT wanted AS w WHERE wanted IS NOT NULL
                         UNION ALL
                         SELECT g.worker_id FROM snowflake.snowflake_registry g
                          WHERE wanted IS NULL
                            AND g.namespace OPERATOR(pg_catalog.=) namespace
                            AND g.worker_id OPERATOR(pg_catalog.<=) max_worker
                            AND g.expires OPERATOR(pg_catalog.<) pg_catalog.now()) c
         ORDER BY (SELECT g.expires FROM snowflake.snowflake_registry g
                    WHERE g.namespace OPERATOR(pg_catalog.=) namespace
                      AND g.worker_id OPERATOR(pg_catalog.=) c.w) NULLS FIRST, c.w
    LOOP
        CONTINUE WHEN candidate OPERATOR(pg_catalog.=) ANY (skipped);
        BEGIN
            r := snowflake.snowflake_registry_take(namespace, candidate, system_identifier,
                                                   node_name, lease_for, asked, place_check,
                                                   next_check, other);
        EXCEPTION WHEN lock_not_available THEN
            r := NULL;
        END;
        IF r IS NOT NULL THEN
            RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                                r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                                NULL::pg_catalog.text, other;
            RETURN;
        END IF;
    END LOOP;

    IF wanted IS NOT NULL THEN
        -- Who holds it is for the registry's administrators: a member learns only that it is
        -- held (a cluster's identity would let a member speak for it).
        RETURN QUERY
            SELECT 'held'::pg_catalog.text, wanted, NULL::pg_catalog.timestamptz,
                   NULL::pg_catalog.int8, NULL::pg_catalog.int8, NULL::pg_catalog.text,
                   CASE WHEN pg_catalog.pg_has_role(SESSION_USER, 'pg_monitor', 'USAGE')
                        THEN pg_catalog.format('cluster %s (%s), until %s', g.system_identifier,
                                               g.node_name, g.expires)
                   END,
                   other
              FROM snowflake.snowflake_registry g
             WHERE g.namespace OPERATOR(pg_catalog.=) namespace
               AND g.worker_id OPERATOR(pg_catalog.=) wanted;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'full'::pg_catalog.text, NULL::pg_catalog.int4,
        NULL::pg_catalog.timestamptz, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
        NULL::pg_catalog.text, NULL::pg_catalog.text, other;
END
$lease$;

-- Takes `candidate` for a cluster if it was never leased or its lease ran out: the expired row,
-- updated under its row lock with the expiry checked again, or a new row. NULL when another
-- cluster holds it. A held row is never locked: an UPDATE locks only the rows its condition
-- selects (the expired ones), and an insert that finds the row there does nothing, so that no
-- member's call, however long its transaction stays open, leaves another's worker id locked.
-- The new holder's place and secret are the hashes `place` and `secret` (NULL for a member of
-- 0.5.0 or 0.4.0), and `copy_of` the other start of its cluster it did not take from. Called by
-- snowflake_registry_hold() alone (it runs as the same owner).
-- mutant: registry_exclusive
-- mutant: registry_take_locks
CREATE FUNCTION snowflake.snowflake_registry_take(
    namespace text,
    candidate integer,
    system_identifier bigint,
    node_name text,
    lease_for interval,
    asked bigint,
    place text,
    secret text,
    copy_of text,
    OUT worker_id integer,
    OUT expires timestamptz,
    OUT start_above_ms bigint,
    OUT covered_until_ms bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $take$
#variable_conflict use_variable
BEGIN
    UPDATE snowflake.snowflake_registry g
       SET system_identifier = system_identifier,
           node_name = node_name,
           since = pg_catalog.now(),
           renewed = pg_catalog.now(),
           expires = pg_catalog.now() OPERATOR(pg_catalog.+) lease_for,
           start_above_ms = g.covered_until_ms,
           covered_until_ms = GREATEST(g.covered_until_ms, asked),
           place = place, secret = secret, copy_of = copy_of, resumed_above_ms = NULL
     WHERE g.namespace OPERATOR(pg_catalog.=) namespace
       AND g.worker_id OPERATOR(pg_catalog.=) candidate
       AND g.expires OPERATOR(pg_catalog.<) pg_catalog.now()
    RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms
         INTO worker_id, expires, start_above_ms, covered_until_ms;
    IF FOUND THEN
        RETURN;
    END IF;
    INSERT INTO snowflake.snowflake_registry AS g
           (namespace, worker_id, system_identifier, node_name, since, renewed, expires,
            covered_until_ms, start_above_ms, place, secret, copy_of)
    VALUES (namespace, candidate, system_identifier, node_name, pg_catalog.now(),
            pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) lease_for, asked, 0, place,
            secret, copy_of)
    ON CONFLICT DO NOTHING
    RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms
         INTO worker_id, expires, start_above_ms, covered_until_ms;
END
$take$;

-- The lease of a member of 0.5.0 or 0.4.0 (`snowflake_registry_decide` with no place and no
-- secret): renewed by its system identifier, as those releases' registry did, where no start of
-- 0.6.0 holds it. Kept for a rolling upgrade (the registry first, then the members); once every
-- member runs 0.6.0, `REVOKE EXECUTE` on it from the members' role (docs/many-servers.md).
-- What members of 0.6.0 call: snowflake_registry_decide() for a start that names its place and
-- sends its secrets. SECURITY DEFINER, so that the members' role needs EXECUTE on this one only;
-- the decision's own function is granted to nobody, so that the way of 0.5.0's members
-- (renewal by system identifier, `legacy`) is open only through snowflake_registry_lease(),
-- which the administrator revokes once no member of 0.5.0 is left (0.6.0's review found it open
-- through this function too, with a NULL place).
CREATE FUNCTION snowflake.snowflake_registry_hold(
    namespace text,
    layout text,
    epoch_ms bigint,
    unit_ms integer,
    time_bits integer,
    worker_bits integer,
    sequence_bits integer,
    worker_last boolean,
    wanted integer,
    preferred integer,
    system_identifier bigint,
    node_name text,
    lease_ms bigint,
    covered_until_ms bigint,
    place text,
    secret text,
    next_secret text)
RETURNS TABLE (outcome text, worker_id integer, expires timestamptz, start_above_ms bigint,
               recorded_until_ms bigint, namespace_layout text, holder text, copy_of text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $hold$
    SELECT d.outcome, d.worker_id, d.expires, d.start_above_ms, d.recorded_until_ms,
           d.namespace_layout, d.holder, d.copy_of
      FROM snowflake.snowflake_registry_decide(false, namespace, layout, epoch_ms, unit_ms,
               time_bits, worker_bits, sequence_bits, worker_last, wanted, preferred,
               system_identifier, node_name, lease_ms, covered_until_ms, place, secret,
               next_secret) d
$hold$;

CREATE FUNCTION snowflake.snowflake_registry_lease(
    namespace text,
    layout text,
    epoch_ms bigint,
    unit_ms integer,
    time_bits integer,
    worker_bits integer,
    sequence_bits integer,
    worker_last boolean,
    wanted integer,
    system_identifier bigint,
    node_name text,
    lease_ms bigint,
    covered_until_ms bigint)
RETURNS TABLE (outcome text, worker_id integer, expires timestamptz, start_above_ms bigint,
               recorded_until_ms bigint, namespace_layout text, holder text)
LANGUAGE sql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $lease$
    SELECT h.outcome, h.worker_id, h.expires, h.start_above_ms, h.recorded_until_ms,
           h.namespace_layout, h.holder
      FROM snowflake.snowflake_registry_decide(true, namespace, layout, epoch_ms, unit_ms,
               time_bits, worker_bits, sequence_bits, worker_last, wanted, NULL::pg_catalog.int4,
               system_identifier, node_name, lease_ms, covered_until_ms, NULL::pg_catalog.text,
               NULL::pg_catalog.text, NULL::pg_catalog.text) h
$lease$;
