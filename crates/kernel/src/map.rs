//! Owned eBPF maps: create, read, write, iterate, pin.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::error::KernelError;
use super::sys::{self, MapSpec, MapType, UpdateFlags};

/// A map the kernel holds for us; closing the last fd (dropping this and every program that
/// references it) frees it.
#[derive(Debug)]
pub struct Map {
    fd: OwnedFd,
    name: String,
    spec: MapSpec,
    /// Possible CPUs, for per-CPU maps (1 otherwise).
    cpus: usize,
}

/// Per-CPU values are stored in 8-byte aligned slots in userspace (`round_up(value_size, 8)`).
fn per_cpu_slot(value_size: u32) -> usize {
    (value_size as usize).div_ceil(8) * 8
}

impl Map {
    /// Creates a map. Map-in-map types need [`Map::create_outer`] instead.
    pub fn create(name: &str, spec: MapSpec) -> Result<Self, KernelError> {
        Self::create_with_inner(name, spec, None)
    }

    /// Creates an `ARRAY_OF_MAPS` / `HASH_OF_MAPS` whose inner maps look like `inner_template`.
    pub fn create_outer(
        name: &str,
        spec: MapSpec,
        inner_template: &Map,
    ) -> Result<Self, KernelError> {
        Self::create_with_inner(name, spec, Some(inner_template.fd.as_fd()))
    }

    fn create_with_inner(
        name: &str,
        spec: MapSpec,
        inner: Option<BorrowedFd<'_>>,
    ) -> Result<Self, KernelError> {
        let cpus = if spec.map_type.is_per_cpu() {
            sys::possible_cpus()?
        } else {
            1
        };
        let fd = sys::map_create(name, &spec, inner)?;
        Ok(Self {
            fd,
            name: name.to_owned(),
            spec,
            cpus,
        })
    }

    /// Opens a map pinned at `path`; `spec` must describe it (the kernel checks sizes on use).
    pub fn from_pinned(path: &str, name: &str, spec: MapSpec) -> Result<Self, KernelError> {
        let cpus = if spec.map_type.is_per_cpu() {
            sys::possible_cpus()?
        } else {
            1
        };
        Ok(Self {
            fd: sys::obj_get(path)?,
            name: name.to_owned(),
            spec,
            cpus,
        })
    }

    /// The map's name (as given at creation; the kernel keeps at most 15 bytes of it).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Type, sizes and flags the map was created with.
    pub fn spec(&self) -> &MapSpec {
        &self.spec
    }

    /// The map's file descriptor, e.g. to patch into a program's `ld_imm64`.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Length of a value as userspace reads and writes it: one 8-byte-aligned slot per possible
    /// CPU for per-CPU maps, 4 bytes (an fd or id) for map-in-map types, else `value_size`.
    pub fn userspace_value_size(&self) -> usize {
        if self.spec.map_type.is_per_cpu() {
            per_cpu_slot(self.spec.value_size) * self.cpus
        } else {
            self.spec.value_size as usize
        }
    }

    /// The number of per-CPU slots (1 for ordinary maps).
    pub fn cpu_slots(&self) -> usize {
        self.cpus
    }

    fn check_key(&self, key: &[u8]) -> Result<(), KernelError> {
        if key.len() == self.spec.key_size as usize {
            Ok(())
        } else {
            Err(KernelError::WrongSize {
                what: "key",
                map: self.name.clone(),
                given: key.len(),
                expected: self.spec.key_size as usize,
            })
        }
    }

    fn check_value(&self, value: &[u8]) -> Result<(), KernelError> {
        let expected = self.userspace_value_size();
        if value.len() == expected {
            Ok(())
        } else {
            Err(KernelError::WrongSize {
                what: "value",
                map: self.name.clone(),
                given: value.len(),
                expected,
            })
        }
    }

