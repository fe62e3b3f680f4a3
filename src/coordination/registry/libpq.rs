//! The few libpq calls the registry's worker makes, with a safe wrapper: one connection, one
//! parameterised statement at a time, every value as text.
//!
//! libpq, not a Rust client: it reads the same connection strings, service files and password
//! files (`~/.pgpass`, `passfile`) as every PostgreSQL tool, `primary_conninfo` among them.
//!
//! Asynchronously, as PostgreSQL's own libpqwalreceiver does it: `PQconnectStartParams` and
//! `PQconnectPoll`, `PQsendQueryParams`, `PQconsumeInput` and `PQisBusy`, and between them a wait
//! for the socket that the caller provides (`Wait`: the worker waits on its latch too, so that a
//! shutdown ends the wait at once, whatever the registry does). A blocking libpq call would hold
//! a shutdown for as long as its timeouts allow (3.1 s measured in 0.3.0 against a registry
//! that accepted connections and never answered).

use crate::text::one_line;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

#[repr(C)]
struct PGconn(c_void);
#[repr(C)]
struct PGresult(c_void);
/// libpq-fe.h's `PQconninfoOption`, an array of which ends with a NULL keyword.
#[repr(C)]
struct PQconninfoOption {
    keyword: *const c_char,
    envvar: *const c_char,
    compiled: *const c_char,
    val: *const c_char,
    label: *const c_char,
    dispchar: *const c_char,
    dispsize: c_int,
}

const CONNECTION_OK: c_int = 0;
const CONNECTION_BAD: c_int = 1;
const PGRES_TUPLES_OK: c_int = 2;
const PGRES_COPY_OUT: c_int = 3;
const PGRES_COPY_IN: c_int = 4;
const PGRES_COPY_BOTH: c_int = 8;
const PGRES_SINGLE_TUPLE: c_int = 9;
/// `PostgresPollingStatusType`: what `PQconnectPoll` waits for next.
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
/// `PG_DIAG_SQLSTATE`, `PG_DIAG_MESSAGE_PRIMARY` and `PG_DIAG_MESSAGE_DETAIL` (postgres_ext.h).
const DIAG_SQLSTATE: c_int = b'C' as c_int;
const DIAG_MESSAGE: c_int = b'M' as c_int;
const DIAG_DETAIL: c_int = b'D' as c_int;

/// libpq's functions, found when this process first needs them. Loaded with `dlopen` in the
/// registry's worker only, never linked: a library preloaded by the postmaster that linked
/// libpq would bring whichever `libpq.so.5` the system has into every server process, and
/// PostgreSQL's own walreceiver (libpqwalreceiver), loaded later, would then use that one
/// instead of its server's, and refuse the options its `pg_basebackup` writes
/// (`sslcertmode` is unknown to 15's libpq: a standby of 16 could not stream).
#[allow(non_snake_case)]
struct Api {
    PQconnectStartParams:
        unsafe extern "C" fn(*const *const c_char, *const *const c_char, c_int) -> *mut PGconn,
    PQconnectPoll: unsafe extern "C" fn(*mut PGconn) -> c_int,
    PQsocket: unsafe extern "C" fn(*const PGconn) -> c_int,
    PQsendQueryParams: unsafe extern "C" fn(
        *mut PGconn,
        *const c_char,
        c_int,
        *const u32,
        *const *const c_char,
        *const c_int,
        *const c_int,
        c_int,
    ) -> c_int,
    PQconsumeInput: unsafe extern "C" fn(*mut PGconn) -> c_int,
    PQisBusy: unsafe extern "C" fn(*mut PGconn) -> c_int,
    PQsetSingleRowMode: unsafe extern "C" fn(*mut PGconn) -> c_int,
    PQsetNoticeReceiver: unsafe extern "C" fn(
        *mut PGconn,
        Option<unsafe extern "C" fn(*mut c_void, *const PGresult)>,
        *mut c_void,
    ) -> *mut c_void,
    PQlibVersion: unsafe extern "C" fn() -> c_int,
    PQgetResult: unsafe extern "C" fn(*mut PGconn) -> *mut PGresult,
    PQstatus: unsafe extern "C" fn(*const PGconn) -> c_int,
    PQerrorMessage: unsafe extern "C" fn(*const PGconn) -> *const c_char,
    PQfinish: unsafe extern "C" fn(*mut PGconn),
    PQresultStatus: unsafe extern "C" fn(*const PGresult) -> c_int,
    PQresultErrorField: unsafe extern "C" fn(*const PGresult, c_int) -> *const c_char,
    PQntuples: unsafe extern "C" fn(*const PGresult) -> c_int,
    PQnfields: unsafe extern "C" fn(*const PGresult) -> c_int,
    PQgetisnull: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> c_int,
    PQgetvalue: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> *const c_char,
    PQgetlength: unsafe extern "C" fn(*const PGresult, c_int, c_int) -> c_int,
    PQclear: unsafe extern "C" fn(*mut PGresult),
    PQconninfoParse: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> *mut PQconninfoOption,
    PQconninfoFree: unsafe extern "C" fn(*mut PQconninfoOption),
    PQfreemem: unsafe extern "C" fn(*mut c_void),
    PQconnectionUsedPassword: unsafe extern "C" fn(*const PGconn) -> c_int,
    PQhost: unsafe extern "C" fn(*const PGconn) -> *const c_char,
}

