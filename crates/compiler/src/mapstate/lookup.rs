//! The datapath decision (`__policy_can_access` / `__policy_check` in Cilium's
//! `bpf/lib/policy.h`, 1.19 precedence layout; docs/semantics.md §5.4), as a
//! reference evaluator over a [`MapState`].

use std::fmt;

use super::MapState;
use super::datapath::{DROP_POLICY, DROP_POLICY_AUTH_REQUIRED, DROP_POLICY_DENY};
use super::entry::{AuthType, Entry, Precedence};
use super::key::{Direction, Key};
use crate::identity::Identity;

/// Why a flow is denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenyReason {
    /// A deny entry matched (`DROP_POLICY_DENY`, -181).
    Rule,
    /// No entry matched: default deny (`DROP_POLICY`, -133).
    NoEntry,
}

/// The verdict of a lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Pass (`CTX_ACT_OK`).
    Allow,
    /// Drop.
    Deny {
        /// Rule or default deny.
        reason: DenyReason,
    },
    /// Pass, redirected to the L7 proxy on `proxy_port`.
    Redirect {
        /// The proxy port (host order).
        proxy_port: u16,
    },
    /// Drop until authenticated (`DROP_POLICY_AUTH_REQUIRED`, -189,
    /// `ext_err = auth_type`).
    AuthRequired {
        /// The required authentication.
        auth_type: AuthType,
    },
}

impl Verdict {
    /// True if the packet passes the policy (allow or redirect).
    pub const fn is_allowed(self) -> bool {
        matches!(self, Verdict::Allow | Verdict::Redirect { .. })
    }

    /// The datapath drop code, `None` when the packet passes.
    pub const fn drop_code(self) -> Option<i32> {
        match self {
            Verdict::Allow | Verdict::Redirect { .. } => None,
            Verdict::Deny {
                reason: DenyReason::Rule,
            } => Some(DROP_POLICY_DENY),
            Verdict::Deny {
                reason: DenyReason::NoEntry,
            } => Some(DROP_POLICY),
            Verdict::AuthRequired { .. } => Some(DROP_POLICY_AUTH_REQUIRED),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Allow => f.write_str("allow"),
            Verdict::Deny {
                reason: DenyReason::Rule,
            } => f.write_str("deny (rule)"),
            Verdict::Deny {
                reason: DenyReason::NoEntry,
            } => f.write_str("deny (no matching entry)"),
            Verdict::Redirect { proxy_port } => write!(f, "redirect to proxy port {proxy_port}"),
            Verdict::AuthRequired { auth_type } => {
                write!(f, "drop: authentication type {} required", auth_type.get())
            }
        }
    }
}

/// Which kind of entry decided (`POLICY_MATCH_*` in `bpf/lib/policy.h`;
/// the discriminants are the datapath values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MatchType {
    /// No entry (default deny).
    None = 0,
    /// Specific identity, any protocol.
    L3Only = 1,
    /// Specific identity, protocol and (some) port bits.
    L3L4 = 2,
    /// Identity 0, protocol and (some) port bits.
    L4Only = 3,
    /// Identity 0, any protocol (allow-all / deny-all).
    All = 4,
    /// Specific identity, protocol, any port.
    L3Proto = 5,
    /// Identity 0, protocol, any port.
    ProtoOnly = 6,
}

impl MatchType {
    /// The datapath's name (`POLICY_MATCH_*` without the prefix).
    pub const fn name(self) -> &'static str {
        match self {
            MatchType::None => "NONE",
            MatchType::L3Only => "L3_ONLY",
            MatchType::L3L4 => "L3_L4",
            MatchType::L4Only => "L4_ONLY",
            MatchType::All => "ALL",
            MatchType::L3Proto => "L3_PROTO",
            MatchType::ProtoOnly => "PROTO_ONLY",
        }
    }
}

impl fmt::Display for MatchType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An entry a lookup found, with its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchedEntry {
    /// The matched key.
    pub key: Key,
    /// The matched entry (with its rule origins).
    pub entry: Entry,
}

/// The outcome of [`MapState::lookup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What happens to the packet.
    pub verdict: Verdict,
    /// Which entry decided (`None` for default deny).
    pub chosen: Option<MatchedEntry>,
    /// The other lookup's entry, when both lookups ran and it found one (it
    /// may have lent its auth type).
    pub other: Option<MatchedEntry>,
    /// The match type reported by the datapath.
    pub match_type: MatchType,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.verdict, self.match_type)?;
        if let Some(chosen) = &self.chosen {
            write!(f, " by {{{}}}: {}", chosen.key, chosen.entry)?;
        }
        Ok(())
    }
}

/// Which entries a lookup chose, by reference: (chosen, the other lookup's
/// hit, whether the chosen one is the L3 lookup's).
type Chosen<'m> = Option<((&'m Key, &'m Entry), Option<(&'m Key, &'m Entry)>, bool)>;

impl MapState {
    /// Longest-prefix match among the keys of exactly `identity` in
    /// `direction` that contain `(proto, port)`; one datapath LPM lookup.
    fn lpm_lookup(
        &self,
        direction: Direction,
        identity: Identity,
        proto: u8,
        port: u16,
    ) -> Option<(&Key, &Entry)> {
        let lo = Key::for_direction(direction).with_identity(identity);
        self.entries
            .range(lo..)
            .take_while(|(k, _)| k.direction() == direction && k.identity() == identity)
            .filter(|(k, _)| k.matches_port_proto(proto, port))
            .max_by_key(|(k, _)| k.datapath_prefix_len())
    }

