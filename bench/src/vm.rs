//! The microVM rig: a real guest behind a tap device, filtered on the host the way a host
//! firewall for microVMs filters it.
//!
//! ```text
//!   netns porin-bench-vc-<pid>          netns porin-bench-vh-<pid> (the "host")           QEMU
//!   pbvc<pid> 10.213.0.1/24 <==veth==> pbvh<pid> 10.213.0.2/24   (routes)   pbt<pid> 10.213.1.1/24 ==tap== virtio-net
//!   (clients)                                                     filters here on the tap        guest 10.213.1.2
//! ```
//!
//! - **porin** attaches to the tap's tc hooks (tcx links as `porin agent` does, or a clsact
//!   qdisc with `PORIN_BENCH_ATTACH=clsact`: [`rig::AttachMode`]). The tap is the host's end of the guest's link,
//!   like a pod's host-side veth where Cilium attaches: what the guest *sends* arrives on the
//!   tap's **ingress** hook (QEMU writes it into the tap), so `porin_from_endpoint` (policy
//!   direction egress) goes there; what is routed *to* the guest leaves by the tap's **egress**
//!   hook, so `porin_to_endpoint` (ingress policy, peer = source) goes there. The programs are
//!   taken from the object ([`rig::attach`]).
//! - **The chains** sit on the host namespace's FORWARD hook, the hook that sees routed guest
//!   traffic: `-o tap` jumps to the N-rule chain (default drop), `-i tap` is accepted
//!   (`workload::ChainAt::ForwardTo`).
//! - **The guest**: a Debian cloud kernel (`linux-image-*-cloud-amd64`, unpacked with
//!   `dpkg-deb -x`; virtio, virtio-pci and virtio-net are modules there, so the initramfs
//!   carries them with their `depends=` closure and loads them in order), a busybox initramfs
//!   (`busybox-static`, `cpio`) whose `/init` configures `eth0` and execs a static echo server
//!   (`echo_std.rs`, built here with `rustc --target x86_64-unknown-linux-musl`).
//! - **Acceleration**: `-accel kvm` first, bounded by a timeout (on this machine KVM opens but
//!   the guest never comes up), then TCG; [`VmRig::accelerator`] says which one ran.
//! - **CPU**: under TCG the guest's emulation dominates every round trip, so the host side is
//!   counted apart from the guest: client threads, ksoftirqd and QEMU's threads other than the
//!   vCPU (`-name ...,debug-threads=on` names it `CPU 0/TCG`) are the host side; the vCPU
//!   thread is the guest.
//!
//! Everything lives in one private directory (created like `mkdtemp`, mode 0700) and in the
//! two namespaces; only addresses inside them are used. `Drop` kills QEMU, deletes the
//! namespaces (and with them the veth pair and the tap), unmounts the private bpffs and
//! removes the directory. The guest is bounded too: its echo server exits after a deadline
//! given on the kernel command line, which ends init, and the guest kernel panics and QEMU
//! (`-no-reboot`) exits, even if this process was killed before its `Drop`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use porin_kernel::{Direction, Program};

use crate::cmd::{in_netns, run};
use crate::cpu;
use crate::e2e::{Bed, E2eConfig, RunFigures};
use crate::echo::{self, READY, ThroughputResult};
use crate::rig::{self, DeviceSide, NETNS_PREFIX, Throughput, Traffic};
use crate::workload::{CLIENT, ChainAt, ECHO_PORT};

/// The guest's address.
pub const GUEST: Ipv4Addr = Ipv4Addr::new(10, 213, 1, 2);
/// The host's address on the tap (the guest's gateway).
const TAP_HOST: Ipv4Addr = Ipv4Addr::new(10, 213, 1, 1);
/// The host namespace's address on the client veth (the client's gateway).
const HOST_VETH: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
/// Prefix of the rig's private directory under the system temp dir.
pub const DIR_PREFIX: &str = "porin-bench-vm-";
/// The modules the guest needs for virtio-net on PCI (with their dependencies).
const GUEST_MODULES: [&str; 2] = ["virtio_pci", "virtio_net"];
/// Longest a TCG boot may take.
const TCG_BOOT_TIMEOUT: Duration = Duration::from_secs(180);
/// TCP echo threads in the guest (one per long-lived connection, plus spares).
const GUEST_TCP_THREADS: usize = 24;

