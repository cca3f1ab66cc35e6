//! `porin_config`: the one-entry array naming the active policy slot
//! (`DATAPATH.md` §2.3). Its conversions from and to a
//! [`PolicySlot`](crate::maps::PolicySlot) are with the slot, in `maps`.

use super::abi_struct;

abi_struct! {
    /// `porin_config_value`.
    pub struct ConfigValue = "porin_config_value" {
        /// 0 = `porin_policy_a`, 1 = `porin_policy_b`; any other value
        /// drops every packet.
        active_policy @ OFF_ACTIVE_POLICY: u32 = Le,
        /// Reserved, 0.
        reserved @ OFF_RESERVED: u32 = Le,
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
}
