//! The release archive of `scripts/dist`, installed the way the README
//! says (scripts/install, checksum-verified, into an empty prefix, no Rust
//! toolchain on PATH), and the container image (`Containerfile`) built with
//! podman and smoke-tested from its exported filesystem (this sandbox's
//! runtime refuses `podman run`).

use std::path::Path;
use std::process::Command;

use crate::common::dist::{self, SYSTEM_PATH, Scratch, TARGET, archive_name, run, version};
use crate::common::workspace;

fn install(dist_dir: &Path, prefix: &Path) -> (i32, String, String) {
    run(Command::new(workspace().join("scripts/install"))
        .args(["--version", version(), "--target", TARGET, "--base-url"])
        .arg(format!("file://{}", dist_dir.display()))
        .arg("--dir")
        .arg(prefix.join("bin"))
        .env_clear()
        .env("PATH", SYSTEM_PATH)
        .env("HOME", prefix))
}

#[test]
fn the_archive_holds_the_binary_and_its_documents_and_its_checksum() {
    let Some(dir) = dist::dist_dir() else { return };
    let name = archive_name();
    let (code, listing, stderr) = run(Command::new("tar").arg("-tzf").arg(dir.join(&name)));
    assert_eq!(code, 0, "{stderr}");
    let stem = name.trim_end_matches(".tar.gz");
    for file in [
        "porin",
        "README.md",
        "LICENSE",
        "CHANGELOG.md",
        "docs/ci.md",
    ] {
        assert!(
            listing.lines().any(|l| l == format!("{stem}/{file}")),
            "{file} missing from {name}:\n{listing}"
        );
    }
    let (code, out, stderr) = run(Command::new("sha256sum")
        .args(["--check", "--strict"])
        .arg(format!("{name}.sha256"))
        .current_dir(dir));
    assert_eq!(code, 0, "{out}{stderr}");
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).expect("SHA256SUMS");
    assert!(
        sums.lines().any(|l| l.ends_with(&format!("  {name}"))),
        "{sums}"
    );
}

#[test]
fn the_archive_installs_into_an_empty_prefix_without_rust() {
    let Some(dir) = dist::dist_dir() else { return };
    let prefix = Scratch::new("install-prefix");
    let (code, out, stderr) = install(dir, &prefix.0);
    assert_eq!(code, 0, "scripts/install failed:\n{out}{stderr}");
    let porin = prefix.join("bin/porin");
    assert_eq!(out.trim(), porin.display().to_string());
    let (code, out, _) = run(Command::new(&porin).arg("--version").env_clear());
    assert_eq!(
        (code, out.trim()),
        (0, format!("porin {}", version()).as_str())
    );
    // The README's first example, with the installed binary.
    let (code, out, stderr) = run(Command::new(&porin)
        .args(["lint", "examples/quickstart/policies"])
        .current_dir(workspace())
        .env_clear()
        .env("NO_COLOR", "1"));
    assert_eq!(code, 0, "{out}{stderr}");
    assert!(out.contains("valid policies loaded"), "{out}");
    // It is the static binary: no ELF interpreter to find on the machine.
    let (_, headers, _) = run(Command::new("readelf").arg("-l").arg(&porin));
    assert!(
        !headers.contains("INTERP"),
        "dynamically linked:\n{headers}"
    );
}

