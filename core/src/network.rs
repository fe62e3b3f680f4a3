//! A worker id from the server's own address (issue 48): `snowflake.worker_id_network` names a
//! network, such as a Kubernetes cluster's pod network `10.244.0.0/16`, and the worker id is the
//! server's address within it (its offset from the network's first address), as Sonyflake takes
//! the low 16 bits of the private address. At any moment an address belongs to one pod of the
//! network, so two running servers never derive one worker id; the rest (two servers in one
//! network namespace, an address that passes from one pod to another) is the extension's, which
//! holds a lock per worker id in the namespace and starts above what the previous holder may
//! have made.
//!
//! Here: parsing the network, and choosing the one address of the server in it, with every
//! refusal named (a network larger than the layout's worker ids, no address in it, several).

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};

/// A network in CIDR notation, IPv4 or IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    /// The first address, as a number (IPv4 in the low 32 bits).
    base: u128,
    prefix: u8,
    v6: bool,
}

/// Why no worker id comes from the server's addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The network holds more addresses than the layout has worker ids: two addresses would
    /// share one.
    TooLarge { network: Network, addresses: u128, worker_ids: u64 },
    /// No address of the server is in the network (the setting names another network, or the
    /// server is not on it yet).
    NoAddress { network: Network, seen: Vec<IpAddr> },
    /// Several are: which one is the server's is not for pg_snowflake to guess.
    Several { network: Network, inside: Vec<IpAddr> },
}

impl Network {
    /// `text` as `address/prefix`: the address is the network's first (no host bits set), the
    /// prefix at most 32 for IPv4 and 128 for IPv6.
    pub fn parse(text: &str) -> Result<Network, String> {
        let text = text.trim();
        let (address, prefix) = text.split_once('/').ok_or_else(|| {
            format!("\"{text}\" is not a network in CIDR notation (address/prefix)")
        })?;
        let address: IpAddr =
            address.parse().map_err(|_| format!("\"{address}\" is not an IPv4 or IPv6 address"))?;
        let width: u8 = if address.is_ipv6() { 128 } else { 32 };
        let prefix: u8 =
            prefix.parse().ok().filter(|&p| p <= width).ok_or_else(|| {
                format!("the prefix \"{prefix}\" is not a number from 0 to {width}")
            })?;
        let base = number(address);
        let host_bits = u32::from(width - prefix);
        let host_mask = if host_bits == 128 { u128::MAX } else { (1u128 << host_bits) - 1 };
        if base & host_mask != 0 {
            return Err(format!(
                "{address} has host bits set for a /{prefix} network: its first address is {}",
                show(base & !host_mask, address.is_ipv6())
            ));
        }
        Ok(Network { base, prefix, v6: address.is_ipv6() })
    }

    /// How many addresses the network holds (2^128 is shown as u128::MAX).
    pub fn addresses(&self) -> u128 {
        let host_bits = u32::from(self.width() - self.prefix);
        if host_bits == 128 {
            u128::MAX
        } else {
            1u128 << host_bits
        }
    }

    /// `address`'s offset within the network, if it is in it.
    pub fn offset_of(&self, address: IpAddr) -> Option<u128> {
        if address.is_ipv6() != self.v6 {
            return None;
        }
        let n = number(address);
        let offset = n.wrapping_sub(self.base);
        (n >= self.base && (self.addresses() == u128::MAX || offset < self.addresses()))
            .then_some(offset)
    }

    fn width(&self) -> u8 {
        if self.v6 {
            128
        } else {
            32
        }
    }

