//! The UDP echo server and the two clients (latency, throughput). They run as this binary
//! re-executed under `nsenter --net=/run/netns/NAME` (see `rig`), and print one `RESULT {json}`
//! line. Every loop is bounded by a count and a deadline, every socket read by a timeout.

use std::io::Write;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::cpu;
use crate::stats::percentile;

/// What the server prints once its socket is bound (one marker for every server).
pub use crate::echo_std::READY;
/// Prefix of a client's result line.
pub const RESULT: &str = "RESULT ";
/// Request/reply payload size (bytes; a sequence number and padding).
const PAYLOAD: usize = 32;

/// Echo server on `addr` with `threads` threads sharing one socket. Exits after `max_secs`, or
/// when its parent (the benchmark) is gone.
pub fn serve(addr: SocketAddr, threads: usize, max_secs: u64) -> Result<()> {
    let socket = Arc::new(UdpSocket::bind(addr).with_context(|| format!("bind {addr}"))?);
    socket.set_read_timeout(Some(Duration::from_millis(200)))?;
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    let parent = std::os::unix::process::parent_id();
    let stop = Arc::new(AtomicBool::new(false));
    println!("{READY}");
    std::io::stdout().flush()?;
    let mut handles = Vec::new();
    for _ in 0..threads.max(1) {
        let socket = Arc::clone(&socket);
        let stop = Arc::clone(&stop);
        handles.push(std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                match socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        let _ = socket.send_to(&buf[..n], from);
                    }
                    Err(_) => {
                        // Idle: check the bounds.
                        if Instant::now() > deadline
                            || std::os::unix::process::parent_id() != parent
                        {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
            }
        }));
    }
    for handle in handles {
        let _ = handle.join();
    }
    Ok(())
}

/// Result of the latency client.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyResult {
    /// Round trips measured.
    pub samples: usize,
    /// Requests without a reply within the timeout.
    pub lost: usize,
    /// Median round trip (ns).
    pub p50_ns: u64,
    /// 99th percentile (ns).
    pub p99_ns: u64,
    /// Mean (ns).
    pub mean_ns: u64,
}

fn encode(buf: &mut [u8; PAYLOAD], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
}

fn decode(buf: &[u8]) -> Option<u64> {
    buf.get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
}

fn connected_socket(target: SocketAddr, timeout: Duration) -> Result<UdpSocket> {
    let socket = UdpSocket::bind("0.0.0.0:0")?;
    socket.connect(target)?;
    socket.set_read_timeout(Some(timeout))?;
    Ok(socket)
}

/// One request in flight at a time: `warmup` unmeasured round trips, then `samples` measured.
/// Gives up (error) when more than a tenth of the requests are lost.
pub fn latency(target: SocketAddr, samples: usize, warmup: usize) -> Result<LatencyResult> {
    let socket = connected_socket(target, Duration::from_millis(200))?;
    let mut rtts = Vec::with_capacity(samples);
    let mut lost = 0usize;
    let mut buf = [0u8; PAYLOAD];
    let mut reply = [0u8; 2048];
    let total = warmup + samples;
    let limit = total / 10 + 5;
    let deadline = Instant::now() + Duration::from_secs(120);
    for seq in 0..total as u64 {
        if lost > limit || Instant::now() > deadline {
            bail!("echo server unreachable: {lost} of {seq} requests lost");
        }
        encode(&mut buf, seq);
        let start = Instant::now();
        socket.send(&buf)?;
        // Skip late replies of earlier (timed-out) requests.
        let answered = loop {
            match socket.recv(&mut reply) {
                Ok(n) if decode(&reply[..n]) == Some(seq) => break true,
                Ok(_) => {}
                Err(_) => break false,
            }
        };
        let elapsed = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if !answered {
            lost += 1;
        } else if seq >= warmup as u64 {
            rtts.push(elapsed);
        }
    }
    Ok(LatencyResult::of(rtts, lost))
}

impl LatencyResult {
    /// The percentiles and mean of the measured round trips (ns).
    pub fn of(mut rtts: Vec<u64>, lost: usize) -> Self {
        rtts.sort_unstable();
        let mean = if rtts.is_empty() {
            0
        } else {
            rtts.iter().sum::<u64>() / rtts.len() as u64
        };
        Self {
            samples: rtts.len(),
            lost,
            p50_ns: percentile(&rtts, 50.0),
            p99_ns: percentile(&rtts, 99.0),
            mean_ns: mean,
        }
    }
}

