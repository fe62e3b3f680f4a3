//! `$PGDATA/pg_snowflake.state`: the durable mark, in plain Rust (no PostgreSQL needed to test).
//!
//! The mark is a millisecond that no id handed out so far has reached. After a restart or crash
//! the generator starts at the mark, whatever the clock says. WAL carries the same mark to
//! standbys and through crash recovery (see `wal`), but recovery only replays WAL written after
//! the last checkpoint, so a mark older than that must come from this file.
//!
//! 24 bytes, written in place with one `pwrite` and `fdatasync`: magic (8), mark in ms since the
//! snowflake epoch (8, little endian), CRC-32C of the first 16 bytes (4), zero (4). A 24-byte
//! write within one sector is atomic on the storage PostgreSQL supports (its own `pg_control`
//! relies on the same for 512 bytes); the CRC catches anything else.
//!
//! A second magic marks a cluster made by `pg_upgrade` to which the old cluster's mark was not
//! carried (see `upgrade`): the generator refuses until an operator settles it. pg_snowflake
//! 0.1.0 does not know this magic and refuses to start on it, which is just as safe.

use crate::layout::END_MARK;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub const FILE_NAME: &str = "pg_snowflake.state";
const MAGIC: [u8; 8] = *b"PGSNOW01";
const MAGIC_NOT_CARRIED: [u8; 8] = *b"PGSNOWUP";
const LEN: usize = 24;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// No file: this data directory never handed out an id (or the file was deleted).
    Missing,
    Mark(u64),
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

pub fn encode(state: Loaded) -> [u8; LEN] {
    let (magic, mark) = match state {
        Loaded::Mark(ms) => (MAGIC, ms),
        Loaded::NotCarried => (MAGIC_NOT_CARRIED, 0),
        Loaded::Missing => unreachable!("a missing file is not written"),
    };
    let mut buf = [0u8; LEN];
    buf[..8].copy_from_slice(&magic);
    buf[8..16].copy_from_slice(&mark.to_le_bytes());
    let crc = crc32c(&buf[..16]);
    buf[16..20].copy_from_slice(&crc.to_le_bytes());
    buf
}

pub fn decode(bytes: &[u8]) -> Result<Loaded, String> {
    if bytes.len() != LEN {
        return Err(format!(
            "the file has {} bytes instead of {LEN}",
            bytes.len()
        ));
    }
    if bytes[..8] != MAGIC && bytes[..8] != MAGIC_NOT_CARRIED {
        return Err("the file does not start with the pg_snowflake magic".into());
    }
    let stored = u32::from_le_bytes(bytes[16..20].try_into().unwrap());
    let computed = crc32c(&bytes[..16]);
    if stored != computed || bytes[20..] != [0; 4] {
        return Err(format!(
            "checksum mismatch (stored {stored:08x}, computed {computed:08x})"
        ));
    }
    let mark = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    if bytes[..8] == MAGIC_NOT_CARRIED {
        return match mark {
            0 => Ok(Loaded::NotCarried),
            _ => Err("the pg_upgrade marker holds a mark".into()),
        };
    }
    if mark > END_MARK {
        return Err(format!(
            "the mark {mark} ms lies past the end of the id layout ({END_MARK} ms)"
        ));
    }
    Ok(Loaded::Mark(mark))
}

pub fn read(dir: &Path) -> Result<Loaded, ReadError> {
    match std::fs::read(dir.join(FILE_NAME)) {
        Ok(bytes) => decode(&bytes).map_err(ReadError::Corrupt),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Loaded::Missing),
        Err(e) => Err(ReadError::Io(e)),
    }
}

/// Writes the state durably. `sync_dir` also syncs the directory, which makes a newly created
/// file's name durable; once per server start is enough.
pub fn write(dir: &Path, state: Loaded, sync_dir: bool) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(FILE_NAME))?;
    file.write_all_at(&encode(state), 0)?;
    file.sync_data()?;
    if sync_dir {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// CRC-32C (Castagnoli), bitwise: the file is written about once a second, so a table would
/// buy nothing.
fn crc32c(data: &[u8]) -> u32 {
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

    #[test]
    fn crc32c_check_value() {
        // The standard check value of CRC-32C for the ASCII digits 1..9.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn encode_decode_roundtrip() {
        for mark in [0, 1, 1_234_567_890_123, (1 << 41) - 1, END_MARK] {
            assert_eq!(decode(&encode(Loaded::Mark(mark))), Ok(Loaded::Mark(mark)));
        }
        assert_eq!(decode(&encode(Loaded::NotCarried)), Ok(Loaded::NotCarried));
    }

    #[test]
    fn a_mark_past_the_end_of_the_layout_is_corrupt_even_with_a_good_checksum() {
        for mark in [END_MARK + 1, 1 << 52, u64::MAX] {
            let err = decode(&encode(Loaded::Mark(mark))).unwrap_err();
            assert!(err.contains("past the end of the id layout"), "{err}");
        }
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        let good = encode(Loaded::Mark(987_654_321));
        for i in 0..LEN {
            for bit in 0..8 {
                let mut bad = good;
                bad[i] ^= 1 << bit;
                assert!(
                    decode(&bad).is_err(),
                    "flip of bit {bit} in byte {i} went unnoticed"
                );
            }
        }
    }

    #[test]
    fn a_file_written_by_version_0_1_0_still_reads() {
        // The bytes 0.1.0 wrote for mark 1 234 567 890 123 (its format is this one's).
        let mut v010 = [0u8; LEN];
        v010[..8].copy_from_slice(b"PGSNOW01");
        v010[8..16].copy_from_slice(&1_234_567_890_123u64.to_le_bytes());
        let crc = crc32c(&v010[..16]);
        v010[16..20].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(&v010), Ok(Loaded::Mark(1_234_567_890_123)));
    }

    #[test]
    fn short_and_foreign_files_are_corrupt() {
        assert!(decode(&encode(Loaded::Mark(5))[..20]).is_err());
        assert!(decode(&[0u8; LEN]).is_err());
        assert!(decode(b"").is_err());
    }

    #[test]
    fn write_then_read_in_a_directory() {
        let dir = std::env::temp_dir().join(format!("pg_snowflake_state_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::Missing);
        write(&dir, Loaded::Mark(42), true).unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::Mark(42));
        write(&dir, Loaded::Mark(7_000_000_000), false).unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::Mark(7_000_000_000));
        write(&dir, Loaded::NotCarried, false).unwrap();
        assert_eq!(read(&dir).unwrap(), Loaded::NotCarried);
        std::fs::write(dir.join(FILE_NAME), b"garbage").unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Corrupt(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
