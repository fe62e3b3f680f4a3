//! `$PGDATA/pg_snowflake.state` and its copy `$PGDATA/pg_snowflake/mark`: the durable mark and
//! the layout it counts in, in plain Rust (no PostgreSQL needed to test).
//!
//! The mark is a time unit that no id handed out so far has reached. After a restart or crash
//! the generator starts at the mark, whatever the clock says. WAL carries the same mark to
//! standbys and through crash recovery (see `wal`), but recovery only replays WAL written after
//! the last checkpoint, and a clean shutdown leaves none to replay: a mark older than that must
//! come from these files.
//!
//! 40 bytes: magic (8), the mark as `Mark` writes it (its time units since the layout's epoch,
//! 8 bytes little endian, then the layout, 16), CRC-32C of the first 32 bytes (4), zero (4).
//! Replaced whole: written to a temporary file, synced, renamed over the old one, and the
//! directory synced (`prepare`, `Prepared::replace`). The CRC catches damage.
//!
//! **The copy.** Every mark is written twice, with the same bytes: to the state file and to
//! `mark` in a directory of its own, `pg_snowflake/`. A state file lost after a clean shutdown
//! would otherwise make the data directory look new, and its ids start from the clock, below the
//! old ones if the clock is behind them. What loses the state file is rarely what loses the
//! copy: a restore or a copy that skips the file by its name or by a pattern
//! (`pg_snowflake.state*`, `*.state`), a cleanup of the data directory's top level, a disk
//! error in one file or one directory. So the copy has another name, another directory and
//! another inode, and each is put in place by a rename of its own. It is not in one of
//! PostgreSQL's directories: a foreign file in `global/` or `base/` breaks `pg_checksums`, and
//! `pg_basebackup` would check its checksums. What removes both (`rm -r` of everything named
//! `pg_snowflake*`, a restore of PostgreSQL's own directories alone) still leaves a data
//! directory that looks new.
//!
//! pg_snowflake 0.1.0 wrote 24 bytes (magic `PGSNOW01`, the mark in Twitter's milliseconds, CRC,
//! zero): such a file still reads, as a mark of the Twitter layout. A second magic of that size
//! marks a cluster made by `pg_upgrade` to which the old cluster's mark was not carried (see
//! `upgrade`): the generator refuses until an operator settles it. 0.1.0 refuses to start on
//! either newer form, which is just as safe. Versions before 0.4.0 wrote no copy: their data
//! directory gets one with the first renewal.

use crate::data_file::{crc32c, Dir};
use crate::layout::TWITTER;
use crate::mark::Mark;
use crate::mark::MARK_BYTES;
use crate::text::iso_unix;
use std::io::{self, ErrorKind};
use std::path::Path;