static API: std::sync::OnceLock<Result<Api, String>> = std::sync::OnceLock::new();

/// Loads libpq, preferring the one in `server_lib` (the server's own library directory, where
/// a PostgreSQL built from source keeps it), else the system's. Later calls return the first
/// result.
pub fn load(server_lib: Option<&std::path::Path>) -> Result<(), String> {
    API.get_or_init(|| load_api(server_lib)).as_ref().map(|_| ()).map_err(Clone::clone)
}

fn api() -> Result<&'static Api, Error> {
    API.get_or_init(|| load_api(None)).as_ref().map_err(|why| plain(why.clone()))
}

// The transmutes' target is each field's type, which the macro below cannot name.
#[allow(clippy::missing_transmute_annotations)]
fn load_api(server_lib: Option<&std::path::Path>) -> Result<Api, String> {
    let mut candidates: Vec<CString> = vec![];
    if let Some(dir) = server_lib {
        let own = dir.join("libpq.so.5");
        if own.exists() {
            candidates.push(CString::new(own.as_os_str().as_encoded_bytes()).unwrap_or_default());
        }
    }
    candidates.push(c"libpq.so.5".to_owned());
    let mut tried = vec![];
    for name in &candidates {
        // SAFETY: a NUL-terminated name; the handle is kept for the life of the process.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            // SAFETY: dlerror returns NULL or a NUL-terminated message.
            let why = unsafe { libc::dlerror() };
            let why = if why.is_null() {
                "not found".to_string()
            } else {
                // SAFETY: not NULL, so the message dlerror just returned.
                unsafe { CStr::from_ptr(why) }.to_string_lossy().into_owned()
            };
            tried.push(why);
            continue;
        }
        macro_rules! symbols {
            ($($name:ident),* $(,)?) => {
                Api { $($name: {
                    // SAFETY: a NUL-terminated name looked up in a library dlopen returned.
                    let p = unsafe {
                        libc::dlsym(lib, concat!(stringify!($name), "\0").as_ptr().cast())
                    };
                    if p.is_null() {
                        return Err(format!("libpq lacks {}", stringify!($name)));
                    }
                    // SAFETY: libpq's function of that name has the signature the field
                    // declares (libpq-fe.h, stable since PostgreSQL 9.3).
                    unsafe { std::mem::transmute::<*mut c_void, _>(p) }
                }),* }
            };
        }
        return Ok(symbols!(
            PQconnectStartParams,
            PQconnectPoll,
            PQsocket,
            PQsendQueryParams,
            PQconsumeInput,
            PQisBusy,
            PQsetSingleRowMode,
            PQsetNoticeReceiver,
            PQlibVersion,
            PQgetResult,
            PQstatus,
            PQerrorMessage,
            PQfinish,
            PQresultStatus,
            PQresultErrorField,
            PQntuples,
            PQnfields,
            PQgetisnull,
            PQgetvalue,
            PQgetlength,
            PQclear,
            PQconninfoParse,
            PQconninfoFree,
            PQfreemem,
            PQconnectionUsedPassword,
            PQhost,
        ));
    }
    Err(format!("libpq could not be loaded: {}", tried.join("; ")))
}

