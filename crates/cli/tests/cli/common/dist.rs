//! The release archive the packaging tests share (`scripts/dist`), and the
//! CI/SKIPPED rule for the external tools they drive: in CI (`CI=true`) a
//! missing tool fails the test, elsewhere the test prints `SKIPPED: ...`
//! and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::workspace;

/// The Linux target of the release binary (static, musl).
pub const TARGET: &str = "x86_64-unknown-linux-musl";

/// True when running in CI.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Fails in CI, prints SKIPPED elsewhere; the caller returns.
pub fn skip(reason: &str) {
    assert!(!in_ci(), "CI=true but this test cannot run: {reason}");
    println!("SKIPPED: {reason}");
}

/// Whether every program runs (`PROGRAM --version`); reports the first
/// missing one through [`skip`].
pub fn have_all(programs: &[&str]) -> bool {
    for program in programs {
        let runs = Command::new(program)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            skip(&format!("{program} is not installed"));
            return false;
        }
    }
    true
}

/// The workspace version (`porin --version` prints `porin VERSION`).
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The directory `scripts/dist` wrote, holding
/// `porin-VERSION-TARGET.tar.gz` and its `.sha256`: `PORIN_DIST_DIR` when
/// set (`.ci/run` builds it once before the tests), else `target/dist`
/// built now (a no-op cargo build when fresh). `None` (after [`skip`]) when
/// the musl target is not installed.
pub fn dist_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("PORIN_DIST_DIR") {
            return Ok(PathBuf::from(dir));
        }
        let libdir = Command::new("rustc")
            .args(["--print", "target-libdir", "--target", TARGET])
            .output()
            .map_err(|e| format!("rustc: {e}"))?;
        let libdir = PathBuf::from(String::from_utf8_lossy(&libdir.stdout).trim());
        let has_std = std::fs::read_dir(&libdir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("libstd-"))
        });
        if !has_std {
            return Err(format!(
                "the Rust target {TARGET} is not installed (rustup target add {TARGET})"
            ));
        }
        let out = workspace().join("target/dist");
        let status = Command::new(workspace().join("scripts/dist"))
            .args(["--target", TARGET, "--out"])
            .arg(&out)
            .current_dir(workspace())
            .status()
            .map_err(|e| format!("scripts/dist: {e}"))?;
        assert!(status.success(), "scripts/dist failed: {status}");
        Ok(out)
    });
    match built {
        Ok(dir) => Some(dir.as_path()),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// The archive's file name.
pub fn archive_name() -> String {
    format!("porin-{}-{TARGET}.tar.gz", version())
}

/// A fresh temporary directory under the target directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// Creates `target/tmp/NAME-PID` empty.
    pub fn new(name: &str) -> Scratch {
        let dir = workspace()
            .join("target/tmp")
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        Scratch(dir.canonicalize().expect("canonical scratch dir"))
    }

    /// A path inside.
    pub fn join(&self, path: &str) -> PathBuf {
        self.0.join(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a command, returning (exit code, stdout, stderr).
pub fn run(command: &mut Command) -> (i32, String, String) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A PATH with the system's tools only: no cargo, no rustc, no porin.
pub const SYSTEM_PATH: &str = "/usr/sbin:/usr/bin:/sbin:/bin";

/// Runs `git ARGS...` in `dir` and returns stdout. Commits get an
/// identity and a fixed date, so the same files give the same commit.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(Command::new("git")
        .args([
            "-c",
            "user.name=porin-test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .env("GIT_AUTHOR_DATE", "2000-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2000-01-01T00:00:00Z")
        .current_dir(dir));
    assert_eq!(code, 0, "git {args:?}: {out}{err}");
    out
}
