//! Conntrack and the policy decision (`DATAPATH.md` §2.4 and §3).
//!
//! Cilium reference: `bpf/lib/policy.h` (`__policy_can_access`,
//! `__policy_check`) for the two-lookup precedence, and `bpf/bpf_lxc.c`
//! for the conntrack interplay: only replies (`CT_REPLY`) skip policy;
//! every other packet, established or not, is checked. Conntrack is one
//! lookup of a role-ordered key (`DATAPATH.md` §2.4) with Cilium's TCP
//! lifetimes (`bpf/lib/conntrack.h`); each policy lookup is the slot's
//! exact-key hash, then its trie (§2.0).

use porin_compiler::mapstate::{Key, Precedence};

use super::hdr::ports;
use super::hdr::skb;
use super::{Gen, frame, off, parse::proto};
use crate::abi::{CtKey, CtValue, PolicyEntry, PolicyKey};
use crate::insn::{AluOp, Cond, Endian, Helper, Reg, Size, SwapBits};
use crate::maps::{Direction, MARK_MAGIC_TO_PROXY, MARK_PORT_SHIFT, Verdict, names};

/// `MAX_PRECEDENCE`: a deny at priority 0, which short-circuits.
const MAX_PRECEDENCE: u32 = Precedence::MAX.get();
/// Offsets and masks of `porin_policy_entry` the decision reads.
const PRECEDENCE: i16 = off(PolicyEntry::OFF_PRECEDENCE);
const FLAGS: i16 = off(PolicyEntry::OFF_FLAGS);
const AUTH: i16 = off(PolicyEntry::OFF_AUTH);
const LPM_SHIFT: i32 = PolicyEntry::LPM_SHIFT as i32;
const AUTH_TYPE_MASK: i32 = PolicyEntry::AUTH_TYPE_MASK as i32;
/// A refresh that moves the expiry forward by less than `lifetime >>
/// LIFETIME_SLACK_SHIFT` (1/16) is not written.
const LIFETIME_SLACK_SHIFT: i32 = 4;

