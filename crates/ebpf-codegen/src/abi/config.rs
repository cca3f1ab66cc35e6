//! `porin_config`: the one-entry array naming the active policy slot
//! (`DATAPATH.md` §2.3).

use crate::maps::PolicySlot;

use super::{AbiError, abi_struct};

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

    /// The value that makes `slot` active.
    pub const fn for_slot(slot: PolicySlot) -> ConfigValue {
        ConfigValue {
            active_policy: match slot {
                PolicySlot::A => Self::SLOT_A,
                PolicySlot::B => Self::SLOT_B,
            },
            reserved: 0,
        }
    }

    /// The slot this value makes active.
    pub const fn slot(&self) -> Result<PolicySlot, AbiError> {
        match self.active_policy {
            Self::SLOT_A => Ok(PolicySlot::A),
            Self::SLOT_B => Ok(PolicySlot::B),
            other => Err(AbiError::BadSlot(other)),
        }
    }
}
