//! Each `snowflake.*` setting declared once: its value and default, what PostgreSQL is told
//! (name, descriptions, range, context, unit), and its definition.

use crate::layout::{self, Preset};
use crate::text;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, PgTryBuilder};
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};
use std::ffi::{CStr, CString};

/// -1 means "not set": a missing worker id must fail loudly instead of silently colliding
/// with another server that also forgot to set it (as pgEdge's snowflake does for its node id).
pub(super) const WORKER_ID_UNSET: i32 = -1;

#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum LayoutSetting {
    #[name = c"twitter"]
    Twitter,
    #[name = c"discord"]
    Discord,
    #[name = c"sonyflake"]
    Sonyflake,
    #[name = c"instagram"]
    Instagram,
    #[name = c"js53"]
    Js53,
    #[name = c"custom"]
    Custom,
}

impl LayoutSetting {
    pub(super) fn preset(self) -> Preset {
        match self {
            LayoutSetting::Twitter => Preset::Twitter,
            LayoutSetting::Discord => Preset::Discord,
            LayoutSetting::Sonyflake => Preset::Sonyflake,
            LayoutSetting::Instagram => Preset::Instagram,
            LayoutSetting::Js53 => Preset::Js53,
            LayoutSetting::Custom => Preset::Custom,
        }
    }
}

pub(super) static LAYOUT: GucSetting<LayoutSetting> =
    GucSetting::<LayoutSetting>::new(LayoutSetting::Twitter);
pub(super) static TIME_RANGES: GucSetting<bool> = GucSetting::<bool>::new(true);

/// An integer setting, declared once: what PostgreSQL is told (name, descriptions, range,
/// context, unit), where its value lives, with its default, and the range that the check of the
/// written text at start (`Written`) holds it to.
pub(super) struct Int {
    pub(super) name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    pub(super) value: GucSetting<i32>,
    pub(super) lowest: i32,
    pub(super) highest: i32,
    context: Context,
    pub(super) flags: GucFlags,
}

/// When an integer setting takes a new value (pgrx's `GucContext` is not `Copy`).
#[derive(Clone, Copy)]
enum Context {
    /// At start only.
    Postmaster,
    /// At a reload too.
    Sighup,
}

/// What the custom layout's widths say beyond their own line.
const WIDTH_LONG: &CStr =
    c"Only for snowflake.layout = custom. The three widths add up to 63 or fewer.";

