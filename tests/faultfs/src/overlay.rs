//! The volatile data of one regular file: dirty pages over its durable data.
//!
//! The durable data is the file's data file in the store (`durable_size` bytes). What
//! processes see is that data with the pages written since the last fsync laid over it,
//! cut or extended to the volatile `size`. Memory is proportional to the unsynced data,
//! not to the file: a clean page is read from the data file when asked for.
//!
//! Invariant: every byte at or past `size` reads as zero (dirty pages are zeroed past
//! `size`, and durable bytes past `floor` are hidden), so growing a file by truncate,
//! fallocate or a write past its end shows zeros without storing them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub const PAGE: usize = 4096;
const PAGE64: u64 = PAGE as u64;

#[derive(Debug)]
pub struct FileData {
    /// Length of the durable data (the data file's length).
    durable_size: u64,
    /// What processes see as the file's size.
    size: u64,
    /// Lowest size the file was truncated to since the last fsync: durable bytes at or
    /// past it were cut away and must not show again if the file grows back.
    floor: u64,
    /// Pages written since the last fsync, by page index; always `PAGE` bytes.
    dirty: BTreeMap<u64, Box<[u8]>>,
}

impl FileData {
    pub fn new(durable_size: u64) -> FileData {
        FileData { durable_size, size: durable_size, floor: u64::MAX, dirty: BTreeMap::new() }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn dirty_bytes(&self) -> u64 {
        self.dirty.len() as u64 * PAGE64
    }

    /// Whether anything differs from the durable data.
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty() || self.size != self.durable_size || self.floor < self.durable_size
    }

    /// Durable bytes below this offset are visible (unless a dirty page covers them).
    fn durable_end(&self) -> u64 {
        self.durable_size.min(self.floor)
    }

    /// Whether the data file must be read to serve the visible bytes.
    pub fn needs_backing(&self) -> bool {
        self.durable_end() > 0
    }

    /// Reads up to `len` bytes at `off`, short at the end of the file.
    pub fn read(&self, off: u64, len: u32, backing: Option<&File>) -> io::Result<Vec<u8>> {
        if off >= self.size || len == 0 {
            return Ok(Vec::new());
        }
        let end = self.size.min(off.saturating_add(len as u64));
        let mut buf = vec![0u8; (end - off) as usize];
        let durable_end = self.durable_end().min(end);
        if durable_end > off {
            read_exact_at(backing, &mut buf[..(durable_end - off) as usize], off)?;
        }
        for (&idx, page) in self.dirty.range(off / PAGE64..=(end - 1) / PAGE64) {
            let pstart = idx * PAGE64;
            let from = pstart.max(off);
            let to = (pstart + PAGE64).min(end);
            buf[(from - off) as usize..(to - off) as usize]
                .copy_from_slice(&page[(from - pstart) as usize..(to - pstart) as usize]);
        }
        Ok(buf)
    }

    /// Writes `data` at `off`, growing the file if it ends past it.
    pub fn write(&mut self, off: u64, data: &[u8], backing: Option<&File>) -> io::Result<()> {
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let idx = pos / PAGE64;
            let pstart = idx * PAGE64;
            let to = (pstart + PAGE64).min(end);
            let page = self.page_mut(idx, backing)?;
            page[(pos - pstart) as usize..(to - pstart) as usize]
                .copy_from_slice(&data[(pos - off) as usize..(to - off) as usize]);
            self.forget_if_zero(idx);
            pos = to;
        }
        self.size = self.size.max(end);
        Ok(())
    }

    /// Overwrites `[off, off + len)` with zeros, within the current size.
    pub fn zero_range(&mut self, off: u64, len: u64, backing: Option<&File>) -> io::Result<()> {
        let end = off.saturating_add(len).min(self.size);
        let mut pos = off;
        while pos < end {
            let idx = pos / PAGE64;
            let pstart = idx * PAGE64;
            let to = (pstart + PAGE64).min(end);
            // A page that is not dirty and has no visible durable bytes already reads as
            // zeros: leave it alone rather than allocate it.
            if self.dirty.contains_key(&idx) || pstart < self.durable_end() {
                let page = self.page_mut(idx, backing)?;
                page[(pos - pstart) as usize..(to - pstart) as usize].fill(0);
                self.forget_if_zero(idx);
            }
            pos = to;
        }
        Ok(())
    }

    /// Sets the size; the bytes cut away read as zeros if the file grows again.
    pub fn truncate(&mut self, new_size: u64) {
        if new_size < self.size {
            self.floor = self.floor.min(new_size);
            let first_gone = new_size.div_ceil(PAGE64);
            self.dirty.split_off(&first_gone);
            if !new_size.is_multiple_of(PAGE64) {
                let idx = new_size / PAGE64;
                if let Some(page) = self.dirty.get_mut(&idx) {
                    page[(new_size % PAGE64) as usize..].fill(0);
                }
                self.forget_if_zero(idx);
            }
        }
        self.size = new_size;
    }

    /// Makes the current data and size durable: writes the dirty pages and the size to the
    /// data file. Returns the number of bytes written.
    pub fn sync(&mut self, backing: &File) -> io::Result<u64> {
        if self.floor < self.durable_size {
            // Cut first, so that bytes between the floor and the new size become zeros.
            backing.set_len(self.floor)?;
        }
        let mut written = 0u64;
        // Coalesce runs of adjacent pages into one write each (up to 1 MiB).
        let mut run: Vec<u8> = Vec::new();
        let mut run_start = 0u64;
        let mut flush = |run: &mut Vec<u8>, start: u64| -> io::Result<()> {
            if !run.is_empty() {
                backing.write_all_at(run, start)?;
                written += run.len() as u64;
                run.clear();
            }
            Ok(())
        };
        for (&idx, page) in &self.dirty {
            let pstart = idx * PAGE64;
            if pstart >= self.size {
                break;
            }
            let len = (self.size - pstart).min(PAGE64) as usize;
            if run_start + run.len() as u64 != pstart || run.len() >= 1 << 20 {
                flush(&mut run, run_start)?;
                run_start = pstart;
            }
            run.extend_from_slice(&page[..len]);
        }
        flush(&mut run, run_start)?;
        backing.set_len(self.size)?;
        self.durable_size = self.size;
        self.floor = u64::MAX;
        self.dirty.clear();
        Ok(written)
    }

    fn page_mut(&mut self, idx: u64, backing: Option<&File>) -> io::Result<&mut Box<[u8]>> {
        if !self.dirty.contains_key(&idx) {
            let mut page = vec![0u8; PAGE].into_boxed_slice();
            let pstart = idx * PAGE64;
            let durable_end = self.durable_end();
            if pstart < durable_end {
                let n = (durable_end - pstart).min(PAGE64) as usize;
                read_exact_at(backing, &mut page[..n], pstart)?;
            }
            self.dirty.insert(idx, page);
        }
        Ok(self.dirty.get_mut(&idx).expect("page just inserted"))
    }

    /// A zero page past the visible durable data reads as zeros without being stored;
    /// dropping it keeps a zero-filled 16 MiB WAL segment from holding 16 MiB of memory.
    fn forget_if_zero(&mut self, idx: u64) {
        if idx * PAGE64 >= self.durable_end()
            && self.dirty.get(&idx).is_some_and(|p| p.iter().all(|&b| b == 0))
        {
            self.dirty.remove(&idx);
        }
    }
}

