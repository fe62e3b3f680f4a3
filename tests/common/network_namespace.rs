//! Network namespaces a test makes for its servers (`ip netns`), each with addresses of its own
//! on its loopback device and nothing else: no traffic leaves it. A server in one
//! (`Cluster::init_in`) sees those addresses as its own, as a pod sees its pod address; the test
//! reaches it through its unix socket. Removed when dropped.

use std::process::Command;

pub struct Namespace {
    pub name: String,
}

impl Namespace {
    /// A namespace named after `name` and this process, its loopback device up with `addresses`
    /// (each `a.b.c.d` or an IPv6 address, added as a host address).
    pub fn new(name: &str, addresses: &[&str]) -> Namespace {
        let ns = Namespace { name: format!("{name}-{}", std::process::id()) };
        let _ = Command::new("ip").args(["netns", "del", &ns.name]).output();
        ns.ip(&["netns", "add", &ns.name]);
        ns.ip(&["-n", &ns.name, "link", "set", "lo", "up"]);
        for address in addresses {
            let prefix = if address.contains(':') { "128" } else { "32" };
            ns.ip(&["-n", &ns.name, "addr", "add", &format!("{address}/{prefix}"), "dev", "lo"]);
        }
        // The tool took effect: the namespace lists exactly these addresses beside loopback's.
        let shown = ns.ip(&["-n", &ns.name, "-o", "addr", "show", "dev", "lo"]);
        for address in addresses {
            assert!(
                shown.contains(&format!(" {address}/")),
                "{} lacks {address}: {shown}",
                ns.name
            );
        }
        ns
    }

    fn ip(&self, args: &[&str]) -> String {
        let out = Command::new("ip").args(args).output().expect("ip runs");
        assert!(
            out.status.success(),
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}