pub const FILE_NAME: &str = "pg_snowflake.state";
/// The copy of the mark, in a directory of its own under another name (see above).
pub const COPY_DIR: &str = "pg_snowflake";
const COPY_NAME: &str = "mark";
pub const COPY_PATH: &str = "pg_snowflake/mark";
const MAGIC_V1: [u8; 8] = *b"PGSNOW01";
const MAGIC: [u8; 8] = *b"PGSNOW02";
const MAGIC_NOT_CARRIED: [u8; 8] = *b"PGSNOWUP";
const LEN_V1: usize = 24;
const LEN: usize = 40;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contents {
    /// Neither the state file nor its copy: this data directory never handed out an id.
    Missing,
    Mark(Mark),
    /// Made by pg_upgrade, and the old cluster's mark did not arrive.
    NotCarried,
    /// This data directory handed out ids, and neither file says where they ended (see
    /// `recover`).
    Lost,
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

pub fn encode(state: Contents) -> Vec<u8> {
    let mut buf = match state {
        Contents::Mark(mark) => {
            let mut buf = vec![0u8; LEN];
            buf[..8].copy_from_slice(&MAGIC);
            buf[8..8 + MARK_BYTES].copy_from_slice(&mark.to_bytes());
            buf
        }
        Contents::NotCarried => {
            let mut buf = vec![0u8; LEN_V1];
            buf[..8].copy_from_slice(&MAGIC_NOT_CARRIED);
            buf
        }
        Contents::Missing | Contents::Lost => unreachable!("only a mark or a marker is written"),
    };
    let body = buf.len() - 8;
    let crc = crc32c(&buf[..body]);
    buf[body..body + 4].copy_from_slice(&crc.to_le_bytes());
    buf
}

pub fn decode(bytes: &[u8]) -> Result<Contents, String> {
    let magic = bytes.get(..8).unwrap_or_default();
    let len = match magic {
        m if m == MAGIC => LEN,
        m if m == MAGIC_V1 || m == MAGIC_NOT_CARRIED => LEN_V1,
        _ => return Err("the file does not start with the pg_snowflake magic".into()),
    };
    if bytes.len() != len {
        return Err(format!("the file has {} bytes instead of {len}", bytes.len()));
    }
    let body = len - 8;
    let stored = u32::from_le_bytes(bytes[body..body + 4].try_into().unwrap());
    let computed = crc32c(&bytes[..body]);
    if stored != computed || bytes[body + 4..] != [0; 4] {
        return Err(format!("checksum mismatch (stored {stored:08x}, computed {computed:08x})"));
    }
    let units = u64::from_le_bytes(bytes[8..16].try_into().unwrap());
    match magic {
        m if m == MAGIC_NOT_CARRIED => match units {
            0 => Ok(Contents::NotCarried),
            _ => Err("the pg_upgrade marker holds a mark".into()),
        },
        m if m == MAGIC_V1 => Mark::checked(units, TWITTER).map(Contents::Mark),
        _ => Mark::from_bytes(bytes[8..8 + MARK_BYTES].try_into().unwrap()).map(Contents::Mark),
    }
}

/// What one of the two files held at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    Missing,
    Empty,
    /// The copy could not be read or holds no mark (why). A damaged state file stops the start
    /// instead (`ReadError`).
    Damaged(String),
    Good(Contents),
}

/// Which of the two files the starting state came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    StateFile,
    Copy,
    /// Neither: a data directory that never handed out an id, or one whose ids are unknown
    /// (`Contents::Lost`).
    Neither,
}

/// The state a start goes on from, where it came from, and what each file held (for the server
/// log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub state: Contents,
    pub source: Source,
    pub file: Found,
    pub copy: Found,
}

/// The state in `dir`: the state file's, or its copy's where the copy holds a higher mark or
/// the state file is missing or empty (what a restore that skipped it, a cleanup script or a
/// disk error leaves). Neither file is a data directory that never handed out an id. An empty
/// state file without a usable copy, or a missing one beside a damaged copy, is `Lost`: ids
/// were handed out (0.3.0 and later never leave the file empty, and the copy is written only
/// with marks), and where they ended is unknown. A state file that is unreadable or corrupt is
/// an error, whatever its copy holds (the start stops: see `generator::problems::state_file_unreadable`).
pub fn recover(dir: &Path) -> Result<Recovered, ReadError> {
    let data = Dir::open(dir).map_err(ReadError::Io)?;
    let file = match data.read(FILE_NAME, LEN) {
        Ok(Some(bytes)) if bytes.is_empty() => Found::Empty,
        Ok(Some(bytes)) => Found::Good(decode(&bytes).map_err(ReadError::Corrupt)?),
        Ok(None) => Found::Missing,
        Err(e) => return Err(ReadError::Io(e)),
    };
    let copy = match data
        .open_dir(mutant!(copy_read, { COPY_DIR }, { "none" }))
        .and_then(|d| d.read(COPY_NAME, LEN))
    {
        Ok(Some(bytes)) if bytes.is_empty() => Found::Damaged("it is empty".into()),
        Ok(Some(bytes)) => match decode(&bytes) {
            Ok(mark @ Contents::Mark(_)) => Found::Good(mark),
            Ok(_) => Found::Damaged("it holds no mark".into()),
            Err(why) => Found::Damaged(why),
        },
        Ok(None) => Found::Missing,
        Err(e) if e.kind() == ErrorKind::NotFound => Found::Missing,
        Err(e) => Found::Damaged(e.to_string()),
    };
    let (state, source) = match (&file, &copy) {
        (Found::Good(Contents::Mark(mine)), Found::Good(Contents::Mark(copied)))
            if copied.bound() > mine.bound() =>
        {
            (Contents::Mark(*copied), Source::Copy)
        }
        (Found::Good(state), _) => (*state, Source::StateFile),
        (_, Found::Good(state)) => (*state, Source::Copy),
        (Found::Missing, Found::Missing) => (Contents::Missing, Source::Neither),
        _ => (mutant!(lost_refusal, { Contents::Lost }, { Contents::Missing }), Source::Neither),
    };
    Ok(Recovered { state, source, file, copy })
}

