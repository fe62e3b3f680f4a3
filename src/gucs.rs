//! Every `snowflake.*` setting: the statics are private, `init()` defines them and resolves the
//! layout and the worker id once, and the rest of the crate reads them through the getters below.
//!
//! None of them is `USERSET` or `SUSET` but `snowflake.time_ranges`, which only changes plans: a
//! session must not be able to change which ids the cluster hands out, so they come from the
//! configuration files only, which only a superuser
//! (or `ALTER SYSTEM`, itself superuser-only by default) can change. The layout and the worker
//! id are postmaster settings: every backend of a running server uses the same ones.

use crate::errors::{self, Code};
use crate::layout::{self, Layout, Preset};
use crate::text;
use crate::text::sentence;
use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys::{self, PgTryBuilder};
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};
use std::ffi::{CStr, CString};
use std::sync::OnceLock;

/// -1 means "not set": a missing worker id must fail loudly instead of silently colliding
/// with another server that also forgot to set it (as pgEdge's snowflake does for its node id).
const WORKER_ID_UNSET: i32 = -1;

#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
enum LayoutSetting {
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
    fn preset(self) -> Preset {
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

static WORKER_ID: GucSetting<i32> = GucSetting::<i32>::new(WORKER_ID_UNSET);
static MAX_DRIFT_MS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static DRIFT_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(100);
static LAYOUT: GucSetting<LayoutSetting> = GucSetting::<LayoutSetting>::new(LayoutSetting::Twitter);
static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
// The custom layout's defaults are Twitter's, so that `custom` with only an epoch set is
// Twitter's widths from that epoch.
static TIME_UNIT_MS: GucSetting<i32> = GucSetting::<i32>::new(layout::TWITTER.unit_ms as i32);
static TIME_BITS: GucSetting<i32> = GucSetting::<i32>::new(layout::TWITTER.time_bits as i32);
static WORKER_BITS: GucSetting<i32> = GucSetting::<i32>::new(layout::TWITTER.worker_bits as i32);
static SEQUENCE_BITS: GucSetting<i32> =
    GucSetting::<i32>::new(layout::TWITTER.sequence_bits as i32);
static TIME_RANGES: GucSetting<bool> = GucSetting::<bool>::new(true);
static CLAIMS_DATABASE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static CLAIMS_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(10);
static REGISTRY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static REGISTRY_NAMESPACE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"default"));
static REGISTRY_LEASE_S: GucSetting<i32> = GucSetting::<i32>::new(300);

/// An integer setting's name, range and unit, written once for its definition and for the check
/// of what the configuration says (`Written`).
struct Int {
    name: &'static CStr,
    lowest: i32,
    highest: i32,
    flags: GucFlags,
}

const TIME_UNIT: Int = Int {
    name: c"snowflake.time_unit",
    lowest: 1,
    highest: 1000,
    flags: GucFlags::UNIT_MS,
};
const TIME_BITS_RANGE: Int = Int {
    name: c"snowflake.time_bits",
    lowest: 1,
    highest: 63,
    flags: GucFlags::empty(),
};
const WORKER_BITS_RANGE: Int = Int {
    name: c"snowflake.worker_bits",
    lowest: 0,
    highest: 31,
    flags: GucFlags::empty(),
};
const SEQUENCE_BITS_RANGE: Int = Int {
    name: c"snowflake.sequence_bits",
    lowest: 0,
    highest: 31,
    flags: GucFlags::empty(),
};
const MAX_DRIFT: Int = Int {
    name: c"snowflake.max_drift",
    lowest: 0,
    highest: i32::MAX,
    flags: GucFlags::UNIT_MS,
};
const DRIFT_WAIT: Int = Int {
    name: c"snowflake.drift_wait",
    lowest: 0,
    highest: 60_000,
    flags: GucFlags::UNIT_MS,
};
const CLAIMS_INTERVAL: Int = Int {
    name: c"snowflake.claims_interval",
    lowest: 1,
    highest: 3600,
    flags: GucFlags::UNIT_S,
};
const REGISTRY_LEASE: Int = Int {
    name: c"snowflake.registry_lease",
    lowest: 10,
    highest: 86_400,
    flags: GucFlags::UNIT_S,
};
/// Its highest value is the layout's largest worker id (`Written::check_worker_id`).
const WORKER_ID_ANY: Int = Int {
    name: c"snowflake.worker_id",
    lowest: WORKER_ID_UNSET,
    highest: i32::MAX,
    flags: GucFlags::empty(),
};

