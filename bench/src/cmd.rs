//! Running the system tools the rig needs (`ip`, `tc`, `nsenter`, `iptables-nft-restore`, `nft`).

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// Runs `program args`, returns stdout; fails with the tool's stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    run_with_input(program, args, None)
}

/// As [`run`], feeding `input` to stdin (for `iptables-restore` and `nft -f -`).
pub fn run_with_input(program: &str, args: &[&str], input: Option<&str>) -> Result<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    if let Some(text) = input {
        // Write on a thread so a tool that fills its stdout pipe first cannot deadlock us.
        let mut stdin = child.stdin.take().context("stdin")?;
        let text = text.to_owned();
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        let output = child.wait_with_output()?;
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("stdin writer panicked"))?
            .with_context(|| format!("writing to {program}"))?;
        return finish(program, args, &output);
    }
    let output = child.wait_with_output()?;
    finish(program, args, &output)
}

fn finish(program: &str, args: &[&str], output: &std::process::Output) -> Result<String> {
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        let shown: Vec<&str> = args.iter().take(12).copied().collect();
        bail!(
            "{program} {shown:?} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
    }
}

/// Runs `program args` inside the network namespace `ns` (via `nsenter --net=`, which, unlike
/// `ip netns exec`, leaves `/sys/fs/bpf` visible).
pub fn in_netns(ns: &str, program: &str, args: &[&str], input: Option<&str>) -> Result<String> {
    let net = format!("--net=/run/netns/{ns}");
    let mut full = vec![net.as_str(), program];
    full.extend_from_slice(args);
    run_with_input("nsenter", &full, input)
}

/// Whether `program` can be started at all.
pub fn available(program: &str, version_flag: &str) -> bool {
    Command::new(program)
        .arg(version_flag)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}
