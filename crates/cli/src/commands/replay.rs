//! `porin replay --flows FILE... POLICIES... --inventory INV [--current PATH]...
//! [--format human|json|markdown|sarif]`: judge policies against the
//! traffic a cluster really had.
//!
//! Reads Hubble flow exports (`hubble observe -o json` / `-o jsonpb`, one
//! event a line; `--flows -` is standard input), maps each flow's ends to
//! the inventory, decides it under POLICIES with the reference evaluator
//! and compares with the verdict Cilium recorded ([`porin_flows::replay`]):
//! flows newly denied (forwarded today), newly allowed (dropped by policy
//! today) and, with `--current` (the policies in force when the flows were
//! recorded), flows where porin's verdict under those differs from
//! Cilium's (a fidelity check). Findings are aggregated by (source
//! workload, destination workload, protocol/port) with counts and first
//! and last time, and name the rules responsible; SARIF puts a newly
//! denied flow on the policy lines that deny it.
//!
//! Replies, L7 and socket events and non-flow events are skipped and
//! counted; a malformed line is reported with its line and column
//! (`PF001`) and the rest of the file is read.
//!
//! Exit codes: 0 nothing changes and every line was read; 1 a flow is
//! newly denied or allowed, a fidelity disagreement, a rejected line, or an
//! invalid policy; 2 an input could not be read.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use porin_flows::observe::{Problem, Recording, record};
use porin_flows::parse::Skip;
use porin_flows::reader::ReadLimits;
use porin_flows::record::Recorded;
use porin_flows::replay::{Aggregate, Edge, Finding, Report, replay};
use porin_model::diagnostic::{Diagnostic, Location};
use serde_json::json;

use super::compile::load_and_compile;
use crate::limit_flags::LimitArgs;
use crate::render::sarif;
use crate::target_flags::TargetArgs;

/// Output format of `porin replay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplayFormat {
    /// Text: a summary, then each finding with its counts and rules.
    Human,
    /// JSON (`summary`, `read`, `newlyDenied`, `newlyAllowed`, `disagreements`, `problems`).
    Json,
    /// Markdown tables (for a pull-request comment).
    Markdown,
    /// SARIF 2.1.0: newly denied flows on the policy lines that deny them.
    Sarif,
}

/// Arguments of `porin replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A flow file (`hubble observe -o json` or `-o jsonpb` lines; `-` for
    /// standard input); repeat for more files.
    #[arg(long = "flows", value_name = "FILE", required = true)]
    pub flows: Vec<PathBuf>,
    /// The policies to judge: files or directories.
    #[arg(required = true)]
    pub policies: Vec<PathBuf>,
    /// Inventory (porin inventory, Kubernetes manifests or a Cilium dump).
    #[arg(long)]
    pub inventory: PathBuf,
    /// The policies in force when the flows were recorded (file or
    /// directory; repeatable): porin's verdict under them is checked
    /// against Cilium's (fidelity).
    #[arg(long, value_name = "PATH")]
    pub current: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ReplayFormat::Human)]
    pub format: ReplayFormat,
    /// Longest line of a flow file, in bytes (longer lines are rejected
    /// unread).
    #[arg(long, value_name = "BYTES", default_value_t = ReadLimits::default().max_line_bytes)]
    pub max_flow_line_bytes: usize,
    /// The Cilium the policies are decided for.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Resource limits.
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// `12408` as `12,408` (lint's findings print counts the same way).
pub fn thousands(n: u64) -> String {
    porin_lint::thousands(usize::try_from(n).unwrap_or(usize::MAX))
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

fn span(a: &Aggregate) -> String {
    match (a.first, a.last) {
        (Some(first), Some(last)) if first == last => format!("at {first}"),
        (Some(first), Some(last)) => format!("{first} – {last}"),
        _ => "no time recorded".to_owned(),
    }
}

fn recorded_word(recorded: Recorded) -> &'static str {
    match recorded {
        Recorded::Allowed => "forwarded",
        Recorded::Denied => "dropped by policy",
    }
}

/// The summary sentence.
pub fn summary(report: &Report, recording: &Recording) -> String {
    let mut parts = Vec::new();
    for finding in Finding::ALL {
        if finding == Finding::Disagreement && !report.fidelity_checked {
            continue;
        }
        let edges = report.edges_of(finding) as u64;
        let flows = report.count(finding);
        let what = match finding {
            Finding::NewlyDenied => "newly denied",
            Finding::NewlyAllowed => "newly allowed",
            Finding::Disagreement => "in fidelity disagreement",
        };
        parts.push(if edges == 0 {
            format!("nothing {what}")
        } else {
            format!(
                "{} carrying {} {what}",
                plural(edges, "edge", "edges"),
                plural(flows, "flow", "flows")
            )
        });
    }
    format!(
        "{} decided ({} distinct edges) from {}: {}",
        plural(report.decided, "flow", "flows"),
        thousands(report.edges as u64),
        plural(recording.files.len() as u64, "file", "files"),
        parts.join(", ")
    )
}

