//! The datapath ABI: every key and value the object's maps hold, defined
//! once (`DATAPATH.md` §2).
//!
//! Each map key or value is one `#[repr(C)]` struct declared with
//! `abi_struct!`, whose one line per field gives the field's name (the
//! BTF member name `bpftool` shows), its type, its byte order and the name
//! of its offset constant. Everything else is derived from that line:
//!
//! - the offset constants (`PolicyKey::OFF_DPORT`, ...) the program
//!   generator (`crate::program`) uses for its loads and stores, taken
//!   from the Rust compiler's own layout of the `#[repr(C)]` struct
//!   (`offset_of!`);
//! - [`Layout`], the BTF shape `crate::elf` writes into `.BTF`;
//! - `to_bytes` / `from_bytes`, explicit little- or big-endian writes of
//!   each field at its offset (no transmute: this crate has no `unsafe`);
//! - a compile-time check that the struct has no implicit padding and that
//!   every multi-byte integer states its byte order.
//!
//! On top of the raw structs, each map's module converts from and to the
//! typed values of `porin-compiler` (a policy [`Key`](porin_compiler::mapstate::Key)
//! and [`Entry`](porin_compiler::mapstate::Entry), an ipcache prefix and
//! identity): the compiler never sees a byte, and decoding is fail-closed
//! (a key or value porin would never write is an [`AbiError`]).
//!
//! `DATAPATH.md`'s layout tables are checked against [`ALL`] by a test, so
//! a field added here and not there fails the build's tests.

mod config;
mod conntrack;
mod counter;
mod event;
mod ipcache;
mod policy;
#[cfg(test)]
mod tests;

pub use config::ConfigValue;
pub use conntrack::{CT_ADDR_LEN, CtKey, CtValue};
pub use counter::Counter;
pub use event::Event;
pub use ipcache::{
    IPV4_ADDR_LEN, IPV6_ADDR_LEN, Ipcache4Key, Ipcache4Pair, Ipcache6Key, Ipcache6Pair,
    IpcachePair, IpcachePairs, IpcacheValue, ipcache_pairs,
};
pub use policy::{
    PolicyEntry, PolicyKey, PolicyPair, decode_policy_pair, policy_pair, policy_pairs,
};

use porin_compiler::identity::IdentityError;
use porin_compiler::mapstate::{EntryError, KeyError};
use thiserror::Error;

/// The byte order of one field in the map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Little-endian (host order on bpfel, the only target porin emits).
    Le,
    /// Big-endian (network order).
    Be,
    /// Single bytes or a byte array: no order.
    Raw,
}

/// The type of one field of a key or value struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldType {
    /// `unsigned char`.
    U8,
    /// `unsigned short`.
    U16,
    /// `unsigned int`.
    U32,
    /// `unsigned long long`.
    U64,
    /// `unsigned char[n]`.
    Bytes(usize),
}

impl FieldType {
    /// Size in bytes.
    pub const fn size(self) -> usize {
        match self {
            FieldType::U8 => 1,
            FieldType::U16 => 2,
            FieldType::U32 => 4,
            FieldType::U64 => 8,
            FieldType::Bytes(n) => n,
        }
    }
}

/// One field of a key or value: everything `DATAPATH.md` and BTF say
/// about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Member name (BTF and `DATAPATH.md`).
    pub name: &'static str,
    /// Type.
    pub ty: FieldType,
    /// Byte order of the value in the map.
    pub order: Order,
    /// Byte offset in the struct.
    pub offset: usize,
}

impl Field {
    /// The type as `DATAPATH.md` writes it: `u8`, `u16 BE`, `u32 LE`,
    /// `u8[16]`.
    pub fn type_name(&self) -> String {
        let base = match self.ty {
            FieldType::U8 => "u8".to_owned(),
            FieldType::U16 => "u16".to_owned(),
            FieldType::U32 => "u32".to_owned(),
            FieldType::U64 => "u64".to_owned(),
            FieldType::Bytes(n) => format!("u8[{n}]"),
        };
        match self.order {
            Order::Le => format!("{base} LE"),
            Order::Be => format!("{base} BE"),
            Order::Raw => base,
        }
    }
}

/// A key or value layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// No key or value (`BPF_MAP_TYPE_RINGBUF`): size 0, no BTF member.
    None,
    /// A plain `unsigned int` (array indices), little-endian.
    U32,
    /// A struct without padding.
    Struct {
        /// BTF struct name.
        name: &'static str,
        /// Size in bytes.
        size: usize,
        /// Fields in offset order.
        fields: &'static [Field],
    },
}

impl Layout {
    /// Size in bytes.
    pub const fn size(&self) -> usize {
        match self {
            Layout::None => 0,
            Layout::U32 => 4,
            Layout::Struct { size, .. } => *size,
        }
    }
}

