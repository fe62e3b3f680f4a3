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
\ir ../pin_schema.sql
\ir ../schema.sql

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

\ir-replace ../claims_check.sql
\ir-replace ../clashes.sql
\ir-replace ../adopt.sql

-- The registry: namespaces of one layout each, worker ids keyed by namespace alone.
\ir ../registry_namespaces.sql
\ir-replace ../registry_compat.sql
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
\ir ../registry_lease.sql

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
\ir ../privileges.sql
