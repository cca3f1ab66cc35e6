//! Echo servers written against `std` alone, so the same file is both a module of porin-bench
//! (the TCP echo server of the namespace rigs) and, compiled on its own with the musl target,
//! the static echo binary inside the microVM guest (`vm.rs` writes this file and a three-line
//! `main` into its private directory and runs `rustc --target x86_64-unknown-linux-musl`).
//! Nothing here may name another module of porin-bench.
//!
//! A static binary of our own rather than busybox `nc`: `nc -e cat` forks and execs `cat` for
//! every connection, which under TCG costs milliseconds and would make the churn figures measure
//! `fork`; `nc` has no UDP echo server either.
//!
//! Every server is bounded: a watchdog ends the process after `max_secs`, or as soon as the
//! process that started it is gone (the guest has no parent to lose: it runs as init, and the
//! rig ends it by killing QEMU).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a server prints once its sockets are bound (the rigs wait for it).
pub const READY: &str = "PORIN_BENCH_READY";

/// Bytes per request and per reply of the TCP workloads (the UDP echo's payload size).
pub const TCP_PAYLOAD: usize = 32;

/// Ends the process after `max_secs`, or when the parent process changes (the benchmark is
/// gone). `check_parent` is false for the guest's init.
pub fn watchdog(max_secs: u64, check_parent: bool) {
    let parent = std::os::unix::process::parent_id();
    let deadline = Instant::now() + Duration::from_secs(max_secs);
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if Instant::now() > deadline
                || (check_parent && std::os::unix::process::parent_id() != parent)
            {
                std::process::exit(0);
            }
        }
    });
}

/// TCP echo on `addr`: `threads` threads accept connections from one listener, and each
/// handles its connection to the end: read exactly [`TCP_PAYLOAD`] bytes, write them back,
/// repeat until the peer closes. A long-lived request/response connection therefore holds one
/// thread; connection churn cycles through the pool. Returns once bound (the threads serve).
pub fn serve_tcp(addr: SocketAddr, threads: usize) -> std::io::Result<()> {
    let listener = Arc::new(TcpListener::bind(addr)?);
    for _ in 0..threads.max(1) {
        let listener = Arc::clone(&listener);
        std::thread::spawn(move || {
            loop {
                match listener.accept() {
                    Ok((stream, _)) => handle_tcp(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
    }
    Ok(())
}

fn handle_tcp(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    // A stuck peer cannot hold a pool thread for long.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut buf = [0u8; TCP_PAYLOAD];
    while stream.read_exact(&mut buf).is_ok() {
        if stream.write_all(&buf).is_err() {
            break;
        }
    }
}

#[allow(
    dead_code,
    reason = "the guest's UDP server; porin-bench's own is `echo::serve`"
)]
/// UDP echo on `addr` with `threads` threads sharing the socket (the guest's; porin-bench's own
/// UDP server is `echo::serve`, unchanged so the UDP figures stay comparable). Returns once bound.
pub fn serve_udp(addr: SocketAddr, threads: usize) -> std::io::Result<()> {
    let socket = Arc::new(UdpSocket::bind(addr)?);
    for _ in 0..threads.max(1) {
        let socket = Arc::clone(&socket);
        std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            loop {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
        });
    }
    Ok(())
}

/// Prints [`READY`] and parks the calling thread until the watchdog ends the process.
pub fn announce_and_wait() -> ! {
    println!("{READY}");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
