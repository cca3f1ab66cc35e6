//! Policy-map entries and their precedence (`pkg/policy/types/entry.go`).

use std::fmt;

use super::error::EntryError;
use super::origins::Origins;

/// Rule priority: lower wins; only the low 24 bits are usable
/// (`types.Priority`, `MaxPriority = 2^24 - 1`). All user rules of a
/// CNP/CCNP/KNP sit at priority 0 at this Cilium snapshot (docs/semantics.md §10.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(u32);

impl Priority {
    /// `MaxPriority = 1<<24 - 1`.
    pub const MAX: Priority = Priority((1 << 24) - 1);
    /// Priority 0 (the highest; every CNP rule today).
    pub const ZERO: Priority = Priority(0);

    /// A checked priority (`0..=MAX`).
    pub const fn new(value: u32) -> Result<Priority, EntryError> {
        if value > Self::MAX.0 {
            Err(EntryError::PriorityOutOfRange { given: value })
        } else {
            Ok(Priority(value))
        }
    }

    /// The raw value.
    pub const fn get(self) -> u32 {
        self.0
    }
}

/// Proxy listener priority: lower wins, 1..=126 (`types.ListenerPriority`).
/// 0 means "no explicit priority" (precedence low byte 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ListenerPriority(u8);

impl ListenerPriority {
    /// 0: redirect without an explicit priority.
    pub const NONE: ListenerPriority = ListenerPriority(0);
    /// `ListenerPriorityHTTP = 101`.
    pub const HTTP: ListenerPriority = ListenerPriority(101);
    /// `ListenerPriorityKafka = 106`.
    pub const KAFKA: ListenerPriority = ListenerPriority(106);
    /// `ListenerPriorityProxylib = 111`.
    pub const PROXYLIB: ListenerPriority = ListenerPriority(111);
    /// `ListenerPriorityTLS = 116`.
    pub const TLS: ListenerPriority = ListenerPriority(116);
    /// `ListenerPriorityDNS = 121`.
    pub const DNS: ListenerPriority = ListenerPriority(121);
    /// `ListenerPriorityCRD = 126` (default for CRD listeners).
    pub const CRD: ListenerPriority = ListenerPriority(126);
    /// `MaxListenerPriority = 126`.
    pub const MAX: ListenerPriority = ListenerPriority(126);

    /// A listener priority; values above 126 are clamped to 126 as
    /// `WithListenerPriority` does.
    pub const fn new(value: u8) -> ListenerPriority {
        if value > Self::MAX.0 {
            Self::MAX
        } else {
            ListenerPriority(value)
        }
    }

    /// The raw value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// Entry precedence: higher wins (`types.Precedence`).
///
/// Bits 31..8 hold `MaxPriority - priority`; bits 7..0 the verdict/listener
/// byte: 255 deny, 254..=129 redirect with listener priority `p` (byte
/// `255 - p`), 2 redirect without priority, 1 plain allow, 0 pass.
// No `Default`: precedence 0 is a PASS verdict, never a sensible default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Precedence(u32);

impl Precedence {
    /// Low byte of a deny (`PrecedenceDeny`).
    pub const DENY_BYTE: u32 = 255;
    /// Low byte of a plain allow (`PrecedenceAllow`).
    pub const ALLOW_BYTE: u32 = 1;
    /// Low byte of a pass (`PrecedencePass`; never written to the datapath).
    pub const PASS_BYTE: u32 = 0;
    /// `MaxPrecedence = MaxDenyPrecedence = 0xFFFFFFFF`: deny at priority 0.
    pub const MAX: Precedence = Precedence(u32::MAX);
    /// `MaxAllowPrecedence = 0xFFFFFF01`: plain allow at priority 0.
    pub const MAX_ALLOW: Precedence = Precedence(0xFFFF_FF01);

    /// The raw value, exactly as written to the datapath.
    pub const fn from_raw(value: u32) -> Precedence {
        Precedence(value)
    }

    /// The raw value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// `Priority.toBasePrecedence()`: priority inverted into bits 31..8.
    pub const fn base(priority: Priority) -> Precedence {
        Precedence((Priority::MAX.0 - priority.0) << 8)
    }

    /// A deny at `priority` (`0xFFFFFFFF` at priority 0).
    pub const fn deny(priority: Priority) -> Precedence {
        Precedence(Self::base(priority).0 + Self::DENY_BYTE)
    }

    /// A plain allow at `priority` (`0xFFFFFF01` at priority 0).
    pub const fn allow(priority: Priority) -> Precedence {
        Precedence(Self::base(priority).0 + Self::ALLOW_BYTE)
    }

    /// A proxy redirect at `priority` with listener priority `listener`
    /// (`WithListenerPriority`): byte `255 - p` for `p` in 1..=126
    /// (HTTP 101 → 154 = `0x9A`), byte 2 for `p = 0`.
    pub const fn redirect(priority: Priority, listener: ListenerPriority) -> Precedence {
        let byte = if listener.0 > 0 {
            Self::DENY_BYTE - listener.0 as u32
        } else {
            2
        };
        Precedence(Self::base(priority).0 + byte)
    }