    /// The worker id of the one address of `addresses` in the network, for a layout whose
    /// largest worker id is `max_worker_id`: refused when the network holds more addresses
    /// than there are worker ids (checked first, whatever the addresses: a setting that works
    /// on one pod and not on another is a trap), when none is in it, and when several are.
    pub fn worker_id(
        &self,
        addresses: &[IpAddr],
        max_worker_id: u32,
    ) -> Result<(IpAddr, u32), Refusal> {
        let worker_ids = u64::from(max_worker_id) + 1;
        if mutant!(network_width, { self.addresses() > u128::from(worker_ids) }, { false }) {
            return Err(Refusal::TooLarge {
                network: *self,
                addresses: self.addresses(),
                worker_ids,
            });
        }
        let mut inside: Vec<IpAddr> =
            addresses.iter().copied().filter(|a| self.offset_of(*a).is_some()).collect();
        inside.sort();
        inside.dedup();
        let one = match inside.as_slice() {
            [] => {
                return mutant!(
                    address_none,
                    { Err(Refusal::NoAddress { network: *self, seen: addresses.to_vec() }) },
                    { Ok((IpAddr::from([0, 0, 0, 0]), 0)) }
                );
            }
            [one] => *one,
            [lowest, ..] => {
                let lowest = *lowest;
                mutant!(
                    address_several,
                    {
                        return Err(Refusal::Several { network: *self, inside });
                    },
                    { lowest }
                )
            }
        };
        // Fits: the offset is below the address count, which is at most worker_ids.
        let offset = self.offset_of(one).unwrap_or_default();
        Ok((one, offset as u32))
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", show(self.base, self.v6), self.prefix)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::TooLarge { network, addresses, worker_ids } => write!(
                f,
                "network {network} holds {} addresses, more than the layout's {worker_ids} worker \
                 ids: two of its addresses would share a worker id",
                if *addresses == u128::MAX { "2^128".to_string() } else { addresses.to_string() }
            ),
            Refusal::NoAddress { network, seen } => write!(
                f,
                "no address of this server is in network {network} (it has {})",
                list(seen)
            ),
            Refusal::Several { network, inside } => write!(
                f,
                "this server has {} addresses in network {network} ({}), and the worker id must \
                 come from one",
                inside.len(),
                list(inside)
            ),
        }
    }
}

