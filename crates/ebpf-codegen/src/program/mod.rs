//! The datapath programs (`DATAPATH.md`), generated with the assembler.
//!
//! One generator, instantiated per direction: `porin_from_endpoint`
//! (policy direction egress, peer = destination) and `porin_to_endpoint`
//! (ingress, peer = source). The code is straight-line with forward jumps
//! only (no loops: the IPv6 extension-header walk is unrolled), reads the
//! packet exclusively through `bpf_skb_load_bytes` into the stack (so every
//! truncation is one negative return, and the verifier never has to prove
//! packet bounds), and ends in one of the verdict blocks, which count the
//! packet and return `TC_ACT_OK` or `TC_ACT_SHOT`.

mod frame;
mod hdr;
mod parse;
mod policy;

use std::collections::BTreeMap;

use crate::ObjectConfig;
use crate::abi::{ConfigValue, Counter, CtKey, Event, Ipcache4Key, PolicyKey};
use crate::asm::{AsmError, Assembled, Assembler, Label};
use crate::insn::{AluOp, Cond, Helper, Reg, Size};
use crate::maps::{
    COUNTERS_PER_DIRECTION, Direction, EVENTS_LOST_COUNTER, TC_ACT_OK, TC_ACT_SHOT, Verdict,
    counter_index, names,
};

/// Name of the program for traffic leaving the endpoint.
pub const FROM_ENDPOINT: &str = "porin_from_endpoint";
/// Name of the program for traffic entering the endpoint.
pub const TO_ENDPOINT: &str = "porin_to_endpoint";

/// A byte offset or length of `crate::abi` as an instruction offset. ABI
/// structs are tens of bytes, far below `i16::MAX`.
pub(crate) const fn off(offset: usize) -> i16 {
    offset as i16
}

/// Ethertypes.
mod ethertype {
    pub const IPV4: i32 = 0x0800;
    pub const IPV6: i32 = 0x86dd;
    pub const VLAN: i32 = 0x8100;
    pub const QINQ: i32 = 0x88a8;
    pub const MPLS_UC: i32 = 0x8847;
    pub const MPLS_MC: i32 = 0x8848;
    pub const PPPOE_SESSION: i32 = 0x8864;
}

/// The code generator for one program.
pub(crate) struct Gen<'c> {
    pub(crate) a: Assembler,
    pub(crate) direction: Direction,
    pub(crate) config: &'c ObjectConfig,
    verdicts: BTreeMap<u32, Label>,
}