/// The bytes of an array map's `u32` index key (`porin_config`,
/// `porin_verdicts`).
pub const fn index_key(index: u32) -> [u8; 4] {
    index.to_le_bytes()
}

/// The layout of every struct of the ABI, in `DATAPATH.md` order.
pub const ALL: [Layout; 10] = [
    Ipcache4Key::LAYOUT,
    Ipcache6Key::LAYOUT,
    IpcacheValue::LAYOUT,
    PolicyKey::LAYOUT,
    PolicyEntry::LAYOUT,
    ConfigValue::LAYOUT,
    CtKey::LAYOUT,
    CtValue::LAYOUT,
    Counter::LAYOUT,
    Event::LAYOUT,
];

/// Why bytes or values are not a valid key or value of the datapath.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AbiError {
    /// A key or value of the wrong length.
    #[error("{what}: expected {expected} bytes, got {got}")]
    Length {
        /// The struct being read.
        what: &'static str,
        /// Its size.
        expected: usize,
        /// The bytes given.
        got: usize,
    },
    /// An ipcache prefix longer than the address.
    #[error("ipcache prefix length {prefix_len} exceeds {max} bits")]
    PrefixTooLong {
        /// Given length.
        prefix_len: u32,
        /// Address bits.
        max: u32,
    },
    /// A policy key prefix length porin never writes (not 40 or 48..=64).
    #[error("policy key prefixlen {prefixlen} is not 40 or 48..=64")]
    InvalidPrefixLength {
        /// The rejected prefix length.
        prefixlen: u32,
    },
    /// A policy key with bits set beyond its prefix: the trie would ignore
    /// them, so the key would match more than it says.
    #[error("policy key has bits set beyond its prefix length {prefixlen}")]
    BitsBeyondPrefix {
        /// The key's prefix length.
        prefixlen: u32,
    },
    /// The direction byte must be 0 (ingress) or 1 (egress).
    #[error("direction byte {byte} is neither 0 (ingress) nor 1 (egress)")]
    InvalidDirection {
        /// The rejected byte.
        byte: u8,
    },
    /// A numeric identity that is not a valid identity.
    #[error("identity {identity} is not a valid identity: {source}")]
    Identity {
        /// The raw value.
        identity: u32,
        /// Why.
        source: IdentityError,
    },
    /// The fields do not make a policy key (the compiler's strict
    /// constructor rejects them).
    #[error("policy key: {0}")]
    Key(KeyError),
    /// The fields do not make a policy entry.
    #[error("policy entry: {0}")]
    Entry(EntryError),
    /// Policy entry flag bits 1-2 are reserved and must be zero.
    #[error("policy entry flags {flags:#04x} have reserved bits set")]
    ReservedFlags {
        /// The flags byte.
        flags: u8,
    },
    /// `lpm_prefix_length` must equal the key's prefix length minus 40.
    #[error("policy entry lpm_prefix_length {entry} does not match the key's {key}")]
    PrefixLengthMismatch {
        /// The entry's value.
        entry: u8,
        /// The key's value.
        key: u8,
    },
    /// The deny flag must agree with the precedence's low byte.
    #[error("policy entry deny flag disagrees with precedence {precedence:#010x}")]
    DenyFlagMismatch {
        /// The precedence.
        precedence: u32,
    },
    /// A deny entry never redirects or requires auth.
    #[error("a deny policy entry carries a proxy port or an auth requirement")]
    DenyWithRedirectOrAuth,
    /// `porin_config.active_policy` names no slot.
    #[error("porin_config active_policy is {0}, not 0 or 1")]
    BadSlot(u32),
    /// A `porin_event` record with fields the programs never write.
    #[error(
        "porin_event with verdict {verdict}, reason {reason}, direction {direction}, \
         family {family} is not one the programs write"
    )]
    BadEvent {
        /// The verdict byte.
        verdict: u8,
        /// The reason (counter index) byte.
        reason: u8,
        /// The direction byte.
        direction: u8,
        /// The family byte.
        family: u8,
    },
}

/// A field type that the ABI can write: unsigned integers and byte arrays.
pub trait Wire: Copy {
    /// Its BTF type.
    const TYPE: FieldType;
    /// Writes the value into `out` (exactly `TYPE.size()` bytes).
    fn write(self, order: Order, out: &mut [u8]);
    /// Reads the value from `bytes` (exactly `TYPE.size()` bytes).
    fn read(order: Order, bytes: &[u8]) -> Self;
}

/// The first `N` bytes of `bytes` (zero-filled if shorter, which the
/// callers' length checks rule out).
fn array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    std::array::from_fn(|i| bytes.get(i).copied().unwrap_or(0))
}

fn copy(out: &mut [u8], bytes: &[u8]) {
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = *b;
    }
}

