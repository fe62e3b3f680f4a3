//! `$PGDATA/pg_snowflake.state`: the durable mark and the layout it counts in, in plain Rust (no
//! PostgreSQL needed to test).
//!
//! The mark is a time unit that no id handed out so far has reached. After a restart or crash
//! the generator starts at the mark, whatever the clock says. WAL carries the same mark to
//! standbys and through crash recovery (see `wal`), but recovery only replays WAL written after
//! the last checkpoint, so a mark older than that must come from this file.
//!
//! 40 bytes: magic (8), the mark as `Mark` writes it (its time units since the layout's epoch,
//! 8 bytes little endian, then the layout, 16), CRC-32C of the first 32 bytes (4), zero (4).
//! Replaced whole: written to a temporary file, synced, renamed over the old one, and the
//! directory synced (`prepare`, `Prepared::replace`). The CRC catches damage.
//!
//! pg_snowflake 0.1.0 wrote 24 bytes (magic `PGSNOW01`, the mark in Twitter's milliseconds, CRC,
//! zero): such a file still reads, as a mark of the Twitter layout. A second magic of that size
//! marks a cluster made by `pg_upgrade` to which the old cluster's mark was not carried (see
//! `upgrade`): the generator refuses until an operator settles it. 0.1.0 refuses to start on
//! either newer form, which is just as safe.

use crate::layout::TWITTER;
use crate::mark::Mark;
use crate::mark::MARK_BYTES;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "pg_snowflake.state";
const MAGIC_V1: [u8; 8] = *b"PGSNOW01";
const MAGIC: [u8; 8] = *b"PGSNOW02";
const MAGIC_NOT_CARRIED: [u8; 8] = *b"PGSNOWUP";
const LEN_V1: usize = 24;
const LEN: usize = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No file: this data directory never handed out an id (or the file was deleted).
    Missing,
    Mark(Mark),
    /// Made by pg_upgrade, and the old cluster's mark did not arrive.
    NotCarried,
}

#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    Corrupt(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Corrupt(why) => write!(f, "{why}"),
        }
    }
}

pub fn encode(state: Loaded) -> Vec<u8> {
    let mut buf = match state {
        Loaded::Mark(mark) => {
            let mut buf = vec![0u8; LEN];
            buf[..8].copy_from_slice(&MAGIC);
            buf[8..8 + MARK_BYTES].copy_from_slice(&mark.to_bytes());
            buf
        }
        Loaded::NotCarried => {
            let mut buf = vec![0u8; LEN_V1];
            buf[..8].copy_from_slice(&MAGIC_NOT_CARRIED);
            buf
        }
        Loaded::Missing => unreachable!("a missing file is not written"),
    };
    let body = buf.len() - 8;
    let crc = crc32c(&buf[..body]);
    buf[body..body + 4].copy_from_slice(&crc.to_le_bytes());
    buf
}

pub fn decode(bytes: &[u8]) -> Result<Loaded, String> {
    let magic = bytes.get(..8).unwrap_or_default();
    let len = match magic {
        m if m == MAGIC => LEN,
        m if m == MAGIC_V1 || m == MAGIC_NOT_CARRIED => LEN_V1,
        _ => return Err("the file does not start with the pg_snowflake magic".into()),
    };
    if bytes.len() != len {
        return Err(format!(
            "the file has {} bytes instead of {len}",
            bytes.len()
        ));
    }
    let body = len - 8;
    let stored = u32::from_le_bytes(bytes[body..body + 4].try_into().unwrap());
    let computed = crc32c(&bytes[..body]);
    if stored != computed || bytes[body + 4..] != [0; 4] {
        return Err(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        ));
    }
    let units = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    match magic {
        m if m == MAGIC_NOT_CARRIED => match units {
            0 => Ok(Loaded::NotCarried),
            _ => Err("the pg_upgrade marker holds a mark".into()),
        },
        m if m == MAGIC_V1 => Mark::checked(units, TWITTER).map(Loaded::Mark),
        _ => Mark::from_bytes(bytes[8..8 + MARK_BYTES].try_into().unwrap()).map(Loaded::Mark),
    }
}

/// The state in `dir`. A missing file, or an empty one, is a data directory that never handed
/// out an id. pg_snowflake 0.2.0 wrote the file in place and could leave it empty when it
/// crashed during the file's very first write, before any id was handed out under it (and the
/// mark it was writing was already in WAL, which crash recovery replays); 0.3.0 replaces the
/// file whole and never leaves it empty.
pub fn read(dir: &Path) -> Result<Loaded, ReadError> {
    match std::fs::read(dir.join(FILE_NAME)) {
        Ok(bytes) if bytes.is_empty() => Ok(Loaded::Missing),
        Ok(bytes) => decode(&bytes).map_err(ReadError::Corrupt),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Loaded::Missing),
        Err(e) => Err(ReadError::Io(e)),
    }
}

/// A new state, durable in a temporary file of its own, not yet in place: the caller can still
/// give up without having changed anything (see `Prepared::replace`).
#[must_use = "the state is in place only once replaced"]
pub struct Prepared {
    dir: PathBuf,
}

/// The temporary file's name: written whole and synced before it is renamed over the state
/// file, so that a crash leaves either the old state or the new one, never a mix or nothing.
/// One left behind by a crash is overwritten by the next write and never read.
const TEMP_NAME: &str = "pg_snowflake.state.tmp";