/// The most memory libpq may take beyond what the process had when `bound_memory` was called:
/// an answer that needs more fails to be read (libpq reports it out of memory). A registry, or
/// anyone between it and this server, could otherwise send rows or one message as large as it
/// likes: 1 MB rows, until the query timed out, grew the worker to 1.5 GB.
const MEMORY_HEADROOM: u64 = 64 << 20;

/// The data segment limit (`RLIMIT_DATA`, which counts every private writable mapping, malloc's
/// too) that libpq runs under, 0 for none.
static MEMORY_LIMIT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// From now on, libpq's calls that read from the registry run with their memory bounded:
/// `MEMORY_HEADROOM` above this process's data segment now (`VmData`). Only libpq runs under
/// the limit, which is put back after each call: libpq checks every allocation and fails
/// cleanly, where Rust code would abort the process, and with it every session of the server.
pub fn bound_memory() {
    let data = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let line = status.lines().find(|l| l.starts_with("VmData:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    });
    if let Some(data) = data {
        MEMORY_LIMIT.store(data + MEMORY_HEADROOM, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs a libpq call under the memory limit (see `bound_memory`).
fn bounded_memory<T>(call: impl FnOnce() -> T) -> T {
    let limit = MEMORY_LIMIT.load(std::sync::atomic::Ordering::Relaxed);
    let mut old = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit of this process's own data limit, with valid pointers.
    let lowered = limit > 0
        && unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut old) } == 0
        && limit < old.rlim_cur
        && unsafe {
            libc::setrlimit(
                libc::RLIMIT_DATA,
                &libc::rlimit { rlim_cur: limit, rlim_max: old.rlim_max },
            )
        } == 0;
    let result = call();
    if lowered {
        // SAFETY: as above; raising the soft limit back up to where it was, below the hard one.
        unsafe { libc::setrlimit(libc::RLIMIT_DATA, &old) };
    }
    result
}

/// The notice receiver of every connection: notices are dropped (see `Connection::open`).
unsafe extern "C" fn drop_notice(_arg: *mut c_void, _res: *const PGresult) {}

/// The version of the libpq loaded, as `PQlibVersion` gives it (160002 for 16.2); 0 before
/// `load`.
pub fn version() -> i32 {
    match API.get() {
        // SAFETY: a plain call of the libpq loaded.
        Some(Ok(api)) => unsafe { (api.PQlibVersion)() },
        _ => 0,
    }
}

/// What the last connection attempt of this process met, answered or not: whether the server
/// asked for a password (`PQconnectionUsedPassword`, also after a refusal), and the host libpq
/// tried last (`PQhost`: a socket directory, or a host name or address).
#[derive(Clone, Debug, Default)]
pub struct Attempt {
    pub password_asked: bool,
    pub host: String,
}

static LAST_ATTEMPT: std::sync::Mutex<Option<Attempt>> = std::sync::Mutex::new(None);

/// The last connection attempt's `Attempt`, if one was made.
pub fn last_attempt() -> Option<Attempt> {
    LAST_ATTEMPT.lock().map(|a| a.clone()).unwrap_or_default()
}

/// An error of the registry's server (with its SQLSTATE), of the connection (without), or an
/// answer of a shape no statement of the registry's gives (`unexpected_answer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub sqlstate: Option<String>,
    pub message: String,
    pub detail: Option<String>,
    /// The answer came, and was not what was asked for (COPY, more rows or results, other
    /// columns, oversized values): whoever answered is no registry, not out of reach.
    pub unexpected_answer: bool,
}

/// "message. Detail." on one line (`text::one_line`): libpq's messages span lines ("...\n\tIs
/// the server running...?") and end without a period.
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", one_line(&self.message))?;
        if let Some(detail) = &self.detail {
            write!(f, ". {}", one_line(detail).trim_end_matches('.'))?;
        }
        Ok(())
    }
}

fn plain(message: String) -> Error {
    Error {
        sqlstate: None,
        message: message.trim_end().to_string(),
        detail: None,
        unexpected_answer: false,
    }
}

/// An answer refused for its shape.
fn unexpected(message: String) -> Error {
    Error { unexpected_answer: true, ..plain(message) }
}

