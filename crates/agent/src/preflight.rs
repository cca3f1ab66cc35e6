//! Checks made before the agent touches the kernel, so that a missing privilege or a missing
//! bpffs is one clear sentence instead of an errno from the middle of a load.

use std::path::Path;

use crate::error::AgentError;

/// `CAP_NET_ADMIN`: attaching programs to network devices.
const CAP_NET_ADMIN: u32 = 12;
/// `CAP_SYS_ADMIN`: implies `CAP_BPF` on every kernel.
const CAP_SYS_ADMIN: u32 = 21;
/// `CAP_BPF` (Linux 5.8+): creating maps and loading programs.
const CAP_BPF: u32 = 39;

/// The effective capability mask (`CapEff` of `/proc/self/status`).
pub fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_cap_eff(&status)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// The capabilities the agent needs that `effective` lacks, by name (empty when none).
fn missing_capabilities(effective: u64) -> Vec<&'static str> {
    let has = |cap: u32| effective & (1u64 << cap) != 0;
    let mut missing = Vec::new();
    if !has(CAP_BPF) && !has(CAP_SYS_ADMIN) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_NET_ADMIN) {
        missing.push("CAP_NET_ADMIN");
    }
    missing
}

/// Fails with [`AgentError::Capabilities`] unless the process may load programs and attach them.
pub fn check_capabilities() -> Result<(), AgentError> {
    let Some(effective) = effective_capabilities() else {
        // Not Linux or no procfs: the kernel's own errors will say it.
        return Ok(());
    };
    let missing = missing_capabilities(effective);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(AgentError::Capabilities {
            missing: missing.join(" and "),
            effective,
        })
    }
}

/// Fails with [`AgentError::NoBpffs`] unless `state_dir` (or, when it does not exist yet, the
/// directory it would be created in) is on a mounted bpffs.
pub fn check_bpffs(state_dir: &Path) -> Result<(), AgentError> {
    let probe = state_dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(state_dir);
    match porin_kernel::pin::is_on_bpffs(probe) {
        Ok(true) => Ok(()),
        Ok(false) => Err(AgentError::NoBpffs(state_dir.to_path_buf())),
        Err(e) => Err(AgentError::io("/proc/self/mountinfo", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_read_from_cap_eff() {
        let status = "Name:\tporin\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        let effective = parse_cap_eff(status).unwrap();
        assert!(missing_capabilities(effective).is_empty());
        assert_eq!(missing_capabilities(0), vec!["CAP_BPF", "CAP_NET_ADMIN"]);
        // CAP_SYS_ADMIN stands in for CAP_BPF; CAP_NET_ADMIN is still needed.
        assert_eq!(missing_capabilities(1 << 21), vec!["CAP_NET_ADMIN"]);
        assert_eq!(
            missing_capabilities((1 << 39) | (1 << 12)),
            Vec::<&str>::new()
        );
    }
}