// The custom layout's defaults are Twitter's, so that `custom` with only an epoch set is
// Twitter's widths from that epoch.
pub(super) static TIME_UNIT: Int = Int {
    name: c"snowflake.time_unit",
    short: c"Sets the time unit of the custom layout, 1 ms to 1 s.",
    long: WIDTH_LONG,
    value: GucSetting::<i32>::new(layout::TWITTER.unit_ms as i32),
    lowest: 1,
    highest: 1000,
    context: Context::Postmaster,
    flags: GucFlags::UNIT_MS,
};
pub(super) static TIME_BITS: Int = Int {
    name: c"snowflake.time_bits",
    short: c"Sets the width of the time field of the custom layout.",
    long: WIDTH_LONG,
    value: GucSetting::<i32>::new(layout::TWITTER.time_bits as i32),
    lowest: 1,
    highest: 63,
    context: Context::Postmaster,
    flags: GucFlags::empty(),
};
pub(super) static WORKER_BITS: Int = Int {
    name: c"snowflake.worker_bits",
    short: c"Sets the width of the worker id field of the custom layout.",
    long: WIDTH_LONG,
    value: GucSetting::<i32>::new(layout::TWITTER.worker_bits as i32),
    lowest: 0,
    highest: 31,
    context: Context::Postmaster,
    flags: GucFlags::empty(),
};
pub(super) static SEQUENCE_BITS: Int = Int {
    name: c"snowflake.sequence_bits",
    short: c"Sets the width of the sequence field of the custom layout.",
    long: WIDTH_LONG,
    value: GucSetting::<i32>::new(layout::TWITTER.sequence_bits as i32),
    lowest: 0,
    highest: 31,
    context: Context::Postmaster,
    flags: GucFlags::empty(),
};
/// Its highest value is the layout's largest worker id, given when it is defined (and to
/// `Written::check_worker_id`).
pub(super) static WORKER_ID: Int = Int {
    name: c"snowflake.worker_id",
    short: c"Sets the worker id that this server embeds in every snowflake id.",
    long: c"Valid values are 0 to the largest worker id of snowflake.layout (1023 for twitter); \
           -1 (the default) means unset, and snowflake_next() then fails. Every server that \
           generates ids for the same data needs its own worker id. Changing it requires a \
           restart, so that all backends always use the same value.",
    value: GucSetting::<i32>::new(WORKER_ID_UNSET),
    lowest: WORKER_ID_UNSET,
    highest: i32::MAX,
    // Postmaster, not sighup: after a reload, backends pick up a new value one by one, so for a
    // moment two worker ids would be in use at once and a new id with a smaller worker id could
    // sort below an older id of the same millisecond.
    context: Context::Postmaster,
    flags: GucFlags::empty(),
};
pub(super) static MAX_DRIFT: Int = Int {
    name: c"snowflake.max_drift",
    short: c"Sets how far the time embedded in new ids may run ahead of the system clock.",
    long: c"Ids borrow time from the future when the clock steps back or when more ids per time \
           unit are requested than the sequence holds. Past half of this bound, ids are handed \
           out first come, first served at the clock's rate, so bursts alone never reach it. \
           Past the bound snowflake_next() waits for the clock (see snowflake.drift_wait) and \
           then fails. Valid values are 0 to 2147483647 ms.",
    value: GucSetting::<i32>::new(10_000),
    lowest: 0,
    highest: i32::MAX,
    context: Context::Sighup,
    flags: GucFlags::UNIT_MS,
};
pub(super) static DRIFT_WAIT: Int = Int {
    name: c"snowflake.drift_wait",
    short: c"Sets how long snowflake_next() waits for the clock when ids run more than \
            snowflake.max_drift ahead of it.",
    long: c"The wait is counted in naps of 1 ms (at least 1 ms each), so it lasts at least this \
           long; 0 fails at once. A clock stepped back further than snowflake.max_drift needs \
           as long as the step beyond it. Valid values are 0 to 60000 ms.",
    value: GucSetting::<i32>::new(100),
    lowest: 0,
    highest: 60_000,
    context: Context::Sighup,
    flags: GucFlags::UNIT_MS,
};
pub(super) static CLAIMS_INTERVAL: Int = Int {
    name: c"snowflake.claims_interval",
    short: c"Sets how often the background worker renews this server's worker id claim.",
    long: c"A claim is valid for three intervals; a server that stops renewing it (stopped, or \
           its worker id moved) no longer clashes with later claims after that. Valid values \
           are 1 to 3600 s.",
    value: GucSetting::<i32>::new(10),
    lowest: 1,
    highest: 3600,
    context: Context::Sighup,
    flags: GucFlags::UNIT_S,
};
pub(super) static REGISTRY_LEASE: Int = Int {
    name: c"snowflake.registry_lease",
    short: c"Sets how long a worker-id lease from the registry lasts.",
    long: c"Renewed every third of it. While the registry is unreachable, this server goes on \
           (also across restarts) until its lease runs out; a stopped server's worker id goes \
           to another one only after it ran out. Valid values are 10 s to 1 day.",
    value: GucSetting::<i32>::new(300),
    lowest: 10,
    highest: 86_400,
    context: Context::Postmaster,
    flags: GucFlags::UNIT_S,
};

/// Every integer setting, in the order they are checked at start.
pub(super) static INTS: [&Int; 9] = [
    &TIME_UNIT,
    &TIME_BITS,
    &WORKER_BITS,
    &SEQUENCE_BITS,
    &WORKER_ID,
    &MAX_DRIFT,
    &DRIFT_WAIT,
    &CLAIMS_INTERVAL,
    &REGISTRY_LEASE,
];

impl Int {
    /// Defines it, up to `highest` (its own, or the layout's largest worker id).
    fn define(&'static self, highest: i32) {
        GucRegistry::define_int_guc(
            self.name,
            self.short,
            self.long,
            &self.value,
            self.lowest,
            highest,
            match self.context {
                Context::Postmaster => GucContext::Postmaster,
                Context::Sighup => GucContext::Sighup,
            },
            self.flags,
        );
    }