fn read_exact_at(backing: Option<&File>, buf: &mut [u8], off: u64) -> io::Result<()> {
    let f = backing.ok_or_else(|| io::Error::other("durable data file missing"))?;
    // The data file may be shorter than recorded only if someone edited the store; read
    // what is there and leave zeros past it.
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reference implementation: the whole volatile and durable contents as vectors.
    struct Model {
        durable: Vec<u8>,
        volatile: Vec<u8>,
    }

    fn rng(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn random_operations_match_a_plain_model() {
        let path =
            std::env::temp_dir().join(format!("faultfs-overlay-unit-{}", std::process::id()));
        for seed0 in 0..40u64 {
            let mut seed = seed0;
            let f = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            let mut data = FileData::new(0);
            let mut m = Model { durable: Vec::new(), volatile: Vec::new() };
            for step in 0..300 {
                let max = 5 * PAGE as u64;
                match rng(&mut seed) % 6 {
                    0 | 1 => {
                        let off = rng(&mut seed) % max;
                        let len = rng(&mut seed) % (2 * PAGE as u64) + 1;
                        // Sometimes zeros, to exercise the zero-page elision.
                        let byte = if rng(&mut seed).is_multiple_of(3) {
                            0
                        } else {
                            (rng(&mut seed) % 255 + 1) as u8
                        };
                        let buf = vec![byte; len as usize];
                        data.write(off, &buf, Some(&f)).unwrap();
                        let end = (off + len) as usize;
                        if m.volatile.len() < end {
                            m.volatile.resize(end, 0);
                        }
                        m.volatile[off as usize..end].copy_from_slice(&buf);
                    }
                    2 => {
                        let n = rng(&mut seed) % max;
                        data.truncate(n);
                        m.volatile.resize(n as usize, 0);
                    }
                    3 => {
                        let off = rng(&mut seed) % max;
                        let len = rng(&mut seed) % max;
                        data.zero_range(off, len, Some(&f)).unwrap();
                        let end = ((off + len) as usize).min(m.volatile.len());
                        if (off as usize) < end {
                            m.volatile[off as usize..end].fill(0);
                        }
                    }
                    4 => {
                        data.sync(&f).unwrap();
                        m.durable = m.volatile.clone();
                    }
                    _ => {
                        // A power cut: only the data file survives.
                        data = FileData::new(f.metadata().unwrap().len());
                        m.volatile = m.durable.clone();
                    }
                }
                assert_eq!(data.size(), m.volatile.len() as u64, "seed {seed0} step {step}");
                let off = rng(&mut seed) % (max + 10);
                let got = data.read(off, 3 * PAGE as u32, Some(&f)).unwrap();
                let lo = (off as usize).min(m.volatile.len());
                let hi = (lo + 3 * PAGE).min(m.volatile.len());
                assert_eq!(got, &m.volatile[lo..hi], "seed {seed0} step {step} read at {off}");
                let whole = data.read(0, u32::MAX, Some(&f)).unwrap();
                assert_eq!(whole, m.volatile, "seed {seed0} step {step}");
                assert_eq!(
                    std::fs::read(&path).unwrap(),
                    m.durable,
                    "seed {seed0} step {step}: durable"
                );
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}