/// How to build the guest.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// A `linux-image-*-cloud-amd64` package; `None`: `apt-get download` it.
    pub kernel_deb: Option<PathBuf>,
    /// How long to wait for the guest under KVM.
    pub kvm_timeout: Duration,
    /// Whether to try KVM at all.
    pub try_kvm: bool,
    /// Longest the guest lives: its echo server exits then, which ends the VM even when
    /// porin-bench was killed before its `Drop` could.
    pub guest_max_secs: u64,
}

/// The running microVM rig; removed on drop.
pub struct VmRig {
    dir: PathBuf,
    ns_client: String,
    ns_host: String,
    tap: String,
    bpffs: PathBuf,
    mounted: bool,
    namespaces: Vec<String>,
    qemu: Option<Child>,
    qemu_pid: u32,
    accel: &'static str,
    kernel: String,
}

impl VmRig {
    /// Builds the guest, the namespaces and the tap, and boots the guest (KVM, else TCG).
    pub fn new(config: &VmConfig) -> Result<Self> {
        rig::remove_leftovers();
        let pid = std::process::id();
        let dir = private_dir(pid)?;
        let mut vm = Self {
            dir,
            ns_client: format!("{NETNS_PREFIX}vc-{pid}"),
            ns_host: format!("{NETNS_PREFIX}vh-{pid}"),
            tap: format!("pbt{pid}"),
            bpffs: PathBuf::new(),
            mounted: false,
            namespaces: Vec::new(),
            qemu: None,
            qemu_pid: 0,
            accel: "none",
            kernel: String::new(),
        };
        let (vmlinuz, initrd) = vm.build_guest(config)?;
        vm.build_network()?;
        vm.bpffs = vm.dir.join("bpffs");
        fs::create_dir(&vm.bpffs).context("mkdir bpffs")?;
        run("mount", &["-t", "bpf", "bpf", &vm.bpffs.to_string_lossy()])?;
        vm.mounted = true;
        vm.boot(config, &vmlinuz, &initrd)?;
        Ok(vm)
    }