    /// The two lookups and the choice between them (steps 1 and 2 of
    /// [`MapState::lookup`]).
    fn choose(&self, direction: Direction, identity: Identity, proto: u8, port: u16) -> Chosen<'_> {
        let l3 = self.lpm_lookup(direction, identity, proto, port);
        if let Some(l3) = l3
            && l3.1.precedence == Precedence::MAX
        {
            return Some((l3, None, true));
        }
        let l4 = self.lpm_lookup(direction, Identity::WILDCARD, proto, port);
        match (l3, l4) {
            (None, None) => None,
            (None, Some(l4)) => Some((l4, None, false)),
            (Some(l3), None) => Some((l3, None, true)),
            (Some(l3), Some(l4)) => {
                let l4_wins = l4.1.precedence > l3.1.precedence
                    || (l4.1.precedence == l3.1.precedence
                        && l4.0.lpm_prefix_length() > l3.0.lpm_prefix_length());
                if l4_wins {
                    Some((l4, Some(l3), false))
                } else {
                    Some((l3, Some(l4), true))
                }
            }
        }
    }

    /// Decides a packet of protocol `proto` to port `port` from/to peer
    /// `identity` in `direction`, as `__policy_can_access` does in Cilium
    /// 1.19. For ICMP (1) and ICMPv6 (58) pass the ICMP *type* as `port`
    /// (what the datapath does with `enable_icmp_rule`); for protocols
    /// without ports pass 0.
    ///
    ///
    /// 1. L3 lookup (exact identity, LPM over protocol/port). A hit with
    ///    precedence `0xFFFFFFFF` (deny at priority 0) decides at once.
    /// 2. L4-only lookup (identity 0). It is chosen if there is no L3 hit,
    ///    or its precedence is higher, or equal with a longer
    ///    `lpm_prefix_length`; otherwise the L3 hit is chosen. No hit at
    ///    all: default deny (`DROP_POLICY`).
    /// 3. `__policy_check`: a deny drops (`DROP_POLICY_DENY`). Otherwise the
    ///    auth type is the chosen entry's, or the other entry's if that has
    ///    *equal precedence*, a greater auth type, and the chosen one has no
    ///    explicit auth. A non-zero auth type drops with
    ///    `DROP_POLICY_AUTH_REQUIRED`; else a proxy port redirects; else allow.
    ///
    /// (Cilium's userspace `mapState.lookup` borrows auth when the other's
    /// `AllowPrecedence` is greater or equal; the datapath, which porin must
    /// agree with, requires equal precedence.)
    pub fn lookup(
        &self,
        direction: Direction,
        identity: Identity,
        proto: u8,
        port: u16,
    ) -> Decision {
        let matched = |(key, entry): (&Key, &Entry)| MatchedEntry {
            key: *key,
            entry: entry.clone(),
        };
        match self.choose(direction, identity, proto, port) {
            None => Decision {
                verdict: Verdict::Deny {
                    reason: DenyReason::NoEntry,
                },
                chosen: None,
                other: None,
                match_type: MatchType::None,
            },
            Some((chosen, other, is_l3)) => decide(matched(chosen), other.map(matched), is_l3),
        }
    }

    /// [`MapState::lookup`]'s verdict and deciding entry, without copying
    /// entries (for analyses that decide many flows).
    pub fn lookup_entry(
        &self,
        direction: Direction,
        identity: Identity,
        proto: u8,
        port: u16,
    ) -> (Verdict, Option<&Entry>) {
        match self.choose(direction, identity, proto, port) {
            None => (
                Verdict::Deny {
                    reason: DenyReason::NoEntry,
                },
                None,
            ),
            Some(((_, chosen), other, _)) => (check(chosen, other.map(|o| o.1)), Some(chosen)),
        }
    }
}

/// `__policy_check` plus the match-type report.
fn decide(chosen: MatchedEntry, other: Option<MatchedEntry>, chosen_is_l3: bool) -> Decision {
    let p_len = chosen.key.lpm_prefix_length();
    let match_type = match (chosen_is_l3, p_len) {
        (true, 9..) => MatchType::L3L4,
        (true, 1..=8) => MatchType::L3Proto,
        (true, 0) => MatchType::L3Only,
        (false, 0) => MatchType::All,
        (false, 1..=8) => MatchType::ProtoOnly,
        (false, 9..) => MatchType::L4Only,
    };
    let verdict = check(&chosen.entry, other.as_ref().map(|o| &o.entry));
    Decision {
        verdict,
        chosen: Some(chosen),
        other,
        match_type,
    }
}

fn check(chosen: &Entry, other: Option<&Entry>) -> Verdict {
    if chosen.is_deny() {
        return Verdict::Deny {
            reason: DenyReason::Rule,
        };
    }
    let mut auth_type = chosen.auth.auth_type();
    if let Some(other) = other
        && other.precedence == chosen.precedence
        && !chosen.auth.is_explicit()
        && other.auth.auth_type() > auth_type
    {
        auth_type = other.auth.auth_type();
    }
    if auth_type != AuthType::DISABLED {
        return Verdict::AuthRequired { auth_type };
    }
    if chosen.proxy_port != 0 {
        return Verdict::Redirect {
            proxy_port: chosen.proxy_port,
        };
    }
    Verdict::Allow
}