/// Whether libpq can read `conninfo` (key/value pairs or a URI); the error says why not.
pub fn check_conninfo(conninfo: &str) -> Result<(), String> {
    let api = api().map_err(|e| e.message)?;
    let text = CString::new(conninfo).map_err(|_| "it holds a NUL byte".to_string())?;
    let mut err: *mut c_char = std::ptr::null_mut();
    // SAFETY: text is NUL-terminated; libpq allocates the options and the message, freed below.
    unsafe {
        let options = (api.PQconninfoParse)(text.as_ptr(), &mut err);
        if !options.is_null() {
            (api.PQconninfoFree)(options);
            return Ok(());
        }
        if err.is_null() {
            return Err("libpq is out of memory".into());
        }
        let why = CStr::from_ptr(err).to_string_lossy().trim_end().to_string();
        (api.PQfreemem)(err.cast());
        Err(why)
    }
}

/// What the caller's wait for the connection's socket saw.
pub enum Waited {
    /// The socket is ready (or may be: libpq checks again).
    Ready,
    /// The deadline passed.
    TimedOut,
}

/// Waits until the socket `fd` can be read (or written, with `write`), for at most `timeout`.
/// The worker's waits on its latch as well, and leaves the process at a shutdown.
pub type Wait<'a> = &'a dyn Fn(c_int, bool, Duration) -> Waited;

/// The value `conninfo` gives `keyword`, as libpq reads it (its URI form decoded), if it gives
/// one and libpq can read the string.
pub fn option(conninfo: &str, keyword: &CStr) -> Option<String> {
    let api = api().ok()?;
    let text = CString::new(conninfo).ok()?;
    let mut err: *mut c_char = std::ptr::null_mut();
    // SAFETY: text is NUL-terminated; the options and the message are freed below; the array
    // ends with a NULL keyword.
    unsafe {
        let options = (api.PQconninfoParse)(text.as_ptr(), &mut err);
        if !err.is_null() {
            (api.PQfreemem)(err.cast());
        }
        if options.is_null() {
            return None;
        }
        let mut found = None;
        let mut option = options;
        while !(*option).keyword.is_null() {
            if CStr::from_ptr((*option).keyword) == keyword && !(*option).val.is_null() {
                found = Some(CStr::from_ptr((*option).val).to_string_lossy().into_owned());
            }
            option = option.add(1);
        }
        (api.PQconninfoFree)(options);
        found
    }
}

/// The `connect_timeout` that `conninfo` sets, if it sets one: libpq applies it only to blocking
/// connections, so the caller of `open` applies it. Values below 2 s count as 2 s, as libpq
/// counts them.
pub fn connect_timeout(conninfo: &str) -> Option<Duration> {
    option(conninfo, c"connect_timeout")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map(|s| Duration::from_secs(s.max(2)))
}

/// Whether `conninfo` makes libpq authenticate the server (`sslmode` verify-ca or verify-full):
/// only then can no one else answer in its place. (`require` encrypts, and takes any
/// certificate: whoever answers with one of its own gets the password all the same, found by
/// 0.6.0's review.)
pub fn authenticates_server(conninfo: &str) -> bool {
    matches!(option(conninfo, c"sslmode").as_deref(), Some("verify-ca" | "verify-full"))
}

