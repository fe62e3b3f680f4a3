//! Every `snowflake.*` setting: each is declared once, as a row of `table` (value and default,
//! name, descriptions, range, context and unit), and what the configuration says of it
//! is checked at start in `written`. Here `init()` defines them and resolves the layout and the
//! worker id once, and the rest of the crate reads them through the getters below.
//!
//! None of them is `USERSET` or `SUSET` but `snowflake.time_ranges`, which only changes plans: a
//! session must not be able to change which ids the cluster hands out, so they come from the
//! configuration files only, which only a superuser
//! (or `ALTER SYSTEM`, itself superuser-only by default) can change. The layout and the worker
//! id are postmaster settings: every backend of a running server uses the same ones.

mod table;
mod written;

use table::{
    define_the_layout_settings, define_the_rest, parse_epoch, CLAIMS_DATABASE, CLAIMS_INTERVAL,
    DRIFT_WAIT, EPOCH, LAYOUT, MAX_DRIFT, REGISTRY, REGISTRY_LEASE, REGISTRY_NAMESPACE,
    SEQUENCE_BITS, TIME_BITS, TIME_RANGES, TIME_UNIT, WORKER_BITS, WORKER_ID, WORKER_ID_NETWORK,
};
use written::Written;

use crate::citus;
use crate::errors::{self, Code};
use crate::layout::{self, Layout};
use crate::text::sentence;
use pgrx::GucSetting;
use std::sync::OnceLock;

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
    define_the_layout_settings();
    let layout =
        mutant!(written_settings, { written.check().and_then(|()| layout_from_settings()) }, {
            let _ = written.check();
            layout_from_settings()
        });
    // The worker id's range is the layout's: PostgreSQL itself then refuses a value the layout
    // cannot hold in ALTER SYSTEM (an error), and pg_settings shows the real range.
    let max_worker_id = layout.as_ref().unwrap_or(&layout::TWITTER).max_worker_id();
    let layout = layout.and_then(|layout| {
        written.check_worker_id(max_worker_id as i32)?;
        Ok(layout)
    });
    define_the_rest(max_worker_id as i32);
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