    /// `IsDeny`: low byte 255.
    pub const fn is_deny(self) -> bool {
        self.0 & 0xff == Self::DENY_BYTE
    }

    /// `IsPass`: low byte 0.
    pub const fn is_pass(self) -> bool {
        self.0 & 0xff == Self::PASS_BYTE
    }

    /// `IsAllow`: neither deny nor pass.
    pub const fn is_allow(self) -> bool {
        !self.is_deny() && !self.is_pass()
    }

    /// The priority level encoded in bits 31..8.
    pub const fn priority(self) -> Priority {
        Priority(Priority::MAX.0 - (self.0 >> 8))
    }

    /// The low (verdict/listener) byte.
    pub const fn low_byte(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// `ProxyPortPrecedenceMayDiffer`: same priority level and same
    /// deny-ness, so the two may differ only in the listener byte.
    pub const fn may_differ_only_in_proxy_byte(self, other: Precedence) -> bool {
        (self.0 ^ other.0) <= Self::DENY_BYTE && self.is_deny() == other.is_deny()
    }

    /// `AllowPrecedence`: the redirect byte masked away (the precedence of a
    /// plain allow at the same level).
    pub const fn allow_precedence(self) -> Precedence {
        Precedence((self.0 & !Self::DENY_BYTE) + Self::ALLOW_BYTE)
    }
}

impl fmt::Display for Precedence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#010x}", self.0)
    }
}

/// Authentication type, 7 bits (`AuthType`): 0 disabled, 1 spire
/// (`mode: required`), 2 always-fail (`test-always-fail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AuthType(u8);

impl AuthType {
    /// 0: no authentication.
    pub const DISABLED: AuthType = AuthType(0);
    /// 1: SPIRE mutual authentication (`required`).
    pub const SPIRE: AuthType = AuthType(1);
    /// 2: always fail (`test-always-fail`).
    pub const ALWAYS_FAIL: AuthType = AuthType(2);

    /// A checked auth type (0..=127).
    pub const fn new(value: u8) -> Result<AuthType, EntryError> {
        if value > 0x7f {
            Err(EntryError::AuthTypeOutOfRange { given: value })
        } else {
            Ok(AuthType(value))
        }
    }

    /// The raw value.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// Cilium's `AuthRequirement` (a `uint8`): bits 0–6 the [`AuthType`], bit
/// 7 set when the rule stated it *explicitly*; derived (inherited from a
/// covering entry) requirements have bit 7 clear. The policy-map byte is
/// encoded by `porin-ebpf`'s `abi::PolicyEntry` from the typed accessors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct AuthRequirement(u8);

impl AuthRequirement {
    /// Bit 7: explicit.
    pub const EXPLICIT_BIT: u8 = 0x80;
    /// No requirement, not explicit (`NoAuthRequirement`).
    pub const NONE: AuthRequirement = AuthRequirement(0);

    /// An explicit requirement (`AuthType.AsExplicitRequirement`).
    pub const fn explicit(auth: AuthType) -> AuthRequirement {
        AuthRequirement(auth.0 | Self::EXPLICIT_BIT)
    }

    /// A derived requirement (`AuthType.AsDerivedRequirement`).
    pub const fn derived(auth: AuthType) -> AuthRequirement {
        AuthRequirement(auth.0)
    }

    /// From Cilium's `uint8` value.
    pub const fn from_byte(byte: u8) -> AuthRequirement {
        AuthRequirement(byte)
    }

    /// Cilium's `uint8` value.
    pub const fn to_byte(self) -> u8 {
        self.0
    }

    /// The auth type (bits 0–6).
    pub const fn auth_type(self) -> AuthType {
        AuthType(self.0 & 0x7f)
    }

    /// True if bit 7 (explicit) is set.
    pub const fn is_explicit(self) -> bool {
        self.0 & Self::EXPLICIT_BIT != 0
    }

    /// The same type, marked derived (`AsDerived`).
    pub const fn as_derived(self) -> AuthRequirement {
        AuthRequirement(self.0 & 0x7f)
    }
}

/// A policy-map value in userspace (`MapStateEntry` plus rule origins).
///
/// `origins` are opaque ids owned by the resolve stage (e.g. an index into
/// its table of rules); the map algebra only unions them when entries merge
/// and never interprets them. They are not part of the datapath encoding.
///
/// Build entries with [`Entry::new`] (which normalises a deny as Cilium's
/// `NewMapStateEntry` does) or the shorthands [`Entry::allow`],
/// [`Entry::deny`] and [`Entry::redirect`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// Higher wins; see [`Precedence`].
    pub precedence: Precedence,
    /// Proxy port in host order; 0 = no redirect.
    pub proxy_port: u16,
    /// Authentication requirement byte.
    pub auth: AuthRequirement,
    /// Policy-log cookie (0 = none).
    pub cookie: u32,
    /// Rule-origin ids (opaque; unioned on merge).
    pub origins: Origins,
}

