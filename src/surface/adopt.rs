//! `snowflake_adopt(tbl, col)`: switches a bigserial or identity column to
//! `DEFAULT snowflake_next()` in the caller's transaction, and moves the generator above the
//! column's largest value. Every step is an ordinary ALTER TABLE with its usual locks and
//! checks, and an error anywhere rolls all of it back (the generator's floor cannot roll back; it
//! only ever moves up, which is harmless).
//!
//! It runs with the caller's rights, often a superuser's, on a table in a schema that may belong
//! to someone else (on 15 and later the database owner owns `public`). A schema's owner can rename
//! it, and plant look-alikes under the old name, between any two statements. So nothing is
//! trusted by name:
//! - the table and the column arrive as an OID and an attribute number, and every catalog read
//!   uses those;
//! - the extension's functions are found by their membership in the extension, by OID; the
//!   generator is moved by a direct call, not through SQL;
//! - the statements PostgreSQL only takes by name (ALTER TABLE, DROP SEQUENCE) are followed by a
//!   check by OID that they changed what was meant (the column's default calls this extension's
//!   `snowflake_next()`, its identity is gone, the sequence is gone): if a rename sent one
//!   elsewhere, the check fails and everything rolls back;
//! - the query for the column's largest value may plan nothing but a scan of that very table
//!   (`planner::only_relation`): a view or another table put under the table's name fails before
//!   anything of it runs. It runs with the rights of the table's owner, as a security-restricted
//!   operation (planning it may run the owner's code, in an index expression), with a fresh
//!   snapshot, and with `row_security = off`, so that rows that policies hide are never silently
//!   left out: a table whose row-level security applies to its owner is refused.
//!
//! On a Citus table (distributed, reference or a Citus local table), every node of the cluster
//! may make ids for it (a write sent to a worker, the SELECTs of an INSERT ... SELECT), so the
//! generator of every node moves above the largest id, through Citus's
//! `run_command_on_all_nodes`; a node that cannot (no pg_snowflake there, no worker id) fails
//! the call and everything rolls back. Citus changes no default of a distribution column: that
//! is refused before anything changes, with the way round it (docs/citus.md).

use crate::built::{built, text_of};
use crate::errors::{self, Code};
use crate::{citus, generator, gucs, planner};
use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use std::ffi::CStr;

/// `snowflake_adopt(tbl regclass, col name)` (declared in sql/adopt.sql: pgrx has no `name`).
#[pg_extern(volatile, strict, parallel_unsafe, sql = false)]
fn snowflake_adopt(fcinfo: pg_sys::FunctionCallInfo) {
    // SAFETY: STRICT, called by PostgreSQL with its two arguments: a regclass (an OID) and a
    // name (a pointer to NameData, valid for the call).
    let (tbl, col) = unsafe {
        let tbl = pg_sys::Oid::from_datum(pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 0), false)
            .unwrap_or(pg_sys::InvalidOid);
        let name = pgrx::fcinfo::pg_getarg_datum_raw(fcinfo, 1).cast_mut_ptr::<pg_sys::NameData>();
        (tbl, CStr::from_ptr((*name).data.as_ptr()).to_owned())
    };
    // SAFETY: the OID of this very function, which PostgreSQL passes.
    let own_oid = unsafe { (*(*fcinfo).flinfo).fn_oid };
    adopt(tbl, &col, own_oid);
}

extension_sql_file!("../../sql/adopt.sql", name = "snowflake_adopt");

/// What the column had before.
enum Before {
    Identity,
    Sequence(pg_sys::Oid),
    OtherNextval(String),
    Nothing,
    Ours,
}

