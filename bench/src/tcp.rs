//! The TCP clients: request/response on long-lived connections, and connection churn (a new
//! connection for every request, so the filter's per-connection work, conntrack inserts and
//! closes, dominates). They run as this binary re-executed in the client namespace, like the
//! UDP clients of `echo`, and print the same `RESULT {json}` line with the same result types.
//! Every loop is bounded by a count and a deadline, every socket read by a timeout.
//!
//! One round trip is [`TCP_PAYLOAD`] bytes each way with `TCP_NODELAY`, one request in flight
//! per connection. A churn round trip is connect (SYN, SYN-ACK, ACK), the request and reply,
//! and the client's close (FIN from each side); the client closes first, so its side holds the
//! TIME_WAIT, and the rig lets the client namespace reuse those ports (`tcp_tw_reuse`, the
//! full ephemeral range) so thousands of connections a second do not run out of ports.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cpu;
use crate::echo::{LatencyResult, SenderCounts, ThroughputResult};
use crate::echo_std::TCP_PAYLOAD;

/// How each request reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// All requests on one connection per client.
    RequestResponse,
    /// A new connection for every request.
    Churn,
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest any client role runs, whatever its arguments.
const ROLE_DEADLINE: Duration = Duration::from_secs(600);

fn connect(target: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)
        .with_context(|| format!("connect {target}"))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

/// One request and its reply on `stream`; checks the echo.
fn round_trip(stream: &mut TcpStream, seq: u64) -> Result<()> {
    let mut request = [0u8; TCP_PAYLOAD];
    request[..8].copy_from_slice(&seq.to_le_bytes());
    stream.write_all(&request)?;
    let mut reply = [0u8; TCP_PAYLOAD];
    stream.read_exact(&mut reply)?;
    if reply != request {
        bail!("the echo server answered request {seq} with other bytes");
    }
    Ok(())
}

/// One churn round trip: connect, request, reply, close.
fn churn_round_trip(target: SocketAddr, seq: u64) -> Result<()> {
    let mut stream = connect(target)?;
    round_trip(&mut stream, seq)?;
    // Close our side and wait for the server's FIN, so the whole connection (and the filter's
    // work on it) falls inside the measured round trip.
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut rest = [0u8; 1];
    let _ = stream.read(&mut rest);
    Ok(())
}

/// One request in flight: `warmup` unmeasured round trips, then `samples` measured. A failed
/// round trip is counted as lost (and, in request/response mode, the connection reopened); more
/// than a tenth lost is an error.
pub fn latency(
    target: SocketAddr,
    mode: Mode,
    samples: usize,
    warmup: usize,
) -> Result<LatencyResult> {
    let total = warmup + samples;
    let limit = total / 10 + 5;
    let deadline = Instant::now() + ROLE_DEADLINE;
    let mut stream = match mode {
        Mode::RequestResponse => Some(connect(target)?),
        Mode::Churn => None,
    };
    let mut rtts = Vec::with_capacity(samples);
    let mut lost = 0usize;
    for seq in 0..total as u64 {
        if lost > limit || Instant::now() > deadline {
            bail!("TCP echo server unreachable: {lost} of {seq} requests failed");
        }
        let start = Instant::now();
        let outcome = match (&mut stream, mode) {
            (Some(stream), Mode::RequestResponse) => round_trip(stream, seq),
            _ => churn_round_trip(target, seq),
        };
        let elapsed = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        match outcome {
            Ok(()) if seq >= warmup as u64 => rtts.push(elapsed),
            Ok(()) => {}
            Err(_) => {
                lost += 1;
                if mode == Mode::RequestResponse {
                    stream = connect(target).ok();
                }
            }
        }
    }
    Ok(LatencyResult::of(rtts, lost))
}

/// `senders` threads, each with one request in flight, for `secs` seconds: on its own
/// long-lived connection, or on a new connection per request.
pub fn throughput(
    target: SocketAddr,
    mode: Mode,
    senders: usize,
    secs: f64,
) -> Result<ThroughputResult> {
    let duration = Duration::from_secs_f64(secs.clamp(0.1, 600.0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut handles = Vec::new();
    for _ in 0..senders.max(1) {
        let mut stream = match mode {
            Mode::RequestResponse => Some(connect(target)?),
            Mode::Churn => None,
        };
        handles.push(std::thread::spawn(move || -> SenderCounts {
            let cpu_start = cpu::this_thread_ns();
            let (mut sent, mut replies) = (0u64, 0u64);
            // A sender whose connection keeps failing stops after 100 errors in a row rather
            // than spinning until the deadline.
            let mut failures = 0u32;
            while Instant::now() < deadline && failures < 100 {
                sent += 1;
                let outcome = match &mut stream {
                    Some(stream) => round_trip(stream, sent),
                    None => churn_round_trip(target, sent),
                };
                if outcome.is_ok() {
                    replies += 1;
                    failures = 0;
                } else {
                    failures += 1;
                    if mode == Mode::RequestResponse {
                        stream = connect(target).ok();
                        if stream.is_none() {
                            break;
                        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Both modes against the TCP echo server on loopback (no namespaces needed).
    #[test]
    fn clients_measure_a_loopback_tcp_echo_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        crate::echo_std::serve_tcp(addr, 4).unwrap();
        for mode in [Mode::RequestResponse, Mode::Churn] {
            let lat = latency(addr, mode, 100, 10).unwrap();
            assert_eq!((lat.samples, lat.lost), (100, 0), "{mode:?}");
            assert!(lat.p50_ns > 0 && lat.p99_ns >= lat.p50_ns);
            let tput = throughput(addr, mode, 2, 0.2).unwrap();
            assert!(tput.replies > 0 && tput.replies <= tput.sent, "{mode:?}");
        }
    }
}
