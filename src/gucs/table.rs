//! Each `snowflake.*` setting declared once, as a row: its value and default, what PostgreSQL is
//! told (name, descriptions, range, context, unit), and from the rows its definition.

use crate::layout::{Preset, TWITTER};
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

/// An integer setting, declared once: what PostgreSQL is told (name, descriptions, range,
/// context, unit), where its value lives, with its default, and the range that the check of the
/// written text at start (`Written`) holds it to.
pub(super) struct Int {
    pub(super) name: &'static CStr,
    /// Its doc comment: the first paragraph is PostgreSQL's short description, the rest the
    /// long one.
    docs: &'static [&'static str],
    pub(super) value: GucSetting<i32>,
    pub(super) lowest: i32,
    pub(super) highest: i32,
    context: Context,
    pub(super) flags: GucFlags,
}

/// When a setting takes a new value (pgrx's `GucContext` is not `Copy`).
#[derive(Clone, Copy)]
enum Context {
    /// At start only.
    Postmaster,
    /// At a reload too.
    Sighup,
    /// In any session, for itself.
    Userset,
}

impl Context {
    fn guc(self) -> GucContext {
        match self {
            Context::Postmaster => GucContext::Postmaster,
            Context::Sighup => GucContext::Sighup,
            Context::Userset => GucContext::Userset,
        }
    }
}

/// The units of the rows below.
mod unit {
    use pgrx::GucFlags;
    pub(super) const MS: GucFlags = GucFlags::UNIT_MS;
    pub(super) const S: GucFlags = GucFlags::UNIT_S;
    pub(super) const NONE: GucFlags = GucFlags::empty();
}

