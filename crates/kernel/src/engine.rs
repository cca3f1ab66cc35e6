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

use ipnetwork::IpNetwork;
use porin_compiler::compile::Compiled;
use porin_compiler::explain::{Flow, FlowVerdict, Peer, describe_family_verdicts};
use porin_compiler::mapstate;
use porin_ebpf::compiled::{CompiledMapsError, MapContents};
use porin_ebpf::{EmitError, ObjectConfig, POLICY_MAP_MAX, emit};
use porin_policytest::{
    self as policytest, CaseDecision, Check, CheckOutcome, Engine, Family, FamilyChecks,
    PreparedTest, ResolvedCase, combine,
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

/// The outcome of a kernel run, from the one counter it moved and the
/// redirect mark, in the terms every engine of `porin test` shares.
impl From<&KernelVerdict> for CheckOutcome {
    fn from(verdict: &KernelVerdict) -> CheckOutcome {
        match verdict.counter {
            Counter::AllowedNew | Counter::AllowedEstablished => CheckOutcome::Allow,
            Counter::Redirected => CheckOutcome::Redirect(verdict.proxy_port.unwrap_or(0)),
            Counter::DeniedByRule => CheckOutcome::DenyRule,
            Counter::DeniedByDefault => CheckOutcome::DenyDefault,
            Counter::DeniedAuth => CheckOutcome::DenyAuth,
            other => CheckOutcome::Other {
                what: format!("counter {other:?}"),
                passed: other.is_pass(),
            },
        }
    }
}

impl From<EngineError> for policytest::EngineError {
    fn from(error: EngineError) -> Self {
        policytest::EngineError::new(KERNEL, error)
    }
}

/// The name of the kernel engine in reports.
const KERNEL: &str = "kernel";

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
    /// The object loaded for the other value of
    /// `enable-extended-ip-protocols`, kept once emitted so that
    /// alternating compilations swap objects instead of reloading them.
    spare: Option<(ObjectConfig, Datapath)>,
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
            spare: None,
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
        if self.config.extended_ip_protocols != compiled.extended_ip_protocols {
            // The agent setting is a property of the object (as Cilium's
            // ENABLE_EXTENDED_IP_PROTOCOLS is of its programs): use the
            // object emitted with the compilation's value.
            let (config, datapath) = match self.spare.take() {
                Some((config, datapath))
                    if config.extended_ip_protocols == compiled.extended_ip_protocols =>
                {
                    (config, datapath)
                }
                _ => {
                    let config = ObjectConfig {
                        extended_ip_protocols: compiled.extended_ip_protocols,
                        ..self.config.clone()
                    };
                    let datapath = Datapath::load(&emit(&config)?)?;
                    (config, datapath)
                }
            };
            let old_config = std::mem::replace(&mut self.config, config);
            let old = std::mem::replace(&mut self.datapath, datapath);
            self.spare = Some((old_config, old));
        }
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
                .map(|c| &c.outcome)
                .eq(w[1].checks.iter().map(|c| &c.outcome))
        })
    }

    /// The verdict of each family run, IPv4 first; one verdict for any
    /// family (`None`) when neither end is an endpoint and nothing ran, as
    /// the reference decides such a flow.
    pub fn family_verdicts(&self) -> Vec<(Option<Family>, FlowVerdict)> {
        if self.runs.is_empty() {
            return vec![(None, self.verdict)];
        }
        self.runs
            .iter()
            .map(|r| (Some(r.family), r.verdict))
            .collect()
    }

    /// The verdict as printed: `deny`, or `IPv4 deny, IPv6 allow` when
    /// the families differ.
    pub fn describe_verdict(&self) -> String {
        describe_family_verdicts(&self.family_verdicts())
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
    let sides = porin_compiler::explain::checked_sides(compiled, flow);
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
        // The datapath counts its drop of a protocol Cilium's conntrack does
        // not track as malformed (DATAPATH.md §4); the packet built here is
        // well formed, so that counter means the untracked-protocol drop.
        let untracked = !porin_compiler::resolve::rule::proto::tracked(
            flow.proto,
            family == Family::V6,
            compiled.extended_ip_protocols,
        );
        let mut checks = Vec::new();
        for (endpoint, direction) in &sides {
            let kernel = engine.check(*endpoint, *direction, &packet)?;
            let outcome = match CheckOutcome::from(&kernel) {
                _ if untracked && kernel.counter == Counter::DroppedMalformed => {
                    CheckOutcome::UntrackedProtocol
                }
                outcome => outcome,
            };
            checks.push(KernelCheck {
                endpoint: *endpoint,
                endpoint_name: compiled
                    .endpoints
                    .get(*endpoint)
                    .map(|e| e.display_name())
                    .unwrap_or_default(),
                direction: *direction,
                outcome,
                kernel,
            });
        }
        let verdict = combine(checks.iter().map(|c| &c.outcome));
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

/// The kernel engine of `porin test` (`--engine kernel`): porin's object
/// in the running kernel deciding each case of a file, with the file's
/// entity peers on their test addresses (see the module docs).
#[derive(Debug)]
pub struct Kernel {
    engine: KernelEngine,
    /// The addresses of the file loaded last; `None` before a load.
    addresses: Option<CaseAddresses>,
}

impl Kernel {
    /// Emits and loads the object ([`KernelEngine::new`]).
    pub fn new() -> Result<Kernel, EngineError> {
        Ok(Kernel {
            engine: KernelEngine::new()?,
            addresses: None,
        })
    }
}

impl Engine for Kernel {
    fn name(&self) -> &str {
        KERNEL
    }

    fn load(
        &mut self,
        test: &PreparedTest,
        cases: &[ResolvedCase],
    ) -> Result<(), policytest::EngineError> {
        self.addresses = None;
        let addresses = CaseAddresses::plan(&test.compiled, cases.iter().map(|c| &c.flow))?;
        self.engine
            .load(&test.compiled, &addresses.ipcache_entries())?;
        self.addresses = Some(addresses);
        Ok(())
    }

    /// The kernel's verdict per family; its explanation lists every check
    /// the kernel ran (`kernel: IPv4 a -> b: ...`). A case passes only if
    /// every family gets the expected verdict. With one identity per end
    /// in every family, families whose checks differ in any way (deny
    /// reason, proxy port) fail the case whatever its verdict: the
    /// difference is the datapath's. A world end is a different identity
    /// per family, so only its verdicts must agree.
    fn decide(
        &mut self,
        test: &PreparedTest,
        case: &ResolvedCase,
    ) -> Result<CaseDecision, policytest::EngineError> {
        let addresses = self.addresses.as_ref().ok_or(EngineError::NothingLoaded)?;
        let kernel = decide_flow(&mut self.engine, &test.compiled, addresses, &case.flow)?;
        let checks = kernel
            .runs
            .iter()
            .map(|run| FamilyChecks {
                family: Some(run.family),
                checks: run
                    .checks
                    .iter()
                    .map(|c| Check {
                        endpoint: c.endpoint_name.clone(),
                        direction: c.direction,
                        outcome: c.outcome.clone(),
                    })
                    .collect(),
            })
            .collect();
        let described = kernel.describe();
        let per_family = case.flow.from.is_per_family() || case.flow.to.is_per_family();
        let explanation =
            if per_family && kernel.runs.windows(2).any(|w| w[0].verdict != w[1].verdict) {
                format!(
                    "{KERNEL}: the families get different verdicts ({}): {described}",
                    kernel.describe_verdict()
                )
            } else {
                format!("{KERNEL}: {described}")
            };
        let mut decision = CaseDecision::new(kernel.family_verdicts(), checks, explanation);
        if !per_family && !kernel.families_agree() {
            decision
                .problems
                .push(format!("IPv4 and IPv6 disagree: {described}"));
        }
        Ok(decision)
    }
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
    fn run_both(tag: &str, text: &str) -> (policytest::TestReport, policytest::PreparedTest) {
        let dir = std::env::temp_dir().join(format!("porin-engine-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("test.yaml");
        std::fs::write(&path, text).unwrap();
        let mut both = policytest::Both::new(Kernel::new().unwrap(), policytest::Reference);
        let report = policytest::run(std::slice::from_ref(&path), &mut both);
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

    /// A deny of `0.0.0.0/0` alone denies the IPv4 half of the world
    /// (world-ipv4) and not the IPv6 half: a `world` case towards a
    /// dual-stack endpoint gets two verdicts, which both engines report per
    /// family, agree on, and fail whatever the case expects.
    #[test]
    fn a_world_case_whose_families_differ_fails_in_both_engines() {
        if !kernel_available() {
            return;
        }
        for expect in ["allow", "deny"] {
            let text = format!(
                r#"
kind: PolicyTest
endpoints:
  - {{name: web, namespace: prod, labels: {{app: web}}, ips: [10.9.2.1, "fd00::9:2:1"]}}
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {{name: web, namespace: prod}}
      spec:
        endpointSelector: {{matchLabels: {{app: web}}}}
        ingress: [{{fromEntities: [world]}}]
        ingressDeny: [{{fromCIDR: ["0.0.0.0/0"]}}]
cases:
  - {{from: world, to: prod/web, port: 80, expect: {expect}}}
"#
            );
            let (report, _) = run_both(&format!("differ-{expect}"), &text);
            assert_eq!((report.passed, report.failed), (0, 1), "{report:?}");
            let line = &report.lines[0];
            assert!(
                line.contains("=> kernel IPv4 deny, IPv6 allow, reference IPv4 deny, IPv6 allow"),
                "{line}"
            );
            assert!(
                line.contains("kernel: the families get different verdicts"),
                "{line}"
            );
            assert!(!line.contains("engines disagree"), "{line}");
            assert!(!line.contains("IPv4 and IPv6 disagree"), "{line}");
        }
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