    pub(super) fn get(&self) -> i32 {
        self.value.get()
    }
}

/// A string setting, declared once (its default with its value).
pub(super) struct Str {
    name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    value: GucSetting<Option<CString>>,
    flags: GucFlags,
}

pub(super) static CLAIMS_DATABASE: Str = Str {
    name: c"snowflake.claims_database",
    short: c"Sets the database where a background worker records this server's worker id claim.",
    long: c"Empty (the default) starts no worker. Set, a background worker calls \
           snowflake_claim() in that database every snowflake.claims_interval, once \
           pg_snowflake is installed there and the server is a primary, so that servers whose \
           snowflake_claims tables meet (through logical replication) find a shared worker id.",
    value: GucSetting::<Option<CString>>::new(None),
    flags: GucFlags::empty(),
};
pub(super) static REGISTRY: Str = Str {
    name: c"snowflake.registry",
    short: c"Sets the libpq connection string of the worker-id registry.",
    long: c"Empty (the default): snowflake.worker_id alone gives the worker id. Set, a \
           background worker leases a worker id from the snowflake_registry table of \
           pg_snowflake installed in that database (exactly snowflake.worker_id when that is \
           set, else a free one) and renews the lease; ids are refused while this server holds \
           no lease. Passwords belong in a password file, not here. Only superusers can read \
           it, as primary_conninfo.",
    value: GucSetting::<Option<CString>>::new(None),
    flags: GucFlags::SUPERUSER_ONLY,
};
pub(super) static REGISTRY_NAMESPACE: Str = Str {
    name: c"snowflake.registry_namespace",
    short: c"Sets the namespace of the worker-id registry this server leases its worker id in.",
    long: c"Servers whose ids meet (in one table, or at one subscriber) lease from one \
           namespace; each namespace and layout has its own worker ids. 1 to 63 characters.",
    value: GucSetting::<Option<CString>>::new(Some(c"default")),
    flags: GucFlags::empty(),
};

impl Str {
    /// Defines it: every string setting but the epoch (which has a check hook) is read at
    /// start only.
    fn define(&'static self) {
        GucRegistry::define_string_guc(
            self.name,
            self.short,
            self.long,
            &self.value,
            GucContext::Postmaster,
            self.flags,
        );
    }

    /// Its value; `None` when empty.
    pub(super) fn get(&self) -> Option<String> {
        self.value
            .get()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty())
    }
}

pub(super) static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// The layout's settings: the preset, the custom layout's epoch and its widths.
pub(super) fn define_layout() {
    GucRegistry::define_enum_guc(
        c"snowflake.layout",
        c"Sets the bit layout of snowflake ids: twitter, discord, sonyflake, instagram, js53 or \
          custom.",
        c"The layout an id was made with decides its epoch, time unit and field widths. custom \
          takes them from snowflake.epoch, snowflake.time_unit, snowflake.time_bits, \
          snowflake.worker_bits and snowflake.sequence_bits. Changing it requires a restart, \
          and ids are refused if the new layout's ids would not all be above those made before.",
        &LAYOUT,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    // SAFETY: a static setting and a check hook that PostgreSQL calls with a valid string.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"snowflake.epoch",
            c"Sets the epoch of the custom layout, as a timestamp with time zone.",
            c"Only for snowflake.layout = custom; it may not lie in the future. Unset, the \
              custom layout uses Twitter's epoch, 2010-11-04 01:42:54.657 UTC.",
            &EPOCH,
            GucContext::Postmaster,
            GucFlags::default(),
            Some(check_epoch),
            None,
            None,
        );
    }
    for width in [&TIME_UNIT, &TIME_BITS, &WORKER_BITS, &SEQUENCE_BITS] {
        width.define(width.highest);
    }
}

