//! Worker ids from the server's own address (`snowflake.worker_id_network`, issue 48): the worker
//! id is the server's one address in the configured network, counted from the network's first
//! address (core's `network`). What an address alone cannot promise, this module does:
//! - two servers in one network namespace (two containers of one pod, two clusters on one host)
//!   have one address: the first holds its worker id in the namespace (an abstract unix socket
//!   named after it, which the kernel releases when the postmaster ends, however it ends), and
//!   the second is refused;
//! - an address passes to another server once its pod ended, and that server may have made ids
//!   up to `snowflake.max_drift` ahead of its clock: the new holder starts above its start plus
//!   `max_drift` plus `CLOCKS_APART_MS` (`reuse_floor_ms`), which assumes that the clocks of the
//!   two hosts are within that of each other (NTP keeps them within milliseconds). What it costs:
//!   the first id waits `CLOCKS_APART_MS` for the clock, and for `max_drift` after that the ids
//!   run at the edge of the drift bound, so a burst waits for the clock instead of borrowing.

use crate::layout::Layout;
use crate::network::{self, Network};
use crate::text::iso_unix;
use std::net::IpAddr;
use std::os::unix::net::UnixListener;
use std::sync::OnceLock;

/// How far apart the clocks of two hosts of the network may be: the reuse rule's margin.
pub const CLOCKS_APART_MS: i64 = 1_000;

/// The worker id this postmaster derived, and what holds it in the network namespace (open
/// until the postmaster ends; its children inherit it, and a crash of one of them leaves it).
struct Derived {
    network: Network,
    address: IpAddr,
    worker_id: u32,
    /// Unix ms its ids start above (the reuse rule): the start, plus what the address's
    /// previous holder may have borrowed ahead of its clock (`snowflake.max_drift` at this
    /// start), plus how far apart the clocks of two hosts may be.
    floor_ms: i64,
    _held: UnixListener,
}

static DERIVED: OnceLock<Derived> = OnceLock::new();

/// At start, in the postmaster: the worker id of this server's address in `network` for
/// `layout`, held in this network namespace; or why there is none, in words.
// mutant: address_hold
pub fn derive(network: &str, layout: &Layout, max_drift_ms: u64) -> Result<u32, String> {
    let network = Network::parse(network)
        .map_err(|why| format!("snowflake.worker_id_network is not a network: {why}"))?;
    let addresses = network::own_addresses()
        .map_err(|e| format!("this server's addresses cannot be read (getifaddrs): {e}"))?;
    let (address, worker_id) =
        network.worker_id(&addresses, layout.max_worker_id()).map_err(|r| r.to_string())?;
    // mutant: address_hold
    let held = network::hold_in_namespace(&network, worker_id).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            format!(
                "another server of this network namespace holds worker id {worker_id} of \
                 network {network} (its address {address} is this server's too, and gives the \
                 same worker id)"
            )
        } else {
            format!("worker id {worker_id} cannot be held in this network namespace: {e}")
        }
    })?;
    let floor_ms = crate::clock::now_unix_ms() + max_drift_ms as i64 + CLOCKS_APART_MS;
    let _ = DERIVED.set(Derived { network, address, worker_id, floor_ms, _held: held });
    Ok(worker_id)
}

/// Where the worker id came from, for `snowflake_stats()`: the network and the address.
pub fn source() -> Option<(String, String)> {
    DERIVED.get().map(|d| (d.network.to_string(), d.address.to_string()))
}

/// Unix ms the ids of a derived worker id start above (the reuse rule).
pub fn reuse_floor_ms() -> Option<i64> {
    DERIVED.get().map(|d| d.floor_ms)
}

/// Why the ids run ahead of the clock at start (see `generator::on_ahead`).
pub fn explain_ahead() -> Option<String> {
    let d = DERIVED.get()?;
    let floor = d.floor_ms;
    (floor > crate::clock::now_unix_ms()).then(|| {
        format!(
            "Worker id {} comes from address {} of network {}, which another server may have \
             had until this one started: its ids start above {}, what that server may have \
             made (snowflake.max_drift ahead of its clock, and {} ms for the clocks of two hosts)",
            d.worker_id,
            d.address,
            d.network,
            iso_unix(floor),
            CLOCKS_APART_MS
        )
    })
}