/// Writes `state` to the temporary file and syncs it. Nothing is in place yet.
pub fn prepare(dir: &Path, state: Loaded) -> io::Result<Prepared> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.join(TEMP_NAME))?;
    file.write_all_at(&encode(state), 0)?;
    file.sync_data()?;
    Ok(Prepared {
        dir: dir.to_path_buf(),
    })
}

impl Prepared {
    /// Puts the prepared state in place, durably: a rename over the state file, then a sync of
    /// the directory, without which a power cut could bring the old name back (and with it the
    /// old mark).
    pub fn replace(self) -> io::Result<()> {
        std::fs::rename(self.dir.join(TEMP_NAME), self.dir.join(FILE_NAME))?;
        File::open(&self.dir)?.sync_all()
    }
}

/// Writes the state durably, replacing the file whole.
pub fn write(dir: &Path, state: Loaded) -> io::Result<()> {
    prepare(dir, state)?.replace()
}

/// CRC-32C (Castagnoli), bitwise: the file is written about once a second, so a table would
/// buy nothing.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{SONYFLAKE, TWITTER};

    fn twitter(units: u64) -> Loaded {
        Loaded::Mark(Mark {
            units,
            layout: TWITTER,
        })
    }

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C for the ASCII digits 1..9.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn encode_decode_roundtrip() {
        for units in [0, 1, 1_234_567_890_123, (1 << 41) - 1, TWITTER.end_mark()] {
            assert_eq!(decode(&encode(twitter(units))), Ok(twitter(units)));
        }
        let sony = Loaded::Mark(Mark {
            units: 123_456,
            layout: SONYFLAKE,
        });
        assert_eq!(decode(&encode(sony)), Ok(sony));
        assert_eq!(decode(&encode(Loaded::NotCarried)), Ok(Loaded::NotCarried));
    }

    #[test]
    fn a_mark_past_the_end_of_the_layout_is_corrupt_even_with_a_good_checksum() {
        for units in [TWITTER.end_mark() + 1, 1 << 52, u64::MAX] {
            let err = decode(&encode(twitter(units))).unwrap_err();
            assert!(err.contains("past the end of the twitter layout"), "{err}");
        }
        let err = decode(&encode(Loaded::Mark(Mark {
            units: 1 << 39 | 1,
            layout: SONYFLAKE,
        })))
        .unwrap_err();
        assert!(err.contains("sonyflake"), "{err}");
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        for good in [encode(twitter(987_654_321)), encode(Loaded::NotCarried)] {
            for i in 0..good.len() {
                for bit in 0..8 {
                    let mut bad = good.clone();
                    bad[i] ^= 1 << bit;
                    assert!(
                        decode(&bad).is_err(),
                        "flip of bit {bit} in byte {i} went unnoticed"
                    );
                }
            }
        }
    }

    #[test]
    fn a_file_written_by_version_0_1_0_still_reads_as_twitter() {
        // The bytes 0.1.0 wrote for mark 1 234 567 890 123 ms.
        let mut v010 = [0u8; LEN_V1];
        v010[..8].copy_from_slice(b"PGSNOW01");
        v010[8..16].copy_from_slice(&1_234_567_890_123u64.to_le_bytes());
        let crc = crc32c(&v010[..16]);
        v010[16..20].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&v010), Ok(twitter(1_234_567_890_123)));
    }

    #[test]
    fn short_and_foreign_files_are_corrupt() {
        assert!(decode(&encode(twitter(5))[..20]).is_err());
        assert!(decode(&encode(twitter(5))[..24]).is_err());
        assert!(decode(&[0u8; LEN]).is_err());
        assert!(decode(b"").is_err());
    }

    #[test]
    fn write_then_read_in_a_directory() {
        let dir = std::env::temp_dir().join(format!("pg_snowflake_state_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::Missing);
        write(&dir, twitter(42)).unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(42));
        write(&dir, twitter(7_000_000_000)).unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(7_000_000_000));
        // The shorter marker replaces the longer file whole.
        write(&dir, Loaded::NotCarried).unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::NotCarried);
        write(&dir, twitter(9)).unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(9));
        // Prepared but not replaced: the old state stays, and the temporary file is not read.
        let prepared = prepare(&dir, twitter(10)).unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(9));
        drop(prepared);
        assert_eq!(read(&dir).unwrap(), twitter(9));
        prepare(&dir, twitter(11)).unwrap().replace().unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(11));
        assert!(!dir.join(TEMP_NAME).exists());
        std::fs::write(dir.join(FILE_NAME), b"garbage").unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Corrupt(_))));
        // An empty file is what 0.2.0 could leave at its first write: nothing handed out yet.
        std::fs::write(dir.join(FILE_NAME), b"").unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::Missing);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_preparation_changes_nothing() {
        let dir = std::env::temp_dir().join(format!("pg_snowflake_prep_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write(&dir, twitter(5)).unwrap();
        // A directory where the temporary file goes: the write fails, the state stays.
        std::fs::create_dir(dir.join(TEMP_NAME)).unwrap();
        assert!(prepare(&dir, twitter(6)).is_err());
        assert_eq!(read(&dir).unwrap(), twitter(5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
