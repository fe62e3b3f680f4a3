//! The schema `snowflake`, the extension's own (sql/schema.sql): what code with other roles'
//! rights reaches by name lives there (the claims table, the registry's tables and lease
//! function), because only its owner, the superuser who created the extension, can rename it or
//! create objects in it. `snowflake.x` then names one object from lookup to use, where a name in
//! the extension's schema (`public` by default, which on 15 and later the database owner owns and
//! can rename at any moment) could lead to another role's object between two statements.
//!
//! The Rust side checks, before it writes through the name, that the schema is still the
//! extension's and a superuser still owns it (a superuser could hand it to another role; a
//! database at 0.3.0 has no such schema yet).

use crate::errors::{self, Code};
use pgrx::prelude::*;

/// Ok when schema `snowflake` exists, belongs to pg_snowflake (or is the schema it was created
/// in) and a superuser owns it; else why not. Only call inside a transaction.
pub fn check() -> Result<(), String> {
    mutant!(own_schema_check, {}, {
        return Ok(());
    });
    let row = Spi::get_three::<bool, bool, String>(
        "SELECT r.rolsuper,
                n.oid OPERATOR(pg_catalog.=) e.extnamespace OR EXISTS (
                    SELECT FROM pg_catalog.pg_depend d
                     WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                       AND d.objid OPERATOR(pg_catalog.=) n.oid
                       AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                       AND d.refobjid OPERATOR(pg_catalog.=) e.oid
                       AND d.deptype OPERATOR(pg_catalog.=) 'e'),
                pg_catalog.quote_ident(r.rolname)
           FROM pg_catalog.pg_namespace n
           JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
           JOIN pg_catalog.pg_extension e ON e.extname OPERATOR(pg_catalog.=) 'pg_snowflake'
          WHERE n.nspname OPERATOR(pg_catalog.=) 'snowflake'",
    );
    match row {
        Ok((Some(true), Some(true), _)) => Ok(()),
        Ok((Some(false), _, owner)) => {
            Err(format!("it belongs to {}, not to a superuser", owner.unwrap_or_default()))
        }
        Ok((Some(_), Some(false), _)) => Err("it is not pg_snowflake's".into()),
        _ => Err("it does not exist (pg_snowflake in this database is older than 0.4.0, or not \
             installed)"
            .into()),
    }
}

extension_sql_file!("../../sql/schema.sql", name = "own_schema");

/// The schema `snowflake` cannot be trusted (`check` says why).
#[cold]
#[track_caller]
pub fn untrusted(why: &str) -> ! {
    errors::report(
        Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("pg_snowflake's schema snowflake cannot be used: {why}"),
        "Run ALTER EXTENSION pg_snowflake UPDATE, or ALTER SCHEMA snowflake OWNER TO a superuser.",
    )
    .detail(
        "Code that runs with a superuser's rights reaches its objects by the schema's name, which \
         the schema's owner could change between a lookup and its use.",
    )
    .raise()
}
