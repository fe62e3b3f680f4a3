//! A directory served over HTTP on 127.0.0.1 (Python's http.server), for the tests that play an
//! archive or an apt repository: the Debian roots share the host's network, so they reach it too.

use super::*;
use std::process::Child;

pub struct Served {
    server: Child,
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
}

impl Served {
    /// Serves `dir`; each request is logged to `log` ("GET /path HTTP/1.1" 200), so a test can
    /// check that the tool it drives really asked this server.
    pub fn start(dir: &Path, log: &Path) -> Served {
        let port = free_port();
        let server = Command::new("python3")
            .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--directory")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(fs::File::create(log).unwrap())
            .spawn()
            .expect("python3 runs");
        poll(Duration::from_secs(20), Duration::from_millis(50), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).map(|_| ()).map_err(|e| {
                format!("the server of {} on port {port} does not answer: {e}", dir.display())
            })
        });
        Served { server, url: format!("http://127.0.0.1:{port}") }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}