/// The registry's host names resolved by this process, not by libpq: libpq resolves them inside
/// `PQconnectStartParams` with the C library's blocking resolver (5 s a try, two tries, per name
/// server), before any wait on the latch, and a fast shutdown waited for a name server that did
/// not answer (10.1 s). Here a thread of its own (every signal blocked) asks, while this one
/// waits on its latch and a pipe the thread writes to: a shutdown ends the wait at once, and the
/// thread with the process. Returns `host`, `hostaddr` and `port` to give libpq (each name as
/// many times as it has addresses, each with its address, so that libpq still tries them all
/// in turn); nothing where no name needs resolving (addresses, socket directories, `hostaddr`
/// given).
fn resolved(
    conninfo: &str,
    deadline: Instant,
    wait: Wait,
) -> Result<Vec<(&'static str, String)>, Error> {
    if option(conninfo, c"hostaddr").is_some_and(|a| !a.is_empty()) {
        return Ok(vec![]);
    }
    let Some(hosts) = option(conninfo, c"host").filter(|h| !h.is_empty()) else {
        return Ok(vec![]);
    };
    let hosts: Vec<String> = hosts.split(',').map(str::to_string).collect();
    let is_name =
        |h: &str| !h.is_empty() && !h.starts_with('/') && h.parse::<std::net::IpAddr>().is_err();
    if !hosts.iter().any(|h| is_name(h)) {
        return Ok(vec![]);
    }
    let ports: Vec<String> =
        option(conninfo, c"port").unwrap_or_default().split(',').map(str::to_string).collect();
    let port_of = |i: usize| -> String {
        match ports.len() {
            0 => String::new(),
            1 => ports[0].clone(),
            _ => ports.get(i).cloned().unwrap_or_default(),
        }
    };
    // The thread resolves every name; the answer comes through a channel, and a byte on the
    // pipe wakes the wait.
    let mut fds = [0 as c_int; 2];
    // SAFETY: an out-array of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(plain(format!("pipe: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: descriptors pipe2 just made, each owned once.
    let (read_end, write_end) = unsafe {
        (std::os::fd::OwnedFd::from_raw_fd(fds[0]), std::os::fd::OwnedFd::from_raw_fd(fds[1]))
    };
    let names: Vec<String> = hosts.iter().filter(|h| is_name(h)).cloned().collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let resolver = move || {
        use std::net::ToSocketAddrs;
        let answers: Vec<(String, Result<Vec<std::net::IpAddr>, String>)> = names
            .into_iter()
            .map(|name| {
                let found = (name.as_str(), 0)
                    .to_socket_addrs()
                    .map(|addrs| {
                        let mut ips: Vec<std::net::IpAddr> = addrs.map(|a| a.ip()).collect();
                        ips.dedup();
                        ips
                    })
                    .map_err(|e| e.to_string());
                (name, found)
            })
            .collect();
        let _ = tx.send(answers);
        // SAFETY: one byte to a pipe whose write end this thread owns.
        unsafe { libc::write(write_end.as_raw_fd(), [1u8].as_ptr().cast(), 1) };
    };
    // SAFETY: the mask of this thread, blocked in full while the thread is made (which inherits
    // it), then set back: no signal of PostgreSQL's is ever handled on the resolver's thread.
    let spawned = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let spawned = std::thread::Builder::new().name("registry resolver".into()).spawn(resolver);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned
    };
    spawned.map_err(|e| plain(format!("cannot start the resolver: {e}")))?;
    let answers = loop {
        if let Ok(answers) = rx.try_recv() {
            break answers;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(plain(
                "timeout while resolving the registry's host name (no answer within the time \
                 allowed)"
                    .into(),
            ));
        }
        wait(read_end.as_raw_fd(), false, left);
    };
    let mut out_hosts = vec![];
    let mut out_addrs = vec![];
    let mut out_ports = vec![];
    for (i, host) in hosts.iter().enumerate() {
        let addrs = match answers.iter().find(|(name, _)| name == host) {
            Some((_, Ok(ips))) if !ips.is_empty() => ips.iter().map(|ip| ip.to_string()).collect(),
            Some((_, Ok(_))) => {
                return Err(plain(format!("the host name \"{host}\" has no address")));
            }
            Some((_, Err(why))) => {
                return Err(plain(format!(
                    "could not translate host name \"{host}\" to address: {why}"
                )));
            }
            None => vec![String::new()],
        };
        for addr in addrs {
            out_hosts.push(host.clone());
            out_addrs.push(addr);
            out_ports.push(port_of(i));
        }
    }
    let mut pairs = vec![("host", out_hosts.join(",")), ("hostaddr", out_addrs.join(","))];
    if !ports.is_empty() && ports.iter().any(|p| !p.is_empty()) {
        pairs.push(("port", out_ports.join(",")));
    }
    Ok(pairs)
}

