//! Attaching porin's programs to network devices with tcx BPF links (kernel 6.6+).
//!
//! A tcx link (`BPF_LINK_CREATE` with `BPF_TCX_INGRESS` / `BPF_TCX_EGRESS`) attaches a
//! `SCHED_CLS` program to a device's ingress or egress hook without a qdisc. The attachment lives
//! as long as the link object: while a file descriptor or a bpffs pin of it exists. A pinned link
//! therefore keeps enforcing after the process that made it exits or is killed, which is what
//! gives `porin agent` no gap on restart; removing the pin (and closing the fds) detaches it.
//! When the device disappears the kernel detaches the link itself ([`LinkInfo::ifindex`] becomes
//! 0).
//!
//! The programs return `TC_ACT_OK` (0) or `TC_ACT_SHOT` (2), which tcx reads as `TCX_PASS`
//! (pass, skip the device's later tcx programs) and `TCX_DROP`.
//!
//! Which hook sees which direction on an endpoint's host-side device is `DATAPATH.md` §8:
//! `porin_from_endpoint` on ingress (what the endpoint sends), `porin_to_endpoint` on egress
//! (what is delivered to it).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use super::error::KernelError;
use super::program::Program;
use super::sys;

/// `BPF_TCX_INGRESS` in `enum bpf_attach_type`.
pub const BPF_TCX_INGRESS: u32 = 46;
/// `BPF_TCX_EGRESS`.
pub const BPF_TCX_EGRESS: u32 = 47;
/// `BPF_LINK_TYPE_TCX` in `enum bpf_link_type`.
pub const BPF_LINK_TYPE_TCX: u32 = 11;

/// A device's tcx hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Hook {
    /// Packets the device receives (on a host-side tap/veth: what the endpoint sends).
    Ingress,
    /// Packets the device transmits (on a host-side tap/veth: what the endpoint receives).
    Egress,
}

impl Hook {
    /// The kernel's attach type.
    pub fn attach_type(self) -> u32 {
        match self {
            Self::Ingress => BPF_TCX_INGRESS,
            Self::Egress => BPF_TCX_EGRESS,
        }
    }

    /// `ingress` / `egress`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ingress => "ingress",
            Self::Egress => "egress",
        }
    }
}

/// What the kernel reports about a link (`struct bpf_link_info`, tcx member).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    /// `enum bpf_link_type` ([`BPF_LINK_TYPE_TCX`] for porin's links).
    pub link_type: u32,
    /// The link's id.
    pub id: u32,
    /// The id of the program it runs.
    pub program_id: u32,
    /// The device's index; 0 once the device is gone (the link is then detached).
    pub ifindex: u32,
    /// The attach type ([`BPF_TCX_INGRESS`] / [`BPF_TCX_EGRESS`]).
    pub attach_type: u32,
}

impl LinkInfo {
    /// The hook, when this is a tcx link.
    pub fn hook(&self) -> Option<Hook> {
        if self.link_type != BPF_LINK_TYPE_TCX {
            return None;
        }
        match self.attach_type {
            BPF_TCX_INGRESS => Some(Hook::Ingress),
            BPF_TCX_EGRESS => Some(Hook::Egress),
            _ => None,
        }
    }
}

/// A tcx link: one program attached to one hook of one device.
#[derive(Debug)]
pub struct TcxLink {
    fd: OwnedFd,
    name: String,
}

fn path_str(path: &Path) -> Result<&str, KernelError> {
    path.to_str()
        .ok_or_else(|| KernelError::Object(format!("path `{}` is not UTF-8", path.display())))
}

impl TcxLink {
    /// Attaches `program` to `hook` of the device `ifindex` (in the calling thread's network
    /// namespace), after the device's other tcx programs.
    pub fn attach(program: &Program, ifindex: u32, hook: Hook) -> Result<Self, KernelError> {
        let name = format!("{}@{ifindex}/{}", program.name(), hook.as_str());
        let fd = sys::link_create(program.fd(), &name, ifindex, hook.attach_type())?;
        Ok(Self { fd, name })
    }

    /// Attaches `program` to `hook` of the device `dev` of the network namespace whose file is
    /// `netns` (e.g. `/run/netns/NAME`). `BPF_LINK_CREATE` names the device by its index in the
    /// caller's namespace, so the attach runs on a thread that joins `netns` and ends; the link
    /// it returns works from every thread.
    pub fn attach_in_netns(
        program: &Program,
        netns: &Path,
        dev: &str,
        hook: Hook,
    ) -> Result<Self, KernelError> {
        let netns = path_str(netns)?;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    sys::join_netns(netns)?;
                    let ifindex = interface_index(dev)?.ok_or_else(|| {
                        KernelError::Object(format!("no device `{dev}` in namespace `{netns}`"))
                    })?;
                    Self::attach(program, ifindex, hook)
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(KernelError::Object(format!(
                        "the thread attaching to `{dev}` in `{netns}` panicked"
                    )))
                })
        })
    }

    /// Opens a link pinned at `path`.
    pub fn from_pinned(path: &Path) -> Result<Self, KernelError> {
        let text = path_str(path)?;
        Ok(Self {
            fd: sys::obj_get(text)?,
            name: text.to_owned(),
        })
    }

    /// Pins the link at `path` (in a mounted bpffs): the attachment then outlives this process.
    pub fn pin(&self, path: &Path) -> Result<(), KernelError> {
        sys::obj_pin(self.fd.as_fd(), path_str(path)?)
    }

    /// The link's fd.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// What the kernel reports about the link.
    pub fn info(&self) -> Result<LinkInfo, KernelError> {
        let mut buffer = [0u8; 64];
        let written = sys::obj_get_info(self.fd.as_fd(), &self.name, &mut buffer)?;
        let word = |offset: usize| u32::from_le_bytes(sys::info_field(&buffer, written, offset));
        // struct bpf_link_info: type, id, prog_id, then a union aligned to 8 (offset 16):
        // tcx { ifindex, attach_type }.
        Ok(LinkInfo {
            link_type: word(0),
            id: word(4),
            program_id: word(8),
            ifindex: word(16),
            attach_type: word(20),
        })
    }

    /// Replaces the link's program atomically (`BPF_LINK_UPDATE`): every packet runs the old or
    /// the new program.
    pub fn update_program(&self, program: &Program) -> Result<(), KernelError> {
        sys::link_update(self.fd.as_fd(), program.fd(), &self.name)
    }
}

/// The index of network device `name` in the calling thread's network namespace; `None` when
/// there is no such device.
pub fn interface_index(name: &str) -> Result<Option<u32>, KernelError> {
    sys::interface_index(name)
}