    /// `KVM` or `TCG`: what the guest runs under.
    pub fn accelerator(&self) -> &'static str {
        self.accel
    }

    /// The guest kernel and the initramfs, in the private directory.
    fn build_guest(&mut self, config: &VmConfig) -> Result<(PathBuf, PathBuf)> {
        let deb = match &config.kernel_deb {
            Some(deb) => deb.clone(),
            None => download_kernel(&self.dir)?,
        };
        let unpacked = self.dir.join("kernel");
        run(
            "dpkg-deb",
            &["-x", &deb.to_string_lossy(), &unpacked.to_string_lossy()],
        )?;
        let vmlinuz = only_entry(&unpacked.join("boot"), "vmlinuz-")?;
        let modules_root = only_entry(&unpacked.join("lib/modules"), "")?;
        self.kernel = modules_root
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let root = self.dir.join("root");
        for sub in ["bin", "proc", "sys", "dev", "lib/modules"] {
            fs::create_dir_all(root.join(sub)).with_context(|| format!("mkdir {sub}"))?;
        }
        let busybox = std::env::var_os("PORIN_BENCH_BUSYBOX")
            .map_or_else(|| PathBuf::from("/bin/busybox"), PathBuf::from);
        check_static(&busybox).with_context(|| {
            format!(
                "{}: the guest needs a static busybox (apt-get install busybox-static)",
                busybox.display()
            )
        })?;
        fs::copy(&busybox, root.join("bin/busybox")).context("copy busybox")?;
        let modules = module_closure(&modules_root, &GUEST_MODULES)?;
        for (name, path) in &modules {
            fs::copy(path, root.join(format!("lib/modules/{name}.ko")))
                .with_context(|| format!("copy module {name}"))?;
        }
        build_echo(&self.dir, &root.join("echo"))?;
        let names: Vec<&str> = modules.iter().map(|(n, _)| n.as_str()).collect();
        let init = guest_init(&names);
        fs::write(root.join("init"), init).context("write init")?;
        fs::set_permissions(root.join("init"), fs::Permissions::from_mode(0o755))?;
        let initrd = self.dir.join("initrd.cpio");
        pack_cpio(&root, &initrd)?;
        Ok((vmlinuz, initrd))
    }

    fn build_network(&mut self) -> Result<()> {
        let pid = std::process::id();
        for ns in [self.ns_client.clone(), self.ns_host.clone()] {
            run("ip", &["netns", "add", &ns])?;
            self.namespaces.push(ns);
        }
        let (dev_client, dev_host) = (format!("pbvc{pid}"), format!("pbvh{pid}"));
        rig::add_veth((&dev_client, &self.ns_client), (&dev_host, &self.ns_host))?;
        let (c, h) = (self.ns_client.as_str(), self.ns_host.as_str());
        let ip = |ns: &str, args: &[&str]| {
            let mut full = vec!["-n", ns];
            full.extend_from_slice(args);
            run("ip", &full).map(drop)
        };
        ip(
            c,
            &["addr", "add", &format!("{CLIENT}/24"), "dev", &dev_client],
        )?;
        ip(
            h,
            &["addr", "add", &format!("{HOST_VETH}/24"), "dev", &dev_host],
        )?;
        ip(h, &["tuntap", "add", "dev", &self.tap, "mode", "tap"])?;
        ip(
            h,
            &["addr", "add", &format!("{TAP_HOST}/24"), "dev", &self.tap],
        )?;
        for (ns, dev) in [
            (c, dev_client.as_str()),
            (h, dev_host.as_str()),
            (h, &self.tap),
        ] {
            ip(ns, &["link", "set", dev, "up"])?;
            ip(ns, &["link", "set", "lo", "up"])?;
        }
        ip(
            c,
            &[
                "route",
                "add",
                &format!("{GUEST}/32"),
                "via",
                &HOST_VETH.to_string(),
            ],
        )?;
        in_netns(h, "sysctl", &["-q", "-w", "net.ipv4.ip_forward=1"], None)?;
        rig::allow_churn(c)?;
        Ok(())
    }

    fn boot(&mut self, config: &VmConfig, vmlinuz: &Path, initrd: &Path) -> Result<()> {
        let kvm = config.try_kvm && Path::new("/dev/kvm").exists();
        if kvm {
            eprintln!(
                "vm: booting the guest under KVM ({} s at most)",
                config.kvm_timeout.as_secs()
            );
            match self.start_qemu("kvm", vmlinuz, initrd, config) {
                Ok(()) => {
                    self.accel = "KVM";
                    return Ok(());
                }
                Err(error) => eprintln!("vm: KVM: {error:#}; falling back to TCG"),
            }
        }
        eprintln!("vm: booting the guest under TCG");
        self.start_qemu("tcg", vmlinuz, initrd, config)?;
        self.accel = "TCG";
        Ok(())
    }

    fn start_qemu(
        &mut self,
        accel: &str,
        vmlinuz: &Path,
        initrd: &Path,
        config: &VmConfig,
    ) -> Result<()> {
        let timeout = if accel == "kvm" {
            config.kvm_timeout
        } else {
            TCG_BOOT_TIMEOUT
        };
        self.stop_qemu();
        let console = self.dir.join(format!("console-{accel}.log"));
        let stderr = fs::File::create(self.dir.join(format!("qemu-{accel}.log")))?;
        let started = Instant::now();
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns_host))
            .arg("qemu-system-x86_64")
            .args([
                "-accel",
                accel,
                "-name",
                "porin-bench-guest,debug-threads=on",
            ])
            .args(["-m", "256", "-smp", "1", "-nodefaults", "-no-user-config"])
            .args(["-display", "none", "-serial", "stdio", "-no-reboot"])
            .arg("-kernel")
            .arg(vmlinuz)
            .arg("-initrd")
            .arg(initrd)
            .args([
                "-append",
                &format!(
                    "console=ttyS0 quiet panic=-1 porin_max_secs={}",
                    config.guest_max_secs
                ),
                "-netdev",
                &format!("tap,id=n0,ifname={},script=no,downscript=no", self.tap),
                "-device",
                "virtio-net-pci,netdev=n0,mac=52:54:00:21:30:02",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .context("start qemu-system-x86_64 (apt-get install qemu-system-x86)")?;
        let stdout = child.stdout.take().context("qemu stdout")?;
        self.qemu_pid = child.id();
        self.qemu = Some(child);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut log = fs::File::create(console).ok();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(log) = &mut log {
                    let _ = writeln!(log, "{line}");
                }
                if line.contains(READY) {
                    let _ = ready_tx.send(());
                }
            }
        });
        if ready_rx.recv_timeout(timeout).is_err() {
            let tail = self.console_tail(accel);
            self.stop_qemu();
            bail!(
                "the guest did not start its echo server within {} s under {accel}; console:\n{tail}",
                timeout.as_secs()
            );
        }
        eprintln!(
            "vm: guest up under {accel} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    fn console_tail(&self, accel: &str) -> String {
        let text =
            fs::read_to_string(self.dir.join(format!("console-{accel}.log"))).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn stop_qemu(&mut self) {
        if let Some(mut qemu) = self.qemu.take() {
            let _ = qemu.kill();
            let _ = qemu.wait();
        }
    }

    /// QEMU's CPU so far: (vCPU threads, every other thread).
    fn qemu_ns(&self) -> (u64, u64) {
        cpu::process_ns_split(self.qemu_pid, |comm| comm.starts_with("CPU "))
    }
}

