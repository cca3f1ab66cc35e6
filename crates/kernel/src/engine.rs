//! The kernel engine of `porin test` (`--engine kernel|both`,
//! `docs/policy-tests.md`).
//!
//! The reference engine decides a case by evaluating the compiled map
//! state in user space. This engine decides it the way the datapath does:
//! it loads porin's object into the running kernel, writes the compiled
//! ipcache and, one endpoint at a time, the endpoint's policy map (through
//! the object's atomic A/B switch, `DATAPATH.md` §2.3), and runs a crafted
//! packet through the program with `BPF_PROG_TEST_RUN`.
//!
//! A case's verdict is built from the same checks the reference makes:
//! the egress check at the source when it is an endpoint (policy of the
//! source, `porin_from_endpoint`, packet source = the endpoint's address,
//! destination = the peer's) and the ingress check at the destination when
//! it is an endpoint (its policy, `porin_to_endpoint`, the same packet).
//! Deny if either drops; redirect if none drops and one carries the proxy
//! redirect mark; allow otherwise. Conntrack is reset before every check:
//! policy is defined for *new* flows (a reply would skip policy, §2.4).
//!
//! # Addresses of peers
//!
//! - An endpoint sends from / receives at its own address of the packet's
//!   family.
//! - An IP peer uses that address; the kernel's ipcache LPM gives it its
//!   identity (the reference uses the compiler's LPM over the same table).
//! - `world` (and `world-ipv4`, `world-ipv6`) is a real outside address
//!   per family, the one the reference decides with
//!   ([`porin_compiler::explain::WorldPeer`]): outside every endpoint and
//!   policy prefix, so the kernel's ipcache LPM gives it what the compiled
//!   `0.0.0.0/0` / `::/0` routes hold, world-ipv4 (9) / world-ipv6 (10),
//!   as in a dual-stack Cilium (`daemon/cmd/hostips-sync.go`). No
//!   engine-local entry is added for it: the compiled ipcache decides.
//! - Another entity word (`host`, `remote-node`, ...) is a reserved
//!   identity without an address. The engine gives each one a *test
//!   address* and adds an engine-local ipcache entry for it:
//!   `100.64.B.<identity>/32` and `100::B:<identity>/128` (shared address
//!   space RFC 6598 and the discard-only prefix RFC 6666, which no cluster
//!   uses for pods), where the block `B` is the first of 0..=255 in which
//!   no endpoint, IP peer or world address of the file lives.
//!
//! # Families
//!
//! Each side offers the families it has addresses in (an endpoint: its
//! addresses; an IP: its own; a reserved entity: both; the world: those it
//! has an address in), as [`porin_compiler::explain::Flow::families`]
//! says. The case runs in every family both sides offer (IPv4 first); ICMP
//! runs only over IPv4 and ICMPv6 only over IPv6. No common family is an
//! error of the case. Families must agree: a world flow whose IPv4 and
//! IPv6 packets get different verdicts fails, with both verdicts shown.
//!
//! # Packets
//!
//! TCP SYN / UDP / SCTP from source port 40000 (40001 when the
//! destination port is 40000); ICMP and ICMPv6 with code 0 and an echo
//! identifier. Two datapath shortcuts are avoided on purpose, because the
//! policy language cannot express them: IPv4 ICMP type 3 *code 4* (always
//! passes, `allow_icmp_frag_needed`) is never sent (the code is 0), and
//! IPv6 packets carry hop limit 64, so ICMPv6 neighbour discovery
//! (types 133-137) goes through policy instead of the hop-limit-255 NDP
//! pass (`DATAPATH.md` §4).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Instant;

use ipnetwork::IpNetwork;
use porin_compiler::compile::Compiled;
pub use porin_compiler::explain::Family;
use porin_compiler::explain::{
    Flow, FlowVerdict, Peer, describe_family_verdicts, evaluate, explain,
};
use porin_compiler::limits::Limits;
use porin_compiler::mapstate;
use porin_ebpf::compiled::{CompiledMapsError, MapContents};
use porin_ebpf::{EmitError, ObjectConfig, POLICY_MAP_MAX, emit};
use porin_policytest::{
    self as policytest, DecidedCase, Engine, FileResult, ResolvedCase, TestReport,
};
use thiserror::Error;

use crate as kernel;
use crate::packet::{Ipv4, Ipv6, Network, Packet, Transport, echo_rest};
use crate::{Counter, Datapath, KernelError, KernelVerdict};

/// Source port of crafted TCP/UDP/SCTP packets.
pub const SOURCE_PORT: u16 = 40000;
/// Echo identifier of crafted ICMP packets.
pub const ECHO_IDENTIFIER: u16 = 0x5043;

const IP_TCP: u8 = 6;
const IP_UDP: u8 = 17;
const IP_SCTP: u8 = 132;
const IP_ICMP: u8 = 1;
const IP_ICMPV6: u8 = 58;

