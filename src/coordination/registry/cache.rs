//! `$PGDATA/pg_snowflake.registry`: the last lease the registry granted this cluster, kept
//! durably so that a restart while the registry is unreachable goes on with the same worker id
//! until that lease runs out (as Leaf caches its ZooKeeper worker id on local disk). Plain Rust,
//! tested without PostgreSQL.
//!
//! A copy of the data directory carries this file too (Leaf's copied cache repeats ids): the
//! lease records the place it was granted at (`identity::Place::check`), and only a start at
//! that place uses it (0.6.0). A file of 0.5.0, which records no place, is used by no start.
//!
//! A few `key=value` lines and a CRC-32C of everything before it, replaced whole (a temporary
//! file, synced, renamed, the directory synced) so that a crash leaves the old lease or the new
//! one. A lease is written here only once the registry has recorded its coverage, and before the
//! generator may use it: the registry always knows at least as much as this file says.

use crate::data_file::{crc32c, Dir};
use std::io;
use std::path::Path;

pub const FILE_NAME: &str = "pg_snowflake.registry";
const TEMP_NAME: &str = "pg_snowflake.registry.tmp";
const HEADER: &str = "pg_snowflake registry lease 2";
/// 0.5.0's file: no place.
const HEADER_1: &str = "pg_snowflake registry lease 1";
/// The largest file a lease makes: its lines hold at most about 500 bytes (a namespace is 63
/// characters of up to 4 bytes).
const MAX_LEN: usize = 4096;

/// A lease as the registry granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The cluster it was granted to: a copy of the data directory with another system
    /// identifier (pg_upgrade, a fresh initdb restored from files) does not inherit it.
    pub system_identifier: u64,
    pub namespace: String,
    /// `Layout::describe()` of the layout it was granted for.
    pub layout: String,
    pub worker_id: u32,
    /// Unix ms: this cluster's ids stay below this time, and the registry has recorded it. 0
    /// once the lease was given back at a clean shutdown: nothing to start with.
    pub covered_until_ms: i64,
    /// Unix ms: ids must be above this time, the coverage of the worker id's previous holder.
    pub start_above_ms: i64,
    /// Unix ms, by the registry's clock: when another cluster may take the worker id.
    pub expires_ms: i64,
    /// The check of the place it was granted at (empty in 0.5.0's file: no place).
    pub place_check: String,
    /// That place, for people.
    pub place: String,
}

impl Lease {
    pub fn encode(&self) -> String {
        let body = format!(
            "{HEADER}\nsystem_identifier={}\nnamespace={}\nlayout={}\nworker_id={}\n\
             covered_until_ms={}\nstart_above_ms={}\nexpires_ms={}\nplace_check={}\nplace={}\n",
            self.system_identifier,
            self.namespace,
            self.layout,
            self.worker_id,
            self.covered_until_ms,
            self.start_above_ms,
            self.expires_ms,
            self.place_check,
            self.place.replace('\n', " ")
        );
        format!("{body}crc32c={:08x}\n", crc32c(body.as_bytes()))
    }