impl Gen<'_> {
    /// From `track` on: one conntrack lookup (the reply check and the
    /// established check at once, `DATAPATH.md` §2.4), policy, conntrack
    /// update.
    pub(super) fn track_and_decide(&mut self) {
        let policy = self.a.new_label();
        let reply = self.verdict(Verdict::AllowedReply);
        let dir = i32::from(self.direction_byte());

        // The key's protocol is the walk's final next header.
        let a = &mut self.a;
        a.load(Size::U8, Reg::R1, Reg::R10, frame::PROTO);
        a.store(
            Size::U8,
            Reg::R10,
            frame::CT_KEY + off(CtKey::OFF_PROTO),
            Reg::R1,
        );
        self.lookup(names::CONNTRACK, frame::CT_KEY);
        self.a.jmp_imm(Cond::Eq, Reg::R0, 0, policy);
        self.a.mov64_reg(Reg::R7, Reg::R0);
        // The clock only for a packet with an entry (and, later, a new one).
        self.a.call(Helper::KTIME_GET_COARSE_NS);
        let a = &mut self.a;
        a.store(Size::U64, Reg::R10, frame::NOW, Reg::R0);
        a.load(Size::U64, Reg::R1, Reg::R7, off(CtValue::OFF_EXPIRES));
        // Expired: as absent; an allowed packet overwrites it.
        a.jmp_reg(Cond::Gt, Reg::R0, Reg::R1, policy);
        a.load(Size::U8, Reg::R1, Reg::R7, off(CtValue::OFF_OPENED_BY));
        let forward = a.new_label();
        a.jmp_imm(Cond::Eq, Reg::R1, dir, forward);

        // A reply: the flow was opened in the other direction.
        self.refresh(Reg::R7);
        let a = &mut self.a;
        a.load(Size::U16, Reg::R1, Reg::R7, off(CtValue::OFF_PROXY_PORT));
        a.jmp_imm(Cond::Eq, Reg::R1, 0, reply);
        self.set_mark_from_r1();
        self.a.ja(reply);

        // The opening direction: policy again (Cilium re-checks), with the
        // entry kept for the update.
        let a = &mut self.a;
        a.bind(forward);
        a.store(Size::U64, Reg::R10, frame::CT_ENTRY, Reg::R7);
        a.store_imm(Size::U32, Reg::R10, frame::ESTABLISHED, 1);

        // Policy needs the peer's identity (a reply above did not).
        a.bind(policy);
        self.peer_identity(true);
        self.decide();
    }

    fn direction_byte(&self) -> u8 {
        PolicyKey::direction_byte(self.direction)
    }

    /// This direction's closing and SYN bits of `CtValue::tcp_state`.
    fn tcp_bits(&self) -> (i32, i32) {
        match self.direction {
            Direction::Ingress => (
                i32::from(CtValue::TCP_RX_CLOSING),
                i32::from(CtValue::TCP_RX_SYN),
            ),
            Direction::Egress => (
                i32::from(CtValue::TCP_TX_CLOSING),
                i32::from(CtValue::TCP_TX_SYN),
            ),
        }
    }

    /// Updates the entry at `value` (a map value, or the new entry on the
    /// stack) for this packet, with `frame::NOW` read (Cilium `__ct_lookup`
    /// and `ct_update_timeout`, `bpf/lib/conntrack.h`): non-TCP gets the
    /// other lifetime. TCP: a SYN without FIN/RST on a closing flow reopens
    /// it; a flow closed both ways is not refreshed, except that another FIN
    /// or RST restarts its close lifetime; otherwise the direction's SYN bit
    /// or the "seen a non-SYN" bit is added and the lifetime is the SYN one
    /// until a non-SYN was seen, then the TCP one; a FIN closes this
    /// direction, an RST before both SYNs were seen closes both, and a flow
    /// closed both ways gets the close lifetime. Clobbers r1-r5.
    fn refresh(&mut self, value: Reg) {
        let (closing, syn_bit) = self.tcp_bits();
        let tcp = self.a.new_label();
        let alive = self.a.new_label();
        let not_reopen = self.a.new_label();
        let syn = self.a.new_label();
        let flags_done = self.a.new_label();
        let long = self.a.new_label();
        let lifetime_done = self.a.new_label();
        let fin_only = self.a.new_label();
        let close_done = self.a.new_label();
        let close_check = self.a.new_label();
        let write_state = self.a.new_label();
        let store_lifetime = self.a.new_label();
        let done = self.a.new_label();
        let closed = i32::from(CtValue::TCP_CLOSED);
        let both_syns = i32::from(CtValue::TCP_RX_SYN | CtValue::TCP_TX_SYN);
        let non_syn = i32::from(CtValue::TCP_SEEN_NON_SYN);
        let (other, tcp_ns, syn_ns, close_ns) = (
            self.config.ct_lifetime_other_ns(),
            self.config.ct_lifetime_tcp_ns(),
            self.config.ct_lifetime_syn_ns(),
            self.config.ct_lifetime_close_ns(),
        );
        let a = &mut self.a;
        a.load(Size::U8, Reg::R1, Reg::R10, frame::PROTO);
        a.jmp_imm(Cond::Eq, Reg::R1, proto::TCP, tcp);
        a.ld_imm64(Reg::R2, other);
        a.ja(store_lifetime);

        // r3 = tcp_state, r4 = the packet's flags.
        a.bind(tcp);
        a.load(Size::U8, Reg::R3, value, off(CtValue::OFF_TCP_STATE));
        a.load(Size::U32, Reg::R4, Reg::R10, frame::TCP_FLAGS);
        a.mov64_reg(Reg::R5, Reg::R4);
        a.alu64_imm(AluOp::And, Reg::R5, ports::SYN | ports::FIN | ports::RST);
        a.jmp_imm(Cond::Ne, Reg::R5, ports::SYN, not_reopen);
        a.alu64_imm(AluOp::And, Reg::R3, !closed);
        a.bind(not_reopen);
        a.mov64_reg(Reg::R5, Reg::R3);
        a.alu64_imm(AluOp::And, Reg::R5, closed);
        a.jmp_imm(Cond::Ne, Reg::R5, closed, alive);
        // Closed both ways: only a FIN or RST restarts the close lifetime.
        a.jmp_imm(Cond::Set, Reg::R4, ports::FIN | ports::RST, close_done);
        a.ja(done);

        a.bind(alive);
        a.jmp_imm(Cond::Set, Reg::R4, ports::SYN, syn);
        a.alu64_imm(AluOp::Or, Reg::R3, non_syn);
        a.ja(flags_done);
        a.bind(syn);
        a.alu64_imm(AluOp::Or, Reg::R3, syn_bit);
        a.bind(flags_done);
        a.jmp_imm(Cond::Set, Reg::R3, non_syn, long);
        a.ld_imm64(Reg::R2, syn_ns);
        a.ja(lifetime_done);
        a.bind(long);
        a.ld_imm64(Reg::R2, tcp_ns);
        a.bind(lifetime_done);
        a.jmp_imm(Cond::Set, Reg::R4, ports::FIN | ports::RST, fin_only);
        a.ja(write_state);
        // FIN (or RST after both SYNs): this direction; RST before both
        // SYNs: both.
        a.bind(fin_only);
        a.alu64_imm(AluOp::Or, Reg::R3, closing);
        a.jmp_imm(Cond::Set, Reg::R4, ports::FIN, close_check);
        a.mov64_reg(Reg::R5, Reg::R3);
        a.alu64_imm(AluOp::And, Reg::R5, both_syns);
        a.jmp_imm(Cond::Eq, Reg::R5, both_syns, close_check);
        a.alu64_imm(AluOp::Or, Reg::R3, closed);
        a.bind(close_check);
        a.mov64_reg(Reg::R5, Reg::R3);
        a.alu64_imm(AluOp::And, Reg::R5, closed);
        a.jmp_imm(Cond::Ne, Reg::R5, closed, write_state);
        a.bind(close_done);
        a.ld_imm64(Reg::R2, close_ns);
        a.bind(write_state);
        // Written only when it changes (see the lifetime below).
        let state_kept = a.new_label();
        a.load(Size::U8, Reg::R5, value, off(CtValue::OFF_TCP_STATE));
        a.jmp_reg(Cond::Eq, Reg::R5, Reg::R3, state_kept);
        a.store(Size::U8, value, off(CtValue::OFF_TCP_STATE), Reg::R3);
        a.bind(state_kept);

        // r1 = now + lifetime. The entry is shared by both directions'
        // programs, which run on different CPUs for one flow (request on the
        // sender's, reply on the receiver's): a store on every packet moves
        // its cache line between them. So an expiry that would move forward
        // by less than 1/16 of the lifetime is not written (the entry then
        // lives at least 15/16 of its lifetime after the last packet,
        // `DATAPATH.md` §2.4); an earlier expiry (the close lifetime) always is.
        a.bind(store_lifetime);
        a.load(Size::U64, Reg::R1, Reg::R10, frame::NOW);
        a.alu64_reg(AluOp::Add, Reg::R1, Reg::R2);
        a.load(Size::U64, Reg::R3, value, off(CtValue::OFF_EXPIRES));
        a.mov64_reg(Reg::R4, Reg::R1);
        a.alu64_reg(AluOp::Sub, Reg::R4, Reg::R3);
        a.alu64_imm(AluOp::Rsh, Reg::R2, LIFETIME_SLACK_SHIFT);
        a.jmp_reg(Cond::Lt, Reg::R4, Reg::R2, done);
        a.store(Size::U64, value, off(CtValue::OFF_EXPIRES), Reg::R1);
        a.bind(done);
    }

    /// `skb->mark = r1 << 16 | MARK_MAGIC_TO_PROXY` (r1 = proxy port, host order).
    fn set_mark_from_r1(&mut self) {
        let a = &mut self.a;
        a.alu64_imm(AluOp::Lsh, Reg::R1, MARK_PORT_SHIFT as i32);
        a.alu64_imm(AluOp::Or, Reg::R1, MARK_MAGIC_TO_PROXY as i32);
        a.store(Size::U32, Reg::R6, skb::MARK, Reg::R1);
    }

    /// The two lookups and `__policy_check`; on allow, conntrack and the
    /// mark.
    fn decide(&mut self) {
        let by_default = self.verdict(Verdict::DeniedByDefault);
        let by_rule = self.verdict(Verdict::DeniedByRule);
        let auth_required = self.verdict(Verdict::DeniedAuth);
        let slot_b = self.a.new_label();
        let have_map = self.a.new_label();
        let l4_lookup = self.a.new_label();
        let have_l3 = self.a.new_label();
        let choose_l4 = self.a.new_label();
        let check = self.a.new_label();
        let auth_done = self.a.new_label();
        let dir = self.direction_byte();

        // Key: {64, identity, direction, proto, dport} (dport written by L4).
        let key = frame::POLICY_KEY;
        let a = &mut self.a;
        a.store_imm(
            Size::U32,
            Reg::R10,
            key + off(PolicyKey::OFF_PREFIXLEN),
            Key::DATAPATH_FULL_PREFIX as i32,
        );
        a.load(Size::U32, Reg::R1, Reg::R10, frame::IDENTITY);
        a.store(
            Size::U32,
            Reg::R10,
            key + off(PolicyKey::OFF_IDENTITY),
            Reg::R1,
        );
        a.store_imm(Size::U8, Reg::R10, key + off(PolicyKey::OFF_DIRECTION), dir);
        a.load(Size::U8, Reg::R1, Reg::R10, frame::PROTO);
        a.store(Size::U8, Reg::R10, key + off(PolicyKey::OFF_PROTO), Reg::R1);

        // r9 = the active slot's prefix trie, read once per packet.
        a.load(Size::U32, Reg::R1, Reg::R10, frame::POLICY_SLOT);
        a.jmp_imm(Cond::Ne, Reg::R1, 0, slot_b);
        a.ld_map(Reg::R9, names::POLICY_A);
        a.ja(have_map);
        a.bind(slot_b);
        a.ld_map(Reg::R9, names::POLICY_B);
        a.bind(have_map);

        // L3 lookup (exact identity). r8 = l3 entry or NULL.
        self.policy_lookup();
        let a = &mut self.a;
        a.mov64_reg(Reg::R8, Reg::R0);
        a.jmp_imm(Cond::Eq, Reg::R8, 0, l4_lookup);
        a.load(Size::U32, Reg::R1, Reg::R8, PRECEDENCE);
        a.jmp32_imm(
            Cond::Ne,
            Reg::R1,
            crate::insn::Imm32::from_bits(MAX_PRECEDENCE),
            l4_lookup,
        );
        // MAX_PRECEDENCE: use the L3 entry alone.
        a.mov64_imm(Reg::R7, 0);
        a.ja(check);

        // L4-only lookup (identity 0). r7 = l4 entry or NULL. Skipped when
        // the slot holds no key it could match (`WILDCARD_SKIP`): NULL.
        a.bind(l4_lookup);
        let l4_done = a.new_label();
        a.load(Size::U32, Reg::R1, Reg::R10, frame::WILDCARD_SKIP);
        a.mov64_imm(Reg::R0, 0);
        a.jmp_imm(Cond::Ne, Reg::R1, 0, l4_done);
        a.store_imm(
            Size::U32,
            Reg::R10,
            frame::POLICY_KEY + off(PolicyKey::OFF_IDENTITY),
            0,
        );
        self.policy_lookup();
        let a = &mut self.a;
        a.bind(l4_done);
        a.mov64_reg(Reg::R7, Reg::R0);
        a.jmp_imm(Cond::Ne, Reg::R8, 0, have_l3);
        a.jmp_imm(Cond::Eq, Reg::R7, 0, by_default);
        a.mov64_reg(Reg::R8, Reg::R7);
        a.mov64_imm(Reg::R7, 0);
        a.ja(check);

        a.bind(have_l3);
        a.jmp_imm(Cond::Eq, Reg::R7, 0, check);
        // Both: L4 wins on higher precedence, or equal precedence and a
        // longer proto/port prefix.
        a.load(Size::U32, Reg::R1, Reg::R7, PRECEDENCE);
        a.load(Size::U32, Reg::R2, Reg::R8, PRECEDENCE);
        a.jmp_reg(Cond::Gt, Reg::R1, Reg::R2, choose_l4);
        a.jmp_reg(Cond::Ne, Reg::R1, Reg::R2, check);
        a.load(Size::U8, Reg::R1, Reg::R7, FLAGS);
        a.alu64_imm(AluOp::Rsh, Reg::R1, LPM_SHIFT);
        a.load(Size::U8, Reg::R2, Reg::R8, FLAGS);
        a.alu64_imm(AluOp::Rsh, Reg::R2, LPM_SHIFT);
        a.jmp_reg(Cond::Gt, Reg::R1, Reg::R2, choose_l4);
        a.ja(check);
        a.bind(choose_l4);
        a.mov64_reg(Reg::R1, Reg::R8);
        a.mov64_reg(Reg::R8, Reg::R7);
        a.mov64_reg(Reg::R7, Reg::R1);

        // __policy_check(chosen = r8, other = r7 or 0).
        a.bind(check);
        a.load(Size::U8, Reg::R1, Reg::R8, FLAGS);
        a.alu64_imm(AluOp::And, Reg::R1, i32::from(PolicyEntry::FLAG_DENY));
        a.jmp_imm(Cond::Ne, Reg::R1, 0, by_rule);
        a.load(Size::U8, Reg::R3, Reg::R8, AUTH);
        a.mov64_reg(Reg::R4, Reg::R3);
        a.alu64_imm(AluOp::And, Reg::R4, AUTH_TYPE_MASK);
        // Derived auth: the other entry's type if precedences are equal, the
        // chosen one's is not explicit, and the other's is greater.
        a.jmp_imm(Cond::Eq, Reg::R7, 0, auth_done);
        a.alu64_imm(AluOp::And, Reg::R3, i32::from(PolicyEntry::AUTH_EXPLICIT));
        a.jmp_imm(Cond::Ne, Reg::R3, 0, auth_done);
        a.load(Size::U32, Reg::R1, Reg::R7, PRECEDENCE);
        a.load(Size::U32, Reg::R2, Reg::R8, PRECEDENCE);
        a.jmp_reg(Cond::Ne, Reg::R1, Reg::R2, auth_done);
        a.load(Size::U8, Reg::R1, Reg::R7, AUTH);
        a.alu64_imm(AluOp::And, Reg::R1, AUTH_TYPE_MASK);
        a.jmp_reg(Cond::Le, Reg::R1, Reg::R4, auth_done);
        a.mov64_reg(Reg::R4, Reg::R1);
        a.bind(auth_done);
        a.jmp_imm(Cond::Ne, Reg::R4, 0, auth_required);

        a.load(
            Size::U16,
            Reg::R1,
            Reg::R8,
            off(PolicyEntry::OFF_PROXY_PORT),
        );
        a.endian(Endian::Big, SwapBits::B16, Reg::R1);
        a.store(Size::U32, Reg::R10, frame::PROXY_PORT, Reg::R1);
        self.allowed();
    }

    /// `r0` = the longest match of `frame::POLICY_KEY` (a full-length key)
    /// in the active slot: its exact-key hash first (a hit is the longest
    /// match there can be, as the hash holds only prefix length 64), then,
    /// unless `porin_config.prefix_free` says the slot's trie is empty, the
    /// trie in r9. The hash lookup has one call site per slot, so each site
    /// sees one map and the kernel can inline it.
    fn policy_lookup(&mut self) {
        let slot_b = self.a.new_label();
        let looked_up = self.a.new_label();
        let done = self.a.new_label();
        let a = &mut self.a;
        a.load(Size::U32, Reg::R1, Reg::R10, frame::POLICY_SLOT);
        a.jmp_imm(Cond::Ne, Reg::R1, 0, slot_b);
        self.lookup(names::POLICY_A_EXACT, frame::POLICY_KEY);
        self.a.ja(looked_up);
        self.a.bind(slot_b);
        self.lookup(names::POLICY_B_EXACT, frame::POLICY_KEY);
        let a = &mut self.a;
        a.bind(looked_up);
        a.jmp_imm(Cond::Ne, Reg::R0, 0, done);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::TRIE_SKIP);
        a.jmp_imm(Cond::Ne, Reg::R1, 0, done);
        a.mov64_reg(Reg::R1, Reg::R9);
        a.mov64_reg(Reg::R2, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R2, i32::from(frame::POLICY_KEY));
        a.call(Helper::MAP_LOOKUP_ELEM);
        a.bind(done);
    }

    /// Allowed: refresh the flow's entry (fresh, opened in this direction)
    /// or create it, then mark a redirect.
    fn allowed(&mut self) {
        let create = self.a.new_label();
        let tracked = self.a.new_label();
        let plain = self.a.new_label();
        let redirected = self.verdict(Verdict::Redirected);
        let new = self.verdict(Verdict::AllowedNew);
        let established = self.verdict(Verdict::AllowedEstablished);
        let dir = i32::from(self.direction_byte());

        let a = &mut self.a;
        a.load(Size::U32, Reg::R1, Reg::R10, frame::ESTABLISHED);
        a.jmp_imm(Cond::Eq, Reg::R1, 0, create);
        let proxy_kept = a.new_label();
        a.load(Size::U64, Reg::R7, Reg::R10, frame::CT_ENTRY);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::PROXY_PORT);
        // Shared with the other direction's CPU: written only when it changes.
        a.load(Size::U16, Reg::R2, Reg::R7, off(CtValue::OFF_PROXY_PORT));
        a.jmp_reg(Cond::Eq, Reg::R2, Reg::R1, proxy_kept);
        a.store(Size::U16, Reg::R7, off(CtValue::OFF_PROXY_PORT), Reg::R1);
        a.bind(proxy_kept);
        self.refresh(Reg::R7);
        self.a.ja(tracked);

        // A new entry (or one over an expired entry), built on the stack.
        self.a.bind(create);
        self.a.call(Helper::KTIME_GET_COARSE_NS);
        let a = &mut self.a;
        a.store(Size::U64, Reg::R10, frame::NOW, Reg::R0);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::PROXY_PORT);
        a.store(
            Size::U16,
            Reg::R10,
            frame::CT_VALUE + off(CtValue::OFF_PROXY_PORT),
            Reg::R1,
        );
        a.store_imm(
            Size::U8,
            Reg::R10,
            frame::CT_VALUE + off(CtValue::OFF_OPENED_BY),
            dir,
        );
        a.mov64_reg(Reg::R7, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R7, i32::from(frame::CT_VALUE));
        self.refresh(Reg::R7);
        let a = &mut self.a;
        a.ld_map(Reg::R1, names::CONNTRACK);
        a.mov64_reg(Reg::R2, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R2, i32::from(frame::CT_KEY));
        a.mov64_reg(Reg::R3, Reg::R10);
        a.alu64_imm(AluOp::Add, Reg::R3, i32::from(frame::CT_VALUE));
        a.mov64_imm(Reg::R4, 0);
        // A failed insert only means the reply will be policy-checked.
        a.call(Helper::MAP_UPDATE_ELEM);

        a.bind(tracked);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::PROXY_PORT);
        a.jmp_imm(Cond::Eq, Reg::R1, 0, plain);
        self.set_mark_from_r1();
        self.a.ja(redirected);
        let a = &mut self.a;
        a.bind(plain);
        a.load(Size::U32, Reg::R1, Reg::R10, frame::ESTABLISHED);
        a.jmp_imm(Cond::Ne, Reg::R1, 0, established);
        a.ja(new);
    }
}