/// An open connection, closed on drop.
pub struct Connection(*mut PGconn, &'static Api);

impl Connection {
    /// Connects with `conninfo`, whose settings win over `defaults` (keyword, value), waiting
    /// with `wait` for at most `timeout` in all.
    pub fn open(
        conninfo: &str,
        defaults: &[(&str, &str)],
        timeout: Duration,
        wait: Wait,
    ) -> Result<Connection, Error> {
        let nul = |_| plain("the connection string holds a NUL byte".into());
        let mut pairs = Vec::new();
        for (key, value) in defaults {
            pairs.push((CString::new(*key).map_err(nul)?, CString::new(*value).map_err(nul)?));
        }
        // libpq expands a `dbname` that is a connection string; its settings take precedence
        // over the entries before it, and the entries after it over its own.
        pairs.push((c"dbname".to_owned(), CString::new(conninfo).map_err(nul)?));
        let deadline = Instant::now() + timeout;
        for (key, value) in mutant!(registry_resolve, { resolved(conninfo, deadline, wait)? }, {
            let _ = resolved;
            Vec::new()
        }) {
            pairs.push((CString::new(key).map_err(nul)?, CString::new(value).map_err(nul)?));
        }
        let mut keywords: Vec<*const c_char> = pairs.iter().map(|(k, _)| k.as_ptr()).collect();
        let mut values: Vec<*const c_char> = pairs.iter().map(|(_, v)| v.as_ptr()).collect();
        keywords.push(std::ptr::null());
        values.push(std::ptr::null());
        let api = api()?;
        // SAFETY: NULL-terminated arrays of NUL-terminated strings that outlive the call; the
        // connection is freed by Drop, also when it failed.
        let conn = Connection(
            unsafe { (api.PQconnectStartParams)(keywords.as_ptr(), values.as_ptr(), 1) },
            api,
        );
        if conn.0.is_null() {
            return Err(plain("libpq is out of memory".into()));
        }
        // libpq's own prints every notice whole to stderr, which is the server log: whoever
        // answered (before authentication too) wrote 730 MB of forged log lines in 10 s. A
        // registry's notices say nothing the lease's answer does not.
        mutant!(
            registry_notices,
            {
                // SAFETY: a live connection object; the receiver keeps nothing of what it is
                // given.
                unsafe {
                    (api.PQsetNoticeReceiver)(conn.0, Some(drop_notice), std::ptr::null_mut())
                };
            },
            {}
        );
        // SAFETY: a live connection object.
        if unsafe { (api.PQstatus)(conn.0) } == CONNECTION_BAD {
            return Err(plain(conn.error_message()));
        }
        let polled = conn.poll(deadline, wait);
        conn.record_attempt();
        polled?;
        Ok(conn)
    }

    /// Polls a started connection until it is made or fails.
    fn poll(&self, deadline: Instant, wait: Wait) -> Result<(), Error> {
        let (conn, api) = (self, self.1);
        // As after PQconnectStartParams: the first poll comes once the socket is writable.
        let mut polled = PGRES_POLLING_WRITING;
        loop {
            match polled {
                PGRES_POLLING_OK => break,
                PGRES_POLLING_READING | PGRES_POLLING_WRITING => {
                    let write = polled == PGRES_POLLING_WRITING;
                    conn.wait_until(deadline, write, wait, "connecting")?;
                }
                _ => return Err(plain(conn.error_message())),
            }
            // SAFETY: a live connection object, polled as libpq asks.
            polled = bounded_memory(|| unsafe { (api.PQconnectPoll)(conn.0) });
            if polled == PGRES_POLLING_FAILED {
                return Err(plain(conn.error_message()));
            }
        }
        // SAFETY: a live connection object.
        if unsafe { (api.PQstatus)(conn.0) } != CONNECTION_OK {
            return Err(plain(conn.error_message()));
        }
        Ok(())
    }

    fn record_attempt(&self) {
        // SAFETY: a live connection object; PQhost returns NULL or a string it owns.
        let attempt = unsafe {
            let host = (self.1.PQhost)(self.0);
            Attempt {
                password_asked: (self.1.PQconnectionUsedPassword)(self.0) != 0,
                host: if host.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(host).to_string_lossy().into_owned()
                },
            }
        };
        if let Ok(mut last) = LAST_ATTEMPT.lock() {
            *last = Some(attempt);
        }
    }

    /// Waits with `wait` for the socket, until `deadline`.
    fn wait_until(
        &self,
        deadline: Instant,
        write: bool,
        wait: Wait,
        doing: &str,
    ) -> Result<(), Error> {
        let left = deadline.saturating_duration_since(Instant::now());
        // SAFETY: a live connection object.
        let fd = unsafe { (self.1.PQsocket)(self.0) };
        if left.is_zero() || fd < 0 {
            return Err(plain(format!(
                "timeout while {doing} (no answer within the time allowed)"
            )));
        }
        match wait(fd, write, left) {
            Waited::Ready => Ok(()),
            Waited::TimedOut => {
                Err(plain(format!("timeout while {doing} (no answer within the time allowed)")))
            }
        }
    }

    fn error_message(&self) -> String {
        // SAFETY: libpq returns a NUL-terminated string owned by the connection.
        unsafe { CStr::from_ptr((self.1.PQerrorMessage)(self.0)) }.to_string_lossy().into_owned()
    }

    /// Runs one statement with text parameters (NULL for `None`) and returns its rows, every
    /// value as text, waiting with `wait` for at most `timeout`.
    pub fn query(
        &self,
        sql: &str,
        params: &[Option<String>],
        timeout: Duration,
        wait: Wait,
        shape: Shape,
    ) -> Result<Vec<Vec<Option<String>>>, Error> {
        let sql = CString::new(sql).map_err(|_| plain("the statement holds a NUL byte".into()))?;
        let owned: Vec<Option<CString>> = params
            .iter()
            .map(|p| p.as_deref().map(|s| CString::new(s).unwrap_or_default()))
            .collect();
        let pointers: Vec<*const c_char> =
            owned.iter().map(|p| p.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())).collect();
        let api = self.1;
        // SAFETY: every pointer is NUL-terminated and outlives the call. The connection stays
        // blocking for sending: a statement of a few kB fits the socket's buffer.
        let sent = unsafe {
            (api.PQsendQueryParams)(
                self.0,
                sql.as_ptr(),
                pointers.len() as c_int,
                std::ptr::null(),
                pointers.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
            )
        };
        // Rows come one result each, so that an answer of many rows is refused at the first one
        // too many, before they pile up.
        if sent == 0
            || mutant!(
                registry_single_row,
                {
                    // SAFETY: a live connection with a statement just sent.
                    (unsafe { (api.PQsetSingleRowMode)(self.0) } == 0)
                },
                { false }
            )
        {
            return Err(plain(self.error_message()));
        }
        let deadline = Instant::now() + timeout;
        // The rows, one result each, then the statement's end (a result of no rows), then NULL;
        // an error decides. Each result is waited for on the socket first (PQgetResult would
        // block, past the deadline and a shutdown, while the rest of the answer is missing).
        let mut rows = Vec::new();
        let mut error = None;
        for _ in 0..mutant!(registry_copy, { shape.rows + 3 }, { usize::MAX }) {
            // SAFETY: a live connection; libpq reads what has arrived, and says whether a whole
            // result is there.
            while bounded_memory(|| unsafe { (api.PQisBusy)(self.0) }) != 0 {
                self.wait_until(deadline, false, wait, "waiting for the registry's answer")?;
                // SAFETY: as above.
                if bounded_memory(|| unsafe { (api.PQconsumeInput)(self.0) }) == 0 {
                    return Err(plain(self.error_message()));
                }
            }
            // SAFETY: a live connection whose next result has arrived (PQisBusy said so).
            let res = PqResult(bounded_memory(|| unsafe { (api.PQgetResult)(self.0) }), api);
            if res.0.is_null() {
                return match error {
                    Some(e) => Err(e),
                    None => Ok(rows),
                };
            }
            // SAFETY: a live result.
            match unsafe { (api.PQresultStatus)(res.0) } {
                PGRES_SINGLE_TUPLE | PGRES_TUPLES_OK if error.is_none() => {
                    rows.extend(self.rows_of(&res, shape)?);
                    if mutant!(registry_rows, { rows.len() > shape.rows }, { false }) {
                        return Err(unexpected(format!(
                            "the registry answered with more than {} rows",
                            shape.rows
                        )));
                    }
                }
                // In a COPY state libpq hands out the same result forever and never NULL: a
                // registry that answered so spun the worker at 100% CPU, past a shutdown.
                PGRES_COPY_OUT | PGRES_COPY_IN | PGRES_COPY_BOTH
                    if mutant!(registry_copy, { true }, { false }) =>
                {
                    return Err(unexpected(
                        "the registry answered with COPY, which no registry statement makes".into(),
                    ))
                }
                _ => error = error.or_else(|| Some(self.error_of(&res))),
            }
        }
        Err(unexpected("the registry answered with more results than one statement makes".into()))
    }

    /// The error a result reports, cut to a length a log line can hold.
    fn error_of(&self, res: &PqResult) -> Error {
        let message = res.field(DIAG_MESSAGE).unwrap_or_else(|| self.error_message());
        Error {
            sqlstate: res.field(DIAG_SQLSTATE).map(|code| bounded(&code, 5)),
            message: bounded(message.trim_end(), MAX_MESSAGE),
            detail: res.field(DIAG_DETAIL).map(|d| bounded(&d, MAX_MESSAGE)),
            unexpected_answer: false,
        }
    }

    /// The rows of a result of the expected `shape`; an error for a result of another shape.
    fn rows_of(&self, res: &PqResult, shape: Shape) -> Result<Vec<Vec<Option<String>>>, Error> {
        let api = self.1;
        // SAFETY: a live result.
        let (rows, columns) = unsafe { ((api.PQntuples)(res.0), (api.PQnfields)(res.0)) };
        if mutant!(
            registry_columns,
            { rows as usize > shape.rows || columns as usize != shape.columns },
            { rows as usize > shape.rows }
        ) {
            return Err(unexpected(format!(
                "the registry answered with {rows} rows of {columns} columns, where {} of {} \
                 were expected",
                shape.rows, shape.columns
            )));
        }
        // SAFETY: a live result; row and column indexes are within its counts.
        unsafe {
            for row in 0..rows {
                for col in 0..columns {
                    let len = (api.PQgetlength)(res.0, row, col);
                    if mutant!(registry_value_bytes, { len as usize > shape.value_bytes }, {
                        false
                    }) {
                        return Err(unexpected(format!(
                            "the registry answered with a value of {len} bytes, where at most \
                             {} were expected",
                            shape.value_bytes
                        )));
                    }
                }
            }
        }
        // SAFETY: as above.
        let rows = unsafe {
            (0..rows)
                .map(|row| {
                    (0..columns)
                        .map(|col| {
                            ((api.PQgetisnull)(res.0, row, col) == 0).then(|| {
                                CStr::from_ptr((api.PQgetvalue)(res.0, row, col))
                                    .to_string_lossy()
                                    .into_owned()
                            })
                        })
                        .collect()
                })
                .collect()
        };
        Ok(rows)
    }
}

