//! Citus, in one place: whether this server preloads it and this database has it, how the
//! claims worker reads the other nodes' claims (`claims`, the nodes' answers checked in
//! `answer`), and how `snowflake_adopt()` moves the generator of every node (`adopt`). Every
//! other node is a peer that may be broken or hostile: what it answers is bounded and checked
//! before it is written or shown. This module uses no other that uses it: the settings and the
//! claims worker give it what it needs (`claims::Worker`).

pub mod adopt;
mod answer;
pub mod claims;

use pgrx::pg_sys;
use pgrx::prelude::*;
use std::ffi::CStr;

/// Whether `citus` is in `shared_preload_libraries` (as written there: a name, maybe quoted).
pub fn preloaded() -> bool {
    // SAFETY: a string setting PostgreSQL set before _PG_init; NUL-terminated when not null.
    let list = unsafe { pg_sys::shared_preload_libraries_string };
    if list.is_null() {
        return false;
    }
    // SAFETY: see above.
    names_citus(&unsafe { CStr::from_ptr(list) }.to_string_lossy())
}

/// Whether a `shared_preload_libraries` list loads Citus: `$libdir/citus` and `citus.so` do
/// too (PostgreSQL adds the directory and the suffix).
fn names_citus(list: &str) -> bool {
    list.split(',').any(|l| {
        let name = l.trim().trim_matches('"');
        let name = name.strip_prefix("$libdir/").unwrap_or(name);
        let name = name.strip_suffix(".so").unwrap_or(name);
        name.eq_ignore_ascii_case("citus")
    })
}

/// Whether Citus is installed in this database (at a release that has `master_run_on_worker`
/// and `pg_dist_local_group`, 11.0 and later).
pub fn installed() -> bool {
    Spi::get_one::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension e
                         WHERE e.extname OPERATOR(pg_catalog.=) 'citus')
            AND pg_catalog.to_regprocedure(
                    'pg_catalog.master_run_on_worker(pg_catalog.text[], pg_catalog.int4[], \
                     pg_catalog.text[], pg_catalog.bool)') IS NOT NULL
            AND pg_catalog.to_regclass('pg_catalog.pg_dist_local_group') IS NOT NULL",
    ) == Ok(Some(true))
}

#[cfg(test)]
mod tests {
    use super::names_citus;

    #[test]
    fn every_spelling_that_loads_citus_is_seen() {
        for list in [
            "citus",
            "citus,pg_snowflake",
            " \"citus\" , pg_snowflake",
            "$libdir/citus,pg_snowflake",
            "citus.so",
            "CITUS",
        ] {
            assert!(names_citus(list), "{list}");
        }
        for list in ["pg_snowflake", "citus_columnar", "", "mycitus", "citusx.so"] {
            assert!(!names_citus(list), "{list}");
        }
    }
}