/// Why the kernel engine could not decide.
#[derive(Debug, Error)]
pub enum EngineError {
    /// This process may not use eBPF (not root / no `CAP_BPF`).
    #[error("the kernel engine needs eBPF (run as root, or with CAP_BPF and CAP_NET_ADMIN): {0}")]
    Unavailable(KernelError),
    /// A `bpf(2)` operation failed.
    #[error("kernel: {0}")]
    Kernel(#[from] KernelError),
    /// The object could not be emitted.
    #[error("emitting the datapath object: {0}")]
    Emit(#[from] EmitError),
    /// The compilation cannot be written into the maps.
    #[error("map contents: {0}")]
    Maps(#[from] CompiledMapsError),
    /// [`KernelEngine::check`] before [`KernelEngine::load`].
    #[error("no compilation is loaded into the kernel engine")]
    NothingLoaded,
    /// An endpoint index outside the compilation.
    #[error("endpoint #{0} is not in the loaded compilation")]
    NoSuchEndpoint(usize),
    /// No packet can carry the flow (no address family in common, ICMP
    /// without IPv4, ...).
    #[error("{from} -> {to}: {reason}")]
    NoCommonFamily {
        /// Source peer.
        from: String,
        /// Destination peer.
        to: String,
        /// Why.
        reason: String,
    },
    /// No block of test addresses is free.
    #[error("every block 100.64.0.0/16 of test addresses for entity peers is in use")]
    NoTestAddresses,
}

/// What one check (one endpoint, one direction) decided, in terms both
/// engines share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckOutcome {
    /// Passed by policy.
    Allow,
    /// Passed with a redirect to this proxy port.
    Redirect(u16),
    /// Dropped by a deny entry.
    DenyRule,
    /// Dropped: no entry matched.
    DenyDefault,
    /// Dropped: authentication required.
    DenyAuth,
    /// The kernel counted something else (a parse drop, a shortcut pass):
    /// never expected for the packets this engine crafts.
    Other(Counter),
}

impl CheckOutcome {
    /// The outcome of a reference lookup.
    pub fn from_reference(verdict: &mapstate::Verdict) -> CheckOutcome {
        match verdict {
            mapstate::Verdict::Allow => CheckOutcome::Allow,
            mapstate::Verdict::Redirect { proxy_port } => CheckOutcome::Redirect(*proxy_port),
            mapstate::Verdict::Deny {
                reason: mapstate::DenyReason::Rule,
            } => CheckOutcome::DenyRule,
            mapstate::Verdict::Deny {
                reason: mapstate::DenyReason::NoEntry,
            } => CheckOutcome::DenyDefault,
            mapstate::Verdict::AuthRequired { .. } => CheckOutcome::DenyAuth,
        }
    }

    /// The outcome of a kernel run (from the one counter it moved and the
    /// redirect mark).
    pub fn from_kernel(verdict: &KernelVerdict) -> CheckOutcome {
        match verdict.counter {
            Counter::AllowedNew | Counter::AllowedEstablished => CheckOutcome::Allow,
            Counter::Redirected => CheckOutcome::Redirect(verdict.proxy_port.unwrap_or(0)),
            Counter::DeniedByRule => CheckOutcome::DenyRule,
            Counter::DeniedByDefault => CheckOutcome::DenyDefault,
            Counter::DeniedAuth => CheckOutcome::DenyAuth,
            other => CheckOutcome::Other(other),
        }
    }

    /// The flow-level verdict this check contributes.
    pub fn flow_verdict(self) -> FlowVerdict {
        match self {
            CheckOutcome::Allow => FlowVerdict::Allow,
            CheckOutcome::Redirect(_) => FlowVerdict::Redirect,
            CheckOutcome::DenyRule | CheckOutcome::DenyDefault | CheckOutcome::DenyAuth => {
                FlowVerdict::Deny
            }
            CheckOutcome::Other(counter) if counter.is_pass() => FlowVerdict::Allow,
            CheckOutcome::Other(_) => FlowVerdict::Deny,
        }
    }
}

impl std::fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckOutcome::Allow => f.write_str("allow"),
            CheckOutcome::Redirect(port) => write!(f, "redirect to proxy port {port}"),
            CheckOutcome::DenyRule => f.write_str("deny (rule)"),
            CheckOutcome::DenyDefault => f.write_str("deny (no matching entry)"),
            CheckOutcome::DenyAuth => f.write_str("deny (authentication required)"),
            CheckOutcome::Other(counter) => write!(f, "counter {counter:?}"),
        }
    }
}

/// Combines check outcomes into a flow verdict (deny > redirect > allow).
/// The reference's rule ([`FlowVerdict::of_checks`]).
pub fn combine(outcomes: impl IntoIterator<Item = CheckOutcome>) -> FlowVerdict {
    FlowVerdict::of_checks(outcomes.into_iter().map(CheckOutcome::flow_verdict))
}

/// The object configuration the engine loads: porin's default object with
/// the largest policy map Cilium allows (65536, `bpf-policy-map-max`), so
/// that big test policies fit. Everything else, including the
/// fail-closed parsing and the shortcuts described in the module docs, is
/// the shipped object's.
pub fn object_config() -> ObjectConfig {
    ObjectConfig {
        policy_map_max_entries: POLICY_MAP_MAX,
        ..ObjectConfig::default()
    }
}

