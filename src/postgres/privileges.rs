//! Who may call what. The SQL side (`sql/privileges.sql`) revokes and grants at the end of the
//! install and upgrade scripts; the functions meant for superusers only also check for one
//! themselves, since a grant (default privileges, or a mistake) must not open them.

use crate::errors::{self, Code};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// Errors with 42501 unless the current user is a superuser.
pub fn require_superuser(function: &str) {
    // SAFETY: a plain catalog lookup of the current user.
    if mutant!(superuser_check, { !unsafe { pg_sys::superuser() } }, { false }) {
        superuser_required(function);
    }
}

extension_sql_file!("../../sql/privileges.sql", name = "privileges", finalize,);

/// A function for superusers only, called by another role (through a grant of EXECUTE, or
/// default privileges).
#[cold]
#[track_caller]
fn superuser_required(function: &str) -> ! {
    errors::report(
        Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied for function {function}"),
        "Run it as a superuser.",
    )
    .detail(format!("{function} is for superusers only, whatever privileges are granted on it."))
    .raise()
}