fn read_line(recording: &Recording) -> String {
    let stats = &recording.stats;
    let mut parts: Vec<String> = Skip::ALL
        .iter()
        .filter(|s| stats.skipped(**s) > 0)
        .map(|s| format!("{} {}", thousands(stats.skipped(*s)), s.describe()))
        .collect();
    if recording.unmapped > 0 {
        parts.push(format!(
            "{} with an end no endpoint matches",
            plural(recording.unmapped, "flow", "flows")
        ));
    }
    for (what, n) in &recording.not_policy {
        parts.push(format!("{} {what} (no policy decision)", thousands(*n)));
    }
    let mut text = format!(
        "read {}: {}",
        plural(stats.lines, "line", "lines"),
        plural(stats.flows, "flow", "flows")
    );
    if !parts.is_empty() {
        let _ = write!(text, "; skipped {}", parts.join(", "));
    }
    if stats.rejected > 0 {
        let _ = write!(
            text,
            "; {} rejected",
            plural(stats.rejected, "line", "lines")
        );
    }
    text
}

fn problem_text(p: &Problem) -> String {
    format!(
        "{}:{}:{}: {}[{}]: {}",
        p.file,
        p.line,
        p.column,
        p.code.severity.as_str(),
        p.code.code,
        p.message
    )
}