fn adopt(tbl: pg_sys::Oid, col: &CStr, own_oid: pg_sys::Oid) {
    let Column { table, attnum, name: column } = Column::checked(tbl, col);
    let next = member_function(own_oid, "snowflake_next", 0);
    let advance = member_function(own_oid, "snowflake_advance_past", 1);
    may_advance(advance);
    let citus = citus::adopt::distribution_column(tbl);
    if mutant!(adopt_distribution_column, { citus == Some(Some(attnum)) }, { false }) {
        citus::adopt::refuse_distribution_column(&table, &column);
    }
    let before = before(tbl, attnum, next);
    let changed = drop_default(tbl, attnum, &before);
    alter(tbl, attnum, "SET DEFAULT %s()", ", $3::pg_catalog.regproc", vec![next.into()]);
    mutant!(
        adopt_check,
        {
            check_adopted(tbl, attnum, next, &before);
        },
        {}
    );

    let top = largest(tbl, attnum, &table);
    if let Some(top) = top {
        mutant!(
            adopt_floor,
            {
                generator::get().advance_past(gucs::layout(), top);
            },
            {
                let _ = top;
            }
        );
        if citus.is_some() {
            mutant!(
                adopt_every_node,
                {
                    citus::adopt::advance_every_node(advance, top, &table);
                },
                {
                    let _ = (citus::adopt::advance_every_node, &table);
                }
            );
        }
    }
    let quoted =
        text_of(&format!("pg_catalog.quote_ident({ATTNAME})"), &[tbl.into(), attnum.into()]);
    let detail = match top {
        None => "The table is empty.".to_string(),
        Some(top) => format!("Every new id is above {top}, the largest one in the column."),
    };
    errors::note(format!(
        "column {quoted} of {table} now takes its ids from snowflake_next() ({changed})"
    ))
    .detail(detail)
    .notice();
}

/// The column to adopt, checked: a column of a table the caller owns, of type bigint.
struct Column {
    /// The table's name as `regclass` prints it.
    table: String,
    attnum: i16,
    /// The column's name as given.
    name: String,
}

impl Column {
    fn checked(tbl: pg_sys::Oid, col: &CStr) -> Column {
        let table = text_of("pg_catalog.format('%s', $1::pg_catalog.regclass)", &[tbl.into()]);
        let (relkind, owned) = Spi::get_two_with_args::<i8, bool>(
            "SELECT c.relkind,
                    pg_catalog.pg_has_role(CURRENT_USER, c.relowner, 'USAGE')
               FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
            &[tbl.into()],
        )
        .unwrap_or((None, None));
        if !matches!(relkind.map(|k| k as u8), Some(b'r' | b'p')) {
            not_a_table(&table);
        }
        if owned != Some(true) {
            errors::report(
                Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("must be owner of table {table}"),
                "Run snowflake_adopt() as the owner of the table, or as a superuser.",
            )
            .raise();
        }
        // SAFETY: a syscache lookup by OID and a NUL-terminated name.
        let attnum = unsafe { pg_sys::get_attnum(tbl, col.as_ptr()) };
        let column = col.to_string_lossy();
        if attnum <= 0 {
            errors::report(
                Code::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{column}\" of relation {table} does not exist"),
                "Pass the name of a bigint column of the table, as it is written in the table.",
            )
            .raise();
        }
        let type_oid = Spi::get_one_with_args::<pg_sys::Oid>(
            "SELECT a.atttypid FROM pg_catalog.pg_attribute a
              WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.=) $2",
            &[tbl.into(), attnum.into()],
        )
        .ok()
        .flatten()
        .unwrap_or(pg_sys::InvalidOid);
        if type_oid != pg_sys::INT8OID {
            let type_name = text_of("pg_catalog.format_type($1, NULL)", &[type_oid.into()]);
            let alter = text_of(
                &format!(
                    "pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I TYPE bigint;',
                                       $1::pg_catalog.regclass, {ATTNAME})"
                ),
                &[tbl.into(), attnum.into()],
            );
            errors::report(
                Code::ERRCODE_DATATYPE_MISMATCH,
                format!("column \"{column}\" of {table} is {type_name}, not bigint"),
                format!("Change the type first with {alter} then run snowflake_adopt() again."),
            )
            .detail("Snowflake ids need all 64 bits of a bigint.")
            .raise();
        }
        Column { table, attnum, name: column.into_owned() }
    }
}

