//! A fake worker-id registry: a small server on 127.0.0.1 that speaks PostgreSQL's v3 wire
//! protocol well enough for a member's libpq, and answers its lease statement however a test
//! says, correctly or not. A member (a real server with `snowflake.registry` pointing here)
//! cannot tell it from a registry until it answers.
//!
//! What it does, in the order libpq asks:
//! - `SSLRequest` and `GSSENCRequest` get `N` (no encryption: libpq's default `sslmode=prefer`
//!   then goes on in plain text, as it would with anyone on the network path);
//! - the `StartupMessage` gets `AuthenticationOk` (or, with `Auth::Cleartext`, a request for the
//!   password in clear, which it records), a few `ParameterStatus`, `BackendKeyData` and
//!   `ReadyForQuery`;
//! - each statement comes as the extended protocol's Parse, Bind, Describe, Execute and Sync
//!   (`PQsendQueryParams`): the session's settings (`set_config`, six columns) are answered as a
//!   registry would, the lease statement (`snowflake_registry_hold`, eight columns) by the
//!   test's `Answer`, anything else with an error.
//!
//! Every loop here is bounded in time or bytes, and ends when the fake is dropped.

use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Protocol 3.0, and the codes of the requests that come instead of a startup message.
const PROTOCOL_3_0: u32 = 196_608;
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;
/// Type oids of the lease's columns.
pub const BOOL: u32 = 16;
pub const INT8: u32 = 20;
pub const INT4: u32 = 23;
pub const TEXT: u32 = 25;
/// The lease statement's columns, as the member's `LEASE` selects them.
pub const LEASE_COLUMNS: [(&str, u32); 8] = [
    ("ours", BOOL),
    ("outcome", TEXT),
    ("worker_id", INT4),
    ("int8", INT8),
    ("start_above_ms", INT8),
    ("recorded_until_ms", INT8),
    ("namespace_layout", TEXT),
    ("copy_of", TEXT),
];
/// No message a member sends is larger (its lease statement is about 2.5 kB): a longer one is
/// not a member's, and the connection is dropped.
const MAX_CLIENT_MESSAGE: usize = 1 << 20;