fn human(report: &Report, recording: &Recording) -> String {
    let mut text = format!("{}\n{}\n", summary(report, recording), read_line(recording));
    for finding in Finding::ALL {
        let Some(edges) = report.findings.get(&finding) else {
            continue;
        };
        let _ = writeln!(text, "\n{}:", finding.title());
        for (edge, a) in edges {
            let _ = writeln!(
                text,
                "  {} → {} {}: {}, {}",
                edge.from,
                edge.to,
                edge.ports(),
                plural(a.flows, "flow", "flows"),
                span(a)
            );
            let cited = if a.cited.is_empty() {
                String::new()
            } else {
                format!(
                    " (Hubble cites {})",
                    a.cited.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            };
            let _ = writeln!(
                text,
                "      recorded {}{cited}; porin: {}",
                recorded_word(a.recorded),
                a.porin
            );
            for rule in &a.rules {
                let _ = writeln!(text, "      because {}", rule.text);
            }
            let _ = writeln!(text, "      first at {}:{}", a.example.0, a.example.1);
        }
    }
    if !recording.problems.is_empty() {
        text.push_str("\nproblems:\n");
        for p in &recording.problems {
            let _ = writeln!(text, "  {}", problem_text(p));
        }
        if recording.more_problems > 0 {
            let _ = writeln!(
                text,
                "  ... and {} more",
                thousands(recording.more_problems)
            );
        }
    }
    text
}

fn markdown(report: &Report, recording: &Recording) -> String {
    let cell = |s: &str| s.replace('|', "\\|");
    let mut text = format!(
        "**porin replay**: {}\n\n{}\n",
        summary(report, recording),
        read_line(recording)
    );
    for finding in Finding::ALL {
        let Some(edges) = report.findings.get(&finding) else {
            continue;
        };
        let _ = write!(
            text,
            "\n### {}\n\n| from | to | port | flows | first | last | recorded | porin | because |\n|---|---|---|---:|---|---|---|---|---|\n",
            finding.title()
        );
        for (edge, a) in edges {
            let because: Vec<String> = a.rules.iter().map(|r| cell(&r.text)).collect();
            let _ = writeln!(
                text,
                "| `{}` | `{}` | {} | {} | {} | {} | {} | {} | {} |",
                edge.from,
                edge.to,
                edge.ports(),
                thousands(a.flows),
                a.first.map(|t| t.to_string()).unwrap_or_default(),
                a.last.map(|t| t.to_string()).unwrap_or_default(),
                recorded_word(a.recorded),
                a.porin,
                because.join("<br>")
            );
        }
    }
    if !recording.problems.is_empty() {
        text.push_str("\n<details><summary>problems</summary>\n\n```text\n");
        for p in &recording.problems {
            let _ = writeln!(text, "{}", problem_text(p));
        }
        text.push_str("```\n</details>\n");
    }
    text
}

fn edge_json(edge: &Edge, a: &Aggregate) -> serde_json::Value {
    json!({
        "from": edge.from,
        "to": edge.to,
        "protocol": porin_compiler::resolve::rule::proto::static_name(edge.proto),
        "port": edge.port,
        "flows": a.flows,
        "first": a.first.map(|t| t.to_string()),
        "last": a.last.map(|t| t.to_string()),
        "recorded": recorded_word(a.recorded),
        "porin": a.porin.to_string(),
        "rules": a.rules.iter().map(|r| json!({
            "text": r.text, "file": r.file, "line": r.line, "route": r.route,
        })).collect::<Vec<_>>(),
        "cited": a.cited,
        "example": {"file": a.example.0, "line": a.example.1},
    })
}

fn to_json(report: &Report, recording: &Recording) -> String {
    let stats = &recording.stats;
    let mut skipped = serde_json::Map::new();
    for s in Skip::ALL {
        skipped.insert(s.key().to_owned(), json!(stats.skipped(s)));
    }
    let mut value = json!({
        "summary": {
            "text": summary(report, recording),
            "decided": report.decided,
            "unchanged": report.unchanged,
            "edges": report.edges,
            "fidelityChecked": report.fidelity_checked,
        },
        "read": {
            "files": recording.files,
            "lines": stats.lines,
            "flows": stats.flows,
            "skipped": skipped,
            "rejected": stats.rejected,
            "unmapped": recording.unmapped,
            "notPolicy": recording.not_policy,
        },
        "problems": recording.problems.iter().map(|p| json!({
            "code": p.code.code, "severity": p.code.severity.as_str(),
            "file": p.file, "line": p.line, "column": p.column, "message": p.message,
        })).collect::<Vec<_>>(),
        "moreProblems": recording.more_problems,
    });
    for finding in Finding::ALL {
        let list: Vec<serde_json::Value> = report
            .findings
            .get(&finding)
            .map(|m| m.iter().map(|(e, a)| edge_json(e, a)).collect())
            .unwrap_or_default();
        value[finding.key()] = json!(list);
    }
    let mut text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

/// The findings as diagnostics: each finding on each rule responsible that
/// has a file (else on the flow file's line of its first event), and the
/// recording's problems on their flow file lines.
pub fn diagnostics(report: &Report, recording: &Recording) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (finding, edges) in &report.findings {
        for (edge, a) in edges {
            let message = format!(
                "{} → {} {}: {} {} in the recording ({}) {}",
                edge.from,
                edge.to,
                edge.ports(),
                plural(a.flows, "flow", "flows"),
                recorded_word(a.recorded),
                span(a),
                match finding {
                    Finding::NewlyDenied => "would be denied",
                    Finding::NewlyAllowed => "would be allowed",
                    Finding::Disagreement => "get another verdict from porin",
                }
            );
            let mut located = false;
            for rule in a.rules.iter().filter(|r| !r.file.is_empty()) {
                located = true;
                let mut d = Diagnostic::new(finding.code(), message.clone()).at(Location {
                    file: rule.file.clone(),
                    document: rule.document,
                    line: rule.line,
                    column: 0,
                    route: rule.route.clone(),
                });
                d.notes.push(format!("porin: {} by {}", a.porin, rule.text));
                if !a.cited.is_empty() {
                    d.notes.push(format!(
                        "Hubble cites {}",
                        a.cited.iter().cloned().collect::<Vec<_>>().join(", ")
                    ));
                }
                d.notes
                    .push(format!("first event at {}:{}", a.example.0, a.example.1));
                out.push(d);
            }
            if !located {
                let mut d = Diagnostic::new(finding.code(), message).at(Location {
                    file: a.example.0.clone(),
                    document: 0,
                    line: u32::try_from(a.example.1).unwrap_or(u32::MAX),
                    column: 1,
                    route: String::new(),
                });
                d.notes
                    .extend(a.rules.iter().map(|r| format!("porin: {}", r.text)));
                out.push(d);
            }
        }
    }
    for p in &recording.problems {
        out.push(Diagnostic::new(p.code, p.message.clone()).at(Location {
            file: p.file.clone(),
            document: 0,
            line: u32::try_from(p.line).unwrap_or(u32::MAX),
            column: u32::try_from(p.column).unwrap_or(1),
            route: String::new(),
        }));
    }
    out
}

/// Runs `porin replay`.
pub fn run(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let limits = args.limits.limits();
    let target = args.target.choice();
    if args.inventory.as_os_str() == "-" {
        anyhow::bail!(
            "porin replay reads the inventory once per policy set: give a file or directory, not `-`"
        );
    }
    let Ok((proposed, _)) = load_and_compile(&args.policies, &args.inventory, &limits, &target)?
    else {
        return Ok(ExitCode::from(1));
    };
    let current = if args.current.is_empty() {
        None
    } else {
        let Ok((current, _)) = load_and_compile(&args.current, &args.inventory, &limits, &target)?
        else {
            return Ok(ExitCode::from(1));
        };
        Some(current)
    };
    let mut compilations = vec![&proposed];
    compilations.extend(current.as_ref());
    let read_limits = ReadLimits {
        max_line_bytes: args.max_flow_line_bytes,
    };
    let recording = record(&args.flows, &compilations, read_limits).map_err(anyhow::Error::msg)?;
    let report = replay(&recording, &proposed, current.as_ref());
    let text = match args.format {
        ReplayFormat::Human => human(&report, &recording),
        ReplayFormat::Json => to_json(&report, &recording),
        ReplayFormat::Markdown => markdown(&report, &recording),
        ReplayFormat::Sarif => sarif::render(
            &diagnostics(&report, &recording),
            &sarif::RunInfo {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                fallback_file: args.flows.first().map(|p| p.display().to_string()),
                failure: None,
            },
        ),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to standard output")?;
    let clean = report.findings.values().all(|m| m.is_empty()) && recording.stats.rejected == 0;
    Ok(if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