impl<'c> Gen<'c> {
    fn new(direction: Direction, config: &'c ObjectConfig) -> Gen<'c> {
        Gen {
            a: Assembler::new(),
            direction,
            config,
            verdicts: BTreeMap::new(),
        }
    }

    /// The label of the block that counts `verdict` and returns.
    pub(crate) fn verdict(&mut self, verdict: Verdict) -> Label {
        if let Some(label) = self.verdicts.get(&verdict.index()) {
            return *label;
        }
        let label = self.a.new_label();
        self.verdicts.insert(verdict.index(), label);
        label
    }

    /// `r1 = ctx; r2 = offset; r3 = fp + buffer; r4 = len; call
    /// skb_load_bytes`, dropping the packet as malformed if the bytes are
    /// not there. `offset_slot` is a stack slot holding the offset (u32);
    /// `None` uses `constant_offset`.
    pub(crate) fn load_bytes(
        &mut self,
        offset_slot: Option<i16>,
        constant_offset: i32,
        buffer: i16,
        len: i32,
    ) {
        let malformed = self.verdict(Verdict::DroppedMalformed);
        let a = &mut self.a;
        a.mov64_reg(Reg::R1, Reg::R6);
        match offset_slot {
            Some(slot) => a.load(Size::U32, Reg::R2, Reg::R10, slot),
            None => a.mov64_imm(Reg::R2, constant_offset),
        }
        a.mov64_reg(Reg::R3, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R3, i32::from(buffer));
        a.mov64_imm(Reg::R4, len);
        a.call(Helper::SKB_LOAD_BYTES);
        a.jmp_imm(Cond::Ne, Reg::R0, 0, malformed);
    }

    /// `r0 = map_lookup_elem(map, fp + key)`.
    pub(crate) fn lookup(&mut self, map: &str, key: i16) {
        let a = &mut self.a;
        a.ld_map(Reg::R1, map);
        a.mov64_reg(Reg::R2, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R2, i32::from(key));
        a.call(Helper::MAP_LOOKUP_ELEM);
    }

    /// Copies `len` bytes (a multiple of 4) between stack slots with u32
    /// moves (stack accesses must be aligned).
    pub(crate) fn copy_stack(&mut self, from: i16, to: i16, len: i16) {
        let mut done = 0;
        while done < len {
            self.a.load(Size::U32, Reg::R1, Reg::R10, from + done);
            self.a.store(Size::U32, Reg::R10, to + done, Reg::R1);
            done += 4;
        }
    }

    fn prologue(&mut self) {
        let a = &mut self.a;
        a.mov64_reg(Reg::R6, Reg::R1);
        a.mov64_imm(Reg::R1, 0);
        let mut off = -frame::SIZE;
        while off < 0 {
            a.store(Size::U64, Reg::R10, off, Reg::R1);
            off += 8;
        }
    }

    /// Reads the active policy slot once (`DATAPATH.md` §2.3).
    fn read_config(&mut self) {
        let bad = self.verdict(Verdict::DroppedBadConfig);
        self.lookup(names::CONFIG, frame::ZERO_KEY);
        let explicit = self.a.new_label();
        let a = &mut self.a;
        a.jmp_imm(Cond::Eq, Reg::R0, 0, bad);
        // Events: bit 7 clear = the default (drops only).
        a.load(Size::U8, Reg::R1, Reg::R0, off(ConfigValue::OFF_EVENTS));
        a.jmp_imm(
            Cond::Set,
            Reg::R1,
            i32::from(ConfigValue::EVENTS_SET),
            explicit,
        );
        a.mov64_imm(Reg::R1, i32::from(ConfigValue::EVENTS_DROPS));
        a.bind(explicit);
        a.store(Size::U32, Reg::R10, frame::EVENT_MASK, Reg::R1);
        a.load(
            Size::U32,
            Reg::R1,
            Reg::R0,
            off(ConfigValue::OFF_ACTIVE_POLICY),
        );
        // Slots are 0 and 1 (`ConfigValue::SLOT_A`, `SLOT_B`).
        a.jmp32_imm(Cond::Gt, Reg::R1, ConfigValue::SLOT_B as i32, bad);
        a.store(Size::U32, Reg::R10, frame::POLICY_SLOT, Reg::R1);
        // This slot's `prefix_free` bit (bit `slot`), from the same value.
        a.load(
            Size::U8,
            Reg::R2,
            Reg::R0,
            off(ConfigValue::OFF_PREFIX_FREE),
        );
        a.mov64_reg(Reg::R3, Reg::R2);
        a.alu64_reg(AluOp::Rsh, Reg::R2, Reg::R1);
        a.alu64_imm(AluOp::And, Reg::R2, 1);
        a.store(Size::U32, Reg::R10, frame::TRIE_SKIP, Reg::R2);
        // This slot's and direction's wildcard-free bit: bit `2 + 2 * slot +
        // direction` (`PolicySlot::wildcard_free_bit`).
        let dir = PolicyKey::direction_byte(self.direction);
        a.alu64_imm(AluOp::Lsh, Reg::R1, 1);
        a.alu64_imm(AluOp::Add, Reg::R1, 2 + i32::from(dir));
        a.alu64_reg(AluOp::Rsh, Reg::R3, Reg::R1);
        a.alu64_imm(AluOp::And, Reg::R3, 1);
        a.store(Size::U32, Reg::R10, frame::WILDCARD_SKIP, Reg::R3);
    }

    /// The verdict blocks and the two exits: count, then return.
    fn epilogue(&mut self) {
        let pass = self.a.new_label();
        let drop = self.a.new_label();
        let verdicts: Vec<(u32, Label)> = self.verdicts.iter().map(|(k, v)| (*k, *v)).collect();
        for (index, label) in verdicts {
            let passes = Verdict::ALL
                .iter()
                .find(|v| v.index() == index)
                .is_some_and(|v| v.passes());
            self.a.bind(label);
            let counter = counter_index(self.direction, index);
            self.a
                .store_imm(Size::U32, Reg::R10, frame::COUNTER_INDEX, counter as i32);
            self.a.ja(if passes { pass } else { drop });
        }
        for (label, code, wanted, verdict) in [
            (pass, TC_ACT_OK, ConfigValue::EVENTS_ALLOWS, Event::ALLOW),
            (drop, TC_ACT_SHOT, ConfigValue::EVENTS_DROPS, Event::DROP),
        ] {
            let done = self.a.new_label();
            self.a.bind(label);
            self.count();
            self.a.load(Size::U32, Reg::R1, Reg::R10, frame::EVENT_MASK);
            self.a.alu64_imm(AluOp::And, Reg::R1, i32::from(wanted));
            self.a.jmp_imm(Cond::Eq, Reg::R1, 0, done);
            self.emit_event(verdict);
            self.a.bind(done);
            self.a.mov64_imm(Reg::R0, code);
            self.a.exit();
        }
    }

    /// Builds the `porin_event` of this packet at `frame::EVENT` (every
    /// byte) and writes it to `porin_events`. A full ring counts the event
    /// as lost (`EVENTS_LOST_COUNTER`); the verdict is unchanged.
    fn emit_event(&mut self, verdict: u8) {
        let written = self.a.new_label();
        let e = frame::EVENT;
        let dir = PolicyKey::direction_byte(self.direction);
        // The identity of a packet that ended before policy (a reply, a
        // malformed L4 header) is looked up here, as it was while parsing.
        self.peer_identity(false);
        let a = &mut self.a;
        a.call(Helper::KTIME_GET_COARSE_NS);
        a.store(Size::U64, Reg::R10, e + off(Event::OFF_TIMESTAMP), Reg::R0);
        a.load(Size::U32, Reg::R1, Reg::R6, hdr::skb::IFINDEX);
        a.store(Size::U32, Reg::R10, e + off(Event::OFF_IFINDEX), Reg::R1);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::IDENTITY);
        a.store(Size::U32, Reg::R10, e + off(Event::OFF_IDENTITY), Reg::R1);
        self.copy_stack(
            frame::IPCACHE_KEY + off(Ipcache4Key::OFF_ADDR),
            e + off(Event::OFF_PEER_ADDR),
            16,
        );
        let a = &mut self.a;
        a.load(
            Size::U16,
            Reg::R1,
            Reg::R10,
            frame::POLICY_KEY + off(PolicyKey::OFF_DPORT),
        );
        a.store(Size::U16, Reg::R10, e + off(Event::OFF_DPORT), Reg::R1);
        a.store_imm(
            Size::U8,
            Reg::R10,
            e + off(Event::OFF_DIRECTION),
            i32::from(dir),
        );
        a.store_imm(
            Size::U8,
            Reg::R10,
            e + off(Event::OFF_VERDICT),
            i32::from(verdict),
        );
        // The reason is the verdict, without the direction's block.
        a.load(Size::U8, Reg::R1, Reg::R10, frame::COUNTER_INDEX);
        a.alu64_imm(AluOp::And, Reg::R1, COUNTERS_PER_DIRECTION as i32 - 1);
        a.store(Size::U8, Reg::R10, e + off(Event::OFF_REASON), Reg::R1);
        a.load(Size::U8, Reg::R1, Reg::R10, frame::PROTO);
        a.store(Size::U8, Reg::R10, e + off(Event::OFF_PROTO), Reg::R1);
        a.load(
            Size::U8,
            Reg::R1,
            Reg::R10,
            frame::CT_KEY + off(CtKey::OFF_FAMILY),
        );
        a.store(Size::U8, Reg::R10, e + off(Event::OFF_FAMILY), Reg::R1);
        a.store_imm(Size::U8, Reg::R10, e + off(Event::OFF_PAD), 0);
        a.ld_map(Reg::R1, names::EVENTS);
        a.mov64_reg(Reg::R2, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R2, i32::from(e));
        a.mov64_imm(Reg::R3, Event::SIZE as i32);
        a.mov64_imm(Reg::R4, 0);
        a.call(Helper::RINGBUF_OUTPUT);
        a.jmp_imm(Cond::Eq, Reg::R0, 0, written);
        a.store_imm(
            Size::U32,
            Reg::R10,
            frame::COUNTER_INDEX,
            counter_index(self.direction, EVENTS_LOST_COUNTER) as i32,
        );
        self.count();
        self.a.bind(written);
    }

