//! `snowflake_adopt()` on a Citus table: which column Citus distributes it by, and the move of
//! every node's generator above the column's largest id, through Citus, each node checked to
//! call pg_snowflake's own function (a node's schema owner may have planted another).

use crate::built::text_of;
use crate::errors::{self, Code};
use crate::text::printable;
use pgrx::prelude::*;

/// `Some(distribution column)` for a table Citus knows (`None` inside for a reference or Citus
/// local table, which has none), `None` for any other table or without Citus. Read from Citus's
/// catalog in pg_catalog, where only a superuser creates relations: the distribution column is
/// the `varattno` of the Var that `partkey` holds in its text form.
pub fn distribution_column(tbl: pg_sys::Oid) -> Option<Option<i16>> {
    let has_citus = Spi::get_one::<bool>(
        "SELECT pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL",
    ) == Ok(Some(true));
    if !has_citus {
        return None;
    }
    let (found, attnum) = Spi::get_two_with_args::<bool, i16>(
        "SELECT true, pg_catalog.substring(p.partkey, ':varattno ([0-9]+)')::pg_catalog.int2
           FROM pg_catalog.pg_dist_partition p
          WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1",
        &[tbl.into()],
    )
    .unwrap_or((None, None));
    found.map(|_| attnum)
}

/// Citus changes no default of a distribution column (it raises XX000): this says what to do
/// first.
pub fn refuse_distribution_column(table: &str, column: &str) -> ! {
    // As SQL literals: a name with a quote in it must not make the hint's statements, pasted,
    // run something else.
    let (t, c) = (table.replace('\'', "''"), column.replace('\'', "''"));
    errors::report(
        Code::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("column \"{column}\" is the distribution column of Citus table {table}"),
        format!(
            "Make the table local first, adopt, and distribute it again: SELECT \
             undistribute_table('{t}'), then snowflake_adopt('{t}', '{c}'), then \
             create_distributed_table('{t}', '{c}')."
        ),
    )
    .detail(
        "Citus changes no default of a distribution column on a distributed table; nothing was \
         changed.",
    )
    .raise()
}

