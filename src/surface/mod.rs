//! The SQL surface: the functions users call and the planner hook that serves their queries.

pub(crate) mod admin; // advance_past, reset_layout
pub(crate) mod adopt; // switching a serial or identity column to snowflake_next()
pub(crate) mod base62; // short text ids
pub(crate) mod compose; // ids of given fields
pub(crate) mod decode; // decoding ids, their time, and time ranges as id ranges
pub(crate) mod next; // snowflake_next()
pub(crate) mod planner; // time ranges through the primary key (and adopt's one-relation plan)
pub(crate) mod stats; // snowflake_stats()