/// porin's object loaded in the kernel, holding one compilation.
#[derive(Debug)]
pub struct KernelEngine {
    datapath: Datapath,
    config: ObjectConfig,
    maps: Option<MapContents>,
    installed: Option<usize>,
}

impl KernelEngine {
    /// Emits and loads the object ([`object_config`]). Fails with
    /// [`EngineError::Unavailable`] when this process may not use eBPF.
    pub fn new() -> Result<KernelEngine, EngineError> {
        kernel::probe().map_err(|e| {
            if e.is_unavailable() {
                EngineError::Unavailable(e)
            } else {
                EngineError::Kernel(e)
            }
        })?;
        let config = object_config();
        let bytes = emit(&config)?;
        let datapath = Datapath::load(&bytes)?;
        Ok(KernelEngine {
            datapath,
            config,
            maps: None,
            installed: None,
        })
    }

    /// The loaded object.
    pub fn datapath(&self) -> &Datapath {
        &self.datapath
    }

    /// The map contents of the loaded compilation.
    pub fn maps(&self) -> Option<&MapContents> {
        self.maps.as_ref()
    }

    /// Writes a compilation's ipcache (plus `extra_ipcache`) into the kernel
    /// and keeps its policy maps for [`KernelEngine::check`].
    pub fn load(
        &mut self,
        compiled: &Compiled,
        extra_ipcache: &[(IpNetwork, u32)],
    ) -> Result<(), EngineError> {
        let maps = MapContents::with_extra_ipcache(compiled, extra_ipcache)?;
        maps.check_capacity(&self.config)?;
        self.maps = None;
        self.installed = None;
        self.datapath
            .install_ipcache(&maps.ipcache4, &maps.ipcache6)?;
        self.maps = Some(maps);
        Ok(())
    }

    /// Makes the policy of endpoint `endpoint` (index into the loaded
    /// compilation) the active one, through the atomic switch.
    pub fn activate(&mut self, endpoint: usize) -> Result<(), EngineError> {
        if self.installed == Some(endpoint) {
            return Ok(());
        }
        let maps = self.maps.as_ref().ok_or(EngineError::NothingLoaded)?;
        let policy = maps
            .endpoint_policy(endpoint)
            .ok_or(EngineError::NoSuchEndpoint(endpoint))?;
        self.installed = None;
        // The atomic switch of DATAPATH.md §2.3 without the retire grace
        // period (100 ms per flip): no program is attached anywhere and
        // every run is a synchronous `BPF_PROG_TEST_RUN` from this thread,
        // so when a run returns, no program still reads the retired map.
        // Waiting would make a test run switch policies ~10 times a second.
        self.datapath.install_policy_unattached(policy)?;
        self.installed = Some(endpoint);
        Ok(())
    }

    /// Runs `packet` through the program of `direction` with the policy of
    /// `endpoint` active and an empty conntrack table.
    pub fn check(
        &mut self,
        endpoint: usize,
        direction: mapstate::Direction,
        packet: &[u8],
    ) -> Result<KernelVerdict, EngineError> {
        self.activate(endpoint)?;
        self.datapath.reset_conntrack()?;
        let program = match direction {
            mapstate::Direction::Egress => kernel::Direction::FromEndpoint,
            mapstate::Direction::Ingress => kernel::Direction::ToEndpoint,
        };
        Ok(self.datapath.decide(program, packet)?)
    }
}

/// The test addresses of entity peers (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestAddresses {
    block: u8,
}

impl TestAddresses {
    /// Picks the first block whose addresses none of `used` falls into.
    pub fn avoiding(used: &BTreeSet<IpAddr>) -> Result<TestAddresses, EngineError> {
        (0..=255u8)
            .map(|block| TestAddresses { block })
            .find(|candidate| {
                !used.iter().any(|ip| match ip {
                    IpAddr::V4(v4) => {
                        let o = v4.octets();
                        o[0] == 100 && o[1] == 64 && o[2] == candidate.block
                    }
                    IpAddr::V6(v6) => {
                        let s = v6.segments();
                        s[0] == 0x0100
                            && s[1..6].iter().all(|x| *x == 0)
                            && s[6] == u16::from(candidate.block)
                    }
                })
            })
            .ok_or(EngineError::NoTestAddresses)
    }

    /// The IPv4 test address of a reserved identity.
    pub fn v4(&self, identity: u32) -> Ipv4Addr {
        Ipv4Addr::new(100, 64, self.block, u8::try_from(identity).unwrap_or(0))
    }

    /// The IPv6 test address of a reserved identity.
    pub fn v6(&self, identity: u32) -> Ipv6Addr {
        Ipv6Addr::new(
            0x0100,
            0,
            0,
            0,
            0,
            0,
            u16::from(self.block),
            u16::try_from(identity).unwrap_or(0),
        )
    }

    /// The ipcache entries (`/32` and `/128` → identity) of the given
    /// reserved identities.
    pub fn ipcache_entries(&self, identities: &BTreeSet<u32>) -> Vec<(IpNetwork, u32)> {
        let mut out = Vec::new();
        for id in identities {
            out.push((IpNetwork::from(IpAddr::V4(self.v4(*id))), *id));
            out.push((IpNetwork::from(IpAddr::V6(self.v6(*id))), *id));
        }
        out
    }
}