/// The longest error message or detail kept from the registry.
const MAX_MESSAGE: usize = 1024;

/// `text` cut to at most `max` bytes, at a character boundary.
fn bounded(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// What an answer must look like: at most `rows` rows of exactly `columns` columns, each value
/// at most `value_bytes` long. Anything else is refused before a value is copied.
#[derive(Clone, Copy)]
pub struct Shape {
    pub rows: usize,
    pub columns: usize,
    pub value_bytes: usize,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: PQfinish frees the object whether or not the connection succeeded.
        unsafe { (self.1.PQfinish)(self.0) };
    }
}

/// A statement's result, cleared on drop.
struct PqResult(*mut PGresult, &'static Api);

impl PqResult {
    fn field(&self, code: c_int) -> Option<String> {
        // SAFETY: a live result; libpq returns NULL or a string owned by the result.
        let p = unsafe { (self.1.PQresultErrorField)(self.0, code) };
        // SAFETY: not NULL, so a NUL-terminated string the result owns.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

impl Drop for PqResult {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a result libpq returned, cleared once.
            unsafe { (self.1.PQclear)(self.0) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conninfo_is_checked_by_libpq() {
        assert_eq!(check_conninfo("host=hub dbname=registry connect_timeout=5"), Ok(()));
        assert_eq!(check_conninfo("postgresql://hub/registry"), Ok(()));
        let why = check_conninfo("host=hub nonsense=1").unwrap_err();
        assert!(why.contains("nonsense"), "{why}");
        let why = check_conninfo("host='hub").unwrap_err();
        assert!(why.contains("quoted"), "{why}");
    }
}