/// The rows of the integer settings: each is its description, as a doc comment, and one line
/// `STATIC: name = default, lowest, highest, context, unit;`.
macro_rules! ints {
    ($($(#[doc = $doc:literal])* $static:ident: $name:literal = $default:expr, $lowest:expr,
       $highest:expr, $context:ident, $unit:ident;)*) => {
        $(pub(super) static $static: Int = Int {
            name: $name,
            docs: &[$($doc),*],
            value: GucSetting::<i32>::new($default),
            lowest: $lowest,
            highest: $highest,
            context: Context::$context,
            flags: unit::$unit,
        };)*
        /// Every integer setting, in the order of the rows (and of the checks at start).
        pub(super) static INTS: &[&Int] = &[$(&$static),*];
    };
}

ints! {
    // The custom layout's defaults are Twitter's, so that `custom` with only an epoch set is
    // Twitter's widths from that epoch.

    /// Sets the time unit of the custom layout, 1 ms to 1 s.
    ///
    /// Only for snowflake.layout = custom. The three widths add up to 63 or fewer.
    TIME_UNIT: c"snowflake.time_unit" = TWITTER.unit_ms as i32, 1, 1000, Postmaster, MS;

    /// Sets the width of the time field of the custom layout.
    ///
    /// Only for snowflake.layout = custom. The three widths add up to 63 or fewer.
    TIME_BITS: c"snowflake.time_bits" = TWITTER.time_bits as i32, 1, 63, Postmaster, NONE;

    /// Sets the width of the worker id field of the custom layout.
    ///
    /// Only for snowflake.layout = custom. The three widths add up to 63 or fewer.
    WORKER_BITS: c"snowflake.worker_bits" = TWITTER.worker_bits as i32, 0, 31, Postmaster, NONE;

    /// Sets the width of the sequence field of the custom layout.
    ///
    /// Only for snowflake.layout = custom. The three widths add up to 63 or fewer.
    SEQUENCE_BITS: c"snowflake.sequence_bits" = TWITTER.sequence_bits as i32, 0, 31, Postmaster,
        NONE;

    // Its highest value is the layout's largest worker id, given when it is defined (and to
    // `Written::check_worker_id`). Postmaster, not sighup: after a reload, backends pick up a
    // new value one by one, so for a moment two worker ids would be in use at once and a new id
    // with a smaller worker id could sort below an older id of the same millisecond.

    /// Sets the worker id that this server embeds in every snowflake id.
    ///
    /// Valid values are 0 to the largest worker id of snowflake.layout (1023 for twitter); -1
    /// (the default) means unset, and snowflake_next() then fails. Every server that generates
    /// ids for the same data needs its own worker id. Changing it requires a restart, so that
    /// all backends always use the same value.
    WORKER_ID: c"snowflake.worker_id" = WORKER_ID_UNSET, WORKER_ID_UNSET, i32::MAX, Postmaster,
        NONE;

    /// Sets how far the time embedded in new ids may run ahead of the system clock.
    ///
    /// Ids borrow time from the future when the clock steps back or when more ids per time unit
    /// are requested than the sequence holds. Past half of this bound, ids are handed out first
    /// come, first served at the clock's rate, so bursts alone never reach it. Past the bound
    /// snowflake_next() waits for the clock (see snowflake.drift_wait) and then fails. Valid
    /// values are 0 to 2147483647 ms.
    MAX_DRIFT: c"snowflake.max_drift" = 10_000, 0, i32::MAX, Sighup, MS;

    /// Sets how long snowflake_next() waits for the clock when ids run more than
    /// snowflake.max_drift ahead of it.
    ///
    /// The wait is counted in naps of 1 ms (at least 1 ms each), so it lasts at least this long;
    /// 0 fails at once. A clock stepped back further than snowflake.max_drift needs as long as
    /// the step beyond it. Valid values are 0 to 60000 ms.
    DRIFT_WAIT: c"snowflake.drift_wait" = 100, 0, 60_000, Sighup, MS;

    /// Sets how often the background worker renews this server's worker id claim.
    ///
    /// A claim is valid for three intervals; a server that stops renewing it (stopped, or its
    /// worker id moved) no longer clashes with later claims after that. Valid values are 1 to
    /// 3600 s.
    CLAIMS_INTERVAL: c"snowflake.claims_interval" = 10, 1, 3600, Sighup, S;

    /// Sets how long a worker-id lease from the registry lasts.
    ///
    /// Renewed every third of it. While the registry is unreachable, this server goes on (also
    /// across restarts) until its lease runs out; a stopped server's worker id goes to another
    /// one only after it ran out. Valid values are 10 s to 1 day.
    REGISTRY_LEASE: c"snowflake.registry_lease" = 300, 10, 86_400, Postmaster, S;
}

/// PostgreSQL's short and long description of a setting, from its doc comment: exactly two
/// paragraphs, a blank line apart (a unit test holds every row to that); made once per setting at start, when it is defined, and kept for good as PostgreSQL
/// keeps the pointers.
fn described(docs: &[&str]) -> (&'static CStr, &'static CStr) {
    let paragraphs: Vec<&'static CStr> = docs
        .split(|line| line.trim().is_empty())
        .map(|lines| {
            let text = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
            let text = CString::new(text).expect("a doc comment holds no NUL");
            &*Box::leak(text.into_boxed_c_str())
        })
        .collect();
    match paragraphs[..] {
        [short, long] => (short, long),
        _ => panic!("a setting's doc comment is two paragraphs: {docs:?}"),
    }
}

impl Int {
    /// Defines it, up to `highest` (its own, or the layout's largest worker id).
    fn define(&'static self, highest: i32) {
        let (short, long) = described(self.docs);
        GucRegistry::define_int_guc(
            self.name,
            short,
            long,
            &self.value,
            self.lowest,
            highest,
            self.context.guc(),
            self.flags,
        );
    }

    pub(super) fn get(&self) -> i32 {
        self.value.get()
    }
}

/// The form a string setting's text must have, checked by a hook PostgreSQL calls with each new
/// value. Named here, not as the hook itself: a row holding the hook would link PostgreSQL's
/// symbols into the unit tests, which read the rows.
#[derive(Clone, Copy)]
enum Check {
    /// A fixed timestamp with time zone (`check_epoch`).
    Timestamp,
}

/// A string setting, declared once (its default with its value). Every one is read at start
/// only.
pub(super) struct Str {
    name: &'static CStr,
    /// As `Int`'s.
    docs: &'static [&'static str],
    value: GucSetting<Option<CString>>,
    flags: GucFlags,
    /// Its check hook, if its text has a form.
    check: Option<Check>,
}

