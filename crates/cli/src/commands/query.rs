//! `porin query --from PEER --to PEER --port 8080/tcp POLICIES... --inventory FILE_OR_DIR`
//! `porin query --from PEER --to PEER --port 8080/tcp TEST.policytest.yaml`
//!
//! Decides one flow with the reference evaluator and explains it: which
//! key matched and which rule produced it, or that no rule allowed it.
//! A PolicyTest file is read with its policies and endpoints (what `porin
//! test` decides its cases against), without `--inventory`. Input that
//! loads no policy at all is refused (every flow would be allowed, which is
//! never what the user asked about) unless `--allow-empty` says so.
//! Peers: `namespace/name`, `name`, an IP address or an entity word;
//! `world` is decided per family (world-ipv4 over IPv4, world-ipv6 over
//! IPv6), each check line naming the family and identity.
//! `--to svc/NAMESPACE/NAME` names a Service of the inventory: `--port` is
//! the Service port, resolved to each backing pod and its targetPort
//! ([`porin_compiler::inventory::service`]), and the flow is decided per
//! backend (exit 1 when any backend denies).
//! Exit codes: 0 allowed or redirected (in some family, for a world peer
//! whose families differ), 1 denied or an invalid policy, 2 porin could not
//! run (unreadable input, no policy loaded, a flow no packet can carry).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args as ClapArgs;
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate, explain_check};
use porin_compiler::resolve::rule::{icmp_type, proto};

use porin_compiler::inventory::Inventory;
use porin_compiler::inventory::service::SERVICE_PREFIX;

use super::compile::{load_and_compile, load_inventory};
use crate::limit_flags::LimitArgs;
use crate::target_flags::TargetArgs;

/// Arguments of `porin query`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Source peer.
    #[arg(long)]
    pub from: String,
    /// Destination peer, or `svc/NAMESPACE/NAME`: a Service of the
    /// inventory, decided for each backing pod on its targetPort.
    #[arg(long)]
    pub to: String,
    /// Destination port, optionally with the protocol (`8080/tcp`); for a
    /// Service, the Service port.
    #[arg(long)]
    pub port: Option<String>,
    /// Protocol: TCP (default), UDP, SCTP, ICMP, ICMPv6, VRRP or IGMP (no port).
    #[arg(long)]
    pub protocol: Option<String>,
    /// ICMP type (number or name) for ICMP/ICMPv6.
    #[arg(long)]
    pub icmp_type: Option<String>,
    /// Policy files or directories, or one PolicyTest file (its policies
    /// and endpoints).
    #[arg(required = true)]
    pub policies: Vec<PathBuf>,
    /// Inventory (see `porin compile --help`); not with a PolicyTest file.
    #[arg(long)]
    pub inventory: Option<PathBuf>,
    /// Decide the flow even when the input loads no policy (every flow is
    /// then allowed).
    #[arg(long)]
    pub allow_empty: bool,
    /// The Cilium the policies are for.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

fn parse_protocol(text: &str) -> anyhow::Result<u8> {
    Ok(match text.to_ascii_uppercase().as_str() {
        "TCP" => proto::TCP,
        "UDP" => proto::UDP,
        "SCTP" => proto::SCTP,
        "ICMP" => proto::ICMP,
        "ICMPV6" => proto::ICMPV6,
        "VRRP" => proto::VRRP,
        "IGMP" => proto::IGMP,
        other => bail!("protocol `{other}` is not TCP, UDP, SCTP, ICMP, ICMPv6, VRRP or IGMP"),
    })
}

/// The PolicyTest file among `paths`, if one is (a file no larger than the
/// loader reads that [`porin_policytest::is_policy_test`]); an error when
/// it is not the only path.
fn policy_test_file(paths: &[PathBuf], max_bytes: u64) -> anyhow::Result<Option<&Path>> {
    let is_test = |path: &Path| {
        path.is_file()
            && std::fs::metadata(path).is_ok_and(|m| m.len() <= max_bytes)
            && std::fs::read_to_string(path)
                .is_ok_and(|text| porin_policytest::is_policy_test(&text))
    };
    let Some(test) = paths.iter().find(|p| is_test(p)) else {
        return Ok(None);
    };
    if paths.len() > 1 {
        bail!(
            "`{}` is a PolicyTest file: give it alone (it names its own policies and endpoints)",
            test.display()
        );
    }
    Ok(Some(test))
}