/// Every other setting, once the layout gives the worker id's range.
pub(super) fn define_the_rest(max_worker_id: i32) {
    WORKER_ID.define(max_worker_id);
    for int in [&MAX_DRIFT, &DRIFT_WAIT, &CLAIMS_INTERVAL, &REGISTRY_LEASE] {
        int.define(int.highest);
    }
    GucRegistry::define_bool_guc(
        c"snowflake.time_ranges",
        c"Turns comparisons of snowflake_timestamp(id) into ranges of id before planning.",
        c"On (the default), the primary key index answers a time range written on \
          snowflake_timestamp(id), with the same rows. Any session may turn it off: it only \
          changes plans.",
        &TIME_RANGES,
        // A session's choice, as enable_indexscan is: it changes plans, never results.
        GucContext::Userset,
        GucFlags::default(),
    );
    for string in [&CLAIMS_DATABASE, &REGISTRY, &REGISTRY_NAMESPACE] {
        string.define();
    }
}

/// The check hook of `snowflake.epoch`: in a backend (`ALTER SYSTEM`), an epoch that is not a
/// fixed timestamp is refused with 22023 and the reason. In the postmaster any text passes:
/// refused at start, the default would be Twitter's epoch, another layout than the one asked
/// for; `init` refuses the layout instead, with the reason, and keeps ids off.
///
/// # Safety
/// Called by PostgreSQL's GUC machinery with a pointer to the new value (a string or NULL).
#[pg_guard]
unsafe extern "C-unwind" fn check_epoch(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: plain reads of a process flag and of the value PostgreSQL passes.
    let text = unsafe {
        if !pg_sys::IsUnderPostmaster || newval.is_null() || (*newval).is_null() {
            return true;
        }
        CStr::from_ptr(*newval).to_string_lossy().into_owned()
    };
    match parse_epoch(&text) {
        Ok(_) => true,
        Err(why) => {
            let why = CString::new(text::sentence(&why)).unwrap_or_default();
            // SAFETY: PostgreSQL reports this palloc'd string with the refusal.
            unsafe { pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(why.as_ptr()) };
            false
        }
    }
}

/// A timestamp with time zone, read by PostgreSQL's own input function (in the server's
/// TimeZone when none is given), in Unix milliseconds.
// mutant: epoch_parser
pub(super) fn parse_epoch(text: &str) -> Result<i64, String> {
    let lower = text.to_ascii_lowercase();
    if ["now", "today", "tomorrow", "yesterday"]
        .iter()
        .any(|word| lower.contains(word))
    {
        return Err(format!(
            "snowflake.epoch \"{text}\" is not a fixed moment: give a date and time"
        ));
    }
    let not_a_timestamp =
        || format!("snowflake.epoch \"{text}\" is not a timestamp with time zone");
    // PostgreSQL's input function raises an ERROR for what it cannot read (22007, or 22009 for
    // a time zone displacement out of range such as "+16"): caught here, in the postmaster at
    // start it would end the start.
    let owned = text.to_string();
    let ts: TimestampWithTimeZone = PgTryBuilder::new(move || owned.parse().map_err(|_| ()))
        .catch_others(|_| Err(()))
        .execute()
        .map_err(|()| not_a_timestamp())?;
    if ts.is_infinity() || ts.is_neg_infinity() {
        return Err(format!(
            "snowflake.epoch \"{text}\" is not a finite timestamp"
        ));
    }
    let pg_us: i64 = ts.into_inner();
    Ok(crate::clock::unix_ms_of(pg_us))
}

#[cfg(test)]
mod tests {
    use super::LayoutSetting;
    use crate::layout::Preset;
    use pgrx::GucEnum;
    use std::ffi::CStr;

    /// `snowflake.layout`'s values are the presets of src/layout.rs, each named as there and
    /// read as that preset, and no other.
    #[test]
    fn the_layout_settings_values_are_the_presets() {
        let mut names = Vec::new();
        let mut entry = LayoutSetting::CONFIG_ENUM_ENTRY;
        // SAFETY: the derive's array, ended by an entry whose name is NULL.
        unsafe {
            while !(*entry).name.is_null() {
                let name = CStr::from_ptr((*entry).name).to_str().unwrap();
                let preset = LayoutSetting::from_ordinal((*entry).val).preset();
                assert_eq!(name, preset.name());
                names.push(name);
                entry = entry.add(1);
            }
        }
        assert_eq!(names, Preset::ALL.map(Preset::name));
    }
}