/// Moves the generator of every node of the Citus cluster above `top`, by calling this
/// extension's `snowflake_advance_past` through Citus, as the caller. Citus runs the command on
/// each node in a connection of its own, outside this transaction: a node that moved stays moved
/// when this call fails, which is harmless (a generator only ever moves up).
///
/// Each node runs the command as the caller, often a superuser, in a schema that a database
/// owner may own (`public`, from 15 on). On a worker where that owner renamed the schema and
/// planted a function of that name (with `citus.enable_ddl_propagation` off, nothing reaches the
/// coordinator), a superuser's adopt ran it. A check in the same statement
/// (`CASE WHEN <member> THEN <call> END`) was not enough: the planner plans the call before the
/// check runs, and runs an IMMUTABLE function of constants while it plans (found by a hostile
/// review). So the command is a `DO` block, whose statements are planned only when they run:
/// it finds what this node's name for `snowflake_advance_past(int8)` (the schema the default
/// names too) is there, checks by its membership that it is pg_snowflake's own, locks its
/// schema's row as a superuser (a rename then waits until the block is done, as
/// sql/pin_schema.sql does), and only then calls it by that name, checking the name again after
/// the call (an error then rolls back whatever ran); where the name is not pg_snowflake's, it
/// fails with `NOT_OURS` and the node counts as failed. Every function and operator in it is
/// named by schema (the node's search_path is the database owner's), and the id is a literal
/// (`-5::int8` would be a unary minus found by that search_path).
pub fn advance_every_node(advance: pg_sys::Oid, top: i64, table: &str) {
    // The name this node calls it by, which every node's shards are given too (the default).
    let name = text_of(
        "(SELECT pg_catalog.format('%I.%I(pg_catalog.int8)', n.nspname, p.proname)
            FROM pg_catalog.pg_proc p
            JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
           WHERE p.oid OPERATOR(pg_catalog.=) $1)",
        &[advance.into()],
    );
    let command = text_of(
        &mutant_text!(
            "pg_catalog.format($do$DO $pg_snowflake$
DECLARE
    schema_name pg_catalog.name;
    function_name pg_catalog.name;
    ours pg_catalog.oid;
BEGIN
    SELECT n.nspname, p.proname, p.oid INTO schema_name, function_name, ours
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure(%4$L)::pg_catalog.oid
       AND p.oid OPERATOR(pg_catalog.=) (%1$s);
    -- A superuser locks the schema's row: a rename waits until this is done (one before the
    -- lock fails the check below). Another role may not lock a catalog row; the checks around
    -- the call stand for it there.
    IF ours IS NOT NULL
       AND pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on' THEN
        PERFORM FROM pg_catalog.pg_namespace n
          WHERE n.oid OPERATOR(pg_catalog.=) (SELECT p.pronamespace FROM pg_catalog.pg_proc p
                                               WHERE p.oid OPERATOR(pg_catalog.=) ours)
            FOR UPDATE;
    END IF;
    IF ours IS NULL OR COALESCE(pg_catalog.to_regprocedure(pg_catalog.format(
           '%%I.%%I(pg_catalog.int8)', schema_name, function_name))::pg_catalog.oid, 0)
           OPERATOR(pg_catalog.<>) ours THEN
        RAISE EXCEPTION %2$L USING ERRCODE = '55000';
    END IF;
    EXECUTE pg_catalog.format('SELECT %%I.%%I(%%L::pg_catalog.int8)', schema_name,
                              function_name, %3$L);
    -- Whatever the call ran rolls back with this error.
    IF COALESCE(pg_catalog.to_regprocedure(pg_catalog.format(
           '%%I.%%I(pg_catalog.int8)', schema_name, function_name))::pg_catalog.oid, 0)
           OPERATOR(pg_catalog.<>) ours THEN
        RAISE EXCEPTION %2$L USING ERRCODE = '55000';
    END IF;
END
$pg_snowflake$$do$, $1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.text,
                   $4::pg_catalog.text)",
            adopt_planted: "\n       AND p.oid OPERATOR(pg_catalog.=) (%1$s);" => ";",
        ),
        &[OURS.into(), NOT_OURS.into(), top.to_string().into(), name.as_str().into()],
    );
    // What a node answered is its own text: each made printable (a newline in it would start a
    // line of the node's own in this server's log), five nodes at most.
    let failures = Spi::connect(|client| {
        client
            .select(
                "SELECT pg_catalog.format('node %s (%s:%s)', r.nodeid, d.nodename, d.nodeport),
                        pg_catalog.textsend(pg_catalog.left(r.result, 200))
                   FROM pg_catalog.run_command_on_all_nodes($1::pg_catalog.text) r
                   LEFT JOIN pg_catalog.pg_dist_node d
                          ON d.nodeid OPERATOR(pg_catalog.=) r.nodeid
                  WHERE NOT r.success OR r.result OPERATOR(pg_catalog.=) $2
                  ORDER BY r.nodeid",
                None,
                &[command.as_str().into(), NOT_OURS.into()],
            )?
            .map(|row| {
                let node = row.get::<String>(1)?.unwrap_or_default();
                let said = row.get::<Vec<u8>>(2)?.unwrap_or_default();
                Ok(format!("{} answered: {}", printable(node.as_bytes()), printable(&said)))
            })
            .collect::<Result<Vec<String>, pgrx::spi::SpiError>>()
    });
    match failures {
        Ok(failures) if failures.is_empty() => {}
        Ok(failures) => {
            let shown = failures.len().min(5);
            let mut text = failures[..shown].join("; ");
            if failures.len() > shown {
                text.push_str(&format!("; and {} nodes more", failures.len() - shown));
            }
            citus_nodes(table, &text)
        }
        Err(e) => citus_nodes(table, &printable(e.to_string().as_bytes())),
    }
}

/// What a node answers where `snowflake_advance_past` is not pg_snowflake's own function.
const NOT_OURS: &str = "snowflake_advance_past there is not pg_snowflake's";

/// pg_snowflake's own `snowflake_advance_past(int8)` on a node, found by its membership in the
/// extension (a query of the catalogs alone; no name of a schema in it).
const OURS: &str = "SELECT p.oid FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d
        ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND d.objid OPERATOR(pg_catalog.=) p.oid
       AND d.deptype OPERATOR(pg_catalog.=) 'e'
      JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
     WHERE e.extname OPERATOR(pg_catalog.=) 'pg_snowflake'
       AND p.proname OPERATOR(pg_catalog.=) 'snowflake_advance_past'
       AND p.pronargs OPERATOR(pg_catalog.=) 1
       AND p.proargtypes[0] OPERATOR(pg_catalog.=) 'pg_catalog.int8'::pg_catalog.regtype";

/// `snowflake_adopt()` on a Citus table could not move the generator of every node.
#[cold]
#[track_caller]
fn citus_nodes(table: &str, failures: &str) -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!(
            "snowflake_adopt() could not move the generator of every node of the Citus cluster \
             of {table}"
        ),
        "Every node needs pg_snowflake preloaded, a worker id, and the extension created \
         (CREATE EXTENSION on the coordinator reaches them); then run snowflake_adopt() again.",
    )
    .detail(format!(
        "Every node may make ids for a Citus table; {failures}. Nothing was changed (the \
         generators it moved only moved up)."
    ))
    .raise()
}