/// What the server log says of a start: a LOG line where the ids' state is known, a WARNING
/// (with what to do) where a file was lost or damaged. Made here, in plain Rust, and logged by
/// the generator (`generator::problems::starting_state`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Account {
    Log { message: String, detail: Option<String> },
    Warning { message: String, detail: String, hint: String },
}

impl Recovered {
    /// Where the generator goes on from, and why, for the server log.
    pub fn account(&self) -> Account {
        let at = |m: &Mark| {
            format!("{}, {} layout", iso_unix(m.layout.unix_ms(m.units)), m.layout.describe())
        };
        let what = |f: &Found| match f {
            Found::Missing => "missing".to_string(),
            Found::Empty => "empty".to_string(),
            Found::Damaged(why) => format!("damaged ({why})"),
            Found::Good(_) => "readable".to_string(),
        };
        let log = |message: String, detail: Option<String>| Account::Log { message, detail };
        match (self.state, self.source) {
            (Contents::Mark(m), Source::StateFile) => log(
                format!("snowflake ids continue above the mark in \"{FILE_NAME}\" ({})", at(&m)),
                match &self.copy {
                    Found::Good(_) => None,
                    other => Some(format!(
                        "Its copy \"{COPY_PATH}\" is {}; the next renewal writes it again.",
                        what(other)
                    )),
                },
            ),
            (Contents::Mark(m), Source::Copy) if matches!(self.file, Found::Good(_)) => log(
                format!(
                    "snowflake ids continue above the copy of the mark in \"{COPY_PATH}\" ({}), \
                     which is ahead of \"{FILE_NAME}\"",
                    at(&m)
                ),
                None,
            ),
            (Contents::Mark(m), _) => Account::Warning {
                message: format!(
                    "the snowflake state file \"{FILE_NAME}\" is {}: ids continue above the copy \
                     of its mark in \"{COPY_PATH}\" ({})",
                    what(&self.file),
                    at(&m)
                ),
                detail: "A restore or a copy of the data directory that skipped the file, a \
                         cleanup script or a disk error may have lost it. The next renewal writes \
                         it again."
                    .into(),
                hint: "Find out what lost the file; nothing else is needed.".into(),
            },
            (Contents::NotCarried, _) => log(
                format!(
                    "the snowflake state file \"{FILE_NAME}\" says that pg_upgrade made this \
                     cluster without the old cluster's mark: ids are refused until it is settled"
                ),
                None,
            ),
            (Contents::Missing, _) => log(
                "no snowflake state file and no copy of it: this data directory has handed out \
                 no ids, and they start from the clock"
                    .into(),
                None,
            ),
            (Contents::Lost, _) => Account::Warning {
                message: format!(
                    "the snowflake state file \"{FILE_NAME}\" is {} and its copy \"{COPY_PATH}\" \
                     is {}: ids are refused",
                    what(&self.file),
                    what(&self.copy)
                ),
                detail: "This data directory has handed out ids, and neither file says where they \
                         ended: new ids could repeat them if the clock is behind them."
                    .into(),
                hint: lost_hint(),
            },
        }
    }
}

