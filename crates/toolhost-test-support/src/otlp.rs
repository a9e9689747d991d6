//! An OTLP/HTTP collector in the test's own process, on a loopback port:
//! it answers every request with 200, counts the batches and their bytes,
//! and, when asked to, keeps the bodies, so a test can tell what left the
//! host (`Collector::keeping`) and a benchmark what it cost to send
//! (`Collector::start`, which keeps nothing).
//!
//! ```no_run
//! let collector = toolhost_test_support::otlp::Collector::keeping();
//! // … export to collector.url(), shut the exporter down, then:
//! assert!(collector.received_text().contains("execute_tool"));
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The collector; it serves until the process ends.
pub struct Collector {
    port: u16,
    seen: Arc<Seen>,
}

#[derive(Default)]
struct Seen {
    batches: AtomicU64,
    bytes: AtomicU64,
    /// The bodies, when kept.
    bodies: Option<Mutex<Vec<Vec<u8>>>>,
}

impl Collector {
    /// A collector that counts and keeps nothing.
    pub fn start() -> Collector {
        Collector::serve(Seen::default())
    }

    /// A collector that keeps every body it receives.
    pub fn keeping() -> Collector {
        Collector::serve(Seen {
            bodies: Some(Mutex::new(Vec::new())),
            ..Seen::default()
        })
    }

    fn serve(seen: Seen) -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let seen = Arc::new(seen);
        let counts = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().map_while(Result::ok) {
                let seen = counts.clone();
                std::thread::spawn(move || answer(stream, &seen));
            }
        });
        Collector { port, seen }
    }

    /// Batches (requests) answered and body bytes received so far.
    pub fn received(&self) -> (u64, u64) {
        (
            self.seen.batches.load(Ordering::Relaxed),
            self.seen.bytes.load(Ordering::Relaxed),
        )
    }

    /// Every body kept so far, as text (protobuf's strings show as they
    /// are); empty unless made by [`Collector::keeping`].
    pub fn received_text(&self) -> String {
        self.seen.bodies.as_ref().map_or_else(String::new, |b| {
            b.lock()
                .iter()
                .map(|body| String::from_utf8_lossy(body).into_owned())
                .collect()
        })
    }

    /// Its base URL (`http://127.0.0.1:PORT`; the exporter adds `/v1/traces`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

/// Answers the requests of one connection.
fn answer(stream: std::net::TcpStream, seen: &Seen) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // The request line and headers, then the body.
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        seen.batches.fetch_add(1, Ordering::Relaxed);
        seen.bytes.fetch_add(length as u64, Ordering::Relaxed);
        if let Some(bodies) = &seen.bodies {
            bodies.lock().push(body);
        }
        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        if reader.get_mut().write_all(reply).is_err() {
            return;
        }
    }
}