impl Bed for VmRig {
    fn describe(&self) -> String {
        format!(
            "a QEMU microVM under {}, 1 vCPU, Debian kernel {}, virtio-net on a tap; clients in \
             their own namespace, routed through a host namespace to the tap; porin on the tap \
             ({}; egress hook = porin_to_endpoint: packets to the guest; ingress hook = \
             porin_from_endpoint: packets from the guest), the chains on the host namespace's \
             FORWARD hook (`-o tap` jumps to the N-rule chain, `-i tap` accepted)",
            self.accel,
            self.kernel,
            rig::AttachMode::from_env().map_or("?", |m| m.label())
        )
    }

    fn server(&self) -> Ipv4Addr {
        GUEST
    }

    fn measure(&self, traffic: Traffic, config: &E2eConfig) -> Result<RunFigures> {
        let target = format!("{GUEST}:{ECHO_PORT}");
        let latency: echo::LatencyResult = echo::parse_result(&rig::client(
            &self.ns_client,
            &traffic.latency_args(&target, config.samples, config.warmup),
        )?)?;
        let args = traffic.throughput_args(&target, config.senders, config.window, config.secs);
        let softirqd = cpu::ksoftirqd_pids();
        let softirq_before = cpu::ksoftirqd_ns(&softirqd);
        let (vcpu_before, host_before) = self.qemu_ns();
        let client: ThroughputResult = echo::parse_result(&rig::client(&self.ns_client, &args)?)?;
        let (vcpu_after, host_after) = self.qemu_ns();
        let softirq_ns = cpu::ksoftirqd_ns(&softirqd).saturating_sub(softirq_before);
        let host_qemu = host_after.saturating_sub(host_before);
        let throughput = Throughput::of(&client, host_qemu + softirq_ns)?;
        Ok(RunFigures {
            p50_ns: latency.p50_ns as f64,
            p99_ns: latency.p99_ns as f64,
            rps: throughput.replies_per_sec,
            cpu_ns: throughput.cpu_ns_per_round_trip,
            guest_cpu_ns: vcpu_after.saturating_sub(vcpu_before) as f64 / client.replies as f64,
            client_cpu_ns: (client.cpu_ns + softirq_ns) as f64 / client.replies as f64,
            program_ns: [f64::NAN; 2],
        })
    }

