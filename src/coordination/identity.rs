//! Who holds a registry lease or makes a claim: one start of this data directory, at one place. A copy of a data
//! directory (an image, a backup, a disk snapshot, a promoted clone, a split brain) carries
//! everything its original has on disk, its system identifier and its cached lease included, so
//! neither tells a copy from its original. Two things do:
//!
//! - The **place**: the machine's boot (`/proc/sys/kernel/random/boot_id`, new at every boot),
//!   its `/etc/machine-id`, its host name, and the data directory's device, inode and path. Two
//!   servers cannot run one data directory at one place at once (the postmaster's lock file), so
//!   a start at the place of the lease's last holder is that holder's next start, after a clean
//!   stop or a crash: it resumes the lease. A copy anywhere else, a restore, a standby promoted on
//!   another host, and a start after a reboot are at another place. The member sends the
//!   registry `credential` (a hash of the place, which no one off this machine can compute: the
//!   boot id is 128 random bits); the cache and the registry keep only `check`, a hash of that,
//!   so neither a copy of the data directory nor a reader of the registry's table learns the
//!   credential.
//! - The **secret**: 32 random bytes, made by this start, kept in shared memory only (never on
//!   disk), sent at every renewal with the next one, which replaces it: the registry keeps only
//!   a hash of the one it expects. A server that cannot present it (a copy started beside its
//!   original, a member's role naming another server) cannot renew, take or keep another start's
//!   lease; two servers that hold one secret (a clone of a running machine's memory) are told
//!   apart at the next renewal of either, when the first one's new secret replaces the one both
//!   had.

use std::os::unix::fs::MetadataExt;

/// Where this data directory runs now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// Hex of the place's hash: what the member presents to the registry.
    pub credential: String,
    /// Hex of the credential's hash: what the cache and the registry keep.
    pub check: String,
    /// For people: the host, the directory and its device and inode.
    pub description: String,
}

/// This data directory's place (the process's working directory, which PostgreSQL sets to the
/// data directory). Claims show `description`, without the boot, so that a claim keeps its
/// place across reboots: a copy on another machine or in another directory still differs.
pub fn place() -> Place {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default().trim().to_string();
    let boot = read("/proc/sys/kernel/random/boot_id");
    let machine = read("/etc/machine-id");
    let host = host_name();
    let dir = std::fs::canonicalize(".").map(|p| p.display().to_string()).unwrap_or_default();
    let (dev, ino) = std::fs::metadata(".").map(|m| (m.dev(), m.ino())).unwrap_or_default();
    let raw = format!("boot={boot}\nmachine={machine}\nhost={host}\ndir={dev}:{ino}\npath={dir}\n");
    let credential = hex(&sha256(raw.as_bytes()));
    let check = check_of(&credential);
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    // The machine too, as a hash: virtual machines made from one image can have one host name,
    // path, device and inode (0.6.0's review), and their claims would otherwise have one key.
    let machine_hash = hex(&sha256(machine.as_bytes()));
    Place {
        credential,
        check,
        description: format!(
            "host {host} (machine {}), {dir} (device {major}:{minor}, inode {ino})",
            &machine_hash[..8]
        ),
    }
}

/// The hash the registry and the cache keep of a credential.
pub fn check_of(credential: &str) -> String {
    hex(&sha256(credential.as_bytes()))
}

/// A new secret: 32 bytes of the kernel's random generator, as hex.
pub fn new_secret() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: writes at most the rest of `bytes`.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        if n > 0 {
            filled += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // The kernel's generator does not fail once seeded (it blocks until then); were it
            // to, a secret of a process-local counter would still be unknown to others.
            panic!("getrandom failed: {}", std::io::Error::last_os_error());
        }
    }
    bytes
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if ok {
        String::from_utf8_lossy(&buf[..end]).into_owned()
    } else {
        String::new()
    }
}

/// SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(data).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_text() {
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_place_is_stable_and_its_check_is_not_its_credential() {
        let (a, b) = (place(), place());
        assert_eq!(a, b);
        assert_eq!(a.credential.len(), 64);
        assert_ne!(a.credential, a.check);
        assert_eq!(check_of(&a.credential), a.check);
    }

    #[test]
    fn secrets_differ() {
        assert_ne!(new_secret(), new_secret());
    }
}