/// The layout and worker id this server runs with, resolved once in the postmaster and
/// inherited by every backend.
struct Resolved {
    layout: Layout,
    /// `None` while unset, or when the settings are invalid (see `problem`).
    worker_id: Option<u32>,
    /// Why the settings were refused at start.
    problem: Option<String>,
}

static RESOLVED: OnceLock<Resolved> = OnceLock::new();

/// Defines the settings and reserves the `snowflake.` prefix, so that a typo such as
/// `snowflake.workerid` in postgresql.conf is reported instead of silently ignored. Then checks
/// the layout and the worker id together: a bad combination is logged as a WARNING, and the
/// server starts with the worker id unset, so that `snowflake_next()` refuses with the reason
/// instead of guessing which ids were meant.
pub fn init() {
    // What the configuration says, read before PostgreSQL parses it: a value it cannot parse
    // or that is out of range is replaced by the default, with a WARNING, and the default is
    // another setting than the one asked for (`snowflake.layout = 'sonyflake '` would be
    // twitter, `snowflake.registry_lease = '1 day'` 5 minutes).
    let written = Written::read();
    define_layout();
    let layout = written.check().and_then(|()| layout_from_settings());
    // The worker id's range is the layout's: PostgreSQL itself then refuses a value the layout
    // cannot hold in ALTER SYSTEM (an error), and pg_settings shows the real range.
    let max_worker_id = layout.as_ref().unwrap_or(&layout::TWITTER).max_worker_id();
    let layout = layout.and_then(|layout| {
        written.check_worker_id(max_worker_id as i32)?;
        Ok(layout)
    });
    define_worker_id(max_worker_id as i32);
    define_drift();
    define_time_ranges();
    define_claims();
    define_registry();
    // SAFETY: called from _PG_init on the main thread with a NUL-terminated literal.
    unsafe { pgrx::pg_sys::MarkGUCPrefixReserved(c"snowflake".as_ptr()) };
    let resolved = resolve(layout);
    if let Some(problem) = &resolved.problem {
        errors::report(
            Code::ERRCODE_WARNING,
            format!("pg_snowflake: {problem}; snowflake_next() refuses until it is fixed"),
            settings_hint(),
        )
        .warn();
    }
    let _ = RESOLVED.set(resolved);
}

fn define_worker_id(max: i32) {
    GucRegistry::define_int_guc(
        c"snowflake.worker_id",
        c"Sets the worker id that this server embeds in every snowflake id.",
        c"Valid values are 0 to the largest worker id of snowflake.layout (1023 for twitter); \
          -1 (the default) means unset, and snowflake_next() then fails. Every server that \
          generates ids for the same data needs its own worker id. Changing it requires a \
          restart, so that all backends always use the same value.",
        &WORKER_ID,
        WORKER_ID_UNSET,
        max,
        // Postmaster, not sighup: after a reload, backends pick up a new value one by one, so
        // for a moment two worker ids would be in use at once and a new id with a smaller worker
        // id could sort below an older id of the same millisecond.
        GucContext::Postmaster,
        GucFlags::default(),
    );
}

fn define_layout() {
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
    let widths = [
        (
            TIME_UNIT,
            c"Sets the time unit of the custom layout, 1 ms to 1 s.",
            &TIME_UNIT_MS,
        ),
        (
            TIME_BITS_RANGE,
            c"Sets the width of the time field of the custom layout.",
            &TIME_BITS,
        ),
        (
            WORKER_BITS_RANGE,
            c"Sets the width of the worker id field of the custom layout.",
            &WORKER_BITS,
        ),
        (
            SEQUENCE_BITS_RANGE,
            c"Sets the width of the sequence field of the custom layout.",
            &SEQUENCE_BITS,
        ),
    ];
    for (int, short, setting) in widths {
        GucRegistry::define_int_guc(
            int.name,
            short,
            c"Only for snowflake.layout = custom. The three widths add up to 63 or fewer.",
            setting,
            int.lowest,
            int.highest,
            GucContext::Postmaster,
            int.flags,
        );
    }
}