macro_rules! wire_int {
    ($ty:ty, $field:ident) => {
        impl Wire for $ty {
            const TYPE: FieldType = FieldType::$field;
            fn write(self, order: Order, out: &mut [u8]) {
                match order {
                    Order::Be => copy(out, &self.to_be_bytes()),
                    Order::Le | Order::Raw => copy(out, &self.to_le_bytes()),
                }
            }
            fn read(order: Order, bytes: &[u8]) -> Self {
                match order {
                    Order::Be => <$ty>::from_be_bytes(array(bytes)),
                    Order::Le | Order::Raw => <$ty>::from_le_bytes(array(bytes)),
                }
            }
        }
    };
}

wire_int!(u8, U8);
wire_int!(u16, U16);
wire_int!(u32, U32);
wire_int!(u64, U64);

impl<const N: usize> Wire for [u8; N] {
    const TYPE: FieldType = FieldType::Bytes(N);
    fn write(self, _: Order, out: &mut [u8]) {
        copy(out, &self);
    }
    fn read(_: Order, bytes: &[u8]) -> Self {
        array(bytes)
    }
}

/// Checked at compile time for every struct: fields are contiguous in
/// declaration order from offset 0 to the struct's size (so `#[repr(C)]`
/// added no padding, and the BTF, the byte encoding and the Rust layout are
/// one layout), and every multi-byte integer states its byte order.
pub(crate) const fn check_layout(size: usize, fields: &[Field]) {
    let mut next = 0;
    let mut i = 0;
    while i < fields.len() {
        let field = fields[i];
        assert!(
            field.offset == next,
            "ABI struct with implicit padding: add an explicit pad field"
        );
        let multi_byte_int = matches!(field.ty, FieldType::U16 | FieldType::U32 | FieldType::U64);
        assert!(
            multi_byte_int != matches!(field.order, Order::Raw),
            "multi-byte integers are Le or Be; u8 and byte arrays are Raw"
        );
        next += field.ty.size();
        i += 1;
    }
    assert!(
        next == size,
        "ABI struct with trailing padding: add an explicit pad field"
    );
}

/// Declares one key or value struct of the ABI. Each field line is
/// `name @ OFFSET_CONST: type = Order,`; see the module documentation for
/// what is derived from it.
macro_rules! abi_struct {
    (
        $(#[$meta:meta])*
        pub struct $name:ident = $btf:literal {
            $(
                $(#[$fmeta:meta])*
                $field:ident @ $off:ident : $ty:ty = $order:ident,
            )+
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )+
        }

        impl $name {
            #[doc = concat!("The BTF struct name, `", $btf, "`.")]
            pub const NAME: &'static str = $btf;
            /// Size in bytes (the `#[repr(C)]` size; no padding).
            pub const SIZE: usize = ::core::mem::size_of::<$name>();
            $(
                #[doc = concat!("Byte offset of `", stringify!($field), "`.")]
                pub const $off: usize = ::core::mem::offset_of!($name, $field);
            )+
            /// The fields, in offset order.
            pub const FIELDS: &'static [$crate::abi::Field] = &[
                $(
                    $crate::abi::Field {
                        name: stringify!($field),
                        ty: <$ty as $crate::abi::Wire>::TYPE,
                        order: $crate::abi::Order::$order,
                        offset: Self::$off,
                    },
                )+
            ];
            /// The BTF layout.
            pub const LAYOUT: $crate::abi::Layout = $crate::abi::Layout::Struct {
                name: $btf,
                size: Self::SIZE,
                fields: Self::FIELDS,
            };

            /// The bytes the map holds.
            pub fn to_bytes(&self) -> [u8; Self::SIZE] {
                let mut out = [0u8; Self::SIZE];
                $(
                    $crate::abi::Wire::write(
                        self.$field,
                        $crate::abi::Order::$order,
                        &mut out[Self::$off..Self::$off
                            + <$ty as $crate::abi::Wire>::TYPE.size()],
                    );
                )+
                out
            }

            /// Reads the bytes of a map key or value. Only the length is
            /// checked; the typed conversions of each map validate the
            /// values.
            pub fn from_bytes(bytes: &[u8]) -> Result<$name, $crate::abi::AbiError> {
                if bytes.len() != Self::SIZE {
                    return Err($crate::abi::AbiError::Length {
                        what: $btf,
                        expected: Self::SIZE,
                        got: bytes.len(),
                    });
                }
                Ok($name {
                    $(
                        $field: <$ty as $crate::abi::Wire>::read(
                            $crate::abi::Order::$order,
                            &bytes[Self::$off..Self::$off
                                + <$ty as $crate::abi::Wire>::TYPE.size()],
                        ),
                    )+
                })
            }
        }

        const _: () = $crate::abi::check_layout($name::SIZE, $name::FIELDS);
    };
}

pub(crate) use abi_struct;