    pub fn decode(text: &str) -> Result<Lease, String> {
        let at = text.rfind("crc32c=").ok_or("the file has no checksum line")?;
        let (body, crc) = text.split_at(at);
        let stored = crc["crc32c=".len()..].trim_end();
        let computed = format!("{:08x}", crc32c(body.as_bytes()));
        if stored != computed {
            return Err(format!("checksum mismatch (stored {stored}, computed {computed})"));
        }
        let mut lines = body.lines();
        let version = match lines.next() {
            Some(HEADER) => 2,
            Some(HEADER_1) => 1,
            _ => return Err("the file does not start with the pg_snowflake registry header".into()),
        };
        let mut value = |key: &str| -> Result<String, String> {
            let line = lines.next().unwrap_or_default();
            line.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix('='))
                .map(str::to_string)
                .ok_or_else(|| format!("line \"{line}\" is not {key}=..."))
        };
        let number = |key: &str, text: String| -> Result<i64, String> {
            text.parse().map_err(|_| format!("{key} \"{text}\" is not a number"))
        };
        let system_identifier = value("system_identifier")?;
        let system_identifier = system_identifier
            .parse()
            .map_err(|_| format!("system_identifier \"{system_identifier}\" is not a number"))?;
        let namespace = value("namespace")?;
        let layout = value("layout")?;
        let worker_id = value("worker_id")?;
        let worker_id =
            worker_id.parse().map_err(|_| format!("worker_id \"{worker_id}\" is not a number"))?;
        let covered_until_ms = number("covered_until_ms", value("covered_until_ms")?)?;
        let start_above_ms = number("start_above_ms", value("start_above_ms")?)?;
        let expires_ms = number("expires_ms", value("expires_ms")?)?;
        let (place_check, place) = if version == 2 {
            (value("place_check")?, value("place")?)
        } else {
            (String::new(), String::new())
        };
        Ok(Lease {
            system_identifier,
            namespace,
            layout,
            worker_id,
            covered_until_ms,
            start_above_ms,
            expires_ms,
            place_check,
            place,
        })
    }
}

/// The cached lease in `dir`, if there is one. A damaged file is an error for the caller to
/// report; it is then treated as no lease (the registry decides again).
pub fn read(dir: &Path) -> Result<Option<Lease>, String> {
    match Dir::open(dir).and_then(|d| d.read(FILE_NAME, MAX_LEN)) {
        Ok(Some(bytes)) => {
            let text = String::from_utf8(bytes).map_err(|_| "the file is not UTF-8".to_string())?;
            Lease::decode(&text).map(Some)
        }
        Ok(None) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Replaces the cached lease durably.
pub fn write(dir: &Path, lease: &Lease) -> io::Result<()> {
    Dir::open(dir)?.replace(TEMP_NAME, FILE_NAME, lease.encode().as_bytes())
}

/// Removes the cached lease durably (a lease that was lost must not come back at restart).
pub fn remove(dir: &Path) -> io::Result<()> {
    Dir::open(dir)?.remove(FILE_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease {
            system_identifier: 7_440_000_000_000_000_001,
            namespace: "eu west".into(),
            layout: "twitter".into(),
            worker_id: 17,
            covered_until_ms: 1_790_000_000_000,
            start_above_ms: 1_789_000_000_000,
            expires_ms: 1_790_000_001_000,
            place_check: "ab".repeat(32),
            place: "host vm, /data (device 8:1, inode 42)".into(),
        }
    }

    #[test]
    fn a_file_of_0_5_0_has_no_place() {
        let body =
            "pg_snowflake registry lease 1\nsystem_identifier=7\nnamespace=n\nlayout=twitter\n\
                    worker_id=3\ncovered_until_ms=10\nstart_above_ms=0\nexpires_ms=20\n";
        let text = format!("{body}crc32c={:08x}\n", crc32c(body.as_bytes()));
        let lease = Lease::decode(&text).unwrap();
        assert_eq!((lease.worker_id, lease.place_check.as_str()), (3, ""));
    }

    #[test]
    fn round_trip() {
        assert_eq!(Lease::decode(&lease().encode()), Ok(lease()));
    }

    #[test]
    fn damage_is_found() {
        let text = lease().encode();
        let flipped = text.replace("worker_id=17", "worker_id=18");
        assert!(Lease::decode(&flipped).unwrap_err().contains("checksum"));
        assert!(Lease::decode(&text[..text.len() - 3]).is_err());
        assert!(Lease::decode("").is_err());
    }

    #[test]
    fn written_and_read_back() {
        let dir = std::env::temp_dir().join(format!("pg_snowflake-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir), Ok(None));
        write(&dir, &lease()).unwrap();
        assert_eq!(read(&dir), Ok(Some(lease())));
        remove(&dir).unwrap();
        assert_eq!(read(&dir), Ok(None));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