/// The rows of the string settings, as `ints!`'s: `STATIC: name = default, flags[, check];`.
macro_rules! strs {
    (@check) => { None };
    (@check $check:ident) => { Some(Check::$check) };
    ($($(#[doc = $doc:literal])* $static:ident: $name:literal = $default:expr, $flags:expr
       $(, $check:ident)?;)*) => {
        $(pub(super) static $static: Str = Str {
            name: $name,
            docs: &[$($doc),*],
            value: GucSetting::<Option<CString>>::new($default),
            flags: $flags,
            check: strs!(@check $($check)?),
        };)*
        /// Every string setting, in the order of the rows.
        pub(super) static STRS: &[&Str] = &[$(&$static),*];
    };
}

strs! {
    /// Sets the epoch of the custom layout, as a timestamp with time zone.
    ///
    /// Only for snowflake.layout = custom; it may not lie in the future. Unset, the custom layout
    /// uses Twitter's epoch, 2010-11-04 01:42:54.657 UTC.
    EPOCH: c"snowflake.epoch" = None, GucFlags::empty(), Timestamp;

    /// Sets the database where a background worker records this server's worker id claim.
    ///
    /// Empty (the default) starts no worker. Set, a background worker calls snowflake_claim() in
    /// that database every snowflake.claims_interval, once pg_snowflake is installed there and
    /// the server is a primary, so that servers whose snowflake_claims tables meet (through
    /// logical replication) find a shared worker id.
    CLAIMS_DATABASE: c"snowflake.claims_database" = None, GucFlags::empty();

    /// Sets the libpq connection string of the worker-id registry.
    ///
    /// Empty (the default): snowflake.worker_id alone gives the worker id. Set, a background
    /// worker leases a worker id from the snowflake_registry table of pg_snowflake installed in
    /// that database (exactly snowflake.worker_id when that is set, else a free one) and renews
    /// the lease; ids are refused while this server holds no lease. Passwords belong in a
    /// password file, not here. Only superusers can read it, as primary_conninfo.
    REGISTRY: c"snowflake.registry" = None, GucFlags::SUPERUSER_ONLY;

    /// Sets the namespace of the worker-id registry this server leases its worker id in.
    ///
    /// Servers whose ids meet (in one table, or at one subscriber) lease from one namespace; each
    /// namespace and layout has its own worker ids. 1 to 63 characters.
    REGISTRY_NAMESPACE: c"snowflake.registry_namespace" = Some(c"default"), GucFlags::empty();

    /// Sets the network whose addresses give worker ids: the worker id is this server's address within it.
    ///
    /// Empty (the default): snowflake.worker_id or snowflake.registry gives the worker id. Set
    /// (for example 10.244.0.0/16, a Kubernetes pod network), the worker id is the offset of this
    /// server's one address in that network from its first address; the network may hold no
    /// more addresses than the layout has worker ids, and no other server of this network
    /// namespace may hold that worker id. snowflake.worker_id stays -1 and snowflake.registry
    /// empty.
    WORKER_ID_NETWORK: c"snowflake.worker_id_network" = None, GucFlags::empty();
}

impl Str {
    fn define(&'static self) {
        let (short, long) = described(self.docs);
        match self.check {
            // SAFETY: a static setting and a check hook that PostgreSQL calls with a valid
            // string.
            Some(check) => unsafe {
                GucRegistry::define_string_guc_with_hooks(
                    self.name,
                    short,
                    long,
                    &self.value,
                    GucContext::Postmaster,
                    self.flags,
                    Some(match check {
                        Check::Timestamp => check_epoch,
                    }),
                    None,
                    None,
                )
            },
            None => GucRegistry::define_string_guc(
                self.name,
                short,
                long,
                &self.value,
                GucContext::Postmaster,
                self.flags,
            ),
        }
    }

    /// Its value as PostgreSQL keeps it; `None` when unset.
    pub(super) fn raw(&self) -> Option<CString> {
        self.value.get()
    }

    /// Its value; `None` when empty.
    pub(super) fn get(&self) -> Option<String> {
        self.value.get().map(|s| s.to_string_lossy().into_owned()).filter(|s| !s.is_empty())
    }
}

/// The layout's row (the one enum setting), as the rows of `ints!`.
pub(super) struct Choice {
    pub(super) name: &'static CStr,
    docs: &'static [&'static str],
    value: GucSetting<LayoutSetting>,
}

