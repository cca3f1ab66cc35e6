//! `porin_config`: the one-entry array naming the active policy slot, the
//! event switches and which slots' prefix tries are empty (`DATAPATH.md`
//! §2.3). Its conversions from and to a
//! [`PolicySlot`](crate::maps::PolicySlot) are with the slot, in `maps`.

use super::abi_struct;

abi_struct! {
    /// `porin_config_value`.
    pub struct ConfigValue = "porin_config_value" {
        /// 0 = `porin_policy_a`, 1 = `porin_policy_b`; any other value
        /// drops every packet.
        active_policy @ OFF_ACTIVE_POLICY: u32 = Le,
        /// Verdict events: [`ConfigValue::EVENTS_SET`] clear = the default
        /// (drops only); set = bits 0 (drops) and 1 (allows) say what is
        /// written to `porin_events`.
        events @ OFF_EVENTS: u8 = Raw,
        /// Bit `s` set: slot `s`'s prefix trie holds no entry, so the
        /// programs answer that slot from its exact-key hash alone. 0 (the
        /// kernel's initial value) always consults both: safe for agents
        /// that write everything into the trie.
        prefix_free @ OFF_PREFIX_FREE: u8 = Raw,
        /// Reserved, 0.
        reserved @ OFF_RESERVED: u16 = Le,
    }
}

impl ConfigValue {
    /// The only key of `porin_config`.
    pub const KEY: u32 = 0;
    /// `active_policy` of slot A. The array is zero-initialised by the
    /// kernel, so a fresh object reads slot A.
    pub const SLOT_A: u32 = 0;
    /// `active_policy` of slot B.
    pub const SLOT_B: u32 = 1;
    /// `events` bit 0: write an event for every dropped packet.
    pub const EVENTS_DROPS: u8 = 1;
    /// `events` bit 1: write an event for every passed packet.
    pub const EVENTS_ALLOWS: u8 = 1 << 1;
    /// `events` bit 7: bits 0-1 were set by an agent. Clear (the kernel's
    /// zero, and the `reserved: 0` of agents written before events
    /// existed) means the default, drops only.
    pub const EVENTS_SET: u8 = 1 << 7;

    /// The `events` word that asks for drops and/or allows explicitly.
    pub const fn events_word(drops: bool, allows: bool) -> u8 {
        let mut word = Self::EVENTS_SET;
        if drops {
            word |= Self::EVENTS_DROPS;
        }
        if allows {
            word |= Self::EVENTS_ALLOWS;
        }
        word
    }

    /// Whether drops / allows are emitted under this value (the programs'
    /// reading of `events`).
    pub const fn emits(&self) -> (bool, bool) {
        if self.events & Self::EVENTS_SET == 0 {
            (true, false)
        } else {
            (
                self.events & Self::EVENTS_DROPS != 0,
                self.events & Self::EVENTS_ALLOWS != 0,
            )
        }
    }
}