/// `snowflake_adopt()` moves the generator as `snowflake_advance_past()` does, and needs the
/// right to call it as 0.3.0 did (it called it through SQL): a privilege of its own.
fn may_advance(advance: pg_sys::Oid) {
    if mutant!(
        adopt_advance_grant,
        {
            Spi::get_one_with_args::<bool>(
                "SELECT pg_catalog.has_function_privilege($1, 'EXECUTE')",
                &[advance.into()],
            ) != Ok(Some(true))
        },
        { false }
    ) {
        errors::report(
            Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
            "permission denied for function snowflake_advance_past",
            "Grant EXECUTE on snowflake_advance_past(bigint) too, or run it as a superuser.",
        )
        .detail("snowflake_adopt() moves the generator above the column's largest value.")
        .raise();
    }
}

/// Drops what made the column's values before (an identity, its own sequence, another default),
/// and says what it was.
fn drop_default(tbl: pg_sys::Oid, attnum: i16, before: &Before) -> String {
    match before {
        Before::Identity => {
            // Dropping the identity drops its sequence too.
            alter(tbl, attnum, "DROP IDENTITY", "", vec![]);
            "dropped its identity".to_string()
        }
        Before::Sequence(seq) => {
            alter(tbl, attnum, "DROP DEFAULT", "", vec![]);
            let name =
                text_of("pg_catalog.format('%s', $1::pg_catalog.regclass)", &[(*seq).into()]);
            // The column's own sequence (bigserial): nothing else can use it once it is gone.
            execute_built(
                "pg_catalog.format('DROP SEQUENCE %s', $1::pg_catalog.regclass)",
                &[(*seq).into()],
            );
            format!("dropped its sequence {name}")
        }
        Before::OtherNextval(def) => {
            alter(tbl, attnum, "DROP DEFAULT", "", vec![]);
            format!("dropped its default {def}")
        }
        Before::Nothing => "it had no default".into(),
        Before::Ours => "it already had this default".into(),
    }
}

/// The column's default or identity before.
fn before(tbl: pg_sys::Oid, attnum: i16, next: pg_sys::Oid) -> Before {
    let (identity, def) = Spi::get_two_with_args::<i8, Vec<u8>>(
        "SELECT a.attidentity,
                pg_catalog.textsend(pg_catalog.pg_get_expr(d.adbin, d.adrelid))
           FROM pg_catalog.pg_attribute a
           LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid OPERATOR(pg_catalog.=) a.attrelid
                                            AND d.adnum OPERATOR(pg_catalog.=) a.attnum
          WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.=) $2",
        &[tbl.into(), attnum.into()],
    )
    .unwrap_or((None, None));
    if identity.is_some_and(|i| i != 0) {
        return Before::Identity;
    }
    let Some(def) = def else {
        return Before::Nothing;
    };
    let def = String::from_utf8_lossy(&def).into_owned();
    if default_calls(tbl, attnum, next) {
        return Before::Ours;
    }
    // The sequence the default's nextval() uses, by the dependency PostgreSQL records, by OID.
    let nextval = Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_attrdef d
                          JOIN pg_catalog.pg_depend p ON p.objid OPERATOR(pg_catalog.=) d.oid
                         WHERE p.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                           AND p.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                           AND d.adrelid OPERATOR(pg_catalog.=) $1 AND d.adnum OPERATOR(pg_catalog.=) $2
                           AND d.adbin::pg_catalog.text OPERATOR(pg_catalog.~) '^\\{FUNCEXPR :funcid 1574 ')",
        &[tbl.into(), attnum.into()],
    ) == Ok(Some(true));
    if !nextval {
        let (column, table) = (column_name(tbl, attnum), table_name(tbl));
        errors::report(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("column \"{column}\" of {table} has a default that is not a sequence: {def}"),
            format!(
                "If ids from snowflake_next() should replace it, drop it first with ALTER TABLE \
                 {table} ALTER COLUMN \"{column}\" DROP DEFAULT; then run snowflake_adopt() again."
            ),
        )
        .raise();
    }
    // A sequence owned by the column (bigserial) goes with it; any other stays.
    let owned = Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT p.objid FROM pg_catalog.pg_depend p
          WHERE p.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
            AND p.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
            AND p.refobjid OPERATOR(pg_catalog.=) $1
            AND p.refobjsubid OPERATOR(pg_catalog.=) $2
            AND p.deptype OPERATOR(pg_catalog.=) 'a'
            AND (SELECT c.relkind FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) p.objid) OPERATOR(pg_catalog.=) 'S'",
        &[tbl.into(), i32::from(attnum).into()],
    )
    .ok()
    .flatten();
    match owned {
        Some(seq) => Before::Sequence(seq),
        None => Before::OtherNextval(def),
    }
}