/// Everything a compilation's cases need in the kernel: the test addresses
/// and the reserved identities that get one.
#[derive(Debug, Clone)]
pub struct CaseAddresses {
    /// The test-address block.
    pub test: TestAddresses,
    /// Reserved identities that need an address.
    pub reserved: BTreeSet<u32>,
}

impl CaseAddresses {
    /// Plans addresses for `flows` over `compiled`.
    pub fn plan<'a>(
        compiled: &Compiled,
        flows: impl IntoIterator<Item = &'a Flow>,
    ) -> Result<CaseAddresses, EngineError> {
        let mut used: BTreeSet<IpAddr> = compiled
            .endpoints
            .iter()
            .flat_map(|e| e.ips.iter().copied())
            .collect();
        let mut reserved = BTreeSet::new();
        for flow in flows {
            for peer in [&flow.from, &flow.to] {
                match peer {
                    Peer::Address(ip, _) => {
                        used.insert(*ip);
                    }
                    // The ipcache decides a world address; a test-address
                    // entry over it would decide instead.
                    Peer::World(world) => used.extend(world.addresses.iter().map(|(ip, _)| *ip)),
                    Peer::Reserved(_, id) => {
                        reserved.insert(*id);
                    }
                    Peer::Endpoint(_) => {}
                }
            }
        }
        Ok(CaseAddresses {
            test: TestAddresses::avoiding(&used)?,
            reserved,
        })
    }

    /// The engine-local ipcache entries.
    pub fn ipcache_entries(&self) -> Vec<(IpNetwork, u32)> {
        self.test.ipcache_entries(&self.reserved)
    }

    fn address(&self, compiled: &Compiled, peer: &Peer, family: Family) -> Option<IpAddr> {
        match peer {
            Peer::Endpoint(index) => compiled
                .endpoints
                .get(*index)?
                .ips
                .iter()
                .copied()
                .find(|ip| Family::of(*ip) == family),
            Peer::Address(ip, _) => (Family::of(*ip) == family).then_some(*ip),
            Peer::World(world) => world.address(family).map(|(ip, _)| ip),
            Peer::Reserved(_, id) => Some(match family {
                Family::V4 => IpAddr::V4(self.test.v4(*id)),
                Family::V6 => IpAddr::V6(self.test.v6(*id)),
            }),
        }
    }
}

/// The packet of a flow between two addresses of one family.
pub fn flow_packet(src: IpAddr, dst: IpAddr, proto: u8, port: u16) -> Packet {
    let sport = if port == SOURCE_PORT {
        SOURCE_PORT + 1
    } else {
        SOURCE_PORT
    };
    let network = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => Network::V4(Ipv4::new(s, d)),
        (IpAddr::V6(s), IpAddr::V6(d)) => Network::V6(Ipv6::new(s, d)),
        // Mixed families never reach here (callers pick one family); map
        // IPv4 into IPv6 rather than panic.
        (s, d) => Network::V6(Ipv6::new(to_v6(s), to_v6(d))),
    };
    let icmp_type = u8::try_from(port).unwrap_or(u8::MAX);
    let transport = match proto {
        IP_TCP => {
            return match network {
                Network::V4(ip) => Packet::tcp4(ip.src, sport, ip.dst, port),
                Network::V6(ip) => Packet::tcp6(ip.src, sport, ip.dst, port),
                Network::Other { .. } => Packet::new(network, Transport::Udp { sport, dport: 0 }),
            };
        }
        IP_UDP => Transport::Udp { sport, dport: port },
        IP_SCTP => Transport::Sctp {
            sport,
            dport: port,
            vtag: 0,
        },
        IP_ICMP => Transport::Icmp {
            icmp_type,
            code: 0,
            rest: echo_rest(ECHO_IDENTIFIER, 1),
        },
        IP_ICMPV6 => Transport::Icmpv6 {
            icmp_type,
            code: 0,
            rest: echo_rest(ECHO_IDENTIFIER, 1),
        },
        other => Transport::Raw {
            proto: other,
            bytes: vec![0; 8],
        },
    };
    Packet::new(network, transport)
}

fn to_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// One kernel check.
#[derive(Debug, Clone)]
pub struct KernelCheck {
    /// Index of the endpoint checked.
    pub endpoint: usize,
    /// Its display name.
    pub endpoint_name: String,
    /// Policy direction.
    pub direction: mapstate::Direction,
    /// What the kernel did.
    pub kernel: KernelVerdict,
    /// The outcome.
    pub outcome: CheckOutcome,
}

/// A flow decided in one family.
#[derive(Debug, Clone)]
pub struct FamilyRun {
    /// The family.
    pub family: Family,
    /// Source and destination addresses of the packet.
    pub addresses: (IpAddr, IpAddr),
    /// The checks, egress at the source first.
    pub checks: Vec<KernelCheck>,
    /// The combined verdict.
    pub verdict: FlowVerdict,
}

