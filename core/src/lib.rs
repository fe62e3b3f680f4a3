//! What pg_snowflake computes and keeps without PostgreSQL: the bit layouts of an id and the rule
//! that advances the generator, the wall clock, durable marks and their encoding, how bursts
//! share borrowed time, and the files it keeps in the data directory. No pgrx here, so that
//! `make check` tests all of it in seconds; the extension (the crate in the parent directory)
//! re-exports these modules under its own root, where `crate::layout` and the like name them.

// First: its macro, mutant!, is in scope in the modules declared after it.
#[macro_use]
pub mod mutant; // mutation points: guards that scripts/mutations.sh removes one at a time
pub mod clock; // the wall clock and epoch conversions
pub mod data_file; // how files in the data directory are read and replaced
pub mod layout; // bit layouts and the rule that advances the generator
pub mod mark; // a durable mark and its encoding
pub mod network; // a worker id from the server's address in a network (48)
pub mod pacing; // how bursts share borrowed time
pub mod state_file; // $PGDATA/pg_snowflake.state
pub mod text; // dates and sentences in messages