/// Whether the column's default depends on function `f` (PostgreSQL records the functions a
/// default calls, by OID).
fn default_calls(tbl: pg_sys::Oid, attnum: i16, f: pg_sys::Oid) -> bool {
    Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_attrdef d
                          JOIN pg_catalog.pg_depend p ON p.objid OPERATOR(pg_catalog.=) d.oid
                         WHERE p.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                           AND p.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                           AND p.refobjid OPERATOR(pg_catalog.=) $3
                           AND d.adrelid OPERATOR(pg_catalog.=) $1 AND d.adnum OPERATOR(pg_catalog.=) $2)",
        &[tbl.into(), attnum.into(), f.into()],
    ) == Ok(Some(true))
}

/// After the statements by name: the column of `tbl` itself has no identity, a default that
/// calls this extension's `snowflake_next()` and nothing else, and the sequence it had is gone.
fn check_adopted(tbl: pg_sys::Oid, attnum: i16, next: pg_sys::Oid, before: &Before) {
    let (identity, calls) = Spi::get_two_with_args::<i8, i64>(
        "SELECT a.attidentity,
                (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attrdef d
                   JOIN pg_catalog.pg_depend p ON p.objid OPERATOR(pg_catalog.=) d.oid
                  WHERE p.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass
                    AND d.adrelid OPERATOR(pg_catalog.=) a.attrelid
                    AND d.adnum OPERATOR(pg_catalog.=) a.attnum
                    AND p.deptype OPERATOR(pg_catalog.=) 'n')
           FROM pg_catalog.pg_attribute a
          WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.=) $2",
        &[tbl.into(), attnum.into()],
    )
    .unwrap_or((None, None));
    let sequence_left = match before {
        Before::Sequence(seq) => Spi::get_one_with_args::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1)",
            &[(*seq).into()],
        ) != Ok(Some(false)),
        _ => false,
    };
    if identity != Some(0) || calls != Some(1) || !default_calls(tbl, attnum, next) || sequence_left
    {
        // A statement that PostgreSQL takes by name changed something else than the table and
        // column (checked by OID here): everything rolls back.
        let table = table_name(tbl);
        errors::report(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!("the column of {table} did not end as snowflake_adopt() left it"),
            "Find out who renames the schema, then run snowflake_adopt() again.",
        )
        .detail(
            "A statement by name reached another object: a schema was renamed, or the column \
             changed, while snowflake_adopt() ran. Nothing was changed.",
        )
        .raise();
    }
}