/// Runs `porin query`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let (mut port, mut protocol) = (None, None);
    if let Some(text) = &args.port {
        let (number, suffix) = match text.split_once('/') {
            Some((n, p)) => (n, Some(p)),
            None => (text.as_str(), None),
        };
        port = Some(
            number
                .parse::<u16>()
                .with_context(|| format!("`{number}` is not a port"))?,
        );
        if let Some(p) = suffix {
            protocol = Some(parse_protocol(p)?);
        }
    }
    if let Some(p) = &args.protocol {
        protocol = Some(parse_protocol(p)?);
    }
    let proto_number = protocol.unwrap_or(proto::TCP);
    let port = if matches!(proto_number, proto::ICMP | proto::ICMPV6) {
        let text = args
            .icmp_type
            .as_deref()
            .context("--icmp-type is required for ICMP")?;
        u16::from(
            icmp_type(text, proto_number == proto::ICMPV6)
                .with_context(|| format!("`{text}` is not an ICMP type"))?,
        )
    } else if matches!(proto_number, proto::VRRP | proto::IGMP) {
        // No ports: looked up with port 0 (enable-extended-ip-protocols).
        port.unwrap_or(0)
    } else {
        port.context("--port is required for TCP, UDP and SCTP")?
    };
    let limits = args.limits.limits();
    // The inventory a Service destination is resolved in (the test file's,
    // or --inventory read again: compile_loaded keeps no copy).
    let mut services_inventory = None;
    let compiled = match policy_test_file(&args.policies, limits.load.max_file_bytes)? {
        Some(path) => {
            if args.inventory.is_some() {
                bail!(
                    "`{}` is a PolicyTest file, which brings its own endpoints: drop --inventory",
                    path.display()
                );
            }
            let target = porin_policytest::TargetOverride {
                command_line: args.target.choice(),
                defaults: crate::target_flags::config_choice(
                    &crate::project_config::project_config()?,
                ),
            };
            match porin_policytest::prepare_with_target(path, &limits, &[], &target) {
                Ok(prepared) => {
                    services_inventory = Some(prepared.inventory);
                    prepared.compiled
                }
                Err(error) => {
                    eprintln!("{error}");
                    // An invalid policy is a finding (1); anything else
                    // stopped porin from running (2).
                    let invalid = error.contains(porin_policytest::POLICIES_INVALID);
                    return Ok(ExitCode::from(if invalid { 1 } else { 2 }));
                }
            }
        }
        None => {
            let inventory = args.inventory.as_deref().context(
                "--inventory is required (or give one PolicyTest file, which has its own endpoints)",
            )?;
            let Ok((compiled, outcome)) =
                load_and_compile(&args.policies, inventory, &limits, &args.target.choice())?
            else {
                // Invalid policies: diagnostics printed; a finding, exit 1.
                return Ok(ExitCode::from(1));
            };
            if outcome.documents.is_empty() && !args.allow_empty {
                bail!(
                    "no policy loaded from {}: with no policy every flow is allowed; pass --allow-empty to ask anyway",
                    args.policies
                        .iter()
                        .map(|p| format!("`{}`", p.display()))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            if args.to.trim().starts_with(SERVICE_PREFIX) {
                if inventory.as_os_str() == "-" {
                    bail!(
                        "`--to {}` names a Service: give --inventory as a file or directory (standard input is read once)",
                        args.to.trim()
                    );
                }
                services_inventory =
                    Some(load_inventory(inventory, &limits).context("cannot load the inventory")?);
            }
            compiled
        }
    };
    if args.from.trim().starts_with(SERVICE_PREFIX) {
        bail!(
            "`--from {}` is a Service: a Service is a destination only (name one of its pods)",
            args.from.trim()
        );
    }
    if let Some(inventory) = services_inventory.as_ref()
        && args.to.trim().starts_with(SERVICE_PREFIX)
    {
        return query_service(args, &compiled, inventory, proto_number, port);
    }
    let flow = Flow {
        from: Peer::parse(&args.from, &compiled)?,
        to: Peer::parse(&args.to, &compiled)?,
        proto: proto_number,
        port,
        family: None,
    };
    // A flow no packet can carry has no verdict in the datapath: refuse it
    // (exit 2) as `porin test` does.
    flow.families(&compiled).with_context(|| {
        format!(
            "{} -> {}",
            flow.from.describe(&compiled),
            flow.to.describe(&compiled)
        )
    })?;
    let evaluation = evaluate(&compiled, &flow);
    // When the families of a world end differ, both verdicts are printed
    // (`IPv4 deny, IPv6 allow`) and the exit code follows the most
    // permissive: some packet of the flow gets through.
    println!(
        "{}: {} -> {} {}/{}",
        evaluation.describe_verdict(),
        flow.from.describe(&compiled),
        flow.to.describe(&compiled),
        proto::name(proto_number),
        port
    );
    if evaluation.checks.is_empty() {
        println!("  neither end is an endpoint of the inventory: nothing checks this flow");
    }
    for check in &evaluation.checks {
        println!("  {}", explain_check(&compiled, check));
    }
    Ok(if evaluation.verdict == FlowVerdict::Deny {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `porin query --to svc/NAMESPACE/NAME`: the Service port resolved to its
/// backends (`Inventory::service_target`), and the flow decided to each
/// backend on its target port, as the load balancer rewrites it before
/// policy. The first line is the verdict every backend gets (or how many
/// deny); exit 0 only when no backend denies: a client can land on any.
fn query_service(
    args: &Args,
    compiled: &porin_compiler::compile::Compiled,
    inventory: &Inventory,
    proto_number: u8,
    port: u16,
) -> anyhow::Result<ExitCode> {
    if matches!(proto_number, proto::ICMP | proto::ICMPV6) {
        bail!("a Service destination takes TCP, UDP or SCTP (a Service port), not ICMP");
    }
    let service = args.to.trim();
    let target = inventory
        .service_target(service, port, proto_number)
        .map_err(|e| anyhow::anyhow!("--to {service}: {e}"))?;
    let from = Peer::parse(&args.from, compiled)?;
    let mut decided = Vec::new();
    for backend in &target.backends {
        let flow = Flow {
            from: from.clone(),
            to: Peer::parse(&backend.peer(), compiled)?,
            proto: proto_number,
            port: backend.port,
            family: None,
        };
        flow.families(compiled).with_context(|| {
            format!(
                "{} -> {} (backend of {service})",
                flow.from.describe(compiled),
                flow.to.describe(compiled)
            )
        })?;
        let evaluation = evaluate(compiled, &flow);
        decided.push((backend, flow, evaluation));
    }
    let denied = decided
        .iter()
        .filter(|(_, _, e)| e.verdict == FlowVerdict::Deny)
        .count();
    let verdicts: Vec<String> = decided
        .iter()
        .map(|(_, _, e)| e.describe_verdict())
        .collect();
    let headline = if verdicts.iter().all(|v| Some(v) == verdicts.first()) {
        verdicts.first().cloned().unwrap_or_default()
    } else {
        format!("deny on {denied} of {} backends", verdicts.len())
    };
    let count = target.backends.len();
    println!(
        "{headline}: {} -> {service} {}/{port} ({}, {count} backend{})",
        from.describe(compiled),
        proto::name(proto_number),
        target.describe_target(),
        if count == 1 { "" } else { "s" }
    );
    for (backend, flow, evaluation) in &decided {
        println!(
            "  backend {} {}/{}: {}",
            flow.to.describe(compiled),
            proto::name(proto_number),
            backend.port,
            evaluation.describe_verdict()
        );
        for check in &evaluation.checks {
            println!("    {}", explain_check(compiled, check));
        }
    }
    for skipped in &target.skipped {
        println!("  not a backend of this port: {skipped}");
    }
    Ok(if denied > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
