//! A durable mark, and how it and its layout are written down, in plain Rust: the same bytes go
//! into WAL records (`wal`), the state file (`state_file`) and shared memory (the layout a
//! recovered mark was made with).

use crate::layout::{Invalid, Layout, Order, Preset};

/// A durable mark: no id of `layout` handed out so far has reached time unit `units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub units: u64,
    pub layout: Layout,
}

/// The encoded size of a mark: the time unit (8, little endian), then the layout (16).
pub const MARK_BYTES: usize = 24;

impl Mark {
    /// The smallest id no id handed out has reached, in any layout: ids of all layouts compare
    /// as plain integers.
    pub const fn bound(&self) -> u64 {
        self.layout.first_id(self.units)
    }

    /// The same mark in time units of `layout`: its ids from there on are all at or above the
    /// bound.
    pub const fn units_in(&self, layout: &Layout) -> u64 {
        layout.units_from_id(self.bound())
    }

    pub fn to_bytes(self) -> [u8; MARK_BYTES] {
        let mut b = [0u8; MARK_BYTES];
        b[..8].copy_from_slice(&self.units.to_le_bytes());
        b[8..].copy_from_slice(&layout_to_bytes(&self.layout));
        b
    }

    /// A mark as written by `to_bytes`, checked: a layout that is not one, or a mark past the
    /// end of its layout, did not come from pg_snowflake (a damaged file or record).
    pub fn from_bytes(b: &[u8; MARK_BYTES]) -> Result<Mark, String> {
        let units = u64::from_le_bytes(b[..8].try_into().unwrap());
        let layout = layout_from_bytes(b[8..].try_into().unwrap())
            .map_err(|e| format!("its layout is invalid: {}", e.0))?;
        Mark::checked(units, layout)
    }

    /// A mark read back from somewhere, if it can be one of `layout`.
    pub fn checked(units: u64, layout: Layout) -> Result<Mark, String> {
        if units > layout.end_mark() {
            return Err(format!(
                "the mark {units} lies past the end of the {} layout ({})",
                layout.describe(),
                layout.end_mark()
            ));
        }
        Ok(Mark { units, layout })
    }
}

/// The layout as 16 bytes: epoch (8, little endian), unit (2), the three widths, the order and
/// the preset (1 each), zero (1).
pub fn layout_to_bytes(layout: &Layout) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&layout.epoch_unix_ms.to_le_bytes());
    b[8..10].copy_from_slice(&(layout.unit_ms as u16).to_le_bytes());
    b[10] = layout.time_bits as u8;
    b[11] = layout.worker_bits as u8;
    b[12] = layout.sequence_bits as u8;
    b[13] = match layout.order {
        Order::WorkerThenSequence => 0,
        Order::SequenceThenWorker => 1,
    };
    b[14] = preset_code(layout.preset);
    b
}

pub fn layout_from_bytes(b: &[u8; 16]) -> Result<Layout, Invalid> {
    let layout = Layout {
        preset: Preset::ALL
            .into_iter()
            .find(|&p| preset_code(p) == b[14])
            .ok_or_else(|| Invalid(format!("unknown layout code {}", b[14])))?,
        epoch_unix_ms: i64::from_le_bytes(b[..8].try_into().unwrap()),
        unit_ms: u16::from_le_bytes([b[8], b[9]]) as u64,
        time_bits: b[10] as u32,
        worker_bits: b[11] as u32,
        sequence_bits: b[12] as u32,
        order: match b[13] {
            0 => Order::WorkerThenSequence,
            1 => Order::SequenceThenWorker,
            other => return Err(Invalid(format!("unknown field order {other}"))),
        },
    };
    if b[15] != 0 {
        return Err(Invalid("a reserved byte is not zero".into()));
    }
    layout.check()?;
    Ok(layout)
}

/// The byte that names a preset in a mark: never reuse a code.
const fn preset_code(preset: Preset) -> u8 {
    match preset {
        Preset::Twitter => 1,
        Preset::Discord => 2,
        Preset::Sonyflake => 3,
        Preset::Instagram => 4,
        Preset::Js53 => 5,
        Preset::Custom => 6,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{SONYFLAKE, TWITTER};

    fn layouts() -> Vec<Layout> {
        let mut v: Vec<Layout> = Preset::ALL.iter().filter_map(|p| p.layout()).collect();
        v.push(Layout::custom(0, 7, 43, 0, 20, 1).unwrap());
        v.push(Layout::custom(1_700_000_000_000, 1000, 28, 24, 11, 1_790_000_000_000).unwrap());
        v
    }

    #[test]
    fn layout_bytes_roundtrip_and_reject_damage() {
        for l in layouts() {
            assert_eq!(layout_from_bytes(&layout_to_bytes(&l)), Ok(l));
        }
        let mut b = layout_to_bytes(&TWITTER);
        b[14] = 99;
        assert!(layout_from_bytes(&b).is_err());
        let mut b = layout_to_bytes(&TWITTER);
        b[10] = 60; // twitter with 60 time bits
        assert!(layout_from_bytes(&b).is_err());
        let mut b = layout_to_bytes(&Layout::custom(0, 1, 41, 10, 12, 1).unwrap());
        b[10] = 200;
        assert!(layout_from_bytes(&b).is_err());
        let mut b = layout_to_bytes(&TWITTER);
        b[15] = 1;
        assert!(layout_from_bytes(&b).is_err());
    }

    #[test]
    fn marks_roundtrip_and_a_mark_past_the_end_is_refused() {
        for l in layouts() {
            for units in [0, 1, l.end_mark() / 2, l.end_mark()] {
                let m = Mark { units, layout: l };
                assert_eq!(Mark::from_bytes(&m.to_bytes()), Ok(m));
            }
            let past = Mark { units: l.end_mark() + 1, layout: l };
            let err = Mark::from_bytes(&past.to_bytes()).unwrap_err();
            assert!(err.contains("past the end"), "{err}");
        }
    }

    #[test]
    fn marks_carry_over_to_other_layouts_through_their_bound() {
        let m = Mark { units: 1_000_000, layout: TWITTER };
        assert_eq!(m.units_in(&TWITTER), 1_000_000);
        // Sonyflake's ids have 24 low bits to Twitter's 22: a quarter of the units.
        assert_eq!(m.units_in(&SONYFLAKE), 250_000);
    }
}
