//! The generator's durability beside its shared state (src/generator): WAL, synchronous standbys,
//! pg_upgrade. The state file and the mark are the core crate's (core/src).

pub(crate) mod sync_standby; // waiting for synchronous standbys before a lease is used
pub(crate) mod upgrade; // carrying the mark through pg_upgrade
pub(crate) mod wal; // the custom WAL resource manager: the mark, replayed on standbys and after a crash