/// What to do when the ids handed out before the last start are unknown (the state file and its
/// copy lost): at start (`Recovered::account`) and with every refusal.
pub fn lost_hint() -> String {
    format!(
        "Restore {FILE_NAME} from a backup of this data directory and restart the server, or, \
         with an id known to be at least as high as every id this server handed out (the largest \
         id in the tables it fills), run SELECT snowflake_advance_past(<that id>), which lets ids \
         go on above it."
    )
}

/// The state in `dir`, as `recover` finds it.
pub fn read(dir: &Path) -> Result<Contents, ReadError> {
    recover(dir).map(|r| r.state)
}

/// Which of the two files a write failed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    StateFile,
    Copy,
}

impl Place {
    /// Its path in the data directory.
    pub const fn path(self) -> &'static str {
        match self {
            Place::StateFile => FILE_NAME,
            Place::Copy => COPY_PATH,
        }
    }
}

/// A write of the state that failed, and on which file.
#[derive(Debug)]
pub struct WriteError {
    pub place: Place,
    pub error: io::Error,
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.place.path(), self.error)
    }
}

fn failed_on(place: Place) -> impl FnOnce(io::Error) -> WriteError {
    move |error| WriteError { place, error }
}

/// A new state, durable in temporary files of its own beside the state file (and beside its
/// copy, for a mark), not yet in place: the caller can still give up without having changed
/// anything (see `Prepared::replace`).
#[must_use = "the state is in place only once replaced"]
pub struct Prepared {
    data: Dir,
    /// The copy's directory, for a mark.
    copy: Option<Dir>,
}

/// The temporary files' names: written whole and synced before they are renamed over the state
/// file and its copy, so that a crash leaves either the old state or the new one, never a mix or
/// nothing. One left behind by a crash is overwritten by the next write and never read.
const TEMP_NAME: &str = "pg_snowflake.state.tmp";
const COPY_TEMP_NAME: &str = "mark.tmp";

/// Writes `state` to the temporary files and syncs them: the state file's, and for a mark its
/// copy's (the first time, after creating the copy's directory durably). Nothing is in place
/// yet. The marker of a pg_upgrade that carried no mark goes into the state file alone: deleting
/// that file is how an operator settles it.
pub fn prepare(dir: &Path, state: Contents) -> Result<Prepared, WriteError> {
    let bytes = encode(state);
    let data = Dir::open(dir).map_err(failed_on(Place::StateFile))?;
    data.write_new(TEMP_NAME, &bytes).map_err(failed_on(Place::StateFile))?;
    let copy = match state {
        Contents::Mark(_) if mutant!(state_copy, { true }, { false }) => {
            let copy_dir = data.open_or_make(COPY_DIR).map_err(failed_on(Place::Copy))?;
            copy_dir.write_new(COPY_TEMP_NAME, &bytes).map_err(failed_on(Place::Copy))?;
            Some(copy_dir)
        }
        _ => None,
    };
    Ok(Prepared { data, copy })
}

impl Prepared {
    /// Puts the prepared state in place, durably: the state file, then its copy. Each is a
    /// rename over the old file, then a sync of its directory, without which a power cut could
    /// bring the old name back (and with it the old mark). The directories are those `prepare`
    /// opened, whatever their names lead to by now.
    pub fn replace(self) -> Result<(), WriteError> {
        self.data.put_in_place(TEMP_NAME, FILE_NAME).map_err(failed_on(Place::StateFile))?;
        if let Some(copy_dir) = &self.copy {
            copy_dir.put_in_place(COPY_TEMP_NAME, COPY_NAME).map_err(failed_on(Place::Copy))?;
        }
        Ok(())
    }
}