/// The largest value of the column over every row (NULL for an empty table), read with the
/// rights of the table's owner as a security-restricted operation, as VACUUM and REINDEX run a
/// table's index expressions: planning the query may run code of the table's owner (an index
/// expression that calls an immutable function of theirs is folded while planning), and that
/// code must not run with the caller's rights, a superuser's perhaps. And with a snapshot taken
/// now, under the ALTER TABLE's lock: a REPEATABLE READ caller's older snapshot would miss rows
/// committed since, and the generator would advance past too small a value.
fn largest(tbl: pg_sys::Oid, attnum: i16, table: &str) -> Option<i64> {
    let owner = Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) $1",
        &[tbl.into()],
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| not_a_table(table));
    let query = built(
        &format!(
            "pg_catalog.format('SELECT pg_catalog.max(t.%I) FROM %s t', {ATTNAME},
                               $1::pg_catalog.regclass)"
        ),
        &[tbl.into(), attnum.into()],
    );
    as_owner(owner, || {
        // row_security = off (sql/adopt.sql): a policy that applies makes the query fail
        // instead of hiding rows; this says so first, with a hint.
        if mutant!(
            adopt_rls,
            {
                Spi::get_one_with_args::<bool>(
                    "SELECT pg_catalog.row_security_active($1)",
                    &[tbl.into()],
                ) == Ok(Some(true))
            },
            {
                // What `SET row_security = off` of the function's definition prevents, too.
                Spi::run("SELECT pg_catalog.set_config('row_security', 'on', true)").is_err()
            }
        ) {
            errors::report(
                Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("row-level security hides rows of {table} from its owner"),
                "ALTER TABLE ... NO FORCE ROW LEVEL SECURITY while adopting, or give the table's owner \
                 BYPASSRLS.",
            )
            .detail(
                "snowflake_adopt() reads the largest id of every row with the rights of the table's \
                 owner, and moves the generator above it; it would miss the ids of the rows the owner \
                 cannot see.",
            )
            .raise();
        }
        Spi::connect_mut(|_| {
            planner::only_relation(tbl, || {
                // SAFETY: a snapshot pushed and popped around one read-only SPI statement
                // (SPI is connected: this closure); the result is read at once from
                // SPI_tuptable, which stays valid until the next SPI call.
                unsafe {
                    pg_sys::PushActiveSnapshot(mutant!(
                        adopt_snapshot,
                        { pg_sys::GetLatestSnapshot() },
                        { pg_sys::GetActiveSnapshot() }
                    ));
                    struct Pop;
                    impl Drop for Pop {
                        fn drop(&mut self) {
                            // SAFETY: the snapshot pushed above.
                            unsafe { pg_sys::PopActiveSnapshot() };
                        }
                    }
                    let _pop = Pop;
                    let rc = pg_sys::SPI_execute(query.as_ptr(), true, 1);
                    assert_eq!(rc, pg_sys::SPI_OK_SELECT as i32, "SPI_execute of the max");
                    let table = pg_sys::SPI_tuptable;
                    let mut null = false;
                    let datum =
                        pg_sys::SPI_getbinval(*(*table).vals, (*table).tupdesc, 1, &mut null);
                    (!null).then(|| datum.value() as i64)
                }
            })
        })
    })
}

/// Runs `f` as role `owner`, in a security-restricted operation (no SET ROLE, no temporary
/// objects, no changes of session state), as PostgreSQL runs a table's expressions for its
/// owner; the caller's identity comes back afterwards, also when `f` raises an error.
fn as_owner<T>(owner: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let (mut user, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reading and setting this backend's current user, as SECURITY DEFINER calls do;
    // Restore sets it back when `f` returns or unwinds (an error passes through Rust frames as a
    // panic, see pgrx's pg_guard).
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            mutant!(adopt_as_owner, { owner }, { user }),
            context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    struct Restore(pg_sys::Oid, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: the identity saved above.
            unsafe { pg_sys::SetUserIdAndSecContext(self.0, self.1) };
        }
    }
    let _restore = Restore(user, context);
    f()
}