/// The configured layout, or why it is refused.
fn layout_from_settings() -> Result<Layout, String> {
    let preset = LAYOUT.get().preset();
    // The custom layout's settings, and their defaults: Twitter's widths.
    let custom = [&TIME_UNIT, &TIME_BITS, &WORKER_BITS, &SEQUENCE_BITS];
    let twitter = &layout::TWITTER;
    let defaults = [
        twitter.unit_ms as i32,
        twitter.time_bits as i32,
        twitter.worker_bits as i32,
        twitter.sequence_bits as i32,
    ];
    let epoch = EPOCH.raw();
    if let Some(fixed) = preset.layout() {
        // A custom field set beside a preset is a mistake the user should hear about: they
        // think they changed the layout, and they did not.
        let stray = custom
            .iter()
            .zip(defaults)
            .filter(|(setting, default)| setting.get() != *default)
            .map(|(setting, _)| setting.name.to_str().unwrap_or_default())
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
    let [unit, time, worker, sequence] = custom.map(|setting| setting.get() as u32);
    Layout::custom(epoch_unix_ms, unit as u64, time, worker, sequence, crate::clock::now_unix_ms())
        .map_err(|e| format!("the custom layout is invalid: {}", e.0))
}

fn resolve(layout: Result<Layout, String>) -> Resolved {
    let layout = match layout {
        Ok(layout) => layout,
        Err(problem) => {
            return Resolved { layout: layout::TWITTER, worker_id: None, problem: Some(problem) }
        }
    };
    // On a Citus node, a worker id set by hand that nothing compares with the other nodes' is
    // not used: one configuration file for every node repeated 5,136 of 96,000 ids in one
    // INSERT ... SELECT, silently (issue 34). With a registry, the registry refuses a worker id
    // in use; with claims in the Citus database, every node compares every node's (claims.rs).
    if mutant!(
        citus_unchecked,
        { registry().is_none() && claims_database().is_none() && citus::preloaded() },
        { false }
    ) {
        if let Some(w) = worker_id_setting() {
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
    // From the server's address (`address`): beside neither of the other two ways.
    if let Some(network) = worker_id_network() {
        let other = match (registry(), worker_id_setting()) {
            (Some(_), _) => Some("snowflake.registry"),
            (None, Some(_)) => Some("snowflake.worker_id"),
            (None, None) => None,
        };
        let derived = match other {
            Some(other) => Err(format!(
                "snowflake.worker_id_network and {other} both give the worker id: set only one \
                 (snowflake.worker_id = -1 and snowflake.registry empty with the network)"
            )),
            None => crate::address::derive(&network, &layout, max_drift_ms()),
        };
        return match derived {
            Ok(w) => Resolved { layout, worker_id: Some(w), problem: None },
            Err(problem) => Resolved { layout, worker_id: None, problem: Some(problem) },
        };
    }
    // PostgreSQL keeps the value within the layout's range (see `init`). With a registry, the
    // worker id is what the registry leases (see `registry`), not the setting.
    Resolved {
        layout,
        worker_id: match registry() {
            Some(_) => None,
            None => worker_id_setting(),
        },
        problem: None,
    }
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

/// The worker id the settings fix at start: `snowflake.worker_id`, or the server's address in
/// `snowflake.worker_id_network`; `None` while unset or refused, or where a registry leases it
/// (`worker_id::current` answers which is in use).
pub fn fixed_worker_id() -> Option<u32> {
    RESOLVED.get().and_then(|r| r.worker_id)
}

/// The value of `snowflake.worker_id`, also where a registry leases the worker id (it is then
/// the worker id to ask for): `None` while unset.
pub fn worker_id_setting() -> Option<u32> {
    mutant!(worker_unset, { u32::try_from(WORKER_ID.get()).ok() }, {
        Some(u32::try_from(WORKER_ID.get()).unwrap_or(0))
    })
}

/// `snowflake.worker_id_network`, if set: the network whose addresses give worker ids.
pub fn worker_id_network() -> Option<String> {
    WORKER_ID_NETWORK.get()
}

/// The registry's connection string, if one is configured.
pub fn registry() -> Option<String> {
    REGISTRY.get()
}

pub fn registry_namespace() -> String {
    REGISTRY_NAMESPACE.get().unwrap_or_default()
}

pub fn registry_lease() -> std::time::Duration {
    std::time::Duration::from_secs(REGISTRY_LEASE.get() as u64)
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
    hot(&MAX_DRIFT.value) as u64
}

pub fn drift_wait_ms() -> u64 {
    DRIFT_WAIT.get() as u64
}

/// Whether the planner hook turns time comparisons into id ranges (`snowflake.time_ranges`).
pub fn time_ranges() -> bool {
    TIME_RANGES.get()
}

/// The database of the claims worker, if one is configured.
pub fn claims_database() -> Option<String> {
    CLAIMS_DATABASE.get()
}

pub fn claims_interval() -> std::time::Duration {
    std::time::Duration::from_secs(CLAIMS_INTERVAL.get() as u64)
}

/// What to do about settings refused at start (the server log says which, and why). Where the
/// worker id comes from an address, what is wrong is most often the server's addresses, not
/// the setting's text. Either is written by an operator's parameters as often as by hand.
pub fn settings_hint() -> &'static str {
    if worker_id_network().is_some() {
        "Correct snowflake.worker_id_network, or give this server one address in that network, \
         as the detail says, and restart the server (postgresql.conf, or the parameters an \
         operator writes there)."
    } else {
        "Correct the snowflake.* settings in postgresql.conf, or the parameters an operator \
         writes there (see the server log), and restart the server."
    }
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
            if citus::preloaded() {
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