    fn attach_programs(&self, programs: &[(Direction, &Program)], tag: &str) -> Result<usize> {
        rig::attach(
            rig::AttachMode::from_env()?,
            &self.ns_host,
            &self.tap,
            DeviceSide::Host,
            programs,
            &self.bpffs,
            tag,
        )
    }

    fn detach_porin(&self, tag: &str) -> Result<()> {
        rig::detach(
            rig::AttachMode::from_env()?,
            &self.ns_host,
            &self.tap,
            &self.bpffs,
            tag,
        )
    }

    fn unpin(&self, tag: &str) {
        rig::unpin_clsact(&self.bpffs, tag);
    }

    fn chain_netns(&self) -> &str {
        &self.ns_host
    }

    fn chain_at(&self) -> ChainAt {
        ChainAt::ForwardTo(self.tap.clone())
    }
}

impl Drop for VmRig {
    fn drop(&mut self) {
        self.stop_qemu();
        // Deleting a namespace destroys its devices: the veth pair and the tap.
        for ns in self.namespaces.drain(..).rev() {
            let _ = run("ip", &["netns", "del", &ns]);
        }
        if self.mounted {
            let _ = run("umount", &[&self.bpffs.to_string_lossy()]);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A new directory `porin-bench-vm-<random>-<pid>` under the temp dir, mode 0700, created
/// exclusively (as `mkdtemp` does: a name that exists is never reused).
fn private_dir(pid: u32) -> Result<PathBuf> {
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(pid).rotate_left(32);
    for _ in 0..100 {
        // xorshift: a fresh name per attempt.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let path = std::env::temp_dir().join(format!("{DIR_PREFIX}{:012x}-{pid}", seed >> 16));
        match fs::DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("mkdir {}", path.display())),
        }
    }
    bail!("cannot create a private directory under the temp dir")
}

/// `apt-get download` of the kernel package `linux-image-cloud-amd64` depends on, into `dir`.
fn download_kernel(dir: &Path) -> Result<PathBuf> {
    let depends = run("apt-cache", &["depends", "linux-image-cloud-amd64"])?;
    let package = depends
        .lines()
        .find_map(|l| l.trim().strip_prefix("Depends: "))
        .map(str::trim)
        .filter(|p| p.starts_with("linux-image-"))
        .context("apt-cache names no kernel for linux-image-cloud-amd64 (apt-get update?)")?
        .to_owned();
    eprintln!("vm: apt-get download {package}");
    let output = Command::new("apt-get")
        .args(["download", "-q", &package])
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .context("apt-get")?;
    if !output.status.success() {
        bail!(
            "apt-get download {package} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    only_entry(dir, &format!("{package}_"))
}

/// The one entry of `dir` whose name starts with `prefix`.
fn only_entry(dir: &Path, prefix: &str) -> Result<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    found.sort();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("no {prefix}* in {}", dir.display()),
        many => bail!("several {prefix}* in {}: {many:?}", dir.display()),
    }
}

/// Fails unless `path` is an ELF executable without an interpreter (statically linked).
fn check_static(path: &Path) -> Result<()> {
    let bytes = fs::read(path).with_context(|| format!("read {}", path.display()))?;
    let field = |at: usize, len: usize| -> Option<u64> {
        let slice = bytes.get(at..at + len)?;
        let mut buf = [0u8; 8];
        buf[..len].copy_from_slice(slice);
        Some(u64::from_le_bytes(buf))
    };
    if bytes.get(..5) != Some(b"\x7fELF\x02") {
        bail!("not a 64-bit ELF file");
    }
    let phoff = field(0x20, 8).context("ELF header")? as usize;
    let phentsize = field(0x36, 2).context("ELF header")? as usize;
    let phnum = field(0x38, 2).context("ELF header")? as usize;
    for index in 0..phnum {
        const PT_INTERP: u64 = 3;
        if field(phoff + index * phentsize, 4) == Some(PT_INTERP) {
            bail!("dynamically linked (has a PT_INTERP program header)");
        }
    }
    Ok(())
}

/// The `.ko` files of `wanted` and of everything they depend on (`depends=` in each module's
/// `.modinfo`), in load order (dependencies first). Modules built into the kernel
/// (`modules.builtin`) need no file and are left out.
fn module_closure(root: &Path, wanted: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let builtin: Vec<String> = fs::read_to_string(root.join("modules.builtin"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .map(|f| f.trim_end_matches(".ko").replace('-', "_"))
        .collect();
    let mut files = BTreeMap::new();
    let mut pending = vec![root.join("kernel")];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if let Some(stem) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".ko"))
            {
                files.insert(stem.replace('-', "_"), path.clone());
            }
        }
    }
    let mut order = Vec::new();
    let mut visiting = Vec::new();
    for name in wanted {
        visit(name, &files, &builtin, &mut order, &mut visiting)?;
    }
    Ok(order)
}

