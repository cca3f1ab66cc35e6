//! Pinning porin's maps in bpffs and adopting them again: the other half (with
//! [`super::attach`]) of enforcement that outlives the agent process.
//!
//! An agent pins every map of an endpoint's object under one directory of a mounted bpffs
//! ([`pin_maps`]). The next agent finds them ([`open_pinned_maps`]), checks each against the
//! object it is about to load (type, key and value sizes, capacity and flags, read from the
//! kernel, not from the file name), and loads its programs over them
//! ([`super::LoadedObject::load_with_maps`]): the policy, ipcache and conntrack contents carry
//! over untouched, so the established flows the conntrack table knows keep passing.

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use super::btf_reader::MapDefinition;
use super::error::KernelError;
use super::loader::{LoadedObject, spec_of};
use super::map::Map;
use super::sys::{self, MapSpec, MapType};

/// The file-system type bpffs shows in mountinfo.
const BPFFS: &str = "bpf";

fn path_str(path: &Path) -> Result<&str, KernelError> {
    path.to_str()
        .ok_or_else(|| KernelError::Object(format!("path `{}` is not UTF-8", path.display())))
}

/// Pins every map of `object` at `dir/<map name>` (`dir` must exist, in a bpffs).
pub fn pin_maps(object: &LoadedObject, dir: &Path) -> Result<(), KernelError> {
    for name in object.map_names() {
        let path = dir.join(name);
        object.map(name)?.pin(path_str(&path)?)?;
    }
    Ok(())
}

/// What the kernel says a pinned map is (`BPF_OBJ_GET_INFO_BY_FD`, `struct bpf_map_info`).
pub fn pinned_map_spec(path: &Path) -> Result<MapSpec, KernelError> {
    let text = path_str(path)?;
    let fd = sys::obj_get(text)?;
    let mut info = [0u8; 40];
    let written = sys::obj_get_info(fd.as_fd(), text, &mut info)?;
    let word = |offset: usize| u32::from_le_bytes(sys::info_field(&info, written, offset));
    Ok(MapSpec {
        map_type: MapType(word(0)),
        key_size: word(8),
        value_size: word(12),
        max_entries: word(16),
        map_flags: word(20),
    })
}

/// The maps of `definitions` pinned under `dir`: `Ok(None)` when none is (a first start),
/// `Ok(Some(maps))` when all are and each is exactly what its definition declares. Some but not
/// all pinned, or one that differs (an object of another porin version), is an error naming the
/// map: adopting it would pair programs with maps of another layout.
pub fn open_pinned_maps(
    definitions: &[MapDefinition],
    dir: &Path,
) -> Result<Option<BTreeMap<String, Map>>, KernelError> {
    let paths: Vec<(&MapDefinition, PathBuf)> = definitions
        .iter()
        .map(|definition| (definition, dir.join(&definition.name)))
        .collect();
    let present = paths.iter().filter(|(_, path)| path.exists()).count();
    if present == 0 {
        return Ok(None);
    }
    if present != paths.len() {
        let missing: Vec<&str> = paths
            .iter()
            .filter(|(_, path)| !path.exists())
            .map(|(definition, _)| definition.name.as_str())
            .collect();
        return Err(KernelError::Contract(format!(
            "{}: {present} of the object's {} maps are pinned; missing: {}",
            dir.display(),
            paths.len(),
            missing.join(", ")
        )));
    }
    let mut maps = BTreeMap::new();
    for (definition, path) in paths {
        let expected = spec_of(definition);
        let found = pinned_map_spec(&path)?;
        if found != expected {
            return Err(KernelError::Contract(format!(
                "pinned map {} is {found:?}; the object declares {expected:?}",
                path.display()
            )));
        }
        maps.insert(
            definition.name.clone(),
            Map::from_pinned(path_str(&path)?, &definition.name, expected)?,
        );
    }
    Ok(Some(maps))
}

/// Whether `path` lies on a mounted bpffs, from `/proc/self/mountinfo` (the mount whose mount
/// point is the longest prefix of `path`). Pins can only be made there.
pub fn is_on_bpffs(path: &Path) -> std::io::Result<bool> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(filesystem_of(&mountinfo, path).as_deref() == Some(BPFFS))
}

/// The file-system type of the mount that holds `path`, from mountinfo text.
fn filesystem_of(mountinfo: &str, path: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        // `id parent major:minor root mount-point options [optional...] - fstype source super`
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(mount_point) = fields.get(4) else {
            continue;
        };
        let mount_point = unescape(mount_point);
        let Some(separator) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let Some(fstype) = fields.get(separator + 1) else {
            continue;
        };
        if path.starts_with(&mount_point) {
            let depth = Path::new(&mount_point).components().count();
            // A later mount on the same point hides the earlier one.
            if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
                best = Some((depth, (*fstype).to_owned()));
            }
        }
    }
    best.map(|(_, fstype)| fstype)
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.by_ref().take(3).collect();
            match u8::from_str_radix(&digits, 8) {
                Ok(byte) => out.push(char::from(byte)),
                Err(_) => {
                    out.push('\\');
                    out.push_str(&digits);
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_mount_point_decides_the_file_system() {
        let mountinfo = "22 1 0:21 / / rw - ext4 /dev/sda1 rw\n\
            30 22 0:26 / /sys/fs/bpf rw,nosuid - bpf bpf rw\n\
            31 22 0:27 / /tmp/my\\040dir rw - bpf bpf rw\n";
        assert_eq!(
            filesystem_of(mountinfo, Path::new("/sys/fs/bpf/porin")).as_deref(),
            Some("bpf")
        );
        assert_eq!(
            filesystem_of(mountinfo, Path::new("/sys/fs/bpfx")).as_deref(),
            Some("ext4")
        );
        assert_eq!(
            filesystem_of(mountinfo, Path::new("/tmp/my dir/x")).as_deref(),
            Some("bpf")
        );
    }
}
