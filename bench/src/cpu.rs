//! CPU time from the scheduler: `/proc/<pid>/task/<tid>/schedstat` (first field: nanoseconds
//! on a CPU, exact, not tick-sampled). This kernel has no `CONFIG_IRQ_TIME_ACCOUNTING`, so
//! softirq work done on a task's stack (veth delivery, tc and netfilter hooks run in the
//! sender's softirq) is in that task's time; softirq work deferred to `ksoftirqd/N` is read
//! from those threads. Other processes on the (shared) machine are not counted.

use std::fs;

/// Nanoseconds on a CPU of one thread, from a `schedstat` file.
fn schedstat_ns(path: &str) -> Option<u64> {
    fs::read_to_string(path)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU nanoseconds of the calling thread so far.
pub fn this_thread_ns() -> u64 {
    schedstat_ns("/proc/thread-self/schedstat").unwrap_or(0)
}

/// CPU nanoseconds of every current thread of process `pid`.
pub fn process_ns(pid: u32) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| {
            schedstat_ns(&format!(
                "/proc/{pid}/task/{}/schedstat",
                task.file_name().to_string_lossy()
            ))
        })
        .sum()
}

/// CPU nanoseconds of the current threads of process `pid`, split by thread name
/// (`/proc/<pid>/task/<tid>/comm`): `(named, others)`, where `named` sums the threads for which
/// `is_named(comm)` holds (QEMU's vCPU threads, `CPU 0/TCG`).
pub fn process_ns_split(pid: u32, is_named: impl Fn(&str) -> bool) -> (u64, u64) {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return (0, 0);
    };
    let (mut named, mut others) = (0, 0);
    for task in tasks.flatten() {
        let tid = task.file_name().to_string_lossy().into_owned();
        let Some(ns) = schedstat_ns(&format!("/proc/{pid}/task/{tid}/schedstat")) else {
            continue;
        };
        let comm = fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).unwrap_or_default();
        if is_named(comm.trim()) {
            named += ns;
        } else {
            others += ns;
        }
    }
    (named, others)
}

/// The pids of the `ksoftirqd/N` kernel threads.
pub fn ksoftirqd_pids() -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_string_lossy().parse().ok()?;
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            comm.starts_with("ksoftirqd/").then_some(pid)
        })
        .collect()
}

/// CPU nanoseconds of the `ksoftirqd` threads.
pub fn ksoftirqd_ns(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|pid| schedstat_ns(&format!("/proc/{pid}/schedstat")))
        .sum()
}

/// The `VmHWM` (peak resident set) of this process in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// The load averages line of `/proc/loadavg` (first three fields).
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_accumulates_cpu_time() {
        let before = this_thread_ns();
        // The scheduler folds a running thread's time into schedstat at its accounting points
        // (tick, switch, the read itself on some kernels), so a short loop in a release build
        // may not show yet: spin until it does, for at most two seconds of wall time.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while this_thread_ns() == before && start.elapsed() < std::time::Duration::from_secs(2) {
            for i in 0..200_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
        }
        assert!(this_thread_ns() > before);
        assert!(process_ns(std::process::id()) >= this_thread_ns());
        let (named, others) = process_ns_split(std::process::id(), |_| false);
        assert_eq!(named, 0);
        assert!(others >= this_thread_ns());
        assert!(peak_rss_kib().unwrap() > 0);
    }
}
