//! Which worker id this server makes ids with, and how servers that share ids learn of each
//! other's: the settings and an address fix it, a registry leases it, claims compare it, Citus in
//! one place.

pub(crate) mod address; // worker ids from the server's own address (snowflake.worker_id_network)
pub(crate) mod citus; // Citus in one place: preloaded, the nodes' claims, adopt on every node
pub(crate) mod claims; // worker id claims and their background worker
pub(crate) mod identity; // where this data directory runs, and a start's secret (copies tell apart)
pub(crate) mod registry; // worker ids leased from a registry database
pub(crate) mod worker_id; // the worker id in use: from the settings or a registry's lease, answered once
