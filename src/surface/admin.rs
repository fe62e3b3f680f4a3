//! Administration: moving the generator above ids from elsewhere (`snowflake_advance_past`; see
//! also `adopt`) and forgetting the ids of a previous layout (`snowflake_reset_layout`). None of
//! it is for `PUBLIC`.

use crate::{generator, gucs, privileges};
use pgrx::prelude::*;

/// Moves the generator durably above `id`: every later id of this cluster is larger, also after
/// a crash right after the call. For ids that came from elsewhere (a restored dump, an import,
/// a worker id moved between servers). Superuser only, unless EXECUTE is granted.
#[pg_extern(volatile, strict, parallel_unsafe)]
fn snowflake_advance_past(id: i64) {
    generator::get().advance_past(gucs::layout(), id)
}

/// Forgets, on purpose, the ids made with the layout this cluster used before, and starts the
/// configured layout from the clock. Superuser only, whatever is granted (forgetting ids is no
/// decision for an application role). Returns false when there was nothing to reset.
#[pg_extern(volatile, parallel_unsafe)]
fn snowflake_reset_layout() -> bool {
    privileges::require_superuser("snowflake_reset_layout()");
    generator::get().reset_layout(gucs::layout())
}
