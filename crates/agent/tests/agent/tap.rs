//! A microVM's guest without the VM: the test process opens the tap's queue
//! (`/dev/net/tun`, `TUNSETIFF` with `IFF_TAP | IFF_NO_PI`, as a VMM does) and speaks Ethernet on
//! it by hand: ARP (it answers requests for its address and resolves its gateway), IPv4 UDP and
//! the TCP handshake (a SYN out, the SYN-ACK back; a SYN in, a SYN-ACK out).
//!
//! Frames are built with porin's own packet builder (`porin_kernel::packet`, which gets lengths
//! and checksums right and is tested against the kernel's programs) and read with the few
//! offsets below: the guest needs to recognise ARP, UDP and TCP flags, nothing more, so no
//! packet crate is added for it.
//!
//! What the guest writes into the tap is what a VM transmits: the host receives it on the tap,
//! so the tap's **ingress** hook (`porin_from_endpoint`, the endpoint's egress policy) decides
//! it. What the host transmits into the tap reaches the guest only past the tap's **egress**
//! hook (`porin_to_endpoint`, ingress policy); the guest records every frame it reads, so a
//! test can tell that a denied frame never reached it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use porin_kernel::packet::{Ipv4, Network, Packet, Transport, ethertype, proto, tcp_flags};

use crate::netns::spawn_in;
use crate::probe::{Proto, TIMEOUT};

/// The guest's MAC address.
pub const GUEST_MAC: [u8; 6] = [0x02, 0x00, 0x0a, 0xe7, 0x03, 0x02];
/// Ports the guest serves (a SYN gets a SYN-ACK, a datagram its echo) are below this; the
/// guest's own probes use source ports from here up.
const FIRST_PROBE_PORT: u16 = 40000;
const BROADCAST: [u8; 6] = [0xff; 6];

