//! Echo servers in the server's namespace and probes from the client's: one probe is one new
//! flow (a fresh TCP connection or UDP socket), so each is decided by policy, not by conntrack.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::netns::{SERVER_IP, spawn_in};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Flow {
    pub proto: Proto,
    pub port: u16,
}

impl std::fmt::Display for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}/{}", self.proto, self.port)
    }
}

pub const TCP_PORTS: [u16; 3] = [8080, 7070, 9090];
pub const UDP_PORTS: [u16; 3] = [5353, 7171, 9191];

/// How long a probe waits before calling its flow dropped: long enough that a slow answer on
/// a loaded machine (the CI machine is shared; load averages of 30 on 2 cores were seen) is not
/// mistaken for a drop, short of TCP's first SYN retransmission (1 s).
pub const TIMEOUT: Duration = Duration::from_millis(900);

/// The echo servers; stopped on drop.
pub struct Servers {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Servers {
    pub fn start(ns: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let mut threads = Vec::new();
        for port in TCP_PORTS {
            let (stop, ready) = (stop.clone(), ready_tx.clone());
            threads.push(spawn_in(ns, move || {
                let listener = TcpListener::bind(("0.0.0.0", port)).unwrap();
                listener.set_nonblocking(true).unwrap();
                ready.send(()).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let stop = stop.clone();
                            std::thread::spawn(move || echo(stream, &stop));
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(2)),
                    }
                }
            }));
        }
        for port in UDP_PORTS {
            let (stop, ready) = (stop.clone(), ready_tx.clone());
            threads.push(spawn_in(ns, move || {
                let socket = UdpSocket::bind(("0.0.0.0", port)).unwrap();
                socket
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .unwrap();
                ready.send(()).unwrap();
                let mut buffer = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = socket.recv_from(&mut buffer) {
                        let _ = socket.send_to(&buffer[..n], from);
                    }
                }
            }));
        }
        for _ in 0..TCP_PORTS.len() + UDP_PORTS.len() {
            ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        }
        Self { stop, threads }
    }
}

fn echo(mut stream: TcpStream, stop: &AtomicBool) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buffer = [0u8; 256];
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => {
                if stream.write_all(&buffer[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One probe to the server (call from a thread in the client's namespace): `true` when the flow
/// got through and the echo came back.
pub fn probe(flow: Flow) -> bool {
    probe_to(SERVER_IP, flow)
}

/// One probe to `target`.
pub fn probe_to(target: &str, flow: Flow) -> bool {
    let server = |port: u16| -> SocketAddr { format!("{target}:{port}").parse().unwrap() };
    match flow.proto {
        Proto::Tcp => {
            let Ok(mut stream) = TcpStream::connect_timeout(&server(flow.port), TIMEOUT) else {
                return false;
            };
            let _ = stream.set_read_timeout(Some(TIMEOUT));
            let mut byte = [0u8; 1];
            stream.write_all(b"p").is_ok() && stream.read_exact(&mut byte).is_ok()
        }
        Proto::Udp => {
            let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
            socket.set_read_timeout(Some(TIMEOUT)).unwrap();
            let mut byte = [0u8; 8];
            socket.send_to(b"p", server(flow.port)).is_ok() && socket.recv_from(&mut byte).is_ok()
        }
    }
}

/// One probe to a peer that answers but does not echo TCP data (the tap's guest): a TCP flow
/// passes when the handshake completes, a UDP flow when the datagram's echo comes back.
pub fn handshake_to(target: &str, flow: Flow) -> bool {
    match flow.proto {
        Proto::Tcp => {
            let server: SocketAddr = format!("{target}:{}", flow.port).parse().unwrap();
            TcpStream::connect_timeout(&server, TIMEOUT).is_ok()
        }
        Proto::Udp => probe_to(target, flow),
    }
}

/// A TCP connection from the client's namespace to the server's echo on 8080 (2 s timeouts).
pub fn connect_from(client: &str) -> TcpStream {
    let connection = spawn_in(client, || {
        TcpStream::connect_timeout(
            &format!("{SERVER_IP}:8080").parse().unwrap(),
            Duration::from_secs(2),
        )
        .unwrap()
    })
    .join()
    .unwrap();
    connection
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    connection
}

/// One byte there and back on `stream`.
pub fn round_trip(stream: &mut TcpStream, byte: u8) -> bool {
    let mut back = [0u8; 1];
    stream.write_all(&[byte]).is_ok() && stream.read_exact(&mut back).is_ok() && back[0] == byte
}

/// One probe's record.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub flow: Flow,
    pub start: Instant,
    pub end: Instant,
    pub passed: bool,
}

/// Probes running continuously, one thread per flow, until stopped.
pub struct Prober {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Prober {
    pub fn start(ns: &str, flows: &[Flow]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let threads = flows
            .iter()
            .map(|&flow| {
                let (stop, samples) = (stop.clone(), samples.clone());
                spawn_in(ns, move || {
                    while !stop.load(Ordering::Relaxed) {
                        let start = Instant::now();
                        let passed = probe(flow);
                        let end = Instant::now();
                        samples.lock().unwrap().push(Sample {
                            flow,
                            start,
                            end,
                            passed,
                        });
                        if passed {
                            // Allowed probes take microseconds: 100 a second per flow keeps the
                            // servers' accept queues short on a loaded machine.
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                })
            })
            .collect();
        Self {
            stop,
            samples,
            threads,
        }
    }

    pub fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            thread.join().unwrap();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}
