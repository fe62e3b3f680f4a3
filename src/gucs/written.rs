//! What the configuration says of the settings, checked before PostgreSQL parses it: a value it
//! cannot parse or that is out of range would be replaced by the default, with a WARNING, and
//! the default is another setting than the one asked for (`snowflake.layout = 'sonyflake '`
//! would be twitter, `snowflake.registry_lease = '1 day'` 5 minutes).

use super::table::{Bool, Choice, Int, BOOLS, INTS, LAYOUT, WORKER_ID};
use crate::layout;
use pgrx::pg_sys;
use pgrx::GucFlags;
use std::ffi::{CStr, CString};

/// What the configuration files (and the command line) say of the settings that PostgreSQL
/// would replace by their default where it refuses the text: read while they are still
/// placeholders, before they are defined.
pub(super) struct Written(Vec<(&'static CStr, String)>);

/// How PostgreSQL reads each of them.
enum Kind {
    Int(&'static Int),
    Bool(&'static Bool),
    Layout(&'static Choice),
}

/// Every setting PostgreSQL could refuse (the strings it takes as they are; `snowflake.epoch`
/// has its own check hook): the layout, every integer, the boolean.
fn checked() -> impl Iterator<Item = Kind> {
    std::iter::once(Kind::Layout(&LAYOUT))
        .chain(INTS.iter().map(|&int| Kind::Int(int)))
        .chain(BOOLS.iter().map(|&boolean| Kind::Bool(boolean)))
}

impl Kind {
    fn name(&self) -> &'static CStr {
        match self {
            Kind::Int(int) => int.name,
            Kind::Bool(boolean) => boolean.name,
            Kind::Layout(choice) => choice.name,
        }
    }
}

impl Written {
    pub(super) fn read() -> Written {
        let texts = checked()
            .filter_map(|kind| {
                let name = kind.name();
                // SAFETY: a lookup of a setting by name, missing_ok; the result is copied at once.
                unsafe {
                    let value = pg_sys::GetConfigOption(name.as_ptr(), true, false);
                    (!value.is_null())
                        .then(|| (name, CStr::from_ptr(value).to_string_lossy().into_owned()))
                }
            })
            .collect();
        Written(texts)
    }

    fn text(&self, name: &CStr) -> Option<&str> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, t)| t.as_str())
    }

    /// `Err` names the first setting PostgreSQL would refuse, and why.
    pub(super) fn check(&self) -> Result<(), String> {
        for kind in checked() {
            let Some(text) = self.text(kind.name()) else {
                continue;
            };
            let name = kind.name().to_string_lossy();
            match kind {
                // PostgreSQL compares the whole text, ignoring case only: nothing is trimmed.
                Kind::Layout(_) => {
                    if layout::Preset::parse(text).is_none() {
                        let names = layout::Preset::ALL.map(layout::Preset::name).join(", ");
                        return Err(format!("{name} = '{text}' is not one of {names}"));
                    }
                }
                Kind::Bool(_) => {
                    let value = CString::new(text).unwrap_or_default();
                    let mut parsed = false;
                    // SAFETY: PostgreSQL's own boolean parser, on a NUL-terminated string.
                    if !unsafe { pg_sys::parse_bool(value.as_ptr(), &mut parsed) } {
                        return Err(format!("{name} = '{text}' is not a boolean"));
                    }
                }
                Kind::Int(int) => {
                    parse_in_range(int, int.lowest, int.highest, text)?;
                }
            }
        }
        Ok(())
    }

    /// The worker id within the layout's range (PostgreSQL would leave it unset otherwise, and
    /// say that it is not set).
    pub(super) fn check_worker_id(&self, max: i32) -> Result<(), String> {
        let Some(text) = self.text(WORKER_ID.name) else {
            return Ok(());
        };
        parse_in_range(&WORKER_ID, WORKER_ID.lowest, max, text).map(|_| ())
    }
}

/// An integer setting's text as PostgreSQL reads it (units included), within its range.
fn parse_in_range(int: &Int, lowest: i32, highest: i32, text: &str) -> Result<i32, String> {
    let name = int.name.to_string_lossy();
    let value = CString::new(text).unwrap_or_default();
    let mut parsed = 0;
    // SAFETY: PostgreSQL's own integer parser (units included), on a NUL-terminated string.
    let ok = unsafe {
        pg_sys::parse_int(value.as_ptr(), &mut parsed, int.flags.bits(), std::ptr::null_mut())
    };
    if !ok {
        let units = if int.flags.contains(GucFlags::UNIT_MS) {
            " (with a unit of ms, s, min, h or d)"
        } else if int.flags.contains(GucFlags::UNIT_S) {
            " (with a unit of s, min, h or d)"
        } else {
            ""
        };
        return Err(format!("{name} = '{text}' is not an integer{units}"));
    }
    if !(lowest..=highest).contains(&parsed) {
        return Err(format!("{name} = '{text}' is outside its range, {lowest} to {highest}"));
    }
    Ok(parsed)
}