/// Opens the queue of tap `device` in network namespace `ns` (the tap must exist there).
#[allow(
    unsafe_code,
    reason = "TUNSETIFF has no safe wrapper in the crates porin uses"
)]
fn open_tap(ns: &str, device: &str) -> File {
    let device = device.to_owned();
    spawn_in(ns, move || {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .expect("/dev/net/tun");
        // struct ifreq: the name, then the flags as the union's first member.
        #[repr(C)]
        struct IfReq {
            name: [u8; 16],
            flags: libc::c_short,
            _pad: [u8; 22],
        }
        let mut request = IfReq {
            name: [0; 16],
            flags: libc::c_short::try_from(libc::IFF_TAP | libc::IFF_NO_PI).unwrap(),
            _pad: [0; 22],
        };
        request.name[..device.len()].copy_from_slice(device.as_bytes());
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq` (40 bytes, the layout above)
        // through the pointer, which is valid for the call; the fd is open.
        let rc = unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&file),
                libc::TUNSETIFF,
                std::ptr::from_mut(&mut request),
            )
        };
        assert_eq!(
            rc,
            0,
            "TUNSETIFF {device}: {}",
            std::io::Error::last_os_error()
        );
        file
    })
    .join()
    .unwrap()
}

/// One IPv4 TCP or UDP frame the guest read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub proto: Proto,
    pub src: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    /// TCP flags (0 for UDP).
    pub flags: u8,
}

#[derive(Default)]
struct Shared {
    received: Vec<Received>,
    gateway_mac: Option<[u8; 6]>,
    arp_requests_answered: usize,
}

/// The guest: a reader thread answering ARP, SYNs and datagrams, and probes of its own.
pub struct Guest {
    tap: Arc<Mutex<File>>,
    ip: Ipv4Addr,
    gateway: Ipv4Addr,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    stop: Arc<AtomicBool>,
    next_port: AtomicU16,
    reader: Option<JoinHandle<()>>,
}

impl Guest {
    /// Attaches to tap `device` of namespace `ns` as the VM with address `ip` behind gateway
    /// `gateway` (the tap's host-side address).
    pub fn start(ns: &str, device: &str, ip: Ipv4Addr, gateway: Ipv4Addr) -> Self {
        let tap = Arc::new(Mutex::new(open_tap(ns, device)));
        let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (tap, shared, stop) = (tap.clone(), shared.clone(), stop.clone());
            std::thread::spawn(move || read_loop(&tap, ip, &shared, &stop))
        };
        Self {
            tap,
            ip,
            gateway,
            shared,
            stop,
            next_port: AtomicU16::new(FIRST_PROBE_PORT),
            reader: Some(reader),
        }
    }

    fn send(&self, frame: &[u8]) {
        send(&self.tap, frame);
    }

    /// Waits until `done` holds for the shared state, or `TIMEOUT`.
    fn wait_for(&self, done: impl Fn(&Shared) -> bool) -> bool {
        let (lock, condvar) = &*self.shared;
        let deadline = Instant::now() + TIMEOUT;
        let mut state = lock.lock().unwrap();
        while !done(&state) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            state = condvar.wait_timeout(state, left).unwrap().0;
        }
        true
    }

    /// The gateway's MAC, resolved with ARP (a request from the guest, the host's reply).
    pub fn gateway_mac(&self) -> [u8; 6] {
        for _ in 0..5 {
            if let Some(mac) = self.shared.0.lock().unwrap().gateway_mac {
                return mac;
            }
            self.send(&arp(1, GUEST_MAC, self.ip, [0; 6], self.gateway, BROADCAST));
            if self.wait_for(|s| s.gateway_mac.is_some()) {
                break;
            }
        }
        self.shared
            .0
            .lock()
            .unwrap()
            .gateway_mac
            .expect("the host answers the guest's ARP request for its gateway")
    }

    /// How many ARP requests of the host the guest answered.
    pub fn arp_requests_answered(&self) -> usize {
        self.shared.0.lock().unwrap().arp_requests_answered
    }

    /// One new flow from the guest to `target`: a TCP SYN (answered by a SYN-ACK; the guest
    /// then resets it) or a UDP datagram (answered by its echo). `true` when the answer came.
    pub fn probe(&self, target: Ipv4Addr, proto: Proto, port: u16) -> bool {
        let gateway = self.gateway_mac();
        let sport = self.next_port.fetch_add(1, Ordering::Relaxed);
        let mut packet = match proto {
            Proto::Tcp => Packet::tcp4(self.ip, sport, target, port),
            Proto::Udp => Packet::udp4(self.ip, sport, target, port).with_payload(b"p"),
        };
        packet.ethernet.src = GUEST_MAC;
        packet.ethernet.dst = gateway;
        self.send(&packet.build());
        let answered = self.wait_for(|s| {
            s.received.iter().any(|r| {
                r.proto == proto
                    && r.src == target
                    && r.sport == port
                    && r.dport == sport
                    && (proto == Proto::Udp
                        || r.flags & (tcp_flags::SYN | tcp_flags::ACK)
                            == tcp_flags::SYN | tcp_flags::ACK)
            })
        });
        if answered && proto == Proto::Tcp {
            // Close the half-open connection: RST with the sequence after the SYN's.
            let mut reset = Packet::new(
                Network::V4(Ipv4::new(self.ip, target)),
                Transport::Tcp {
                    sport,
                    dport: port,
                    flags: tcp_flags::RST,
                    seq: 2,
                    ack: 0,
                },
            );
            reset.ethernet.src = GUEST_MAC;
            reset.ethernet.dst = gateway;
            self.send(&reset.build());
        }
        answered
    }

    /// Whether a TCP segment or UDP datagram from `src` to the guest's `port` ever reached the
    /// guest.
    pub fn saw(&self, src: Ipv4Addr, proto: Proto, port: u16) -> bool {
        self.shared
            .0
            .lock()
            .unwrap()
            .received
            .iter()
            .any(|r| r.src == src && r.proto == proto && r.dport == port)
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

fn send(tap: &Mutex<File>, frame: &[u8]) {
    // One write is one frame on a tap without IFF_NO_PI's header.
    tap.lock().unwrap().write_all(frame).expect("write to tap");
}

/// An ARP packet (`op` 1 request, 2 reply) in an Ethernet frame to `to`.
fn arp(
    op: u16,
    sender_mac: [u8; 6],
    sender_ip: Ipv4Addr,
    target_mac: [u8; 6],
    target_ip: Ipv4Addr,
    to: [u8; 6],
) -> Vec<u8> {
    let mut body = vec![0, 1, 0x08, 0x00, 6, 4];
    body.extend_from_slice(&op.to_be_bytes());
    body.extend_from_slice(&sender_mac);
    body.extend_from_slice(&sender_ip.octets());
    body.extend_from_slice(&target_mac);
    body.extend_from_slice(&target_ip.octets());
    let mut packet = Packet::non_ip(ethertype::ARP, body);
    packet.ethernet.src = sender_mac;
    packet.ethernet.dst = to;
    packet.build()
}

fn read_loop(
    tap: &Mutex<File>,
    ip: Ipv4Addr,
    shared: &(Mutex<Shared>, Condvar),
    stop: &AtomicBool,
) {
    let mut buffer = vec![0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        let read = tap.lock().unwrap().read(&mut buffer);
        let frame = match read {
            Ok(n) => &buffer[..n],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            Err(e) => panic!("read from tap: {e}"),
        };
        if let Some(answer) = handle(frame, ip, shared) {
            send(tap, &answer);
        }
        shared.1.notify_all();
    }
}

fn field<const N: usize>(frame: &[u8], at: usize) -> Option<[u8; N]> {
    frame.get(at..at + N)?.try_into().ok()
}

/// Records one frame; returns the guest's answer to it, if any.
fn handle(frame: &[u8], ip: Ipv4Addr, shared: &(Mutex<Shared>, Condvar)) -> Option<Vec<u8>> {
    let peer_mac: [u8; 6] = field(frame, 6)?;
    match u16::from_be_bytes(field(frame, 12)?) {
        ethertype::ARP => {
            let op = u16::from_be_bytes(field(frame, 20)?);
            let sender_mac: [u8; 6] = field(frame, 22)?;
            let sender_ip = Ipv4Addr::from(field::<4>(frame, 28)?);
            let target_ip = Ipv4Addr::from(field::<4>(frame, 38)?);
            let mut state = shared.0.lock().unwrap();
            match op {
                1 if target_ip == ip => {
                    state.arp_requests_answered += 1;
                    Some(arp(2, GUEST_MAC, ip, sender_mac, sender_ip, sender_mac))
                }
                2 if target_ip == ip => {
                    state.gateway_mac = Some(sender_mac);
                    None
                }
                _ => None,
            }
        }
        ethertype::IPV4 => {
            let ihl = usize::from(frame.get(14)? & 0x0f) * 4;
            let protocol = *frame.get(23)?;
            let src = Ipv4Addr::from(field::<4>(frame, 26)?);
            if Ipv4Addr::from(field::<4>(frame, 30)?) != ip {
                return None;
            }
            let l4 = 14 + ihl;
            let sport = u16::from_be_bytes(field(frame, l4)?);
            let dport = u16::from_be_bytes(field(frame, l4 + 2)?);
            let (proto, flags) = match protocol {
                proto::TCP => (Proto::Tcp, *frame.get(l4 + 13)?),
                proto::UDP => (Proto::Udp, 0),
                _ => return None,
            };
            shared.0.lock().unwrap().received.push(Received {
                proto,
                src,
                sport,
                dport,
                flags,
            });
            if dport >= FIRST_PROBE_PORT {
                return None;
            }
            // A service port: a SYN gets a SYN-ACK, a datagram its echo.
            let transport = match proto {
                Proto::Tcp if flags == tcp_flags::SYN => {
                    let seq = u32::from_be_bytes(field(frame, l4 + 4)?);
                    Transport::Tcp {
                        sport: dport,
                        dport: sport,
                        flags: tcp_flags::SYN | tcp_flags::ACK,
                        seq: 7,
                        ack: seq.wrapping_add(1),
                    }
                }
                Proto::Udp => Transport::Udp {
                    sport: dport,
                    dport: sport,
                },
                Proto::Tcp => return None,
            };
            let mut answer = Packet::new(Network::V4(Ipv4::new(ip, src)), transport);
            if proto == Proto::Udp {
                answer = answer.with_payload(b"p");
            }
            answer.ethernet.src = GUEST_MAC;
            answer.ethernet.dst = peer_mac;
            Some(answer.build())
        }
        _ => None,
    }
}