    /// Adds this packet to the counter whose index is in
    /// `frame::COUNTER_INDEX` (this direction's block, `maps::counter_index`;
    /// per-CPU: plain read-modify-write).
    fn count(&mut self) {
        let done = self.a.new_label();
        self.lookup(names::VERDICTS, frame::COUNTER_INDEX);
        let a = &mut self.a;
        a.jmp_imm(Cond::Eq, Reg::R0, 0, done);
        a.load(Size::U64, Reg::R1, Reg::R0, off(Counter::OFF_PACKETS));
        a.alu64_imm(AluOp::Add, Reg::R1, 1);
        a.store(Size::U64, Reg::R0, off(Counter::OFF_PACKETS), Reg::R1);
        a.load(Size::U32, Reg::R2, Reg::R6, hdr::skb::LEN);
        a.load(Size::U64, Reg::R1, Reg::R0, off(Counter::OFF_BYTES));
        a.alu64_reg(AluOp::Add, Reg::R1, Reg::R2);
        a.store(Size::U64, Reg::R0, off(Counter::OFF_BYTES), Reg::R1);
        a.bind(done);
    }
}

/// Generates one program.
pub(crate) fn generate(direction: Direction, config: &ObjectConfig) -> Result<Assembled, AsmError> {
    let mut g = Gen::new(direction, config);
    g.prologue();
    g.read_config();
    let ipv4 = g.a.new_label();
    let ipv6 = g.a.new_label();
    let track = g.a.new_label();
    g.ethernet(ipv4, ipv6);
    g.a.bind(ipv4);
    g.ipv4(track);
    g.a.bind(ipv6);
    g.ipv6(track);
    g.a.bind(track);
    g.track_and_decide();
    g.epilogue();
    g.a.finish()
}
