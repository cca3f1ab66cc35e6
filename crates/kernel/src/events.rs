//! The verdict events of `porin_events` (`DATAPATH.md` §2.6), read by an agent.
//!
//! [`EventReader`] maps the object's ring buffer (through [`sys::RingBuffer`], the mmap the
//! kernel's ring buffer requires: it has no lookup) and returns its records as typed
//! [`Event`]s. Polling never blocks; an agent calls [`EventReader::poll`] on a timer or when an
//! `epoll` on the map's fd says data arrived.

use porin_ebpf::abi::{ConfigValue, Event};
use porin_ebpf::maps::names;

use super::datapath::{CONFIG, Datapath};
use super::error::KernelError;
use super::map::Map;
use super::sys::{self, MapType};

/// Which verdicts the programs write events for (`porin_config.events`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSelection {
    /// Write an event for every dropped packet (default on).
    pub drops: bool,
    /// Write an event for every passed packet (default off).
    pub allows: bool,
}

impl Default for EventSelection {
    fn default() -> Self {
        Self {
            drops: true,
            allows: false,
        }
    }
}

/// The consumer of one object's `porin_events` ring buffer.
#[derive(Debug)]
pub struct EventReader {
    ring: sys::RingBuffer,
}

impl EventReader {
    /// Maps `map`, which must be a `BPF_MAP_TYPE_RINGBUF` (the object's `porin_events`).
    pub fn open(map: &Map) -> Result<Self, KernelError> {
        let spec = map.spec();
        if spec.map_type != MapType::RINGBUF {
            return Err(KernelError::Contract(format!(
                "map `{}` is {:?}, not a ring buffer",
                map.name(),
                spec.map_type
            )));
        }
        let data_len = usize::try_from(spec.max_entries).unwrap_or(0);
        Ok(Self {
            ring: sys::RingBuffer::map(map.fd(), map.name(), data_len)?,
        })
    }

    /// Maps the `porin_events` map of a loaded datapath.
    pub fn for_datapath(datapath: &Datapath) -> Result<Self, KernelError> {
        Self::open(datapath.object().map(names::EVENTS)?)
    }

    /// Every event written since the last poll, oldest first. A record that is not a
    /// `porin_event` the programs write is an error (after the ring has been drained past it).
    pub fn poll(&mut self) -> Result<Vec<Event>, KernelError> {
        self.ring
            .drain()
            .iter()
            .map(|record| {
                Event::decode(record).map_err(|e| {
                    KernelError::Contract(format!("`{}` record: {e}", self.ring.name()))
                })
            })
            .collect()
    }
}

impl Datapath {
    /// Sets which verdicts produce events, keeping the active slot and the other config fields.
    pub fn set_events(&self, selection: EventSelection) -> Result<(), KernelError> {
        let mut config = self.read_config()?;
        config.events = ConfigValue::events_word(selection.drops, selection.allows);
        self.object().map(CONFIG)?.update(
            &porin_ebpf::abi::index_key(ConfigValue::KEY),
            &config.to_bytes(),
        )
    }

    /// Which verdicts produce events now.
    pub fn events(&self) -> Result<EventSelection, KernelError> {
        let (drops, allows) = self.read_config()?.emits();
        Ok(EventSelection { drops, allows })
    }
}