fn visit(
    name: &str,
    files: &BTreeMap<String, PathBuf>,
    builtin: &[String],
    order: &mut Vec<(String, PathBuf)>,
    visiting: &mut Vec<String>,
) -> Result<()> {
    if builtin.iter().any(|b| b == name) || order.iter().any(|(n, _)| n == name) {
        return Ok(());
    }
    if visiting.iter().any(|v| v == name) {
        bail!("module dependency cycle through {name}");
    }
    let path = files
        .get(name)
        .with_context(|| format!("the kernel package has no module {name}"))?;
    let bytes = fs::read(path).with_context(|| format!("read {}", path.display()))?;
    let depends = modinfo_depends(&bytes);
    visiting.push(name.to_owned());
    for dependency in depends {
        visit(&dependency, files, builtin, order, visiting)?;
    }
    visiting.pop();
    order.push((name.to_owned(), path.clone()));
    Ok(())
}

/// The `depends=` list of a module's `.modinfo` (NUL-separated `key=value` strings).
fn modinfo_depends(bytes: &[u8]) -> Vec<String> {
    const KEY: &[u8] = b"\0depends=";
    let Some(at) = bytes.windows(KEY.len()).position(|w| w == KEY) else {
        return Vec::new();
    };
    let rest = &bytes[at + KEY.len()..];
    let end = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end])
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|d| d.replace('-', "_"))
        .collect()
}

/// The guest's `/init`: mount the pseudo file systems, load the modules in order, configure
/// `eth0` and exec the echo server with the lifetime from the kernel command line.
fn guest_init(modules: &[&str]) -> String {
    format!(
        "#!/bin/busybox sh\n\
         # porin-bench microVM guest (written by porin-bench vm; see bench/src/vm.rs).\n\
         B=/bin/busybox\n\
         $B mount -t proc proc /proc\n\
         $B mount -t sysfs sys /sys\n\
         $B mount -t devtmpfs dev /dev\n\
         for m in {}; do $B insmod /lib/modules/$m.ko || echo \"porin-guest: insmod $m failed\"; done\n\
         max=$($B sed -n 's/.*porin_max_secs=\\([0-9]*\\).*/\\1/p' /proc/cmdline)\n\
         $B ip link set lo up\n\
         $B ip addr add {GUEST}/24 dev eth0\n\
         $B ip link set eth0 up\n\
         $B ip route add default via {TAP_HOST}\n\
         exec /echo \"${{max:-600}}\" {ECHO_PORT} {GUEST_TCP_THREADS}\n",
        modules.join(" ")
    )
}