/// How the fake authenticates a member.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `AuthenticationOk` at once.
    Trust,
    /// Asks for the password in clear text (`AuthenticationCleartextPassword`), records it, and
    /// refuses the connection as a server does with a wrong one (28P01), with `message`.
    CleartextThenRefuse(&'static str),
    /// Refuses the connection at once (28P01), with `message`, asking for nothing.
    Refuse(&'static str),
}

/// One call of the lease statement: its parameters as the member bound them ($1 is
/// `params[0]`), every value as text.
#[derive(Clone, Debug, Default)]
pub struct LeaseCall {
    pub params: Vec<Option<String>>,
}

impl LeaseCall {
    fn param(&self, n: usize) -> Option<&str> {
        self.params.get(n - 1)?.as_deref()
    }

    pub fn namespace(&self) -> Option<&str> {
        self.param(1)
    }

    pub fn layout(&self) -> Option<&str> {
        self.param(2)
    }

    /// The worker id asked for ($9): `None` for any free one.
    pub fn wanted(&self) -> Option<i64> {
        self.param(9)?.parse().ok()
    }

    /// The worker id to take first when it is free ($10): held now, or cached.
    pub fn preferred(&self) -> Option<i64> {
        self.param(10)?.parse().ok()
    }

    /// The secret the member presents ($16): `None` for a new start.
    pub fn secret(&self) -> Option<&str> {
        self.param(16)
    }

    /// The lease asked for, in ms ($12).
    pub fn lease_ms(&self) -> i64 {
        self.param(13).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// How far the member's ids may go if granted (Unix ms, $14).
    pub fn covered_until_ms(&self) -> i64 {
        self.param(14).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// The eight values of a correct grant of `worker_id` (or the one asked for), as the
    /// registry's `snowflake_registry_hold()` answers a new holder: no previous coverage to
    /// start above, the whole coverage asked for recorded, expiring one lease from now.
    pub fn grant(&self, worker_id: i64) -> Vec<Option<Vec<u8>>> {
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
                as i64;
        [
            Some("t".to_string()),
            Some("granted".into()),
            Some(self.wanted().unwrap_or(worker_id).to_string()),
            Some((now_ms + self.lease_ms()).to_string()),
            Some("0".into()),
            Some(self.covered_until_ms().to_string()),
            None,
            None,
        ]
        .into_iter()
        .map(|v| v.map(String::into_bytes))
        .collect()
    }
}

/// The protocol's backend messages, whole (type byte, length, body).
pub mod msg {
    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::with_capacity(body.len() + 5);
        m.push(kind);
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    pub fn parse_complete() -> Vec<u8> {
        message(b'1', &[])
    }

    pub fn bind_complete() -> Vec<u8> {
        message(b'2', &[])
    }

    /// Text columns of the given names and type oids.
    pub fn row_description(columns: &[(&str, u32)]) -> Vec<u8> {
        let mut body = (columns.len() as u16).to_be_bytes().to_vec();
        for (name, oid) in columns {
            body.extend_from_slice(name.as_bytes());
            body.push(0);
            body.extend_from_slice(&0u32.to_be_bytes()); // no table
            body.extend_from_slice(&0u16.to_be_bytes()); // no column of one
            body.extend_from_slice(&oid.to_be_bytes());
            body.extend_from_slice(&(-1i16).to_be_bytes()); // variable length
            body.extend_from_slice(&(-1i32).to_be_bytes()); // no typmod
            body.extend_from_slice(&0u16.to_be_bytes()); // text format
        }
        message(b'T', &body)
    }

    /// A row of text values (`None`: NULL).
    pub fn data_row(values: &[Option<Vec<u8>>]) -> Vec<u8> {
        let mut body = (values.len() as u16).to_be_bytes().to_vec();
        for value in values {
            match value {
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(v) => {
                    body.extend_from_slice(&(v.len() as u32).to_be_bytes());
                    body.extend_from_slice(v);
                }
            }
        }
        message(b'D', &body)
    }

    pub fn command_complete(tag: &str) -> Vec<u8> {
        let mut body = tag.as_bytes().to_vec();
        body.push(0);
        message(b'C', &body)
    }

    pub fn ready_for_query() -> Vec<u8> {
        message(b'Z', b"I")
    }

    /// An `ErrorResponse` of `severity` (ERROR, FATAL) with a SQLSTATE and a message.
    pub fn error(severity: &str, code: &str, text: &str) -> Vec<u8> {
        let mut body = vec![];
        for (field, value) in [(b'S', severity), (b'V', severity), (b'C', code), (b'M', text)] {
            body.push(field);
            body.extend_from_slice(value.as_bytes());
            body.push(0);
        }
        body.push(0);
        message(b'E', &body)
    }

    /// `CopyOutResponse` (`H`) or `CopyInResponse` (`G`) of `columns` text columns.
    pub fn copy_response(kind: u8, columns: u16) -> Vec<u8> {
        let mut body = vec![0u8]; // text
        body.extend_from_slice(&columns.to_be_bytes());
        for _ in 0..columns {
            body.extend_from_slice(&0u16.to_be_bytes());
        }
        message(kind, &body)
    }

    pub fn parameter_status(name: &str, value: &str) -> Vec<u8> {
        let mut body = name.as_bytes().to_vec();
        body.push(0);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
        message(b'S', &body)
    }

    /// `AuthenticationOk` (0) or `AuthenticationCleartextPassword` (3).
    pub fn authentication(code: u32) -> Vec<u8> {
        message(b'R', &code.to_be_bytes())
    }

    pub fn backend_key_data(pid: u32, key: u32) -> Vec<u8> {
        let mut body = pid.to_be_bytes().to_vec();
        body.extend_from_slice(&key.to_be_bytes());
        message(b'K', &body)
    }
}

/// The lease statement's answer in progress: what the test's `Answer` writes to.
pub struct Reply<'a> {
    stream: &'a mut TcpStream,
    stop: &'a AtomicBool,
    sent: &'a AtomicU64,
    pub call: &'a LeaseCall,
}

impl Reply<'_> {
    /// Sends `bytes`; an error once the member hung up or the fake is dropped.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("the fake registry is stopping"));
        }
        self.stream.write_all(bytes)?;
        self.sent.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// What every answer of an extended-protocol statement starts with: `ParseComplete`,
    /// `BindComplete`.
    pub fn begin(&mut self) -> std::io::Result<()> {
        let mut m = msg::parse_complete();
        m.extend(msg::bind_complete());
        self.send(&m)
    }

    /// A whole answer of these rows of the lease's columns (after `begin`), as a server ends a
    /// statement: `CommandComplete`, `ReadyForQuery`.
    pub fn rows(&mut self, rows: &[Vec<Option<Vec<u8>>>]) -> std::io::Result<()> {
        self.begin()?;
        let mut m = msg::row_description(&LEASE_COLUMNS);
        for row in rows {
            m.extend(msg::data_row(row));
        }
        m.extend(msg::command_complete(&format!("SELECT {}", rows.len())));
        m.extend(msg::ready_for_query());
        self.send(&m)
    }

    /// Reads and drops whatever the member sends until it hangs up (at most 60 s): an answer
    /// that leaves the member in a state it must get out of by itself (COPY) keeps the
    /// connection open meanwhile.
    pub fn until_hangup(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline && !self.stop.load(Ordering::Relaxed) {
            match self.stream.read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Waits for `every`, in steps of 10 ms; an error if the fake is dropped meanwhile.
    pub fn pause(&self, every: Duration) -> std::io::Result<()> {
        let until = Instant::now() + every;
        while Instant::now() < until {
            if self.stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::other("the fake registry is stopping"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

/// How the lease statement is answered: writes to the `Reply`; an error ends the connection
/// (the member hung up).
pub type Answer = Arc<dyn Fn(&mut Reply) -> std::io::Result<()> + Send + Sync>;

/// What the fake saw, for the test to wait on and check.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    /// Connections that came through the startup (authenticated or not).
    startups: AtomicUsize,
    session_statements: AtomicUsize,
    /// Lease statements received (answered or not yet).
    lease_statements: AtomicUsize,
    /// Lease answers begun and ended (the member hung up, or the answer was whole).
    answers_begun: AtomicUsize,
    answers_ended: AtomicUsize,
    /// Bytes of the lease answer in progress, or of the last one.
    answer_bytes: AtomicU64,
    calls: Mutex<Vec<LeaseCall>>,
    passwords: Mutex<Vec<String>>,
    startup_params: Mutex<Vec<(String, String)>>,
}

/// A getter of each of `Seen`'s counters, named as the counter.
macro_rules! counters {
    ($($name:ident),*) => {
        $(pub fn $name(&self) -> usize {
            self.seen.$name.load(Ordering::Relaxed)
        })*
    };
}

/// A fake registry listening on 127.0.0.1:`port` until dropped.
pub struct FakeRegistry {
    pub port: u16,
    answer: Arc<Mutex<Answer>>,
    auth: Arc<Mutex<Auth>>,
    /// While set, a lease statement waits before it is answered (see `hold`).
    held: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl FakeRegistry {
    /// Starts the fake with `answer` for the lease statement.
    pub fn start(answer: Answer) -> FakeRegistry {
        // free_port() found the port free, but something may bind it before this does (once
        // in a full run, on 15): another one then.
        let (port, listener) = (0..10)
            .find_map(|_| {
                let port = free_port();
                TcpListener::bind(("127.0.0.1", port)).ok().map(|l| (port, l))
            })
            .expect("bind the fake registry: ten free ports were taken before it bound one");
        let answer = Arc::new(Mutex::new(answer));
        let auth = Arc::new(Mutex::new(Auth::Trust));
        let held = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let acceptor = {
            let (answer, auth, held, stop, seen) =
                (answer.clone(), auth.clone(), held.clone(), stop.clone(), seen.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(stream) = stream else { continue };
                    seen.connections.fetch_add(1, Ordering::Relaxed);
                    let connection = Connection {
                        answer: answer.clone(),
                        auth: *auth.lock().unwrap(),
                        held: held.clone(),
                        stop: stop.clone(),
                        seen: seen.clone(),
                    };
                    std::thread::spawn(move || connection.serve(stream));
                }
            })
        };
        FakeRegistry { port, answer, auth, held, stop, seen, acceptor: Some(acceptor) }
    }

    /// A correct registry: every lease statement is granted `worker_id` (or the one asked for).
    pub fn granting(worker_id: i64) -> FakeRegistry {
        FakeRegistry::start(grant(worker_id))
    }

    /// The answer of the lease statements that come from now on.
    pub fn set_answer(&self, answer: Answer) {
        *self.answer.lock().unwrap() = answer;
    }

    /// How connections that come from now on authenticate.
    pub fn set_auth(&self, auth: Auth) {
        *self.auth.lock().unwrap() = auth;
    }

    /// Lease statements wait, unanswered, until `release` (at most 60 s): a test can look at the
    /// member while its worker waits for the answer.
    pub fn hold(&self) {
        self.held.store(true, Ordering::Relaxed);
    }

    pub fn release(&self) {
        self.held.store(false, Ordering::Relaxed);
    }

    /// `snowflake.registry` for a member of this fake, with `extra` keywords.
    pub fn conninfo_setting(&self, extra: &str) -> String {
        format!(
            "snowflake.registry = 'host=127.0.0.1 port={} user=fleet dbname=registry {extra}'",
            self.port
        )
    }

    /// A member of this fake (not started): no worker id of its own, `snowflake.registry` with
    /// `extra` keywords, the shortest lease.
    pub fn member(&self, name: &str, extra: &str) -> Cluster {
        Cluster::init(
            name,
            &["snowflake.worker_id = -1", &self.conninfo_setting(extra), SHORTEST_LEASE],
        )
    }

    counters! {
        connections, startups, session_statements, lease_statements, answers_begun, answers_ended
    }

    /// Bytes of the lease answer in progress, or of the last one.
    pub fn answer_bytes(&self) -> u64 {
        self.seen.answer_bytes.load(Ordering::Relaxed)
    }

    /// The lease statements' parameters, in the order they came.
    pub fn calls(&self) -> Vec<LeaseCall> {
        self.seen.calls.lock().unwrap().clone()
    }

    /// Passwords members sent (`Auth::CleartextThenRefuse`).
    pub fn passwords(&self) -> Vec<String> {
        self.seen.passwords.lock().unwrap().clone()
    }

    /// The last startup message's parameters (user, database, application_name...).
    pub fn startup_params(&self) -> Vec<(String, String)> {
        self.seen.startup_params.lock().unwrap().clone()
    }

    /// Polls until `what` of the fake reaches `n`.
    pub fn wait_for(&self, what: &str, n: usize, within: Duration, count: impl Fn(&Self) -> usize) {
        poll(within, Duration::from_millis(10), || {
            let now = count(self);
            (now >= n)
                .then_some(())
                .ok_or_else(|| format!("the fake registry saw {now} {what}, not {n}"))
        });
    }
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the acceptor, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// A correct answer: the lease granted (see `LeaseCall::grant`).
pub fn grant(worker_id: i64) -> Answer {
    Arc::new(move |reply: &mut Reply| {
        let row = reply.call.grant(worker_id);
        reply.rows(&[row])
    })
}

/// One member's connection.
struct Connection {
    answer: Arc<Mutex<Answer>>,
    auth: Auth,
    held: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
}

impl Connection {
    fn serve(self, mut stream: TcpStream) {
        // No read blocks the fake's end for more than 100 ms; a member that stops reading its
        // answer for 30 s is let go.
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
        let _ = self.talk(&mut stream);
    }

    /// Reads exactly `buf.len()` bytes, waiting out read timeouts until the fake stops or 60 s
    /// pass.
    fn read_exact(&self, stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = 0;
        while got < buf.len() {
            if self.stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                return Err(std::io::Error::other("the fake registry stops reading"));
            }
            match stream.read(&mut buf[got..]) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if timed_out(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn read_u32(&self, stream: &mut TcpStream) -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        self.read_exact(stream, &mut b)?;
        Ok(u32::from_be_bytes(b))
    }

    /// A body of `length` bytes (its length word included, as the protocol counts).
    fn read_body(&self, stream: &mut TcpStream, length: u32) -> std::io::Result<Vec<u8>> {
        let length = (length as usize).checked_sub(4).unwrap_or(usize::MAX);
        if length > MAX_CLIENT_MESSAGE {
            return Err(std::io::Error::other("not a member's message"));
        }
        let mut body = vec![0u8; length];
        self.read_exact(stream, &mut body)?;
        Ok(body)
    }

    fn talk(&self, stream: &mut TcpStream) -> std::io::Result<()> {
        // SSLRequest and GSSENCRequest until the startup message.
        let startup = loop {
            let length = self.read_u32(stream)?;
            let body = self.read_body(stream, length)?;
            let code = u32::from_be_bytes(
                body.get(..4).ok_or(std::io::ErrorKind::InvalidData)?.try_into().unwrap(),
            );
            match code {
                SSL_REQUEST | GSSENC_REQUEST => stream.write_all(b"N")?,
                PROTOCOL_3_0 => break body[4..].to_vec(),
                _ => return Ok(()), // a cancel request, or not a member
            }
        };
        self.seen.startups.fetch_add(1, Ordering::Relaxed);
        let strings: Vec<String> =
            startup.split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned()).collect();
        *self.seen.startup_params.lock().unwrap() = strings
            .chunks(2)
            .filter(|kv| kv.len() == 2 && !kv[0].is_empty())
            .map(|kv| (kv[0].clone(), kv[1].clone()))
            .collect();
        if let Auth::Refuse(message) = self.auth {
            stream.write_all(&msg::error("FATAL", "28P01", message))?;
            return Ok(());
        }
        if let Auth::CleartextThenRefuse(message) = self.auth {
            stream.write_all(&msg::authentication(3))?;
            let mut kind = [0u8];
            self.read_exact(stream, &mut kind)?;
            let length = self.read_u32(stream)?;
            let body = self.read_body(stream, length)?;
            if kind[0] == b'p' {
                let password = body.split(|&b| b == 0).next().unwrap_or_default();
                self.seen
                    .passwords
                    .lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(password).into_owned());
            }
            stream.write_all(&msg::error("FATAL", "28P01", message))?;
            return Ok(());
        }
        let mut hello = msg::authentication(0);
        for (name, value) in [
            ("server_version", "16.4"),
            ("server_encoding", "UTF8"),
            ("client_encoding", "UTF8"),
            ("standard_conforming_strings", "on"),
            ("integer_datetimes", "on"),
            ("DateStyle", "ISO, MDY"),
        ] {
            hello.extend(msg::parameter_status(name, value));
        }
        hello.extend(msg::backend_key_data(4242, 0x5eed));
        hello.extend(msg::ready_for_query());
        stream.write_all(&hello)?;
        // Statements: Parse, Bind, Describe, Execute, Sync each.
        let mut query = String::new();
        let mut params = vec![];
        loop {
            let mut kind = [0u8];
            self.read_exact(stream, &mut kind)?;
            let length = self.read_u32(stream)?;
            let body = self.read_body(stream, length)?;
            match kind[0] {
                b'P' => query = parse_query(&body),
                b'B' => params = bind_params(&body).ok_or(std::io::ErrorKind::InvalidData)?,
                b'D' | b'E' | b'H' => {}
                b'S' => self.answer(stream, &query, std::mem::take(&mut params))?,
                b'X' => return Ok(()),
                _ => {
                    let mut m = msg::error(
                        "ERROR",
                        "08P01",
                        "the fake registry only takes statements of the extended protocol",
                    );
                    m.extend(msg::ready_for_query());
                    stream.write_all(&m)?;
                }
            }
        }
    }

    fn answer(
        &self,
        stream: &mut TcpStream,
        query: &str,
        params: Vec<Option<String>>,
    ) -> std::io::Result<()> {
        if query.contains("set_config") {
            self.seen.session_statements.fetch_add(1, Ordering::Relaxed);
            let names: Vec<(&str, u32)> = (0..6).map(|_| ("set_config", TEXT)).collect();
            let mut m = msg::parse_complete();
            m.extend(msg::bind_complete());
            m.extend(msg::row_description(&names));
            m.extend(msg::data_row(
                &["on", "off", "10s", "5s", "0", "read committed"]
                    .map(|v| Some(v.as_bytes().to_vec())),
            ));
            m.extend(msg::command_complete("SELECT 1"));
            m.extend(msg::ready_for_query());
            return stream.write_all(&m);
        }
        if !query.contains("snowflake_registry_hold") {
            let mut m = msg::error(
                "ERROR",
                "42883",
                "the fake registry knows only the session and lease statements",
            );
            m.extend(msg::ready_for_query());
            return stream.write_all(&m);
        }
        let call = LeaseCall { params };
        self.seen.calls.lock().unwrap().push(call.clone());
        self.seen.lease_statements.fetch_add(1, Ordering::Relaxed);
        let held_since = Instant::now();
        while self.held.load(Ordering::Relaxed) && held_since.elapsed() < Duration::from_secs(60) {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let answer = self.answer.lock().unwrap().clone();
        self.seen.answer_bytes.store(0, Ordering::Relaxed);
        self.seen.answers_begun.fetch_add(1, Ordering::Relaxed);
        let mut reply =
            Reply { stream, stop: &self.stop, sent: &self.seen.answer_bytes, call: &call };
        let answered = answer(&mut reply);
        self.seen.answers_ended.fetch_add(1, Ordering::Relaxed);
        answered
    }
}

/// The query of a Parse message: statement name, then the query, NUL-terminated.
fn parse_query(body: &[u8]) -> String {
    let mut parts = body.splitn(3, |&b| b == 0);
    let _name = parts.next();
    String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned()
}

/// The text parameters of a Bind message (portal, statement, formats, then each value).
fn bind_params(body: &[u8]) -> Option<Vec<Option<String>>> {
    let mut at = 0;
    for _ in 0..2 {
        at += body.get(at..)?.iter().position(|&b| b == 0)? + 1;
    }
    let u16_at = |at: usize| -> Option<usize> {
        Some(u16::from_be_bytes(body.get(at..at + 2)?.try_into().ok()?) as usize)
    };
    let formats = u16_at(at)?;
    at += 2 + 2 * formats;
    let count = u16_at(at)?;
    at += 2;
    let mut params = Vec::with_capacity(count);
    for _ in 0..count {
        let length = i32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?);
        at += 4;
        if length < 0 {
            params.push(None);
        } else {
            let value = body.get(at..at + length as usize)?;
            params.push(Some(String::from_utf8_lossy(value).into_owned()));
            at += length as usize;
        }
    }
    Some(params)
}

/// A read that found nothing before its timeout.
fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
}