/// The addresses of this machine's (or network namespace's) interfaces that are up and
/// running, from `getifaddrs`.
pub fn own_addresses() -> io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list that freeifaddrs releases below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = vec![];
    let mut at = head;
    while !at.is_null() {
        // SAFETY: a node of the list getifaddrs returned, valid until freeifaddrs.
        let entry = unsafe { &*at };
        at = entry.ifa_next;
        // Up and running (a carrier): a bridge with nothing attached, such as docker0 or
        // virbr0, has the same address on every host, and is not this server's.
        let running = (libc::IFF_UP | libc::IFF_RUNNING) as u32;
        let up = entry.ifa_flags & running == running;
        if !up || entry.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr of the family it names.
        unsafe {
            match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let a = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    found.push(IpAddr::from(u32::from_be(a.sin_addr.s_addr).to_be_bytes()));
                }
                libc::AF_INET6 => {
                    let a = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    found.push(IpAddr::from(a.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
    }
    // SAFETY: the list getifaddrs made, released once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// Holds `address` in this network namespace for as long as the returned socket stays open: an
/// abstract unix socket named after it, which only one process of a network namespace can bind,
/// and which the kernel releases when its holder ends, however it ends (no file to clean up
/// after a crash). Two servers in one namespace have one address, and derive one worker id
/// whatever network each names: the second is refused here (`AddrInUse`).
pub fn hold_in_namespace(address: IpAddr) -> io::Result<UnixListener> {
    let name = format!("pg_snowflake address {address}");
    UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)
}

fn list(addresses: &[IpAddr]) -> String {
    if addresses.is_empty() {
        return "none".into();
    }
    addresses.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

fn number(address: IpAddr) -> u128 {
    match address {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

fn show(n: u128, v6: bool) -> String {
    if v6 {
        std::net::Ipv6Addr::from(n).to_string()
    } else {
        std::net::Ipv4Addr::from(n as u32).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_pod_address_gives_its_offset_in_the_network() {
        let n = Network::parse("10.244.0.0/16").unwrap();
        assert_eq!(n.addresses(), 65_536);
        let (a, w) = n.worker_id(&[ip("127.0.0.1"), ip("10.244.3.7")], 65_535).unwrap();
        assert_eq!((a, w), (ip("10.244.3.7"), 3 * 256 + 7));
        assert_eq!(n.worker_id(&[ip("10.244.255.255")], 65_535).unwrap().1, 65_535);
        assert_eq!(n.to_string(), "10.244.0.0/16");
    }

    #[test]
    fn ipv6_networks_work_alike() {
        let n = Network::parse("fd00:10::/118").unwrap();
        assert_eq!(n.addresses(), 1024);
        assert_eq!(n.worker_id(&[ip("fd00:10::3ff"), ip("10.0.0.1")], 1023).unwrap().1, 1023);
        assert_eq!(n.offset_of(ip("fd00:10::400")), None);
    }

    #[test]
    fn a_network_larger_than_the_layout_is_refused_whatever_the_address() {
        let n = Network::parse("10.244.0.0/16").unwrap();
        // Twitter's layout: 1,024 worker ids.
        let e = n.worker_id(&[ip("10.244.0.1")], 1023).unwrap_err();
        assert!(matches!(e, Refusal::TooLarge { addresses: 65_536, worker_ids: 1024, .. }));
        assert!(e.to_string().contains("more than the layout's 1024 worker ids"), "{e}");
        assert!(Network::parse("10.244.0.0/22")
            .unwrap()
            .worker_id(&[ip("10.244.3.255")], 1023)
            .is_ok());
        let all = Network::parse("::/0").unwrap();
        assert_eq!(all.addresses(), u128::MAX);
        assert!(matches!(all.worker_id(&[], u32::MAX), Err(Refusal::TooLarge { .. })));
    }

    #[test]
    fn no_address_and_several_addresses_are_refused_with_them() {
        let n = Network::parse("10.1.0.0/24").unwrap();
        let e = n.worker_id(&[ip("127.0.0.1"), ip("10.2.0.5")], 1023).unwrap_err();
        assert!(e.to_string().contains("(it has 127.0.0.1, 10.2.0.5)"), "{e}");
        let e = n.worker_id(&[ip("10.1.0.5"), ip("10.1.0.9"), ip("10.1.0.5")], 1023).unwrap_err();
        assert_eq!(
            e,
            Refusal::Several { network: n, inside: vec![ip("10.1.0.5"), ip("10.1.0.9")] }
        );
        assert!(e.to_string().contains("2 addresses in network 10.1.0.0/24"), "{e}");
    }

    #[test]
    fn the_loopback_address_is_one_of_ours() {
        let ours = own_addresses().unwrap();
        assert!(ours.contains(&ip("127.0.0.1")), "{ours:?}");
        let n = Network::parse("127.0.0.0/30").unwrap();
        assert_eq!(n.worker_id(&ours, 1023).unwrap(), (ip("127.0.0.1"), 1));
    }

    #[test]
    fn one_worker_id_is_held_once_in_a_namespace() {
        // Addresses of their own, so that no other test run on this machine holds the names.
        let pid = std::process::id();
        let a = ip(&format!("10.{}.{}.7", pid % 256, (pid / 256) % 256));
        let b = ip(&format!("10.{}.{}.8", pid % 256, (pid / 256) % 256));
        let first = hold_in_namespace(a).unwrap();
        let second = hold_in_namespace(a).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::AddrInUse);
        let other = hold_in_namespace(b).unwrap();
        drop(first);
        hold_in_namespace(a).expect("released when its holder closed it");
        drop(other);
    }

    #[test]
    fn networks_are_checked_as_written() {
        for (bad, why) in [
            ("10.244.0.0", "CIDR notation"),
            ("10.244.0.1/16", "its first address is 10.244.0.0"),
            ("10.244.0.0/33", "from 0 to 32"),
            ("fd00::/129", "from 0 to 128"),
            ("pods/16", "not an IPv4 or IPv6 address"),
            ("10.244.0.0/-1", "from 0 to 32"),
        ] {
            let e = Network::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(Network::parse(" 10.0.0.0/8 ").unwrap().to_string(), "10.0.0.0/8");
    }
}
