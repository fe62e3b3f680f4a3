\echo Use "ALTER EXTENSION pg_snowflake UPDATE TO '0.4.0'" to load this file. \quit
-- 0.4.0: what code with other roles' rights reaches lives in a schema of the extension's own,
-- `snowflake`, owned by the superuser who runs the script (schema.sql, docs/security.md): the
-- claims table, its trigger function and the clashes view, and the registry's table move there.
-- The registry keys its worker ids by namespace alone, and knows each namespace's layout by its
-- fields (registry_namespaces.sql): rows written under the old key (namespace, layout's name,
-- worker id) are moved below. snowflake_adopt() is written in Rust (adopt.rs).
--
-- Nothing here reaches an object through the name of the extension's schema and trusts it: the
-- objects are found by their membership in the extension, moved by name, and checked by OID
-- afterwards (that schema's owner could rename it while this script runs). privileges.sql, last,
-- checks that every object of the extension ended in one of its two schemas.
--
-- A template: `make install` writes the script with every \ir and \generated line replaced by
-- the object's one definition (see scripts/sql-upgrades.py).
-- ../pin_schema.sql
-- Pins the extension's schema for the rest of this script. The script names it as
-- @extschema@, a name, and its owner (on 15 and later the database owner owns `public`) can rename
-- it and give the name to a schema of theirs, with look-alikes in it, between two statements:
-- CREATEs and GRANTs would then reach their objects. So the first statement locks the schema's
-- row in pg_namespace, found by the OID that CREATE EXTENSION (or ALTER EXTENSION) recorded, and
-- checks that it still bears the name the script uses: a rename waits for that lock until the
-- script's transaction ends (on 16 and later nothing else makes it wait), and while the schema
-- has the name, no other schema can take it. A rename that came first fails the script, and the
-- whole CREATE EXTENSION or ALTER EXTENSION with it: run it again.
DO $pin$
DECLARE
    pinned pg_catalog.name;
BEGIN
    SELECT n.nspname INTO pinned
      FROM pg_catalog.pg_namespace n
     WHERE n.oid OPERATOR(pg_catalog.=) (
           SELECT e.extnamespace FROM pg_catalog.pg_extension e
            WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')
       FOR UPDATE;
    IF pinned IS NULL
       OR pg_catalog.quote_ident(pinned) OPERATOR(pg_catalog.<>) '@extschema@' THEN
        RAISE EXCEPTION 'the schema of pg_snowflake was renamed while its script started'
            USING ERRCODE = '55000',
                  DETAIL = pg_catalog.format('The script names it %s; it is now named %s.',
                                             '@extschema@', pinned),
                  HINT = 'Find out who renames it, then run the command again.';
    END IF;
END
$pin$;
-- ../schema.sql
-- The schema `snowflake`, the extension's own, owned by the superuser who runs this script: it
-- holds every object that code running with other roles' rights reaches by name (the claims
-- table and its trigger, the clashes view, the registry's tables and lease function). Only its
-- owner can rename it, drop it or create objects in it, so `snowflake.x` names the same object
-- from lookup to use. The schema of `CREATE EXTENSION ... SCHEMA s` (public by default) keeps
-- what applications call; on 15 and later the database owner owns `public` and can rename it at
-- any moment, so nothing privileged ever reaches an object through that schema's name (see
-- docs/security.md).
--
-- A schema of that name that someone else made first is refused, never adopted: whoever owns it
-- could rename it, or plant objects in it, under a superuser's feet. (`CREATE EXTENSION
-- pg_snowflake SCHEMA snowflake` into a schema a superuser owns puts everything in it.)
DO $schema$
DECLARE
    found_owner pg_catalog.oid;
BEGIN
    SELECT n.nspowner INTO found_owner FROM pg_catalog.pg_namespace n
     WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake';
    IF NOT FOUND THEN
        CREATE SCHEMA snowflake;
    ELSIF '@extschema@' OPERATOR(pg_catalog.<>) 'snowflake'
          OR NOT (SELECT r.rolsuper FROM pg_catalog.pg_roles r
                   WHERE r.oid OPERATOR(pg_catalog.=) found_owner) THEN
        RAISE EXCEPTION 'schema "snowflake" already exists'
            USING ERRCODE = '42P06',
                  DETAIL = pg_catalog.format('pg_snowflake keeps what its workers, triggers and '
                      'SECURITY DEFINER functions use in a schema of its own named snowflake, '
                      'which it makes itself, owned by the superuser who creates it; one exists '
                      'already, owned by %s.',
                      found_owner::pg_catalog.regrole),
                  HINT = 'Rename or drop the existing schema snowflake, then create the extension again (or, if a superuser made it, create the extension in it: CREATE EXTENSION pg_snowflake SCHEMA snowflake).';
    END IF;
END
$schema$;
-- Any role may look into it (monitoring reads the claims, members call the lease function);
-- each object's privileges say who may use it (privileges.sql, registry.sql).
GRANT USAGE ON SCHEMA snowflake TO PUBLIC;

-- The roles that members of 0.3.0 lease as: they keep their grant on the old signature, and get
-- the new function's (granted again at the end, by OID).
SELECT pg_catalog.set_config('pg_snowflake.lease_grantees', COALESCE((
    SELECT pg_catalog.string_agg(DISTINCT a.grantee::pg_catalog.text, ',')
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid,
           pg_catalog.aclexplode(p.proacl) a
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                              WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')
       AND d.deptype OPERATOR(pg_catalog.=) 'e'
       AND p.proname OPERATOR(pg_catalog.=) 'snowflake_registry_lease'
       AND p.pronargs OPERATOR(pg_catalog.=) 8
       AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
       AND a.grantee OPERATOR(pg_catalog.<>) 0
       AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'), ''), true);

-- Into the schema snowflake: each object of the extension, found by OID, moved by its name as
-- the catalog prints it now, then checked by OID to be there.
DO $move$
DECLARE
    ext pg_catalog.oid;
    own pg_catalog.oid;
    o record;
    now_in pg_catalog.oid;
BEGIN
    SELECT e.oid INTO ext FROM pg_catalog.pg_extension e
     WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake';
    SELECT n.oid INTO own FROM pg_catalog.pg_namespace n
     WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake';
    FOR o IN
        SELECT c.oid,
               CASE WHEN c.relkind OPERATOR(pg_catalog.=) 'v' THEN 'VIEW' ELSE 'TABLE' END AS kind,
               c.oid::pg_catalog.regclass::pg_catalog.text AS name, true AS relation
          FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) c.oid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND c.relname OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_claims',
                   'snowflake_clashes', 'snowflake_registry']::pg_catalog.name[])
           AND c.relnamespace OPERATOR(pg_catalog.<>) own
        UNION ALL
        SELECT p.oid, 'FUNCTION', p.oid::pg_catalog.regprocedure::pg_catalog.text, false
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND p.proname OPERATOR(pg_catalog.=) 'snowflake_claims_check'
           AND p.pronamespace OPERATOR(pg_catalog.<>) own
    LOOP
        EXECUTE pg_catalog.format('ALTER %s %s SET SCHEMA snowflake', o.kind, o.name);
        IF o.relation THEN
            SELECT c.relnamespace INTO now_in FROM pg_catalog.pg_class c
             WHERE c.oid OPERATOR(pg_catalog.=) o.oid;
        ELSE
            SELECT p.pronamespace INTO now_in FROM pg_catalog.pg_proc p
             WHERE p.oid OPERATOR(pg_catalog.=) o.oid;
        END IF;
        IF now_in IS NULL OR now_in OPERATOR(pg_catalog.<>) own THEN
            RAISE EXCEPTION 'pg_snowflake''s % % was not moved into the schema snowflake', o.kind, o.name
                USING ERRCODE = '42501',
                      HINT = 'Was a schema renamed while the script ran? Run ALTER EXTENSION pg_snowflake UPDATE again.';
        END IF;
    END LOOP;
END
$move$;

-- ../claims_check.sql
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
CREATE OR REPLACE FUNCTION snowflake.snowflake_claims_check() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $check$
DECLARE
    other record;
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
           AND o.system_identifier OPERATOR(pg_catalog.<>) NEW.system_identifier
           AND o.since OPERATOR(pg_catalog.<) NEW.expires
           AND NEW.since OPERATOR(pg_catalog.<) o.expires
           AND (TG_OP OPERATOR(pg_catalog.=) 'INSERT'
                OR NOT (o.since OPERATOR(pg_catalog.<) OLD.expires
                        AND OLD.since OPERATOR(pg_catalog.<) o.expires))
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
                         'SELECT * FROM snowflake.snowflake_clashes lists every clash.';
    END LOOP;
    RETURN NULL;
END
$check$;

CREATE OR REPLACE TRIGGER snowflake_claims_check AFTER INSERT OR UPDATE ON snowflake.snowflake_claims
FOR EACH ROW EXECUTE FUNCTION snowflake.snowflake_claims_check();
ALTER TABLE snowflake.snowflake_claims ENABLE ALWAYS TRIGGER snowflake_claims_check;
-- ../clashes.sql
-- Two clusters clash when they claim the same worker id of the same layout at overlapping
-- times. A worker id reused after its first cluster stopped (a replaced server, a pg_upgrade,
-- which gives a new system identifier) does not clash: the claims do not overlap. A clash stays
-- listed after it ended (ids of that time may be equal), with ongoing false: monitoring alerts
-- on `WHERE ongoing`, and deleting a stale claim clears its history.
--
-- A view runs with its owner's rights and binds its operators when it is created: every one is
-- named by schema, so that none can be one a less privileged role planted on the search_path.
CREATE OR REPLACE VIEW snowflake.snowflake_clashes AS
SELECT a.worker_id, a.layout,
       a.node_name, a.system_identifier,
       b.node_name AS other_node_name, b.system_identifier AS other_system_identifier,
       greatest(a.since, b.since) AS since,
       least(a.expires, b.expires) AS until,
       least(a.expires, b.expires) OPERATOR(pg_catalog.>) pg_catalog.now() AS ongoing
  FROM snowflake.snowflake_claims a
  JOIN snowflake.snowflake_claims b
    ON b.worker_id OPERATOR(pg_catalog.=) a.worker_id
   AND b.layout OPERATOR(pg_catalog.=) a.layout
   -- Each pair once, in the order of the node names.
   AND (b.node_name, b.system_identifier) OPERATOR(pg_catalog.>) (a.node_name, a.system_identifier)
   AND a.since OPERATOR(pg_catalog.<) b.expires
   AND b.since OPERATOR(pg_catalog.<) a.expires;
-- ../adopt.sql
-- snowflake_adopt(tbl, col): switches a bigserial or identity column to DEFAULT snowflake_next()
-- in the caller's transaction, and moves the generator above the column's largest value (see
-- src/adopt.rs, where it is written: pgrx cannot declare an argument of type name). It runs with
-- the caller's rights; its search_path is pg_catalog alone (pg_temp last), and row_security is
-- off, so that a row-level security policy that would hide some of the column's values from the
-- caller makes it fail instead of advancing past too small a value.
CREATE OR REPLACE FUNCTION @extschema@.snowflake_adopt(tbl regclass, col name) RETURNS void
LANGUAGE c VOLATILE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
SET row_security = off
AS 'MODULE_PATHNAME', 'snowflake_adopt_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_adopt(regclass, name) IS
    'Switches a bigserial or identity column to DEFAULT snowflake_next(), above its largest value';

-- The registry: namespaces of one layout each, worker ids keyed by namespace alone.
-- ../registry_namespaces.sql
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
-- ../registry_compat.sql
-- Members of pg_snowflake 0.3.0 during a rolling upgrade (the registry first, then the members):
-- they call snowflake_registry_lease() in the extension's schema with their layout's name and
-- learn what happened from the message of an error. These two functions answer them as 0.3.0's
-- registry did, through the registry of this release.

-- The fields of a layout as pg_snowflake 0.3.0 named it (its Layout::describe): a preset's name,
-- or `custom (41 bits of 1 ms since 2010-11-04T01:42:54.657Z, 10 worker bits, 12 sequence bits)`.
-- All NULL for any other text. The presets' fields are those of src/layout.rs (a #[pg_test]
-- checks that they agree).
CREATE OR REPLACE FUNCTION snowflake.snowflake_registry_layout_fields(layout text,
    OUT epoch_ms bigint, OUT unit_ms integer, OUT time_bits integer, OUT worker_bits integer,
    OUT sequence_bits integer, OUT worker_last boolean)
LANGUAGE plpgsql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $fields$
#variable_conflict use_variable
DECLARE
    m text[];
BEGIN
    CASE layout
        WHEN 'twitter' THEN
            SELECT 1288834974657, 1, 41, 10, 12, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'discord' THEN
            SELECT 1420070400000, 1, 41, 10, 12, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'sonyflake' THEN
            SELECT 1409529600000, 10, 39, 16, 8, true
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'instagram' THEN
            SELECT 1314220021721, 1, 41, 13, 10, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        WHEN 'js53' THEN
            SELECT 1735689600000, 10, 38, 6, 9, false
              INTO epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits, worker_last;
        ELSE
            m := pg_catalog.regexp_match(layout,
                '^custom \((\d{1,2}) bits of (\d{1,4}) ms since (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z), (\d{1,2}) worker bits, (\d{1,2}) sequence bits\)$');
            IF m IS NOT NULL THEN
                time_bits := m[1]::pg_catalog.int4;
                unit_ms := m[2]::pg_catalog.int4;
                epoch_ms := pg_catalog.round(pg_catalog.date_part('epoch',
                                m[3]::pg_catalog.timestamptz) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8;
                worker_bits := m[4]::pg_catalog.int4;
                sequence_bits := m[5]::pg_catalog.int4;
                worker_last := false;
            END IF;
    END CASE;
END
$fields$;

-- 0.3.0's signature and answers: a lease as four columns; a held worker id and a full namespace
-- as errors 55000 whose messages hold the words its members look for ("leased to another
-- cluster", "is free"); a namespace of another layout as an error 55000 that says so. Runs as
-- its owner, so that the members' role needs EXECUTE on this function only, as it did.
CREATE OR REPLACE FUNCTION @extschema@.snowflake_registry_lease(
    namespace text,
    layout text,
    max_worker_id integer,
    wanted integer,
    system_identifier bigint,
    node_name text,
    lease_ms bigint,
    covered_until_ms bigint)
RETURNS TABLE (worker_id integer, expires timestamptz, start_above_ms bigint,
               recorded_until_ms bigint)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $compat$
#variable_conflict use_variable
DECLARE
    f record;
    a record;
BEGIN
    f := snowflake.snowflake_registry_layout_fields(layout);
    IF f.epoch_ms IS NULL
       OR ((1::pg_catalog.int8 OPERATOR(pg_catalog.<<) f.worker_bits) OPERATOR(pg_catalog.-) 1)
          OPERATOR(pg_catalog.<>) max_worker_id THEN
        RAISE EXCEPTION 'layout "%" is not one that pg_snowflake 0.3.0 describes', layout
            USING ERRCODE = '22023',
                  HINT = 'Update this member to the registry''s release of pg_snowflake.';
    END IF;
    SELECT l.* INTO STRICT a FROM snowflake.snowflake_registry_lease(namespace,
        pg_catalog.split_part(layout, ' ', 1), f.epoch_ms, f.unit_ms, f.time_bits,
        f.worker_bits, f.sequence_bits, f.worker_last, wanted, system_identifier, node_name,
        lease_ms, covered_until_ms) l;
    CASE a.outcome
        WHEN 'granted' THEN
            RETURN QUERY SELECT a.worker_id, a.expires, a.start_above_ms, a.recorded_until_ms;
        WHEN 'held' THEN
            RAISE EXCEPTION 'worker id % of namespace "%" is leased to another cluster',
                    wanted, namespace
                USING ERRCODE = '55000',
                      HINT = 'Give this server another snowflake.worker_id, or leave it unset to lease a free one.';
        WHEN 'full' THEN
            RAISE EXCEPTION 'no worker id of namespace "%" is free', namespace
                USING ERRCODE = '55000',
                      HINT = 'Use another snowflake.registry_namespace, a layout with more worker bits, or wait for a lease to run out.';
        ELSE
            RAISE EXCEPTION 'namespace "%" makes ids of layout %, not of layout %', namespace,
                    a.namespace_layout, layout
                USING ERRCODE = '55000',
                      HINT = 'Give the servers of each layout a namespace of their own (snowflake.registry_namespace).';
    END CASE;
END
$compat$;
COMMENT ON FUNCTION @extschema@.snowflake_registry_lease(text, text, integer, integer, bigint, text, bigint, bigint) IS
    'Leases a worker id to a member of pg_snowflake 0.3.0 (members of later releases call snowflake.snowflake_registry_lease)';

-- Who may call them: only those the administrator grants. Taken back from everyone else,
-- whatever default privileges granted, as they are created (an update from 0.3.0 grants the
-- members' roles again). The old signature lives in the extension's schema, found here by its
-- membership in the extension; the script pinned that schema's name (pin_schema.sql).
DO $privileges$
DECLARE
    grant_ record;
BEGIN
    FOR grant_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS object,
               a.grantee, p.proowner AS owner
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
          LEFT JOIN LATERAL pg_catalog.aclexplode(p.proacl) a ON true
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                                  WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')
           AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND ((p.proname OPERATOR(pg_catalog.=) 'snowflake_registry_lease'
                 AND p.pronargs OPERATOR(pg_catalog.=) 8)
                OR p.proname OPERATOR(pg_catalog.=) 'snowflake_registry_layout_fields')
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', grant_.object);
        IF grant_.grantee OPERATOR(pg_catalog.<>) ALL (ARRAY[0, grant_.owner]) THEN
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
                                      grant_.grantee::pg_catalog.regrole);
        END IF;
    END LOOP;
END
$privileges$;
DO $rekey$
DECLARE
    moved record;
    said text;
BEGIN
    -- A namespace keeps the layout that most of its rows have (of those as many, the one
    -- renewed last); the rows of other layouts move to a namespace of their own, named after
    -- their layout, whose coverage their servers keep if they lease there (they are refused in
    -- the old one: its ids and theirs could be equal). A layout is its fields, not its name.
    FOR moved IN
        WITH f AS (
            SELECT g.ctid AS row_id, g.namespace, g.layout, g.renewed,
                   pg_catalog.concat_ws(',', l.epoch_ms, l.unit_ms, l.time_bits, l.worker_bits,
                                        l.sequence_bits, l.worker_last) AS fields
              FROM snowflake.snowflake_registry g,
                   LATERAL snowflake.snowflake_registry_layout_fields(g.layout) l),
        groups AS (
            SELECT f.namespace, f.fields, pg_catalog.count(*) AS how_many,
                   pg_catalog.max(f.renewed) AS last,
                   pg_catalog.min(f.layout) FILTER (
                       WHERE pg_catalog.strpos(f.layout, ' ') OPERATOR(pg_catalog.=) 0) AS preset
              FROM f GROUP BY f.namespace, f.fields),
        kept AS (
            SELECT DISTINCT ON (k.namespace) k.namespace, k.fields
              FROM groups k ORDER BY k.namespace, k.how_many DESC, k.last DESC)
        SELECT f.row_id, f.namespace, f.layout,
               -- 63 characters at most, as members can name it: the namespace cut to fit.
               pg_catalog.left(f.namespace, 62 OPERATOR(pg_catalog.-) pg_catalog.length(s.suffix))
               OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) s.suffix AS to_namespace
          FROM f
          JOIN groups gr ON gr.namespace OPERATOR(pg_catalog.=) f.namespace
                        AND gr.fields OPERATOR(pg_catalog.=) f.fields
          JOIN kept k ON k.namespace OPERATOR(pg_catalog.=) f.namespace,
               LATERAL (SELECT COALESCE(gr.preset, 'custom-' OPERATOR(pg_catalog.||)
                                        pg_catalog.left(pg_catalog.md5(f.fields), 8)) AS suffix) s
         WHERE f.fields OPERATOR(pg_catalog.<>) k.fields
         ORDER BY 4
    LOOP
        UPDATE snowflake.snowflake_registry g SET namespace = moved.to_namespace
         WHERE g.ctid OPERATOR(pg_catalog.=) moved.row_id;
        CONTINUE WHEN moved.to_namespace OPERATOR(pg_catalog.=) said;
        said := moved.to_namespace;
        -- A WARNING: an extension's script shows its client nothing below that level.
        RAISE WARNING 'the registry''s worker ids of layout % in namespace "%" are now in namespace "%"',
                moved.layout, moved.namespace, moved.to_namespace
            USING DETAIL = 'A namespace is one id space, of one layout.',
                  HINT = pg_catalog.format('Set snowflake.registry_namespace = %L on the servers of that layout.',
                                           moved.to_namespace);
    END LOOP;

    -- Each namespace's layout, by a preset's name where one of its rows has one.
    INSERT INTO snowflake.snowflake_registry_namespaces
           (namespace, layout, epoch_ms, unit_ms, time_bits, worker_bits, sequence_bits,
            worker_last, since)
    SELECT DISTINCT ON (g.namespace) g.namespace, pg_catalog.split_part(g.layout, ' ', 1),
           f.epoch_ms, f.unit_ms, f.time_bits, f.worker_bits, f.sequence_bits, f.worker_last,
           (SELECT pg_catalog.min(o.since) FROM snowflake.snowflake_registry o
             WHERE o.namespace OPERATOR(pg_catalog.=) g.namespace)
      FROM snowflake.snowflake_registry g,
           LATERAL snowflake.snowflake_registry_layout_fields(g.layout) f
     WHERE f.epoch_ms IS NOT NULL
     ORDER BY g.namespace, pg_catalog.strpos(g.layout, ' ') OPERATOR(pg_catalog.=) 0 DESC,
              g.renewed DESC;

    -- Layouts of other names and the same fields are one layout now: their rows of one worker
    -- id become one, held by the row that expires last, covering all that any of them covered.
    UPDATE snowflake.snowflake_registry k
       SET covered_until_ms = m.covered, start_above_ms = m.start_above
      FROM (SELECT g.namespace, g.worker_id,
                   pg_catalog.max(g.covered_until_ms) AS covered,
                   pg_catalog.max(g.start_above_ms) AS start_above
              FROM snowflake.snowflake_registry g
             GROUP BY g.namespace, g.worker_id) m
     WHERE k.namespace OPERATOR(pg_catalog.=) m.namespace
       AND k.worker_id OPERATOR(pg_catalog.=) m.worker_id;
    DELETE FROM snowflake.snowflake_registry g
     WHERE g.ctid OPERATOR(pg_catalog.<>) ALL (
           SELECT DISTINCT ON (k.namespace, k.worker_id) k.ctid
             FROM snowflake.snowflake_registry k
            ORDER BY k.namespace, k.worker_id, k.expires DESC);

    -- A coverage below 0 was never a time (0.3.0 took one from any member).
    UPDATE snowflake.snowflake_registry g
       SET covered_until_ms = GREATEST(g.covered_until_ms, 0),
           start_above_ms = GREATEST(g.start_above_ms, 0)
     WHERE g.covered_until_ms OPERATOR(pg_catalog.<) 0
        OR g.start_above_ms OPERATOR(pg_catalog.<) 0;

    ALTER TABLE snowflake.snowflake_registry DROP CONSTRAINT snowflake_registry_pkey;
    ALTER TABLE snowflake.snowflake_registry DROP COLUMN layout;
    ALTER TABLE snowflake.snowflake_registry ADD PRIMARY KEY (namespace, worker_id),
        ADD CHECK (covered_until_ms OPERATOR(pg_catalog.>=) 0),
        ADD CHECK (start_above_ms OPERATOR(pg_catalog.>=) 0);
END
$rekey$;
-- ../registry_lease.sql
-- Leases a worker id of a namespace to a cluster, or renews its lease; called by each member's
-- registry worker (src/registry/worker.rs). With `wanted` NULL any free worker id: the lowest
-- never leased, else the one whose lease ran out longest ago; else exactly `wanted`. The primary
-- key decides between clusters asking at once: an INSERT of a new worker id waits for the
-- other's, and the update of an expired one takes its row lock and checks the expiry again, so
-- a worker id is never granted twice.
--
-- The answer is a row whose `outcome` says what happened, never a message to parse:
--   granted  worker_id, expires, start_above_ms (the previous holders' coverage, to start above)
--            and recorded_until_ms (the coverage recorded for this cluster, at most what it asked)
--   held     `wanted` is another cluster's; `holder` names it for superusers and pg_monitor only
--   full     no worker id of the namespace is free
--   layout   the namespace makes ids of another layout: `namespace_layout` describes it
-- Calls it cannot answer (a null, a value out of range) are errors: 22004, 22023.
--
-- SECURITY DEFINER, so that the role members connect as needs EXECUTE only and can change the
-- registry only as this function does: a coverage only grows and is never negative or further
-- ahead than the registry's clock plus the lease and a minute (a member whose clock runs far
-- ahead gets less than it asked, and refuses ids once its clock passes that); an expiry only
-- moves later; a held worker id is never taken. Its search_path holds only pg_catalog, and its
-- tables live in the extension's own schema, which only a superuser can rename (schema.sql): it
-- checks that a superuser still owns that schema before it reads through its name.
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
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
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
       OR lease_ms IS NULL OR covered_until_ms IS NULL THEN
        RAISE EXCEPTION 'only the worker id may be null'
            USING ERRCODE = '22004',
                  HINT = 'snowflake.snowflake_registry_lease() is called by the registry worker of each member.';
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
    IF lease_ms OPERATOR(pg_catalog.<) 1000 OR lease_ms OPERATOR(pg_catalog.>) 86400000
       OR covered_until_ms OPERATOR(pg_catalog.<) 0
       OR (wanted IS NOT NULL AND (wanted OPERATOR(pg_catalog.<) 0
                                   OR wanted OPERATOR(pg_catalog.>) max_worker)) THEN
        RAISE EXCEPTION 'worker id %, lease of % ms or coverage until % ms is out of range',
                wanted, lease_ms, covered_until_ms
            USING ERRCODE = '22023',
                  HINT = pg_catalog.format('Worker ids run from 0 to %s; leases last 1 s to 1 day; '
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
            NULL::pg_catalog.text;
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

    -- This cluster's lease, renewed (also one that ran out while no other cluster took it).
    -- A renewal never moves the expiry earlier: a shorter lease asked for now applies from the
    -- time the current one ends.
    UPDATE snowflake.snowflake_registry g
       SET node_name = node_name, renewed = pg_catalog.now(),
           expires = GREATEST(g.expires, pg_catalog.now() OPERATOR(pg_catalog.+) lease_for),
           covered_until_ms = GREATEST(g.covered_until_ms, asked)
     WHERE (g.namespace, g.worker_id) OPERATOR(pg_catalog.=)
           (SELECT o.namespace, o.worker_id FROM snowflake.snowflake_registry o
             WHERE o.namespace OPERATOR(pg_catalog.=) namespace
               AND o.system_identifier OPERATOR(pg_catalog.=) system_identifier
               AND o.worker_id OPERATOR(pg_catalog.<=) max_worker
               AND (wanted IS NULL OR o.worker_id OPERATOR(pg_catalog.=) wanted)
             ORDER BY o.expires DESC LIMIT 1 FOR UPDATE)
    RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms INTO r;
    IF r IS NOT NULL THEN
        RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                            r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                            NULL::pg_catalog.text;
        RETURN;
    END IF;

    -- A worker id of its own, never leased (the lowest first); then, in the loop below, one
    -- whose lease ran out longest ago (a server that was down briefly may still come back for
    -- its own), whose next holder starts above everything its previous holders covered.
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
                                                       node_name, lease_for, asked);
            EXCEPTION WHEN lock_not_available THEN
                r := NULL;
            END;
            skipped := skipped OPERATOR(pg_catalog.||) candidate;
            IF r IS NOT NULL THEN
                RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                                    r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                                    NULL::pg_catalog.text;
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
                                                   node_name, lease_for, asked);
        EXCEPTION WHEN lock_not_available THEN
            r := NULL;
        END;
        IF r IS NOT NULL THEN
            RETURN QUERY SELECT 'granted'::pg_catalog.text, r.worker_id, r.expires,
                                r.start_above_ms, r.covered_until_ms, NULL::pg_catalog.text,
                                NULL::pg_catalog.text;
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
                   END
              FROM snowflake.snowflake_registry g
             WHERE g.namespace OPERATOR(pg_catalog.=) namespace
               AND g.worker_id OPERATOR(pg_catalog.=) wanted;
        RETURN;
    END IF;
    RETURN QUERY SELECT 'full'::pg_catalog.text, NULL::pg_catalog.int4,
        NULL::pg_catalog.timestamptz, NULL::pg_catalog.int8, NULL::pg_catalog.int8,
        NULL::pg_catalog.text, NULL::pg_catalog.text;
END
$lease$;

-- Takes `candidate` for a cluster if it was never leased or its lease ran out: the expired row,
-- updated under its row lock with the expiry checked again, or a new row. NULL when another
-- cluster holds it. A held row is never locked: an UPDATE locks only the rows its condition
-- selects (the expired ones), and an insert that finds the row there does nothing, so that no
-- member's call, however long its transaction stays open, leaves another's worker id locked.
-- Called by snowflake_registry_lease() alone (it runs as the same owner).
CREATE FUNCTION snowflake.snowflake_registry_take(
    namespace text,
    candidate integer,
    system_identifier bigint,
    node_name text,
    lease_for interval,
    asked bigint,
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
           covered_until_ms = GREATEST(g.covered_until_ms, asked)
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
            covered_until_ms, start_above_ms)
    VALUES (namespace, candidate, system_identifier, node_name, pg_catalog.now(),
            pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) lease_for, asked, 0)
    ON CONFLICT DO NOTHING
    RETURNING g.worker_id, g.expires, g.start_above_ms, g.covered_until_ms
         INTO worker_id, expires, start_above_ms, covered_until_ms;
END
$take$;

-- Who may lease is the administrator's choice (GRANT EXECUTE ... TO the members' role): nobody
-- else, whatever default privileges granted at creation. Monitoring may read which cluster holds
-- which worker id. Not in privileges.sql, which every upgrade script runs: it would take the
-- members' grants back, and they would stop leasing.
DO $privileges$
DECLARE
    grant_ record;
BEGIN
    FOR grant_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS object,
               a.grantee
          FROM pg_catalog.pg_proc p, pg_catalog.aclexplode(p.proacl) a
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   'snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer, integer, boolean, integer, bigint, text, bigint, bigint)'::pg_catalog.regprocedure,
                   'snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint)'::pg_catalog.regprocedure])
           AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
        UNION
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass), a.grantee
          FROM pg_catalog.pg_class c, pg_catalog.aclexplode(c.relacl) a
         WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY[
                   'snowflake.snowflake_registry'::pg_catalog.regclass,
                   'snowflake.snowflake_registry_namespaces'::pg_catalog.regclass])
           AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', grant_.object,
            CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
            END);
    END LOOP;
END
$privileges$;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer, integer, boolean, integer, bigint, text, bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION snowflake.snowflake_registry_take(text, integer, bigint, text, interval, bigint) FROM PUBLIC;
REVOKE ALL ON snowflake.snowflake_registry, snowflake.snowflake_registry_namespaces FROM PUBLIC;
GRANT SELECT ON snowflake.snowflake_registry, snowflake.snowflake_registry_namespaces TO pg_monitor;

-- The members' roles of 0.3.0, found above: EXECUTE on the old signature (taken back by the
-- creation of registry_compat.sql) and on the new function, granted by name and checked by OID.
DO $grants$
DECLARE
    old_lease pg_catalog.oid;
    new_lease pg_catalog.oid := 'snowflake.snowflake_registry_lease(text, text, bigint, integer, integer, integer, integer, boolean, integer, bigint, text, bigint, bigint)'::pg_catalog.regprocedure;
    member_role pg_catalog.oid;
BEGIN
    SELECT p.oid INTO old_lease FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) (SELECT e.oid FROM pg_catalog.pg_extension e
                                              WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake')
       AND d.deptype OPERATOR(pg_catalog.=) 'e'
       AND p.proname OPERATOR(pg_catalog.=) 'snowflake_registry_lease'
       AND p.pronargs OPERATOR(pg_catalog.=) 8;
    FOR member_role IN
        SELECT r::pg_catalog.oid FROM pg_catalog.unnest(pg_catalog.string_to_array(
            pg_catalog.current_setting('pg_snowflake.lease_grantees'), ',')) r
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s, %s TO %s',
            old_lease::pg_catalog.regprocedure, new_lease::pg_catalog.regprocedure,
            member_role::pg_catalog.regrole);
        IF NOT (pg_catalog.has_function_privilege(member_role, old_lease, 'EXECUTE')
                AND pg_catalog.has_function_privilege(member_role, new_lease, 'EXECUTE')) THEN
            RAISE EXCEPTION 'role % was not granted the lease functions again', member_role::pg_catalog.regrole
                USING ERRCODE = '42501',
                      HINT = 'Was a schema or a role renamed while the script ran? Run ALTER EXTENSION pg_snowflake UPDATE again.';
        END IF;
    END LOOP;
END
$grants$;
-- ../privileges.sql
-- Who may call and read what (docs/security.md), and where everything is. Run at the end of the
-- install script and of every upgrade script, so that a database ends with exactly these
-- privileges whatever path it took.
--
-- Every object is found by its membership in the extension (pg_depend, by OID), never through a
-- schema's name: the owner of the extension's schema (on 15 and later the database owner owns
-- `public`) can rename it while this script runs, and a statement that names `public` would then
-- reach objects of theirs. GRANT and REVOKE take names (printed here from the OIDs): by now this
-- transaction has created or replaced objects in the extension's schema, and PostgreSQL lets
-- nobody rename a schema while another transaction that created objects in it is open, so the
-- names lead where the OIDs do. What a rename before that could do, send the script's first
-- CREATEs into another schema, is checked at the end, by OID: every object of the extension must
-- be in one of its schemas, or the script fails, and with it the whole CREATE EXTENSION or ALTER
-- EXTENSION.
--
-- First every grant of the administrators' objects to anyone but their owner is taken back:
-- default privileges (ALTER DEFAULT PRIVILEGES ... GRANT EXECUTE ON FUNCTIONS TO app, or ON
-- TABLES) would otherwise have given them to roles at CREATE EXTENSION, and a REVOKE FROM PUBLIC
-- does not take such a grant back. Then what is meant to be granted is granted. An administrator
-- may grant more afterwards; snowflake_reset_layout() and snowflake_claim() check for a superuser
-- themselves, whatever is granted. (The registry's functions and tables keep the grants the
-- administrator gave the members: registry_lease.sql sets them at creation only.)
DO $privileges$
DECLARE
    ext pg_catalog.oid;
    home pg_catalog.oid;
    own pg_catalog.oid;
    object_ record;
    grant_ record;
    stray text;
BEGIN
    SELECT e.oid, e.extnamespace INTO ext, home FROM pg_catalog.pg_extension e
     WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake';
    SELECT n.oid INTO own FROM pg_catalog.pg_namespace n
      JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
     WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake' AND r.rolsuper
       AND (n.oid OPERATOR(pg_catalog.=) home OR EXISTS (
            SELECT FROM pg_catalog.pg_depend d
             WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
               AND d.objid OPERATOR(pg_catalog.=) n.oid
               AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
               AND d.refobjid OPERATOR(pg_catalog.=) ext
               AND d.deptype OPERATOR(pg_catalog.=) 'e'));
    IF own IS NULL THEN
        RAISE EXCEPTION 'the schema snowflake of pg_snowflake is missing or not owned by a superuser'
            USING ERRCODE = '42501',
                  HINT = 'Was it renamed while the script ran? Run the script again.';
    END IF;

    -- The administrators' functions and the claims.
    FOR object_ IN
        SELECT pg_catalog.format('FUNCTION %s', p.oid::pg_catalog.regprocedure) AS name,
               p.proname AS short, p.proacl AS acl, p.proowner AS owner
          FROM pg_catalog.pg_proc p
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_stats',
                   'snowflake_advance_past', 'snowflake_reset_layout', 'snowflake_claim',
                   'snowflake_adopt', 'snowflake_claims_check']::pg_catalog.name[])
        UNION ALL
        SELECT pg_catalog.format('TABLE %s', c.oid::pg_catalog.regclass), c.relname, c.relacl,
               c.relowner
          FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) c.oid
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
           AND c.relname OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_claims',
                   'snowflake_clashes']::pg_catalog.name[])
    LOOP
        FOR grant_ IN SELECT DISTINCT a.grantee FROM pg_catalog.aclexplode(object_.acl) a
                       WHERE a.grantee OPERATOR(pg_catalog.<>) object_.owner LOOP
            -- regrole prints a role's name quoted where it needs to be; 0 is PUBLIC.
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s', object_.name,
                CASE WHEN grant_.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                     ELSE grant_.grantee::pg_catalog.regrole::pg_catalog.text
                END);
        END LOOP;
        -- A function nobody was granted anything on has PUBLIC's EXECUTE all the same.
        EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM PUBLIC', object_.name);
        -- Claims name servers (host names, system identifiers): readable by monitoring,
        -- written by superusers (and the apply workers of their subscriptions) only.
        IF object_.short OPERATOR(pg_catalog.=) 'snowflake_stats' THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON %s TO pg_monitor', object_.name);
        ELSIF object_.short OPERATOR(pg_catalog.=) ANY (ARRAY['snowflake_claims',
                  'snowflake_clashes']::pg_catalog.name[]) THEN
            EXECUTE pg_catalog.format('GRANT SELECT ON %s TO pg_monitor', object_.name);
        END IF;
    END LOOP;

    -- Every object of the extension in its schema or in a schema of its own (one it created,
    -- that a superuser owns: `snowflake`, and in the test build `tests`): a CREATE that a rename
    -- sent into another schema would leave it where another role may replace it.
    SELECT pg_catalog.string_agg(pg_catalog.pg_describe_object(d.classid, d.objid, 0), ', ')
      INTO stray
      FROM pg_catalog.pg_depend d
     WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e'
       AND COALESCE(
             (SELECT p.pronamespace FROM pg_catalog.pg_proc p
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                 AND p.oid OPERATOR(pg_catalog.=) d.objid),
             (SELECT c.relnamespace FROM pg_catalog.pg_class c
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                 AND c.oid OPERATOR(pg_catalog.=) d.objid),
             (SELECT t.typnamespace FROM pg_catalog.pg_type t
               WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
                 AND t.oid OPERATOR(pg_catalog.=) d.objid),
             home) OPERATOR(pg_catalog.<>) ALL (ARRAY[home] OPERATOR(pg_catalog.||) ARRAY(
                 SELECT n.oid FROM pg_catalog.pg_namespace n
                   JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                   JOIN pg_catalog.pg_depend m ON m.objid OPERATOR(pg_catalog.=) n.oid
                  WHERE m.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                    AND m.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                    AND m.refobjid OPERATOR(pg_catalog.=) ext
                    AND m.deptype OPERATOR(pg_catalog.=) 'e'
                    AND r.rolsuper));
    IF stray IS NOT NULL THEN
        RAISE EXCEPTION 'pg_snowflake''s objects are outside its schemas: %', stray
            USING ERRCODE = '42501',
                  HINT = 'Was a schema renamed while the script ran? Run the script again.';
    END IF;
END
$privileges$;
