//! `porin query --from PEER --to PEER --port 8080/tcp POLICIES... --inventory FILE_OR_DIR`
//!
//! Decides one flow with the reference evaluator and explains it: which
//! key matched and which rule produced it, or that no rule allowed it.
//! Peers: `namespace/name`, `name`, an IP address or an entity word;
//! `world` is decided per family (world-ipv4 over IPv4, world-ipv6 over
//! IPv6), each check line naming the family and identity.
//! Exit codes: 0 allowed or redirected (in some family, for a world peer
//! whose families differ), 1 denied, 2 bad input or a flow no packet can
//! carry.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args as ClapArgs;
use porin_compiler::explain::{Flow, FlowVerdict, Peer, evaluate, explain_check};
use porin_compiler::resolve::rule::{icmp_type, proto};

use super::compile::load_and_compile;
use crate::limit_flags::LimitArgs;

/// Arguments of `porin query`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    /// Source peer.
    #[arg(long)]
    pub from: String,
    /// Destination peer.
    #[arg(long)]
    pub to: String,
    /// Destination port, optionally with the protocol (`8080/tcp`).
    #[arg(long)]
    pub port: Option<String>,
    /// Protocol: TCP (default), UDP, SCTP, ICMP or ICMPv6.
    #[arg(long)]
    pub protocol: Option<String>,
    /// ICMP type (number or name) for ICMP/ICMPv6.
    #[arg(long)]
    pub icmp_type: Option<String>,
    /// Policy files or directories.
    #[arg(required = true)]
    pub policies: Vec<PathBuf>,
    /// Inventory (see `porin compile --help`).
    #[arg(long)]
    pub inventory: PathBuf,
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
        other => bail!("protocol `{other}` is not TCP, UDP, SCTP, ICMP or ICMPv6"),
    })
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
    } else {
        port.context("--port is required for TCP, UDP and SCTP")?
    };
    let Ok((compiled, _)) =
        load_and_compile(&args.policies, &args.inventory, &args.limits.limits())?
    else {
        return Ok(ExitCode::from(2));
    };
    let flow = Flow {
        from: Peer::parse(&args.from, &compiled)?,
        to: Peer::parse(&args.to, &compiled)?,
        proto: proto_number,
        port,
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