/// A flow decided by the kernel.
#[derive(Debug, Clone)]
pub struct KernelEvaluation {
    /// The verdict: every family's, or the most permissive when they
    /// differ (see [`Self::families_agree`], [`Self::describe_verdict`]).
    pub verdict: FlowVerdict,
    /// One run per family (empty when neither end is an endpoint).
    pub runs: Vec<FamilyRun>,
}

impl KernelEvaluation {
    /// True when every family gave the same checks' outcomes.
    pub fn families_agree(&self) -> bool {
        self.runs.windows(2).all(|w| {
            w[0].checks
                .iter()
                .map(|c| c.outcome)
                .eq(w[1].checks.iter().map(|c| c.outcome))
        })
    }

    /// The verdict as printed: `deny`, or `IPv4 deny, IPv6 allow` when
    /// the families differ.
    pub fn describe_verdict(&self) -> String {
        if self.runs.is_empty() {
            return self.verdict.to_string();
        }
        let families: Vec<(Option<Family>, FlowVerdict)> = self
            .runs
            .iter()
            .map(|r| (Some(r.family), r.verdict))
            .collect();
        describe_family_verdicts(&families)
    }

    /// One line describing the checks of every family.
    pub fn describe(&self) -> String {
        if self.runs.is_empty() {
            return "neither end is an endpoint: nothing checks this flow".to_owned();
        }
        let mut out = String::new();
        for (i, run) in self.runs.iter().enumerate() {
            if i > 0 {
                out.push_str(" | ");
            }
            let _ = write!(
                out,
                "{} {} -> {}:",
                run.family, run.addresses.0, run.addresses.1
            );
            for check in &run.checks {
                let _ = write!(
                    out,
                    " {} {} {} (counter {:?}, mark {:#x});",
                    check.endpoint_name,
                    check.direction,
                    check.outcome,
                    check.kernel.counter,
                    check.kernel.mark
                );
            }
        }
        out
    }
}

/// Decides `flow` in the kernel. `compiled` must be the compilation loaded
/// into `engine` with `addresses.ipcache_entries()`.
pub fn decide_flow(
    engine: &mut KernelEngine,
    compiled: &Compiled,
    addresses: &CaseAddresses,
    flow: &Flow,
) -> Result<KernelEvaluation, EngineError> {
    let mut sides = Vec::new();
    if let Peer::Endpoint(index) = flow.from {
        sides.push((index, mapstate::Direction::Egress));
    }
    if let Peer::Endpoint(index) = flow.to {
        sides.push((index, mapstate::Direction::Ingress));
    }
    if sides.is_empty() {
        return Ok(KernelEvaluation {
            verdict: FlowVerdict::Allow,
            runs: Vec::new(),
        });
    }
    let no_family = |reason: String| EngineError::NoCommonFamily {
        from: flow.from.describe(compiled),
        to: flow.to.describe(compiled),
        reason,
    };
    let families = flow
        .families(compiled)
        .map_err(|e| no_family(e.to_string()))?;
    let mut runs = Vec::new();
    for family in families {
        let (Some(src), Some(dst)) = (
            addresses.address(compiled, &flow.from, family),
            addresses.address(compiled, &flow.to, family),
        ) else {
            return Err(no_family(format!("no {family} address")));
        };
        let packet = flow_packet(src, dst, flow.proto, flow.port).build();
        let mut checks = Vec::new();
        for (endpoint, direction) in &sides {
            let kernel = engine.check(*endpoint, *direction, &packet)?;
            checks.push(KernelCheck {
                endpoint: *endpoint,
                endpoint_name: compiled
                    .endpoints
                    .get(*endpoint)
                    .map(|e| e.display_name())
                    .unwrap_or_default(),
                direction: *direction,
                outcome: CheckOutcome::from_kernel(&kernel),
                kernel,
            });
        }
        let verdict = combine(checks.iter().map(|c| c.outcome));
        runs.push(FamilyRun {
            family,
            addresses: (src, dst),
            checks,
            verdict,
        });
    }
    // Alternative packets of one flow: the most permissive verdict, as the
    // reference combines families (`FlowVerdict::of_alternatives`).
    let verdict =
        FlowVerdict::of_alternatives(runs.iter().map(|r| r.verdict)).unwrap_or(FlowVerdict::Deny);
    Ok(KernelEvaluation { verdict, runs })
}

/// Where the reference and the kernel disagree on a flow, if anywhere:
/// per check (outcome, including the deny reason and the proxy port), per
/// family.
pub fn disagreement(compiled: &Compiled, flow: &Flow, kernel: &KernelEvaluation) -> Option<String> {
    let reference = evaluate(compiled, flow);
    let mut problems = Vec::new();
    for run in &kernel.runs {
        // The reference checks of this run's packet: those of its family
        // for a world flow, the family-independent ones otherwise.
        let expected: Vec<CheckOutcome> = reference
            .checks
            .iter()
            .filter(|c| c.family.is_none_or(|f| f == run.family))
            .map(|c| CheckOutcome::from_reference(&c.decision.verdict))
            .collect();
        let seen: Vec<CheckOutcome> = run.checks.iter().map(|c| c.outcome).collect();
        if seen != expected {
            let pairs: Vec<String> = run
                .checks
                .iter()
                .zip(expected.iter().map(Some).chain(std::iter::repeat(None)))
                .map(|(c, e)| {
                    format!(
                        "{} {}: kernel {}, reference {}",
                        c.endpoint_name,
                        c.direction,
                        c.outcome,
                        e.map_or_else(|| "none".to_owned(), ToString::to_string)
                    )
                })
                .collect();
            problems.push(format!("{}: {}", run.family, pairs.join("; ")));
        }
    }
    if reference.verdict != kernel.verdict {
        problems.push(format!(
            "flow verdict: kernel {}, reference {}",
            kernel.describe_verdict(),
            reference.describe_verdict()
        ));
    }
    (!problems.is_empty()).then(|| problems.join(" | "))
}