impl Entry {
    /// `types.NewMapStateEntry(priority, deny, proxyPort, listenerPriority,
    /// authReq)`: a deny clears proxy port, listener priority and auth; a
    /// redirect (non-zero proxy port) gets the listener byte.
    pub fn new(
        priority: Priority,
        deny: bool,
        proxy_port: u16,
        listener: ListenerPriority,
        auth: AuthRequirement,
    ) -> Entry {
        if deny {
            return Entry {
                precedence: Precedence::deny(priority),
                proxy_port: 0,
                auth: AuthRequirement::NONE,
                cookie: 0,
                origins: Origins::new(),
            };
        }
        let precedence = if proxy_port != 0 {
            Precedence::redirect(priority, listener)
        } else {
            Precedence::allow(priority)
        };
        Entry {
            precedence,
            proxy_port,
            auth,
            cookie: 0,
            origins: Origins::new(),
        }
    }

    /// `AllowEntry()`: a plain allow at priority 0 (`0xFFFFFF01`).
    pub fn allow() -> Entry {
        Entry::new(
            Priority::ZERO,
            false,
            0,
            ListenerPriority::NONE,
            AuthRequirement::NONE,
        )
    }

    /// `DenyEntry()`: a deny at priority 0 (`0xFFFFFFFF`).
    pub fn deny() -> Entry {
        Entry::new(
            Priority::ZERO,
            true,
            0,
            ListenerPriority::NONE,
            AuthRequirement::NONE,
        )
    }

    /// A redirect to `proxy_port` at priority 0 with the given listener priority.
    pub fn redirect(proxy_port: u16, listener: ListenerPriority) -> Entry {
        Entry::new(
            Priority::ZERO,
            false,
            proxy_port,
            listener,
            AuthRequirement::NONE,
        )
    }

    /// The same entry with `origin` added.
    #[must_use]
    pub fn with_origin(mut self, origin: u32) -> Entry {
        self.origins.insert(origin);
        self
    }

    /// The same entry with the given cookie.
    #[must_use]
    pub fn with_cookie(mut self, cookie: u32) -> Entry {
        self.cookie = cookie;
        self
    }

    /// The same entry with the given auth requirement.
    #[must_use]
    pub fn with_auth(mut self, auth: AuthRequirement) -> Entry {
        self.auth = auth;
        self
    }

    /// True for a deny.
    pub const fn is_deny(&self) -> bool {
        self.precedence.is_deny()
    }

    /// True for an allow (plain or redirect).
    pub const fn is_allow(&self) -> bool {
        self.precedence.is_allow()
    }

    /// True if the entry redirects to a proxy.
    pub const fn is_redirect(&self) -> bool {
        self.proxy_port != 0
    }

    /// True if the datapath-visible parts (everything but origins) are equal.
    pub fn datapath_eq(&self, other: &Entry) -> bool {
        self.precedence == other.precedence
            && self.proxy_port == other.proxy_port
            && self.auth == other.auth
            && self.cookie == other.cookie
    }

    /// `MapStateEntry.Merge`, for two entries whose precedences may differ
    /// only in the listener byte: the higher redirect precedence wins (tie:
    /// the lower proxy port); explicit auth beats derived, otherwise the
    /// numerically higher requirement wins. Origins are unioned by the caller.
    pub(crate) fn merge_same_level(&mut self, other: &Entry) {
        if !(self.is_allow() && other.is_allow()) {
            return;
        }
        if other.is_redirect()
            && (other.precedence > self.precedence
                || (other.precedence == self.precedence && other.proxy_port < self.proxy_port))
        {
            self.proxy_port = other.proxy_port;
            self.precedence = other.precedence;
        }
        if other.auth.is_explicit() == self.auth.is_explicit() {
            if other.auth > self.auth {
                self.auth = other.auth;
            }
        } else if other.auth.is_explicit() {
            self.auth = other.auth;
        }
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.is_deny() {
            "deny"
        } else if self.is_allow() {
            "allow"
        } else {
            "pass"
        };
        write!(
            f,
            "{verdict} priority={} listener-byte={}",
            self.precedence.priority().get(),
            self.precedence.low_byte()
        )?;
        if self.proxy_port != 0 {
            write!(f, " proxy-port={}", self.proxy_port)?;
        }
        if self.auth.auth_type() != AuthType::DISABLED {
            let note = if self.auth.is_explicit() {
                ""
            } else {
                " (derived)"
            };
            write!(f, " auth={}{note}", self.auth.auth_type().get())?;
        }
        if self.cookie != 0 {
            write!(f, " cookie={}", self.cookie)?;
        }
        Ok(())
    }
}
