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
pub fn derive(network: &str, layout: &Layout, max_drift_ms: u64) -> Result<u32, String> {
    let network = Network::parse(network)
        .map_err(|why| format!("snowflake.worker_id_network is not a network: {why}"))?;
    let addresses = network::own_addresses()
        .map_err(|e| format!("this server's addresses cannot be read (getifaddrs): {e}"))?;
    let (address, worker_id) =
        network.worker_id(&addresses, layout.max_worker_id()).map_err(|r| r.to_string())?;
    let held = network::hold_in_namespace(mutant!(address_hold, { address }, {
        std::net::IpAddr::from([127, 1, (std::process::id() >> 8) as u8, std::process::id() as u8])
    }))
    .map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            format!(
                "another server of this network namespace holds address {address}, which gives \
                 worker id {worker_id} (or another process took the abstract unix socket \
                 \"@pg_snowflake address {address}\": `ss -xlp` shows which)"
            )
        } else {
            format!("address {address} cannot be held in this network namespace: {e}")
        }
    })?;
    let floor_ms = crate::clock::now_unix_ms() + max_drift_ms as i64 + CLOCKS_APART_MS;
    // The start waits that long, so that the first call finds the clock within
    // `snowflake.max_drift` of the floor instead of failing for its first second.
    std::thread::sleep(std::time::Duration::from_millis(CLOCKS_APART_MS as u64));
    let _ = DERIVED.set(Derived { network, address, worker_id, floor_ms, _held: held });
    Ok(worker_id)
}

/// Why no id may be made any more: the address the worker id came from is no longer this
/// server's (DHCP, an address moved by hand, a container network reconnected), and may be
/// another server's, which derives the same worker id. Checked at every renewal of the lease
/// (`generator::cover`, about once a second under load, and at the first call after a pause),
/// one `getifaddrs` each.
pub fn gone() -> Option<String> {
    let d = DERIVED.get()?;
    match network::own_addresses() {
        Ok(now) if now.contains(&d.address) => None,
        Ok(now) => Some(format!(
            "address {} of network {}, which gave worker id {}, is no longer this server's (it \
             has {}): another server may have it now",
            d.address,
            d.network,
            d.worker_id,
            if now.is_empty() {
                "none".to_string()
            } else {
                now.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            }
        )),
        Err(e) => Some(format!("this server's addresses cannot be read (getifaddrs): {e}")),
    }
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