#[test]
fn a_corrupted_archive_is_refused_and_nothing_is_installed() {
    let Some(dir) = dist::dist_dir() else { return };
    let mirror = Scratch::new("install-corrupt");
    let name = archive_name();
    let mut bytes = std::fs::read(dir.join(&name)).expect("archive");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(mirror.join(&name), bytes).expect("write corrupt archive");
    std::fs::copy(
        dir.join(format!("{name}.sha256")),
        mirror.join(&format!("{name}.sha256")),
    )
    .expect("copy checksum");
    let (code, out, stderr) = install(&mirror.0, &mirror.join("prefix"));
    assert_eq!(code, 1, "{out}{stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(!mirror.join("prefix/bin/porin").exists());
}

/// `podman` with its own storage under `dir`, so the test neither needs
/// nor touches the machine's image store.
fn podman(dir: &Path) -> Command {
    let mut command = Command::new("podman");
    command
        .arg("--root")
        .arg(dir.join("storage"))
        .arg("--runroot")
        .arg(dir.join("run"))
        .args([
            "--storage-driver",
            "vfs",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "none",
        ]);
    command
}

#[test]
fn the_container_image_builds_and_porin_runs_from_its_exported_root() {
    if !dist::have_all(&["podman", "chroot"]) {
        return;
    }
    let Some(dir) = dist::dist_dir() else { return };
    let scratch = Scratch::new("image");
    let image = format!("localhost/porin-test:{}", version());
    let (code, out, stderr) = run(podman(&scratch.0)
        .args(["build", "--quiet", "-f"])
        .arg(workspace().join("Containerfile"))
        .args([
            "--build-arg",
            &format!("VERSION={}", version()),
            "-t",
            &image,
        ])
        .arg(dir));
    assert_eq!(code, 0, "podman build failed:\n{out}{stderr}");

    // The image's configuration: non-root, porin as the entry point, OCI labels.
    let (code, config, stderr) = run(podman(&scratch.0).args([
        "image",
        "inspect",
        "--format",
        "{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Labels}}",
        &image,
    ]));
    assert_eq!(code, 0, "{stderr}");
    let (user, rest) = config
        .trim()
        .split_once('|')
        .expect("user|entrypoint|labels");
    let (entrypoint, labels) = rest.split_once('|').expect("entrypoint|labels");
    assert_eq!(user, "65532:65532");
    assert_eq!(entrypoint, r#"["/usr/bin/porin"]"#);
    let labels: serde_json::Value = serde_json::from_str(labels).expect("labels JSON");
    assert_eq!(labels["org.opencontainers.image.version"], version());
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert_eq!(labels["org.opencontainers.image.title"], "porin");

    // Export the filesystem of a created (never started) container.
    let (code, id, stderr) = run(podman(&scratch.0).args(["create", &image]));
    assert_eq!(code, 0, "podman create failed:\n{stderr}");
    let rootfs = scratch.join("rootfs");
    std::fs::create_dir_all(&rootfs).expect("rootfs dir");
    let export = scratch.join("rootfs.tar");
    let (code, _, stderr) = run(podman(&scratch.0)
        .args(["export", "-o"])
        .arg(&export)
        .arg(id.trim()));
    assert_eq!(code, 0, "podman export failed:\n{stderr}");
    let (code, _, stderr) = run(Command::new("tar")
        .arg("-xf")
        .arg(&export)
        .arg("-C")
        .arg(&rootfs));
    assert_eq!(code, 0, "{stderr}");
    // FROM scratch: nothing but porin and its documents (no shell to exploit).
    assert!(rootfs.join("usr/bin/porin").is_file());
    assert!(rootfs.join("usr/share/doc/porin/LICENSE").is_file());
    assert!(!rootfs.join("bin/sh").exists());

    // Run the image's binary inside its own root, as the image's user.
    let work = rootfs.join("work/quickstart");
    std::fs::create_dir_all(work.join("policies")).expect("work dir");
    let quickstart = workspace().join("examples/quickstart");
    std::fs::copy(
        quickstart.join("policies/api.yaml"),
        work.join("policies/api.yaml"),
    )
    .expect("copy policy");
    std::fs::copy(
        quickstart.join("inventory.yaml"),
        work.join("inventory.yaml"),
    )
    .expect("copy inventory");
    let chroot = |args: &[&str]| {
        run(Command::new("chroot")
            .arg("--userspec=65532:65532")
            .arg(&rootfs)
            .arg("/usr/bin/porin")
            .args(args)
            .env_clear()
            .env("PATH", SYSTEM_PATH)
            .env("NO_COLOR", "1"))
    };
    let (code, out, stderr) = chroot(&["--version"]);
    assert_eq!(
        (code, out.trim()),
        (0, format!("porin {}", version()).as_str()),
        "{stderr}"
    );
    let (code, out, stderr) = chroot(&[
        "lint",
        "/work/quickstart/policies",
        "--inventory",
        "/work/quickstart/inventory.yaml",
    ]);
    assert_eq!(code, 0, "{out}{stderr}");
    assert!(out.contains("2 valid policies loaded"), "{out}");
}

/// The README's install lines, as written, up to the first alternative
/// (`# or:`), with `REPO` pointed at a directory laid out like the
/// releases (`releases/download/vVERSION/`) holding the local archive.
#[test]
fn the_readmes_install_lines_give_a_working_porin() {
    let Some(dir) = dist::dist_dir() else { return };
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README");
    let section = &readme[readme.find("## Install").expect("an Install section")..];
    let block = &section[section.find("```sh\n").expect("a sh block") + 6..];
    let block = &block[..block.find("```").expect("closed block")];
    let lines: Vec<&str> = block
        .lines()
        .take_while(|l| !l.starts_with("# or:"))
        .collect();
    let script = lines.join("\n");
    assert!(
        script.starts_with("REPO=https://example.invalid/porin "),
        "the first line sets REPO:\n{script}"
    );
    let scratch = Scratch::new("readme-install");
    let releases = scratch.join(&format!("releases/download/v{}", version()));
    std::fs::create_dir_all(&releases).expect("releases dir");
    for file in [archive_name(), format!("{}.sha256", archive_name())] {
        std::fs::copy(dir.join(&file), releases.join(&file)).expect("copy release file");
    }
    let script = script.replacen(
        "REPO=https://example.invalid/porin",
        &format!("REPO=file://{}", scratch.0.display()),
        1,
    );
    let home = scratch.join("home");
    let work = scratch.join("work");
    std::fs::create_dir_all(&work).expect("work dir");
    let (code, out, stderr) = run(Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&work)
        .env_clear()
        .env("PATH", SYSTEM_PATH)
        .env("HOME", &home));
    assert_eq!(
        code, 0,
        "the README's install lines failed:\n{script}\n{out}{stderr}"
    );
    let (code, out, _) = run(Command::new(home.join(".local/bin/porin")).arg("--version"));
    assert_eq!(
        (code, out.trim()),
        (0, format!("porin {}", version()).as_str())
    );
}