/// What one sender thread returns: requests sent, replies received, its CPU ns.
pub type SenderCounts = (u64, u64, u64);

impl ThroughputResult {
    /// Joins the sender threads started at `start` and adds up their counts.
    pub fn join(
        handles: Vec<std::thread::JoinHandle<SenderCounts>>,
        start: Instant,
    ) -> Result<Self> {
        let mut result = Self {
            replies: 0,
            sent: 0,
            elapsed_ns: 0,
            cpu_ns: 0,
        };
        for handle in handles {
            let (sent, replies, cpu_ns) = handle
                .join()
                .map_err(|_| anyhow::anyhow!("a sender thread panicked"))?;
            result.sent += sent;
            result.replies += replies;
            result.cpu_ns += cpu_ns;
        }
        result.elapsed_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Ok(result)
    }
}

/// Result of the throughput client.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// Replies received (completed round trips).
    pub replies: u64,
    /// Requests sent.
    pub sent: u64,
    /// Measured wall time (ns).
    pub elapsed_ns: u64,
    /// CPU time of the client's sender threads during the run (ns).
    pub cpu_ns: u64,
}

/// `senders` threads, each with its own socket (its own flow), keep up to `window` requests in
/// flight for `secs` seconds: send a window, collect its replies (each read bounded by a short
/// timeout), repeat.
pub fn throughput(
    target: SocketAddr,
    senders: usize,
    window: usize,
    secs: f64,
) -> Result<ThroughputResult> {
    let duration = Duration::from_secs_f64(secs.clamp(0.1, 600.0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut handles = Vec::new();
    for _ in 0..senders.max(1) {
        let socket = connected_socket(target, Duration::from_millis(20))?;
        handles.push(std::thread::spawn(move || -> SenderCounts {
            let cpu_start = cpu::this_thread_ns();
            let (mut sent, mut replies) = (0u64, 0u64);
            let mut buf = [0u8; PAYLOAD];
            let mut reply = [0u8; 2048];
            while Instant::now() < deadline {
                let mut in_flight = 0usize;
                for _ in 0..window {
                    encode(&mut buf, sent);
                    if socket.send(&buf).is_ok() {
                        sent += 1;
                        in_flight += 1;
                    }
                }
                while in_flight > 0 {
                    match socket.recv(&mut reply) {
                        Ok(_) => {
                            replies += 1;
                            in_flight -= 1;
                        }
                        Err(_) => break,
                    }
                }
            }
            (
                sent,
                replies,
                cpu::this_thread_ns().saturating_sub(cpu_start),
            )
        }));
    }
    ThroughputResult::join(handles, start)
}

/// Prints a client's result line.
pub fn print_result<T: Serialize>(result: &T) -> Result<()> {
    println!("{RESULT}{}", serde_json::to_string(result)?);
    std::io::stdout().flush()?;
    Ok(())
}

/// Finds and parses the result line in a client's stdout.
pub fn parse_result<T: for<'de> Deserialize<'de>>(stdout: &str) -> Result<T> {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix(RESULT))
        .with_context(|| format!("no result line in client output: {stdout}"))?;
    Ok(serde_json::from_str(line)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The server and both clients on loopback (no namespaces needed).
    #[test]
    fn clients_measure_a_loopback_echo_server() {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        std::thread::spawn(move || serve(addr, 1, 20));
        std::thread::sleep(Duration::from_millis(100));
        let lat = latency(addr, 200, 20).unwrap();
        assert_eq!(lat.samples + lat.lost, 200);
        assert!(lat.p50_ns > 0 && lat.p99_ns >= lat.p50_ns);
        let tput = throughput(addr, 2, 8, 0.3).unwrap();
        assert!(tput.replies > 0 && tput.replies <= tput.sent);
        assert!(tput.cpu_ns > 0);
        let line = format!("noise\n{RESULT}{}\n", serde_json::to_string(&lat).unwrap());
        let parsed: LatencyResult = parse_result(&line).unwrap();
        assert_eq!(parsed.p50_ns, lat.p50_ns);
    }
}