/// Runs every test file under `paths` with `engine`. The reference engine
/// is the compiler's runner; `Kernel` decides each case in the kernel;
/// `Both` does both and fails a case on any disagreement between them
/// (verdict, deny reason, proxy port, or between families).
pub fn run(paths: &[PathBuf], engine: Engine) -> TestReport {
    run_with_limits(paths, engine, &Limits::default())
}

/// [`run`] with explicit resource limits for reading and compiling each
/// test file (`porin test --max-...`), the same for both engines.
pub fn run_with_limits(paths: &[PathBuf], engine: Engine, limits: &Limits) -> TestReport {
    if engine == Engine::Reference {
        return policytest::run_with_limits(paths, engine, limits);
    }
    let mut report = TestReport::default();
    let files = match policytest::discover(paths) {
        Ok(files) => files,
        Err(error) => {
            report.errors.push(error);
            return report;
        }
    };
    let mut kernel_engine = match KernelEngine::new() {
        Ok(k) => k,
        Err(error) => {
            report.errors.push(error.to_string());
            return report;
        }
    };
    for file in files {
        run_file(&mut kernel_engine, &file, engine, limits, &mut report);
    }
    report
}

fn run_file(
    kernel_engine: &mut KernelEngine,
    path: &std::path::Path,
    engine: Engine,
    limits: &Limits,
    report: &mut TestReport,
) {
    let started = Instant::now();
    let mut result = FileResult {
        file: path.display().to_string(),
        ..FileResult::default()
    };
    run_file_into(kernel_engine, path, engine, limits, report, &mut result);
    result.duration = started.elapsed();
    report.files.push(result);
}

/// Runs one file, recording each case both as a `PASS`/`FAIL` line and as a
/// [`CaseResult`] (what `porin test --format junit` writes), like the
/// reference runner does.
fn run_file_into(
    kernel_engine: &mut KernelEngine,
    path: &std::path::Path,
    engine: Engine,
    limits: &Limits,
    report: &mut TestReport,
    result: &mut FileResult,
) {
    let Some(prepared) = policytest::prepare_for_run(path, limits, report, result) else {
        return;
    };
    result.file.clone_from(&prepared.file);
    result.name.clone_from(&prepared.spec.name);
    let mut cases: Vec<ResolvedCase> = Vec::new();
    for (index, case) in prepared.spec.cases.iter().enumerate() {
        match policytest::resolve_case(&prepared.file, index, case, &prepared.compiled) {
            Ok(case) => cases.push(case),
            Err(error) => {
                result.cases = policytest::unrun_cases(&prepared.spec, Some(index), &error);
                result.error = Some(error.clone());
                report.errors.push(error);
                return;
            }
        }
    }
    let compiled = &prepared.compiled;
    let loaded = CaseAddresses::plan(compiled, cases.iter().map(|c| &c.flow)).and_then(|a| {
        kernel_engine.load(compiled, &a.ipcache_entries())?;
        Ok(a)
    });
    let addresses = match loaded {
        Ok(a) => a,
        Err(error) => {
            let error = format!("{}: {error}", prepared.file);
            result.cases = policytest::unrun_cases(&prepared.spec, None, &error);
            result.error = Some(error.clone());
            report.errors.push(error);
            return;
        }
    };
    for (index, case) in cases.into_iter().enumerate() {
        let started = Instant::now();
        let (seen, problems) = match decide_flow(kernel_engine, compiled, &addresses, &case.flow) {
            Err(error) => ("kernel engine error".to_owned(), vec![error.to_string()]),
            Ok(kernel) => judge(compiled, &case, &kernel, engine),
        };
        let decided = DecidedCase {
            index,
            seen,
            failure: (!problems.is_empty()).then(|| problems.join("; ")),
            duration: started.elapsed(),
        };
        policytest::record_case(report, result, &prepared, case, decided);
    }
}

