//! Running a tool (`porin`, `nca`) as a measured child process: wall time, peak resident set
//! (`ru_maxrss` from `wait4(2)`, the kernel's own high-water mark of that process) and a wall-time
//! limit after which the child is killed and the run reported as not finished.
//!
//! `wait4` is the one call std does not offer (its `Child::wait` drops the resource usage), so
//! this module has `unsafe` code (with `echo::mmsg`, porin-bench's only): one `wait4` and one
//! `kill`, each on a pid this module spawned and has not reaped yet.
#![allow(
    unsafe_code,
    reason = "wait4(2) for the child's rusage and kill(2) at the timeout; see the module docs"
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How one run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exited with this status code.
    Exited(i32),
    /// Killed by this signal (not by us).
    Signalled(i32),
    /// Still running at the time limit; killed.
    TimedOut,
}

/// One measured run.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// How it ended.
    pub outcome: Outcome,
    /// Wall seconds from spawn to exit (or to the kill).
    pub wall_secs: f64,
    /// Peak resident set of the child, KiB (`ru_maxrss`).
    pub max_rss_kib: u64,
    /// The limit it ran under.
    pub limit_secs: f64,
}

impl Run {
    /// Exited with status 0 or 1 (porin: "ran"; 1 means it found errors).
    pub fn ran(&self) -> bool {
        matches!(self.outcome, Outcome::Exited(0 | 1))
    }

    /// The outcome as a table cell suffix: empty for a normal exit 0.
    pub fn note(&self) -> String {
        match self.outcome {
            Outcome::Exited(0) => String::new(),
            Outcome::Exited(code) => format!("exit {code}"),
            Outcome::Signalled(9) => "killed (SIGKILL: out of memory?)".to_owned(),
            Outcome::Signalled(signal) => format!("killed by signal {signal}"),
            Outcome::TimedOut => format!("did not finish in {:.0} s", self.limit_secs),
        }
    }
}

/// What to run.
pub struct Spec<'a> {
    /// The program and its arguments.
    pub program: &'a Path,
    /// Arguments.
    pub args: Vec<String>,
    /// Extra environment (e.g. `RAYON_NUM_THREADS`).
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: &'a Path,
    /// Where stdout goes: a file, or `/dev/null` when `None`.
    pub stdout: Option<&'a Path>,
    /// Where stderr goes: a file, or `/dev/null` when `None`.
    pub stderr: Option<&'a Path>,
    /// Wall-time limit.
    pub timeout: Duration,
    /// Address-space limit in bytes (through `prlimit --as`, when `prlimit` exists): a size
    /// that needs more fails instead of pushing the shared machine into swap.
    pub memory_limit: Option<u64>,
}

fn wait4(pid: libc::pid_t) -> std::io::Result<(i32, libc::rusage)> {
    let mut status: libc::c_int = 0;
    // SAFETY: all-zero is a valid `rusage` (plain integers and timevals).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own unreaped child; both pointers are to live locals.
        let ret = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if ret == pid {
            return Ok((status, usage));
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

fn kill(pid: libc::pid_t) {
    // SAFETY: `pid` is our child and not reaped (the waiter has not reported), so it cannot
    // have been reused.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

fn sink(path: Option<&Path>) -> Result<Stdio> {
    Ok(match path {
        Some(path) => std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?
            .into(),
        None => Stdio::null(),
    })
}

/// Runs `spec` to completion or to its time limit.
pub fn run(spec: &Spec<'_>) -> Result<Run> {
    let prlimit = spec
        .memory_limit
        .filter(|_| crate::cmd::available("prlimit", "--version"));
    let mut command = match prlimit {
        Some(bytes) => {
            // prlimit sets the limit and execs the program: same pid, so the rusage is the
            // program's.
            let mut c = Command::new("prlimit");
            c.arg(format!("--as={bytes}")).arg("--").arg(spec.program);
            c
        }
        None => Command::new(spec.program),
    };
    command
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(spec.cwd)
        .stdin(Stdio::null())
        .stdout(sink(spec.stdout)?)
        .stderr(sink(spec.stderr)?);
    let start = Instant::now();
    let child = command
        .spawn()
        .with_context(|| format!("cannot start {}", spec.program.display()))?;
    let pid = libc::pid_t::try_from(child.id()).context("pid out of range")?;
    // std's `Child` is dropped without waiting; the waiter thread reaps the pid.
    drop(child);
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send((wait4(pid), Instant::now()));
    });
    let (result, end, timed_out) = match receiver.recv_timeout(spec.timeout) {
        Ok((result, end)) => (result, end, false),
        Err(_) => {
            kill(pid);
            let (result, end) = receiver.recv().context("the waiter thread vanished")?;
            (result, end, true)
        }
    };
    let (status, usage) = result.context("wait4")?;
    let outcome = if timed_out {
        Outcome::TimedOut
    } else if libc::WIFEXITED(status) {
        Outcome::Exited(libc::WEXITSTATUS(status))
    } else {
        Outcome::Signalled(libc::WTERMSIG(status))
    };
    Ok(Run {
        outcome,
        wall_secs: end.duration_since(start).as_secs_f64(),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        limit_secs: spec.timeout.as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(program: &'static str, args: &[&str], timeout_ms: u64) -> Spec<'static> {
        Spec {
            program: Path::new(program),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            env: vec![],
            cwd: Path::new("/"),
            stdout: None,
            stderr: None,
            timeout: Duration::from_millis(timeout_ms),
            memory_limit: None,
        }
    }

    #[test]
    fn exit_codes_and_memory_are_reported() {
        let ok = run(&spec("/bin/sh", &["-c", "exit 0"], 10_000)).unwrap();
        assert_eq!(ok.outcome, Outcome::Exited(0));
        assert!(ok.max_rss_kib > 0);
        let failed = run(&spec("/bin/sh", &["-c", "exit 3"], 10_000)).unwrap();
        assert_eq!(failed.outcome, Outcome::Exited(3));
        assert!(!failed.ran());
        assert_eq!(failed.note(), "exit 3");
    }

    #[test]
    fn a_run_past_its_limit_is_killed_and_reported() {
        let slow = run(&spec("/bin/sleep", &["30"], 200)).unwrap();
        assert_eq!(slow.outcome, Outcome::TimedOut);
        assert!(slow.wall_secs < 10.0, "{}", slow.wall_secs);
        assert!(slow.note().starts_with("did not finish in"));
    }
}