/// Writes the state durably, replacing the files whole.
pub fn write(dir: &Path, state: Contents) -> Result<(), WriteError> {
    prepare(dir, state)?.replace()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{SONYFLAKE, TWITTER};
    use std::path::PathBuf;

    fn twitter(units: u64) -> Contents {
        Contents::Mark(Mark { units, layout: TWITTER })
    }

    #[test]
    fn encode_decode_roundtrip() {
        for units in [0, 1, 1_234_567_890_123, (1 << 41) - 1, TWITTER.end_mark()] {
            assert_eq!(decode(&encode(twitter(units))), Ok(twitter(units)));
        }
        let sony = Contents::Mark(Mark { units: 123_456, layout: SONYFLAKE });
        assert_eq!(decode(&encode(sony)), Ok(sony));
        assert_eq!(decode(&encode(Contents::NotCarried)), Ok(Contents::NotCarried));
    }

    #[test]
    fn a_mark_past_the_end_of_the_layout_is_corrupt_even_with_a_good_checksum() {
        for units in [TWITTER.end_mark() + 1, 1 << 52, u64::MAX] {
            let err = decode(&encode(twitter(units))).unwrap_err();
            assert!(err.contains("past the end of the twitter layout"), "{err}");
        }
        let err = decode(&encode(Contents::Mark(Mark { units: 1 << 39 | 1, layout: SONYFLAKE })))
            .unwrap_err();
        assert!(err.contains("sonyflake"), "{err}");
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        for good in [encode(twitter(987_654_321)), encode(Contents::NotCarried)] {
            for i in 0..good.len() {
                for bit in 0..8 {
                    let mut bad = good.clone();
                    bad[i] ^= 1 << bit;
                    assert!(decode(&bad).is_err(), "flip of bit {bit} in byte {i} went unnoticed");
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
        let dir = scratch("state");
        assert_eq!(read(&dir).unwrap(), Contents::Missing);
        write(&dir, twitter(42)).unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(42));
        write(&dir, twitter(7_000_000_000)).unwrap();
        assert_eq!(read(&dir).unwrap(), twitter(7_000_000_000));
        // The shorter marker replaces the longer file whole.
        write(&dir, Contents::NotCarried).unwrap();
        assert_eq!(read(&dir).unwrap(), Contents::NotCarried);
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
        assert!(!dir.join(COPY_DIR).join(COPY_TEMP_NAME).exists());
        // A damaged state file stops the start, whatever its copy holds.
        std::fs::write(dir.join(FILE_NAME), b"garbage").unwrap();
        assert!(matches!(read(&dir), Err(ReadError::Corrupt(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A directory of its own for a test, empty.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pg_snowflake_{name}_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A scratch directory whose state file (and copy) hold `mark`.
    fn written(name: &str, mark: Contents) -> PathBuf {
        let dir = scratch(name);
        write(&dir, mark).unwrap();
        dir
    }

    fn recovered(dir: &Path) -> (Contents, Source) {
        let r = recover(dir).unwrap();
        (r.state, r.source)
    }

    #[test]
    fn every_mark_is_written_to_the_state_file_and_its_copy() {
        let dir = scratch("copy");
        assert_eq!(recovered(&dir), (Contents::Missing, Source::Neither));
        write(&dir, twitter(42)).unwrap();
        assert_eq!(std::fs::read(dir.join(FILE_NAME)).unwrap(), encode(twitter(42)));
        assert_eq!(std::fs::read(dir.join(COPY_PATH)).unwrap(), encode(twitter(42)));
        assert_eq!(recovered(&dir), (twitter(42), Source::StateFile));
        // The pg_upgrade marker goes to the state file alone, so that deleting it settles it.
        write(&dir, Contents::NotCarried).unwrap();
        assert_eq!(recovered(&dir), (Contents::NotCarried, Source::StateFile));
        assert_eq!(std::fs::read(dir.join(COPY_PATH)).unwrap(), encode(twitter(42)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_or_empty_state_file_goes_on_from_its_copy_or_is_lost() {
        let dir = written("lost", twitter(7_000));
        // Deleted, then emptied: the copy's mark.
        std::fs::remove_file(dir.join(FILE_NAME)).unwrap();
        let r = recover(&dir).unwrap();
        assert_eq!((r.state, r.source, r.file), (twitter(7_000), Source::Copy, Found::Missing));
        std::fs::write(dir.join(FILE_NAME), b"").unwrap();
        let r = recover(&dir).unwrap();
        assert_eq!((r.state, r.source, r.file), (twitter(7_000), Source::Copy, Found::Empty));
        // Emptied, and the copy gone or damaged: ids were made, where they ended is unknown.
        std::fs::remove_dir_all(dir.join(COPY_DIR)).unwrap();
        assert_eq!(recovered(&dir), (Contents::Lost, Source::Neither));
        std::fs::create_dir(dir.join(COPY_DIR)).unwrap();
        for damage in [&b""[..], b"garbage", &encode(Contents::NotCarried)] {
            std::fs::write(dir.join(COPY_PATH), damage).unwrap();
            assert_eq!(recovered(&dir), (Contents::Lost, Source::Neither));
            // A missing state file beside a damaged copy too.
            std::fs::remove_file(dir.join(FILE_NAME)).unwrap();
            let r = recover(&dir).unwrap();
            assert_eq!(r.state, Contents::Lost);
            assert!(matches!(r.copy, Found::Damaged(_)), "{:?}", r.copy);
            std::fs::write(dir.join(FILE_NAME), b"").unwrap();
        }
        // Missing, and no copy either: a data directory that never handed out an id.
        std::fs::remove_file(dir.join(FILE_NAME)).unwrap();
        std::fs::remove_file(dir.join(COPY_PATH)).unwrap();
        assert_eq!(recovered(&dir), (Contents::Missing, Source::Neither));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_higher_of_the_two_marks_wins() {
        let dir = written("higher", twitter(500));
        // A crash between the two renames leaves the copy one mark behind: the state file's.
        std::fs::write(dir.join(COPY_PATH), encode(twitter(400))).unwrap();
        assert_eq!(recovered(&dir), (twitter(500), Source::StateFile));
        // The other way round (the state file restored from an older backup): the copy's.
        std::fs::write(dir.join(COPY_PATH), encode(twitter(600))).unwrap();
        assert_eq!(recovered(&dir), (twitter(600), Source::Copy));
        // A damaged copy beside a good state file: the state file's, and the log says so.
        std::fs::write(dir.join(COPY_PATH), b"garbage").unwrap();
        let r = recover(&dir).unwrap();
        assert_eq!((r.state, r.source), (twitter(500), Source::StateFile));
        assert!(matches!(r.copy, Found::Damaged(_)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_preparation_changes_nothing() {
        let dir = written("prep", twitter(5));
        // A directory where the temporary file goes: the write fails, the state stays.
        std::fs::create_dir(dir.join(TEMP_NAME)).unwrap();
        let e = prepare(&dir, twitter(6)).err().unwrap();
        assert_eq!(e.place, Place::StateFile);
        assert_eq!(read(&dir).unwrap(), twitter(5));
        // The same beside the copy: the error names the copy.
        std::fs::remove_dir(dir.join(TEMP_NAME)).unwrap();
        std::fs::create_dir(dir.join(COPY_DIR).join(COPY_TEMP_NAME)).unwrap();
        let e = prepare(&dir, twitter(6)).err().unwrap();
        assert_eq!(e.place, Place::Copy);
        assert!(e.to_string().starts_with("pg_snowflake/mark: "), "{e}");
        assert_eq!(recovered(&dir), (twitter(5), Source::StateFile));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