/// The rows of the enum settings, as `ints!`'s: `STATIC: name = default;`.
macro_rules! choices {
    ($($(#[doc = $doc:literal])* $static:ident: $name:literal = $default:expr;)*) => {
        $(pub(super) static $static: Choice = Choice {
            name: $name,
            docs: &[$($doc),*],
            value: GucSetting::<LayoutSetting>::new($default),
        };)*
    };
}

choices! {
    /// Sets the bit layout of snowflake ids: twitter, discord, sonyflake, instagram, js53 or
    /// custom.
    ///
    /// The layout an id was made with decides its epoch, time unit and field widths. custom
    /// takes them from snowflake.epoch, snowflake.time_unit, snowflake.time_bits,
    /// snowflake.worker_bits and snowflake.sequence_bits. Changing it requires a restart, and ids
    /// are refused if the new layout's ids would not all be above those made before.
    LAYOUT: c"snowflake.layout" = LayoutSetting::Twitter;
}

impl Choice {
    fn define(&'static self) {
        let (short, long) = described(self.docs);
        GucRegistry::define_enum_guc(
            self.name,
            short,
            long,
            &self.value,
            GucContext::Postmaster,
            GucFlags::default(),
        );
    }

    pub(super) fn get(&self) -> LayoutSetting {
        self.value.get()
    }
}

/// A boolean setting, declared once.
pub(super) struct Bool {
    pub(super) name: &'static CStr,
    docs: &'static [&'static str],
    value: GucSetting<bool>,
    context: Context,
}

/// The rows of the boolean settings, as `ints!`'s: `STATIC: name = default, context;`.
macro_rules! bools {
    ($($(#[doc = $doc:literal])* $static:ident: $name:literal = $default:expr, $context:ident;)*) => {
        $(pub(super) static $static: Bool = Bool {
            name: $name,
            docs: &[$($doc),*],
            value: GucSetting::<bool>::new($default),
            context: Context::$context,
        };)*
        /// Every boolean setting, in the order of the rows.
        pub(super) static BOOLS: &[&Bool] = &[$(&$static),*];
    };
}

bools! {
    // A session's choice, as enable_indexscan is: it changes plans, never results.

    /// Turns comparisons of snowflake_timestamp(id) into ranges of id before planning.
    ///
    /// On (the default), the primary key index answers a time range written on
    /// snowflake_timestamp(id), with the same rows. Any session may turn it off: it only changes
    /// plans.
    TIME_RANGES: c"snowflake.time_ranges" = true, Userset;
}

impl Bool {
    fn define(&'static self) {
        let (short, long) = described(self.docs);
        GucRegistry::define_bool_guc(
            self.name,
            short,
            long,
            &self.value,
            self.context.guc(),
            GucFlags::default(),
        );
    }

    pub(super) fn get(&self) -> bool {
        self.value.get()
    }
}

/// Defines the layout's settings: the layout, its epoch and its widths (the integers' rows above
/// the worker id's), which give the worker id's range. The order of the definitions is the order
/// of PostgreSQL's WARNINGs for bad values at start, 0.5.0's: these, then `define_the_rest`.
pub(super) fn define_the_layout_settings() {
    LAYOUT.define();
    EPOCH.define();
    for int in INTS.iter().take_while(|int| int.name != WORKER_ID.name) {
        int.define(int.highest);
    }
}

/// Defines the worker id, up to the layout's largest, then every other setting.
pub(super) fn define_the_rest(max_worker_id: i32) {
    for int in INTS.iter().skip_while(|int| int.name != WORKER_ID.name) {
        int.define(if int.name == WORKER_ID.name { max_worker_id } else { int.highest });
    }
    for boolean in BOOLS {
        boolean.define();
    }
    for string in STRS.iter().filter(|string| string.name != EPOCH.name) {
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
            // SAFETY: PostgreSQL reports these palloc'd strings with the refusal.
            unsafe {
                pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(why.as_ptr());
                pg_sys::GUC_check_errhint_string = pg_sys::pstrdup(
                    c"Give a date and time with its time zone, such as '2024-01-01 00:00:00+00'."
                        .as_ptr(),
                );
            }
            false
        }
    }
}

/// A timestamp with time zone, read by PostgreSQL's own input function (in the server's
/// TimeZone when none is given), in Unix milliseconds.
pub(super) fn parse_epoch(text: &str) -> Result<i64, String> {
    let lower = text.to_ascii_lowercase();
    if ["now", "today", "tomorrow", "yesterday"].iter().any(|word| lower.contains(word)) {
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
    let parse = PgTryBuilder::new(move || owned.parse().map_err(|_| ()));
    let ts: TimestampWithTimeZone =
        mutant!(epoch_parser, { parse.catch_others(|_| Err(())).execute() }, { parse.execute() })
            .map_err(|()| not_a_timestamp())?;
    if ts.is_infinity() || ts.is_neg_infinity() {
        return Err(format!("snowflake.epoch \"{text}\" is not a finite timestamp"));
    }
    let pg_us: i64 = ts.into_inner();
    Ok(crate::clock::unix_ms_of(pg_us))
}

#[cfg(test)]
mod tests {
    use super::{LayoutSetting, BOOLS, INTS, LAYOUT, STRS};
    use crate::layout::Preset;
    use pgrx::GucEnum;
    use std::ffi::CStr;

    /// `snowflake.layout`'s values are the presets of core/src/layout.rs, each named as there and
    /// read as that preset, and no other.
    #[test]
    fn every_row_is_described_in_two_paragraphs() {
        let docs = INTS
            .iter()
            .map(|i| i.docs)
            .chain(STRS.iter().map(|s| s.docs))
            .chain(BOOLS.iter().map(|b| b.docs))
            .chain([LAYOUT.docs]);
        for doc in docs {
            let paragraphs = doc.split(|l| l.trim().is_empty()).filter(|p| !p.is_empty()).count();
            assert_eq!(paragraphs, 2, "{doc:?}");
        }
    }

    /// Every `snowflake.*` setting is one row: 16 of them, each named once.
    #[test]
    fn every_setting_is_one_row() {
        let mut names: Vec<&CStr> = INTS
            .iter()
            .map(|i| i.name)
            .chain(STRS.iter().map(|s| s.name))
            .chain(BOOLS.iter().map(|b| b.name))
            .chain([LAYOUT.name])
            .collect();
        assert!(names.iter().all(|n| n.to_bytes().starts_with(b"snowflake.")), "{names:?}");
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 16, "{names:?}");
    }

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