fn define_drift() {
    GucRegistry::define_int_guc(
        MAX_DRIFT.name,
        c"Sets how far the time embedded in new ids may run ahead of the system clock.",
        c"Ids borrow time from the future when the clock steps back or when more ids per time \
          unit are requested than the sequence holds. Past half of this bound, ids are handed out \
          first come, first served at the clock's rate, so bursts alone never reach it. Past the \
          bound snowflake_next() waits for the clock (see snowflake.drift_wait) and then fails. \
          Valid values are 0 to 2147483647 ms.",
        &MAX_DRIFT_MS,
        MAX_DRIFT.lowest,
        MAX_DRIFT.highest,
        GucContext::Sighup,
        MAX_DRIFT.flags,
    );
    GucRegistry::define_int_guc(
        DRIFT_WAIT.name,
        c"Sets how long snowflake_next() waits for the clock when ids run more than \
          snowflake.max_drift ahead of it.",
        c"The wait is counted in naps of 1 ms (at least 1 ms each), so it lasts at least this \
          long; 0 fails at once. A clock stepped back further than snowflake.max_drift needs as \
          long as the step beyond it. Valid values are 0 to 60000 ms.",
        &DRIFT_WAIT_MS,
        DRIFT_WAIT.lowest,
        DRIFT_WAIT.highest,
        GucContext::Sighup,
        DRIFT_WAIT.flags,
    );
}

fn define_time_ranges() {
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
}

fn define_claims() {
    GucRegistry::define_string_guc(
        c"snowflake.claims_database",
        c"Sets the database where a background worker records this server's worker id claim.",
        c"Empty (the default) starts no worker. Set, a background worker calls \
          snowflake_claim() in that database every snowflake.claims_interval, once \
          pg_snowflake is installed there and the server is a primary, so that servers whose \
          snowflake_claims tables meet (through logical replication) find a shared worker id.",
        &CLAIMS_DATABASE,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        CLAIMS_INTERVAL.name,
        c"Sets how often the background worker renews this server's worker id claim.",
        c"A claim is valid for three intervals; a server that stops renewing it (stopped, or \
          its worker id moved) no longer clashes with later claims after that. Valid values \
          are 1 to 3600 s.",
        &CLAIMS_INTERVAL_S,
        CLAIMS_INTERVAL.lowest,
        CLAIMS_INTERVAL.highest,
        GucContext::Sighup,
        CLAIMS_INTERVAL.flags,
    );
}

