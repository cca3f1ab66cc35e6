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
/// when its parent (the benchmark) is gone. `batch` > 1: each thread takes up to `batch`
/// datagrams per `recvmmsg(2)` and answers them with one `sendmmsg(2)` (the batched mode);
/// 1: one `recvfrom`/`sendto` per datagram (the rig's default).
pub fn serve(addr: SocketAddr, threads: usize, max_secs: u64, batch: usize) -> Result<()> {
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
            let mut batched = mmsg::Batch::new(batch.max(1));
            while !stop.load(Ordering::Relaxed) {
                let received = if batch > 1 {
                    batched.echo(&socket).map(drop)
                } else {
                    socket
                        .recv_from(&mut buf)
                        .map(|(n, from)| drop(socket.send_to(&buf[..n], from)))
                };
                match received {
                    Ok(()) => {}
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
/// timeout), repeat. `batched`: each window goes out in one `sendmmsg(2)` and the replies come
/// back by `recvmmsg(2)` (as many as have arrived per call), the batched mode; otherwise one
/// `send`/`recv` per datagram.
pub fn throughput(
    target: SocketAddr,
    senders: usize,
    window: usize,
    secs: f64,
    batched: bool,
) -> Result<ThroughputResult> {
    let duration = Duration::from_secs_f64(secs.clamp(0.1, 600.0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut handles = Vec::new();
    for _ in 0..senders.max(1) {
        let socket = connected_socket(target, Duration::from_millis(20))?;
        handles.push(std::thread::spawn(move || -> SenderCounts {
            let cpu_start = cpu::this_thread_ns();
            let (sent, replies) = if batched {
                windows_batched(&socket, window, deadline)
            } else {
                windows(&socket, window, deadline)
            };
            (
                sent,
                replies,
                cpu::this_thread_ns().saturating_sub(cpu_start),
            )
        }));
    }
    ThroughputResult::join(handles, start)
}

/// One sender of [`throughput`], a datagram per call: (sent, replies).
fn windows(socket: &UdpSocket, window: usize, deadline: Instant) -> (u64, u64) {
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
    (sent, replies)
}

/// One sender of [`throughput`] in the batched mode: (sent, replies).
fn windows_batched(socket: &UdpSocket, window: usize, deadline: Instant) -> (u64, u64) {
    let (mut sent, mut replies) = (0u64, 0u64);
    let window = window.clamp(1, mmsg::MAX_BATCH);
    let mut requests = vec![[0u8; PAYLOAD]; window];
    let mut batch = mmsg::Batch::new(window);
    while Instant::now() < deadline {
        for (i, request) in requests.iter_mut().enumerate() {
            encode(request, sent + i as u64);
        }
        // Only what the kernel took is in flight.
        let mut in_flight = mmsg::send_connected(socket, &requests).unwrap_or(0);
        sent += in_flight as u64;
        while in_flight > 0 {
            match batch.receive(socket, in_flight) {
                Ok(n) => {
                    replies += n as u64;
                    in_flight = in_flight.saturating_sub(n);
                }
                Err(_) => break,
            }
        }
    }
    (sent, replies)
}

/// `recvmmsg(2)` / `sendmmsg(2)` for the batched mode (std has neither).
#[allow(
    unsafe_code,
    reason = "recvmmsg(2) and sendmmsg(2) on a socket this process owns, with buffers that \
              outlive the call; see each block"
)]
mod mmsg {
    use std::io;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    /// Largest batch (datagrams per call).
    pub const MAX_BATCH: usize = 64;
    const BUF: usize = 2048;

    /// Receive buffers, peer addresses and headers for up to `len` datagrams per call.
    pub struct Batch {
        bufs: Vec<[u8; BUF]>,
        names: Vec<libc::sockaddr_storage>,
        iovs: Vec<libc::iovec>,
        msgs: Vec<libc::mmsghdr>,
    }

    impl Batch {
        pub fn new(len: usize) -> Self {
            let len = len.clamp(1, MAX_BATCH);
            Self {
                bufs: vec![[0u8; BUF]; len],
                // SAFETY: sockaddr_storage, iovec and mmsghdr are plain C structs for which
                // all-zero bytes are a valid value (null pointers, zero lengths).
                names: vec![unsafe { std::mem::zeroed() }; len],
                iovs: vec![unsafe { std::mem::zeroed() }; len],
                msgs: vec![unsafe { std::mem::zeroed() }; len],
            }
        }

        /// Points header `i` at buffer `i` (`len` bytes of it) and, with `name`, at address
        /// slot `i` (`name_len` bytes of it).
        fn aim(&mut self, i: usize, len: usize, name: Option<u32>) {
            self.iovs[i] = libc::iovec {
                iov_base: self.bufs[i].as_mut_ptr().cast(),
                iov_len: len,
            };
            let hdr = &mut self.msgs[i].msg_hdr;
            hdr.msg_iov = &raw mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = std::ptr::null_mut();
            hdr.msg_controllen = 0;
            hdr.msg_flags = 0;
            match name {
                Some(name_len) => {
                    hdr.msg_name = (&raw mut self.names[i]).cast();
                    hdr.msg_namelen = name_len;
                }
                None => {
                    hdr.msg_name = std::ptr::null_mut();
                    hdr.msg_namelen = 0;
                }
            }
            self.msgs[i].msg_len = 0;
        }

        fn recv(&mut self, socket: &UdpSocket, max: usize, names: bool) -> io::Result<usize> {
            let max = max.clamp(1, self.msgs.len());
            let name_len = u32::try_from(std::mem::size_of::<libc::sockaddr_storage>())
                .map_err(io::Error::other)?;
            for i in 0..max {
                self.aim(i, BUF, names.then_some(name_len));
            }
            let count = u32::try_from(max).map_err(io::Error::other)?;
            // SAFETY: `msgs[..max]` point at `iovs`, `bufs` and `names` of `self`, which live
            // and are not otherwise borrowed for the call; the kernel writes at most the
            // lengths given. MSG_WAITFORONE: block (up to SO_RCVTIMEO) for the first
            // datagram only.
            let n = unsafe {
                libc::recvmmsg(
                    socket.as_raw_fd(),
                    self.msgs.as_mut_ptr(),
                    count,
                    libc::MSG_WAITFORONE,
                    std::ptr::null_mut(),
                )
            };
            usize::try_from(n).map_err(|_| io::Error::last_os_error())
        }

        /// Receives up to `max` datagrams on a connected socket (at least one, or the
        /// socket's read timeout); returns how many.
        pub fn receive(&mut self, socket: &UdpSocket, max: usize) -> io::Result<usize> {
            self.recv(socket, max, false)
        }

        /// Receives what has arrived (up to the batch) and sends each datagram back to its
        /// sender with one `sendmmsg(2)`; returns how many were echoed.
        pub fn echo(&mut self, socket: &UdpSocket) -> io::Result<usize> {
            let n = self.recv(socket, self.msgs.len(), true)?;
            for i in 0..n {
                let len = self.msgs[i].msg_len as usize;
                let name_len = self.msgs[i].msg_hdr.msg_namelen;
                self.aim(i, len, Some(name_len));
            }
            send(socket, &mut self.msgs[..n])
        }
    }

    fn send(socket: &UdpSocket, msgs: &mut [libc::mmsghdr]) -> io::Result<usize> {
        if msgs.is_empty() {
            return Ok(0);
        }
        let count = u32::try_from(msgs.len()).map_err(io::Error::other)?;
        // SAFETY: every header points at buffers (and addresses) owned by the caller that
        // outlive the call; the kernel only reads them.
        let n = unsafe { libc::sendmmsg(socket.as_raw_fd(), msgs.as_mut_ptr(), count, 0) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Sends every payload on a connected socket with one `sendmmsg(2)`; returns how many the
    /// kernel took.
    pub fn send_connected<const N: usize>(
        socket: &UdpSocket,
        payloads: &[[u8; N]],
    ) -> io::Result<usize> {
        let mut iovs: Vec<libc::iovec> = payloads
            .iter()
            .map(|p| libc::iovec {
                // sendmmsg only reads through the pointer.
                iov_base: p.as_ptr().cast_mut().cast(),
                iov_len: N,
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: all-zero bytes are a valid mmsghdr (no name, no control data).
                let mut msg: libc::mmsghdr = unsafe { std::mem::zeroed() };
                msg.msg_hdr.msg_iov = iov;
                msg.msg_hdr.msg_iovlen = 1;
                msg
            })
            .collect();
        send(socket, &mut msgs)
    }
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

    /// A server taking `batch` datagrams per call on a free loopback port, started.
    fn loopback_server(batch: usize) -> SocketAddr {
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        std::thread::spawn(move || serve(addr, 1, 20, batch));
        std::thread::sleep(Duration::from_millis(100));
        addr
    }

    /// The server and both clients on loopback (no namespaces needed).
    #[test]
    fn clients_measure_a_loopback_echo_server() {
        let addr = loopback_server(1);
        let lat = latency(addr, 200, 20).unwrap();
        assert_eq!(lat.samples + lat.lost, 200);
        assert!(lat.p50_ns > 0 && lat.p99_ns >= lat.p50_ns);
        let tput = throughput(addr, 2, 8, 0.3, false).unwrap();
        assert!(tput.replies > 0 && tput.replies <= tput.sent);
        assert!(tput.cpu_ns > 0);
        let batched = throughput(addr, 2, 8, 0.3, true).unwrap();
        assert!(batched.replies > 0 && batched.replies <= batched.sent);
        let line = format!("noise\n{RESULT}{}\n", serde_json::to_string(&lat).unwrap());
        let parsed: LatencyResult = parse_result(&line).unwrap();
        assert_eq!(parsed.p50_ns, lat.p50_ns);
    }

    /// The batched server answers both clients, every reply to its own sender.
    #[test]
    fn batched_server_echoes_to_each_sender() {
        let addr = loopback_server(16);
        let lat = latency(addr, 200, 20).unwrap();
        assert_eq!(lat.lost, 0);
        let batched = throughput(addr, 3, 16, 0.3, true).unwrap();
        assert!(batched.replies > 0 && batched.replies <= batched.sent);
        // Most of the windows come back (each reply reached the sender that asked).
        assert!(batched.replies * 2 > batched.sent, "{batched:?}");
    }
}