/// `ALTER TABLE tbl ALTER COLUMN col <action>`, by the table's and the column's names as they
/// are now: `action` may hold further `%` conversions, whose arguments `extra_sql` lists (as
/// `, $3`, ...) and `extra` gives.
fn alter(tbl: pg_sys::Oid, attnum: i16, action: &str, extra_sql: &str, extra: Vec<DatumWithOid>) {
    let builder = format!(
        "pg_catalog.format('ALTER TABLE %s ALTER COLUMN %I {action}', $1::pg_catalog.regclass,
                           {ATTNAME}{extra_sql})"
    );
    let mut args: Vec<DatumWithOid> = vec![tbl.into(), attnum.into()];
    args.extend(extra);
    execute_built(&builder, &args);
}

/// The name of column `$2` of table `$1`, in SQL.
const ATTNAME: &str = "(SELECT a.attname FROM pg_catalog.pg_attribute a
                         WHERE a.attrelid OPERATOR(pg_catalog.=) $1
                           AND a.attnum OPERATOR(pg_catalog.=) $2)";

/// Runs the statement that SQL expression `builder` makes, byte for byte: names in any database
/// encoding stay what they are (a Rust string would have to be UTF-8).
fn execute_built(builder: &str, args: &[DatumWithOid]) {
    let statement = built(builder, args);
    Spi::connect_mut(|_| {
        // SAFETY: a NUL-terminated statement, with SPI connected (this closure).
        let rc = unsafe { pg_sys::SPI_execute(statement.as_ptr(), false, 0) };
        assert!(rc >= 0, "SPI_execute of an ALTER TABLE returned {rc}");
    });
}

fn table_name(tbl: pg_sys::Oid) -> String {
    text_of("pg_catalog.format('%s', $1::pg_catalog.regclass)", &[tbl.into()])
}

fn column_name(tbl: pg_sys::Oid, attnum: i16) -> String {
    text_of(
        "(SELECT a.attname::pg_catalog.text FROM pg_catalog.pg_attribute a
           WHERE a.attrelid OPERATOR(pg_catalog.=) $1 AND a.attnum OPERATOR(pg_catalog.=) $2)",
        &[tbl.into(), attnum.into()],
    )
}

/// The function `name` with `nargs` arguments that is a member of the extension of function
/// `own_oid` (this one), by OID: never another of that name that a schema's owner put in place.
fn member_function(own_oid: pg_sys::Oid, name: &str, nargs: i16) -> pg_sys::Oid {
    Spi::get_one_with_args::<pg_sys::Oid>(
        "SELECT p.oid FROM pg_catalog.pg_proc p
           JOIN pg_catalog.pg_depend d ON d.objid OPERATOR(pg_catalog.=) p.oid
          WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
            AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
            AND d.deptype OPERATOR(pg_catalog.=) 'e'
            AND d.refobjid OPERATOR(pg_catalog.=) (
                SELECT o.refobjid FROM pg_catalog.pg_depend o
                 WHERE o.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                   AND o.objid OPERATOR(pg_catalog.=) $1
                   AND o.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                   AND o.deptype OPERATOR(pg_catalog.=) 'e')
            AND p.proname OPERATOR(pg_catalog.=) $2::pg_catalog.name
            AND p.pronargs OPERATOR(pg_catalog.=) $3",
        &[own_oid.into(), name.into(), nargs.into()],
    )
    .ok()
    .flatten()
    .unwrap_or_else(|| {
        errors::report(
            Code::ERRCODE_UNDEFINED_FUNCTION,
            format!("function {name}() of pg_snowflake does not exist"),
            "Run ALTER EXTENSION pg_snowflake UPDATE.",
        )
        .raise()
    })
}

#[cold]
#[track_caller]
fn not_a_table(table: &str) -> ! {
    errors::report(
        Code::ERRCODE_WRONG_OBJECT_TYPE,
        format!("{table} is not a table"),
        "Pass a table (or a partitioned table) whose column is to take its ids from \
         snowflake_next().",
    )
    .raise()
}
