//! What the extension needs of PostgreSQL beyond pgrx: errors, shared memory, background workers,
//! subtransactions, waits, privileges and its own schema.

pub(crate) mod background; // how the background workers are registered and start
pub(crate) mod built; // text PostgreSQL builds, byte for byte (names in any encoding)
pub(crate) mod errors; // the report builder: SQLSTATE, message, hint; depends on no other module
pub(crate) mod own_schema; // the schema `snowflake`, where privileged code finds its objects
pub(crate) mod privileges; // who may call what
pub(crate) mod shared_memory; // structs in PostgreSQL's shared memory, set up under its lock
pub(crate) mod subtransaction; // a step whose error is caught and rolled back
pub(crate) mod text_arg; // text arguments in any database encoding
pub(crate) mod wait_event; // what a waiting session shows in pg_stat_activity