    /// Creates or replaces `key -> value` (`BPF_ANY`).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<(), KernelError> {
        self.update_with(key, value, UpdateFlags::Any)
    }

    /// Writes `key -> value` with explicit update flags.
    pub fn update_with(
        &self,
        key: &[u8],
        value: &[u8],
        flags: UpdateFlags,
    ) -> Result<(), KernelError> {
        self.check_key(key)?;
        self.check_value(value)?;
        sys::map_update(self.fd(), &self.name, key, value, flags)
    }

    /// Writes the same value into every CPU's slot of a per-CPU map (`value` is one slot's
    /// `value_size` bytes).
    pub fn update_all_cpus(&self, key: &[u8], value: &[u8]) -> Result<(), KernelError> {
        if value.len() != self.spec.value_size as usize {
            return Err(KernelError::WrongSize {
                what: "per-CPU value",
                map: self.name.clone(),
                given: value.len(),
                expected: self.spec.value_size as usize,
            });
        }
        let slot = per_cpu_slot(self.spec.value_size);
        let mut all = vec![0u8; self.userspace_value_size()];
        for chunk in all.chunks_mut(slot) {
            chunk[..value.len()].copy_from_slice(value);
        }
        self.update(key, &all)
    }

    /// Points `key` of a map-in-map at `inner`.
    pub fn set_inner_map(&self, key: &[u8], inner: &Map) -> Result<(), KernelError> {
        let raw = std::os::fd::AsRawFd::as_raw_fd(&inner.fd);
        self.update(key, &raw.to_ne_bytes())
    }

    /// The value at `key`, `None` when absent. For per-CPU maps this is every slot
    /// concatenated; see [`Map::lookup_per_cpu`].
    pub fn lookup(&self, key: &[u8]) -> Result<Option<Vec<u8>>, KernelError> {
        self.check_key(key)?;
        let mut value = vec![0u8; self.userspace_value_size()];
        let found = sys::map_lookup(self.fd(), &self.name, key, &mut value)?;
        Ok(found.then_some(value))
    }

    /// The value at `key` of a per-CPU map, one `value_size` vector per possible CPU.
    pub fn lookup_per_cpu(&self, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, KernelError> {
        let slot = per_cpu_slot(self.spec.value_size);
        let size = self.spec.value_size as usize;
        Ok(self.lookup(key)?.map(|all| {
            all.chunks(slot)
                .map(|chunk| chunk[..size.min(chunk.len())].to_vec())
                .collect()
        }))
    }

    /// Deletes `key`; `false` when it was absent.
    pub fn delete(&self, key: &[u8]) -> Result<bool, KernelError> {
        self.check_key(key)?;
        sys::map_delete(self.fd(), &self.name, key)
    }

    /// The key after `key` (the first key when `None`), `None` at the end.
    pub fn next_key(&self, key: Option<&[u8]>) -> Result<Option<Vec<u8>>, KernelError> {
        if let Some(key) = key {
            self.check_key(key)?;
        }
        let mut next = vec![0u8; self.spec.key_size as usize];
        let found = sys::map_get_next_key(self.fd(), &self.name, key, &mut next)?;
        Ok(found.then_some(next))
    }

    /// Every key, in the kernel's iteration order. Bounded by `max_entries` so a map that is
    /// modified concurrently cannot make this loop forever.
    pub fn keys(&self) -> Result<Vec<Vec<u8>>, KernelError> {
        let mut keys = Vec::new();
        let mut current = self.next_key(None)?;
        while let Some(key) = current {
            if keys.len() > self.spec.max_entries as usize {
                break;
            }
            current = self.next_key(Some(&key))?;
            keys.push(key);
        }
        Ok(keys)
    }

    /// Removes every entry; array maps (whose entries cannot be deleted) are zeroed instead.
    /// Returns how many entries were removed or zeroed.
    pub fn clear(&self) -> Result<usize, KernelError> {
        let is_array = matches!(self.spec.map_type, MapType::ARRAY | MapType::PERCPU_ARRAY);
        if is_array {
            let zero = vec![0u8; self.userspace_value_size()];
            for index in 0..self.spec.max_entries {
                self.update(&index.to_ne_bytes(), &zero)?;
            }
            return Ok(self.spec.max_entries as usize);
        }
        let mut removed = 0usize;
        // Restart from the first key each time: deleting invalidates the iteration cursor.
        while let Some(key) = self.next_key(None)? {
            if self.delete(&key)? {
                removed += 1;
            }
            if removed > self.spec.max_entries as usize {
                return Err(KernelError::Contract(format!(
                    "map `{}` still has entries after deleting {removed}",
                    self.name
                )));
            }
        }
        Ok(removed)
    }

    /// Pins the map at `path` in a mounted bpffs.
    pub fn pin(&self, path: &str) -> Result<(), KernelError> {
        sys::obj_pin(self.fd(), path)
    }
}
