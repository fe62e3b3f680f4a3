//! A TCP proxy between a server and what connects to it, that the test controls: it passes bytes
//! on, delays them, or cuts the link (every connection through it closed, new ones refused), as a
//! network partition or a slow link would. Real TCP on loopback, real libpq on both sides.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does to its link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Pass,
    /// Every chunk of bytes waits this long, each way.
    Delay(Duration),
    /// Cut: connections through it are closed, new ones closed at once.
    Cut,
}

struct State {
    /// 0: pass; u64::MAX: cut; else the delay in ms.
    link: AtomicU64,
    /// Both ends of every live connection, to close them at a cut.
    live: Mutex<Vec<(TcpStream, TcpStream)>>,
    stop: AtomicBool,
}

pub struct Proxy {
    pub port: u16,
    state: Arc<State>,
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 to `target_port` there.
    pub fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", super::free_port())).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            link: AtomicU64::new(0),
            live: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let s = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if s.stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = client else { continue };
                if s.link.load(Ordering::Relaxed) == u64::MAX {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", target_port)) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                if let (Ok(c), Ok(sv)) = (client.try_clone(), server.try_clone()) {
                    s.live.lock().unwrap().push((c, sv));
                }
                for (from, to) in [
                    (client.try_clone(), server.try_clone()),
                    (server.try_clone(), client.try_clone()),
                ] {
                    let (Ok(from), Ok(to)) = (from, to) else {
                        continue;
                    };
                    let s = s.clone();
                    std::thread::spawn(move || pump(from, to, &s));
                }
            }
        });
        Proxy { port, state }
    }

    pub fn set(&self, link: Link) {
        let value = match link {
            Link::Pass => 0,
            Link::Delay(d) => (d.as_millis() as u64).clamp(1, u64::MAX - 1),
            Link::Cut => u64::MAX,
        };
        self.state.link.store(value, Ordering::Relaxed);
        if link == Link::Cut {
            for (a, b) in self.state.live.lock().unwrap().drain(..) {
                let _ = a.shutdown(Shutdown::Both);
                let _ = b.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Relaxed);
        self.set(Link::Cut);
        // Wakes the accepting thread, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Copies `from` to `to` until either closes, each chunk after the delay in force.
fn pump(mut from: TcpStream, mut to: TcpStream, state: &State) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        match state.link.load(Ordering::Relaxed) {
            0 => {}
            u64::MAX => break,
            ms => std::thread::sleep(Duration::from_millis(ms)),
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