/// What the engines saw for one case (`kernel allow`, or `kernel allow,
/// reference deny` for `Both`) and every problem with it; no problem means
/// the case passed.
fn judge(
    compiled: &Compiled,
    case: &ResolvedCase,
    kernel: &KernelEvaluation,
    engine: Engine,
) -> (String, Vec<String>) {
    let mut problems = Vec::new();
    if case.flow.from.is_per_family() || case.flow.to.is_per_family() {
        // A world end is a different identity per family, so the checks
        // may differ in how they deny (rule or default); only the verdicts
        // must agree, and each must be the expected one.
        if kernel.runs.windows(2).any(|w| w[0].verdict != w[1].verdict) {
            problems.push(format!(
                "the families get different verdicts ({}): {}",
                kernel.describe_verdict(),
                kernel.describe()
            ));
        } else if kernel.verdict != case.expect {
            problems.push(format!("kernel: {}", kernel.describe()));
        }
    } else if !kernel.families_agree() {
        // One identity in every family: any difference is the datapath's.
        problems.push(format!("IPv4 and IPv6 disagree: {}", kernel.describe()));
    } else if kernel.verdict != case.expect {
        problems.push(format!("kernel: {}", kernel.describe()));
    }
    let mut seen = kernel.describe_verdict();
    if engine == Engine::Both {
        let reference = evaluate(compiled, &case.flow);
        seen = format!(
            "kernel {}, reference {}",
            kernel.describe_verdict(),
            reference.describe_verdict()
        );
        if let Some(diff) = disagreement(compiled, &case.flow, kernel) {
            problems.push(format!(
                "engines disagree: {diff}; kernel: {}",
                kernel.describe()
            ));
        }
        if !policytest::passes(&reference, case.expect) {
            problems.push(format!("reference: {}", explain(compiled, &reference)));
        }
    }
    (seen, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNEL_TEST: &str = r#"
kind: PolicyTest
endpoints:
  - {name: client, namespace: prod, labels: {app: client}, ips: [10.9.0.1, "fd00::9:1"]}
  - {name: server, namespace: prod, labels: {app: server}, ips: [10.9.0.2, "fd00::9:2"]}
  - {name: v6only, namespace: prod, labels: {app: v6only}, ips: ["fd00::9:3"]}
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: server, namespace: prod}
      spec:
        endpointSelector: {matchLabels: {app: server}}
        ingress:
          - fromEntities: [host]
          - fromEndpoints: [{matchLabels: {app: client}}]
            toPorts:
              - ports: [{port: "80", protocol: TCP}]
                rules: {http: [{method: GET}]}
          - fromEndpoints: [{matchLabels: {app: v6only}}]
            toPorts: [{ports: [{port: "443", protocol: TCP}]}]
        ingressDeny:
          - fromCIDR: [198.51.100.0/24]
cases:
  - {from: host, to: prod/server, port: 9999, expect: allow}
  - {from: world, to: prod/server, port: 9999, expect: deny}
  - {from: remote-node, to: prod/server, port: 9999, expect: deny}
  - {from: prod/client, to: prod/server, port: 80, expect: redirect}
  - {from: prod/client, to: prod/server, port: 81, expect: deny}
  - {from: prod/v6only, to: prod/server, port: 443, expect: allow}
  - {from: 198.51.100.9, to: prod/server, port: 443, expect: deny}
"#;

    fn kernel_available() -> bool {
        match kernel::probe() {
            Ok(()) => true,
            Err(error) => {
                let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
                assert!(!in_ci, "CI=true but eBPF is unavailable: {error}");
                println!("SKIPPED: kernel engine test: eBPF unavailable ({error})");
                false
            }
        }
    }

    /// Runs a test file's text with both engines; also returns it prepared.
    fn run_both(tag: &str, text: &str) -> (TestReport, policytest::PreparedTest) {
        let dir = std::env::temp_dir().join(format!("porin-engine-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("test.yaml");
        std::fs::write(&path, text).unwrap();
        let report = run(std::slice::from_ref(&path), Engine::Both);
        let prepared = policytest::prepare(&path).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        (report, prepared)
    }

    #[test]
    fn kernel_engine_decides_entities_families_and_redirects() {
        if !kernel_available() {
            return;
        }
        let (report, prepared) = run_both("entities", KERNEL_TEST);
        assert_eq!(
            (report.passed, report.failed),
            (7, 0),
            "{:#?}",
            report.lines
        );

        // Family selection and the redirect's proxy port, checked directly.
        let compiled = &prepared.compiled;
        let cases: Vec<ResolvedCase> = prepared
            .spec
            .cases
            .iter()
            .enumerate()
            .map(|(i, c)| policytest::resolve_case("t", i, c, compiled).unwrap())
            .collect();
        let addresses = CaseAddresses::plan(compiled, cases.iter().map(|c| &c.flow)).unwrap();
        let mut engine = KernelEngine::new().unwrap();
        engine.load(compiled, &addresses.ipcache_entries()).unwrap();
        let families = |index: usize, engine: &mut KernelEngine| {
            decide_flow(engine, compiled, &addresses, &cases[index].flow)
                .unwrap()
                .runs
                .iter()
                .map(|r| r.family)
                .collect::<Vec<_>>()
        };
        // Entity peers and dual-stack endpoints run in both families; a
        // v6-only endpoint and an IPv4 address in one.
        assert_eq!(families(0, &mut engine), [Family::V4, Family::V6]);
        assert_eq!(families(3, &mut engine), [Family::V4, Family::V6]);
        assert_eq!(families(5, &mut engine), [Family::V6]);
        assert_eq!(families(6, &mut engine), [Family::V4]);
        let redirect = decide_flow(&mut engine, compiled, &addresses, &cases[3].flow).unwrap();
        let ingress = redirect.runs[0].checks.last().unwrap();
        assert!(matches!(ingress.outcome, CheckOutcome::Redirect(port) if port != 0));
        assert_eq!(ingress.kernel.counter, Counter::Redirected);
        // The world is a real outside address per family, which the
        // compiled ipcache gives world-ipv4 / world-ipv6 (no engine-local
        // entry, no identity 2).
        let world = decide_flow(&mut engine, compiled, &addresses, &cases[1].flow).unwrap();
        let sources: Vec<IpAddr> = world.runs.iter().map(|r| r.addresses.0).collect();
        assert_eq!(
            sources,
            [
                compiled.world_address(Family::V4).unwrap(),
                compiled.world_address(Family::V6).unwrap()
            ]
        );
        assert!(!addresses.reserved.contains(&2), "{addresses:?}");
        assert!(
            addresses
                .ipcache_entries()
                .iter()
                .all(|(net, _)| !sources.iter().any(|ip| net.contains(*ip)))
        );
    }

    /// The world address avoids every policy prefix: here 192.0.2.0/24 and
    /// 2001:db8::/64 (where the search starts) are denied, the world is
    /// allowed, so a world peer placed inside them would be denied by the
    /// kernel's LPM. Both engines decide the same outside addresses.
    #[test]
    fn the_world_address_lies_outside_every_policy_prefix() {
        if !kernel_available() {
            return;
        }
        let text = r#"
kind: PolicyTest
endpoints:
  - {name: web, namespace: prod, labels: {app: web}, ips: [10.9.1.1, "fd00::9:1"]}
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: web, namespace: prod}
      spec:
        endpointSelector: {matchLabels: {app: web}}
        ingress: [{fromEntities: [world]}]
        ingressDeny: [{fromCIDR: [192.0.2.0/24, "2001:db8::/64"]}]
cases:
  - {from: world, to: prod/web, port: 80, expect: allow}
  - {from: 192.0.2.1, to: prod/web, port: 80, expect: deny}
  - {from: "2001:db8::1", to: prod/web, port: 80, expect: deny}
"#;
        let (report, prepared) = run_both("world", text);
        assert_eq!(
            (report.passed, report.failed),
            (3, 0),
            "{:#?}",
            report.lines
        );
        let compiled = &prepared.compiled;
        assert_eq!(
            compiled.world_address(Family::V4),
            Some("192.0.3.0".parse().unwrap())
        );
        assert_eq!(
            compiled.world_address(Family::V6),
            Some("2001:db8:0:1::".parse().unwrap())
        );
    }

    #[test]
    fn test_addresses_skip_used_blocks() {
        let used: BTreeSet<IpAddr> = ["100.64.0.7".parse().unwrap(), "100::1:2".parse().unwrap()]
            .into_iter()
            .collect();
        let t = TestAddresses::avoiding(&used).unwrap();
        assert_eq!(t.v4(1), Ipv4Addr::new(100, 64, 2, 1));
        assert_eq!(t.v6(2), "100::2:2".parse::<Ipv6Addr>().unwrap());
        let entries = t.ipcache_entries(&BTreeSet::from([1, 6]));
        assert_eq!(
            entries,
            vec![
                ("100.64.2.1/32".parse().unwrap(), 1),
                ("100::2:1/128".parse().unwrap(), 1),
                ("100.64.2.6/32".parse().unwrap(), 6),
                ("100::2:6/128".parse().unwrap(), 6),
            ]
        );
    }

    #[test]
    fn outcomes_combine_deny_over_redirect_over_allow() {
        use CheckOutcome::*;
        assert_eq!(combine([Allow, Redirect(1)]), FlowVerdict::Redirect);
        assert_eq!(combine([Redirect(1), DenyDefault]), FlowVerdict::Deny);
        assert_eq!(combine([Allow, Allow]), FlowVerdict::Allow);
        assert_eq!(combine([]), FlowVerdict::Allow);
        assert_eq!(
            combine([Other(Counter::DroppedMalformed)]),
            FlowVerdict::Deny
        );
    }

    #[test]
    fn packets_avoid_the_datapath_shortcuts() {
        let v4 = flow_packet(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            IP_ICMP,
            3,
        );
        match v4.transport {
            Transport::Icmp {
                icmp_type, code, ..
            } => assert_eq!((icmp_type, code), (3, 0)),
            other => panic!("{other:?}"),
        }
        let v6 = flow_packet(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            IP_ICMPV6,
            135,
        );
        match &v6.network {
            Network::V6(ip) => assert_ne!(ip.hop_limit, 255),
            other => panic!("{other:?}"),
        }
        let tcp = flow_packet(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            IP_TCP,
            SOURCE_PORT,
        );
        match tcp.transport {
            Transport::Tcp { sport, dport, .. } => {
                assert_eq!((sport, dport), (SOURCE_PORT + 1, SOURCE_PORT));
            }
            other => panic!("{other:?}"),
        }
    }
}