/// The guest's echo server: `echo_std.rs` and a `main`, compiled statically with the musl target.
fn build_echo(dir: &Path, out: &Path) -> Result<()> {
    let src = dir.join("echo-src");
    fs::create_dir(&src).context("mkdir echo-src")?;
    fs::write(src.join("echo_std.rs"), include_str!("echo_std.rs"))?;
    fs::write(
        src.join("main.rs"),
        "mod echo_std;\n\
         fn main() {\n    \
             let arg = |i: usize, default: u64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);\n    \
             echo_std::watchdog(arg(1, 600), false);\n    \
             let addr = std::net::SocketAddr::from(([0, 0, 0, 0], arg(2, 7000) as u16));\n    \
             let threads = arg(3, 16) as usize;\n    \
             if let Err(e) = echo_std::serve_udp(addr, 2).and_then(|()| echo_std::serve_tcp(addr, threads)) {\n        \
                 eprintln!(\"porin-guest: echo server: {e}\");\n        \
                 std::process::exit(1);\n    \
             }\n    \
             echo_std::announce_and_wait()\n\
         }\n",
    )?;
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = Command::new(&rustc)
        .args(["--edition", "2021", "--target", "x86_64-unknown-linux-musl"])
        .args([
            "-C",
            "opt-level=2",
            "-C",
            "panic=abort",
            "--cap-lints",
            "allow",
        ])
        .arg("-o")
        .arg(out)
        .arg(src.join("main.rs"))
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("start {rustc}"))?;
    if !output.status.success() {
        bail!(
            "building the guest's echo server with {rustc} --target x86_64-unknown-linux-musl \
             failed (rustup target add x86_64-unknown-linux-musl): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    check_static(out).context("the guest's echo server")
}

/// `root` as a `newc` cpio archive at `out` (the initramfs), with `cpio -o`.
fn pack_cpio(root: &Path, out: &Path) -> Result<()> {
    let mut names = Vec::new();
    let mut pending = vec![PathBuf::from(".")];
    while let Some(relative) = pending.pop() {
        names.push(relative.to_string_lossy().into_owned());
        let absolute = root.join(&relative);
        if absolute.is_dir() {
            for entry in fs::read_dir(&absolute)? {
                pending.push(relative.join(entry?.file_name()));
            }
        }
    }
    names.sort();
    let list = names.join("\n") + "\n";
    let archive = {
        let mut child = Command::new("cpio")
            .args(["-o", "-H", "newc", "--quiet"])
            .current_dir(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("start cpio (apt-get install cpio)")?;
        let mut stdin = child.stdin.take().context("cpio stdin")?;
        let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
        let output = child.wait_with_output()?;
        writer
            .join()
            .map_err(|_| anyhow::anyhow!("cpio writer panicked"))??;
        if !output.status.success() {
            bail!(
                "cpio failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        output.stdout
    };
    fs::write(out, archive).context("write the initramfs")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modinfo_depends_reads_the_list() {
        let bytes = b"xx\0license=GPL\0depends=virtio_ring,virtio\0vermagic=6.1\0";
        assert_eq!(modinfo_depends(bytes), ["virtio_ring", "virtio"]);
        assert!(modinfo_depends(b"\0depends=\0").is_empty());
        assert!(modinfo_depends(b"no modinfo").is_empty());
    }

    #[test]
    fn dependencies_load_first_and_builtins_are_skipped() {
        let dir = private_dir(std::process::id()).unwrap();
        let kernel = dir.join("kernel/drivers");
        fs::create_dir_all(&kernel).unwrap();
        for (name, depends) in [
            ("virtio_net", "virtio_ring,virtio,net_failover"),
            ("net_failover", "failover"),
            ("failover", ""),
            ("virtio", "virtio_ring"),
            ("virtio_ring", ""),
        ] {
            fs::write(
                kernel.join(format!("{name}.ko")),
                format!("\0depends={depends}\0"),
            )
            .unwrap();
        }
        fs::write(dir.join("modules.builtin"), "kernel/net/core/failover.ko\n").unwrap();
        let order: Vec<String> = module_closure(&dir, &["virtio_net"])
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            order,
            ["virtio_ring", "virtio", "net_failover", "virtio_net"]
        );
        assert!(module_closure(&dir, &["e1000"]).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_static_executables_pass() {
        let exe = std::env::current_exe().unwrap();
        // The test binary is dynamically linked (glibc target).
        assert!(check_static(&exe).is_err());
        let dir = private_dir(std::process::id()).unwrap();
        assert!(check_static(&dir.join("missing")).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