fn define_registry() {
    GucRegistry::define_string_guc(
        c"snowflake.registry",
        c"Sets the libpq connection string of the worker-id registry.",
        c"Empty (the default): snowflake.worker_id alone gives the worker id. Set, a background \
          worker leases a worker id from the snowflake_registry table of pg_snowflake installed \
          in that database (exactly snowflake.worker_id when that is set, else a free one) and \
          renews the lease; ids are refused while this server holds no lease. Passwords belong \
          in a password file, not here. Only superusers can read it, as primary_conninfo.",
        &REGISTRY,
        GucContext::Postmaster,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_string_guc(
        c"snowflake.registry_namespace",
        c"Sets the namespace of the worker-id registry this server leases its worker id in.",
        c"Servers whose ids meet (in one table, or at one subscriber) lease from one namespace; \
          each namespace and layout has its own worker ids. 1 to 63 characters.",
        &REGISTRY_NAMESPACE,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        REGISTRY_LEASE.name,
        c"Sets how long a worker-id lease from the registry lasts.",
        c"Renewed every third of it. While the registry is unreachable, this server goes on \
          (also across restarts) until its lease runs out; a stopped server's worker id goes to \
          another one only after it ran out. Valid values are 10 s to 1 day.",
        &REGISTRY_LEASE_S,
        REGISTRY_LEASE.lowest,
        REGISTRY_LEASE.highest,
        GucContext::Postmaster,
        REGISTRY_LEASE.flags,
    );
}

/// What the configuration files (and the command line) say of the settings that PostgreSQL
/// would replace by their default where it refuses the text: read while they are still
/// placeholders, before they are defined.
struct Written(Vec<(&'static CStr, String)>);

/// How PostgreSQL reads each of them.
enum Kind {
    Int(Int),
    Bool(&'static CStr),
    Layout,
}

/// Every setting PostgreSQL could refuse (the strings it takes as they are; `snowflake.epoch`
/// has its own check hook).
const CHECKED: [Kind; 11] = [
    Kind::Layout,
    Kind::Int(TIME_UNIT),
    Kind::Int(TIME_BITS_RANGE),
    Kind::Int(WORKER_BITS_RANGE),
    Kind::Int(SEQUENCE_BITS_RANGE),
    Kind::Int(WORKER_ID_ANY),
    Kind::Int(MAX_DRIFT),
    Kind::Int(DRIFT_WAIT),
    Kind::Int(CLAIMS_INTERVAL),
    Kind::Int(REGISTRY_LEASE),
    Kind::Bool(c"snowflake.time_ranges"),
];

impl Kind {
    fn name(&self) -> &'static CStr {
        match self {
            Kind::Int(int) => int.name,
            Kind::Bool(name) => name,
            Kind::Layout => c"snowflake.layout",
        }
    }
}

impl Written {
    fn read() -> Written {
        let texts = CHECKED
            .iter()
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
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.as_str())
    }

    /// `Err` names the first setting PostgreSQL would refuse, and why.
    fn check(&self) -> Result<(), String> {
        for kind in &CHECKED {
            let Some(text) = self.text(kind.name()) else {
                continue;
            };
            let name = kind.name().to_string_lossy();
            match kind {
                // PostgreSQL compares the whole text, ignoring case only: nothing is trimmed.
                Kind::Layout => {
                    if !layout::Preset::ALL
                        .iter()
                        .any(|p| p.name().eq_ignore_ascii_case(text))
                    {
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
                    parse_in_range(int, text)?;
                }
            }
        }
        Ok(())
    }

    /// The worker id within the layout's range (PostgreSQL would leave it unset otherwise, and
    /// say that it is not set).
    fn check_worker_id(&self, max: i32) -> Result<(), String> {
        let Some(text) = self.text(WORKER_ID_ANY.name) else {
            return Ok(());
        };
        let int = Int {
            highest: max,
            ..WORKER_ID_ANY
        };
        parse_in_range(&int, text).map(|_| ())
    }
}

/// An integer setting's text as PostgreSQL reads it (units included), within its range.
fn parse_in_range(int: &Int, text: &str) -> Result<i32, String> {
    let name = int.name.to_string_lossy();
    let value = CString::new(text).unwrap_or_default();
    let mut parsed = 0;
    // SAFETY: PostgreSQL's own integer parser (units included), on a NUL-terminated string.
    let ok = unsafe {
        pg_sys::parse_int(
            value.as_ptr(),
            &mut parsed,
            int.flags.bits(),
            std::ptr::null_mut(),
        )
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
    if !(int.lowest..=int.highest).contains(&parsed) {
        return Err(format!(
            "{name} = '{text}' is outside its range, {} to {}",
            int.lowest, int.highest
        ));
    }
    Ok(parsed)
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

/// The configured layout, or why it is refused.
fn layout_from_settings() -> Result<Layout, String> {
    let preset = LAYOUT.get().preset();
    let custom = [
        (
            "snowflake.time_unit",
            TIME_UNIT_MS.get(),
            layout::TWITTER.unit_ms as i32,
        ),
        (
            "snowflake.time_bits",
            TIME_BITS.get(),
            layout::TWITTER.time_bits as i32,
        ),
        (
            "snowflake.worker_bits",
            WORKER_BITS.get(),
            layout::TWITTER.worker_bits as i32,
        ),
        (
            "snowflake.sequence_bits",
            SEQUENCE_BITS.get(),
            layout::TWITTER.sequence_bits as i32,
        ),
    ];
    let epoch = EPOCH.get();
    if let Some(fixed) = preset.layout() {
        // A custom field set beside a preset is a mistake the user should hear about: they
        // think they changed the layout, and they did not.
        let stray = custom
            .iter()
            .filter(|(_, value, default)| value != default)
            .map(|(name, ..)| *name)
            .chain(epoch.is_some().then_some("snowflake.epoch"))
            .collect::<Vec<_>>();
        return match stray.as_slice() {
            [] => Ok(fixed),
            names => Err(format!(
                "{} only apply to snowflake.layout = custom, and the layout is {}",
                names.join(", "),
                preset.name()
            )),
        };
    }
    let epoch_unix_ms = match &epoch {
        None => layout::TWITTER.epoch_unix_ms,
        Some(text) => parse_epoch(&text.to_string_lossy())?,
    };
    let [unit, time, worker, sequence] = custom.map(|(_, value, _)| value as u32);
    Layout::custom(
        epoch_unix_ms,
        unit as u64,
        time,
        worker,
        sequence,
        crate::clock::now_unix_ms(),
    )
    .map_err(|e| format!("the custom layout is invalid: {}", e.0))
}

/// A timestamp with time zone, read by PostgreSQL's own input function (in the server's
/// TimeZone when none is given), in Unix milliseconds.
fn parse_epoch(text: &str) -> Result<i64, String> {
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

fn resolve(layout: Result<Layout, String>) -> Resolved {
    let layout = match layout {
        Ok(layout) => layout,
        Err(problem) => {
            return Resolved {
                layout: layout::TWITTER,
                worker_id: None,
                problem: Some(problem),
            }
        }
    };
    // On a Citus node, a worker id set by hand that nothing compares with the other nodes' is
    // not used: one configuration file for every node repeated 5,136 of 96,000 ids in one
    // INSERT ... SELECT, silently (issue 34). With a registry, the registry refuses a worker id
    // in use; with claims in the Citus database, every node compares every node's (claims.rs).
    if registry().is_none() && claims_database().is_none() && citus_preloaded() {
        if let Some(w) = requested_worker_id() {
            return Resolved {
                layout,
                worker_id: None,
                problem: Some(format!(
                    "this server preloads Citus, and nothing compares its snowflake.worker_id {w} \
                     with the other nodes' of its Citus cluster: set snowflake.registry to lease \
                     the worker ids from the coordinator (with snowflake.worker_id = -1), or \
                     snowflake.claims_database to the Citus database"
                )),
            };
        }
    }
    // PostgreSQL keeps the value within the layout's range (see `init`). With a registry, the
    // worker id is what the registry leases (see `registry`), not the setting.
    Resolved {
        layout,
        worker_id: match registry() {
            Some(_) => None,
            None => requested_worker_id(),
        },
        problem: None,
    }
}

/// Whether `citus` is in `shared_preload_libraries` (as written there: a name, maybe quoted).
pub fn citus_preloaded() -> bool {
    // SAFETY: a string setting PostgreSQL set before _PG_init; NUL-terminated when not null.
    let list = unsafe { pg_sys::shared_preload_libraries_string };
    if list.is_null() {
        return false;
    }
    // SAFETY: see above.
    names_citus(&unsafe { CStr::from_ptr(list) }.to_string_lossy())
}

/// Whether a `shared_preload_libraries` list loads Citus: `$libdir/citus` and `citus.so` do
/// too (PostgreSQL adds the directory and the suffix).
fn names_citus(list: &str) -> bool {
    list.split(',').any(|l| {
        let name = l.trim().trim_matches('"');
        let name = name.strip_prefix("$libdir/").unwrap_or(name);
        let name = name.strip_suffix(".so").unwrap_or(name);
        name.eq_ignore_ascii_case("citus")
    })
}

/// The layout of this server: the configured one, or Twitter's where pg_snowflake is not
/// preloaded (or its layout settings were refused, when no id can be made anyway).
#[inline]
pub fn layout() -> &'static Layout {
    match RESOLVED.get() {
        Some(r) => &r.layout,
        None => &layout::TWITTER,
    }
}

/// The configured worker id, or `None` while `snowflake.worker_id` is unset or refused, or a
/// registry leases it.
pub fn worker_id() -> Option<u32> {
    RESOLVED.get().and_then(|r| r.worker_id)
}

/// `snowflake.worker_id`, also where a registry leases it: `None` while unset.
pub fn requested_worker_id() -> Option<u32> {
    u32::try_from(WORKER_ID.get()).ok()
}

/// The registry's connection string, if one is configured.
pub fn registry() -> Option<String> {
    REGISTRY
        .get()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
}

pub fn registry_namespace() -> String {
    REGISTRY_NAMESPACE
        .get()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

pub fn registry_lease() -> std::time::Duration {
    std::time::Duration::from_secs(REGISTRY_LEASE_S.get() as u64)
}

/// The layout and the worker id, for the hot path: `None` while the worker id is unset or
/// refused, when no id can be made.
#[inline]
pub fn generating() -> Option<(&'static Layout, u32)> {
    let r = RESOLVED.get()?;
    Some((&r.layout, r.worker_id?))
}

/// Why the layout settings or the worker id were refused at start, if they were.
pub fn problem() -> Option<&'static str> {
    RESOLVED.get().and_then(|r| r.problem.as_deref())
}

/// Reads a setting on the hot path.
///
/// `GucSetting::get()` first checks that it runs on PostgreSQL's thread, which costs a
/// `__tls_get_addr` call in a shared library on every read (callgrind; what an id costs now is
/// in docs/benchmarks.json, `make bench-hotpath`). PostgreSQL writes these
/// variables only from this backend's one thread (at start and when it processes a reload
/// between statements), so a plain read is what C extensions do.
#[inline]
fn hot(setting: &'static GucSetting<i32>) -> i32 {
    // SAFETY: see above; the pointer is to a static that lives for the whole process.
    unsafe { *setting.as_ptr() }
}

/// Never negative: the setting's minimum is 0.
#[inline]
pub fn max_drift_ms() -> u64 {
    hot(&MAX_DRIFT_MS) as u64
}

pub fn drift_wait_ms() -> u64 {
    DRIFT_WAIT_MS.get() as u64
}

/// Whether the planner hook turns time comparisons into id ranges (`snowflake.time_ranges`).
pub fn time_ranges() -> bool {
    TIME_RANGES.get()
}

/// The database of the claims worker, if one is configured.
pub fn claims_database() -> Option<String> {
    CLAIMS_DATABASE
        .get()
        .map(|db| db.to_string_lossy().into_owned())
        .filter(|db| !db.is_empty())
}

pub fn claims_interval() -> std::time::Duration {
    std::time::Duration::from_secs(CLAIMS_INTERVAL_S.get() as u64)
}

/// What to do about settings refused at start (the server log says which, and why).
pub fn settings_hint() -> &'static str {
    "Correct the snowflake.* settings in postgresql.conf (see the server log) and restart the \
     server."
}

/// No worker id: unset, or the settings were refused at start.
#[cold]
#[track_caller]
pub fn worker_id_unset() -> ! {
    match problem() {
        Some(problem) => errors::report(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake.worker_id is not in use: the snowflake settings were refused at server start",
            settings_hint(),
        )
        .detail(sentence(problem))
        .raise(),
        None => errors::report(
            Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "snowflake.worker_id is not set",
            // On a Citus node a worker id set by hand is refused unless something compares it
            // with the other nodes' (`resolve`): the plain advice led a user from this error to
            // that one.
            if citus_preloaded() {
                "This server preloads Citus: lease its worker id from the coordinator, with \
                 snowflake.worker_id = -1 and snowflake.registry naming the coordinator's \
                 database, and restart the server (docs/citus.md)."
                    .to_string()
            } else {
                format!(
                    "Pick a worker id between 0 and {} that no other server uses, run ALTER \
                     SYSTEM SET snowflake.worker_id = <id>; and restart the server.",
                    layout().max_worker_id()
                )
            },
        )
        .detail(
            "Every server that generates snowflake ids needs a worker id of its own; two servers \
             with the same worker id can generate the same ids.",
        )
        .raise(),
    }
}

#[cfg(test)]
mod tests {
    use super::names_citus;

    #[test]
    fn every_spelling_that_loads_citus_is_seen() {
        for list in [
            "citus",
            "citus,pg_snowflake",
            " \"citus\" , pg_snowflake",
            "$libdir/citus,pg_snowflake",
            "citus.so",
            "CITUS",
        ] {
            assert!(names_citus(list), "{list}");
        }
        for list in ["pg_snowflake", "citus_columnar", "", "mycitus", "citusx.so"] {
            assert!(!names_citus(list), "{list}");
        }
    }
}
