//! A serde `Deserializer` over the located tree.
//!
//! Why our own instead of serde-saphyr's: it must (1) know the route of every
//! value so errors are located, (2) collect *all* unknown fields of a
//! document (with a did-you-mean) instead of stopping at the first, and
//! (3) judge plain scalars the way `kubectl` + the API server do: `port: 8080`
//! is an integer and so not a valid string, `"8080"` is a string.

use std::cell::RefCell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess, Visitor,
};

use super::tree::{Node, NodeKind, Style, is_null_text};
use crate::route::{Route, Segment};
use crate::suggest::did_you_mean;

/// What went wrong while deserializing, before it becomes a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeErrorKind {
    /// Wrong YAML type for the field.
    Type,
    /// A required field is missing.
    Missing,
    /// A value outside an enumeration.
    UnknownVariant,
    /// A field the type does not have (reported via [`Ctx`], never fatal).
    UnknownField,
    /// Anything else serde reports.
    Other,
}

/// A deserialization error with the route of the offending node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeError {
    /// Category.
    pub kind: DeErrorKind,
    /// Message without location.
    pub message: String,
    /// What would be valid.
    pub help: Option<String>,
    /// Where; filled in on the way out of the deserializer.
    pub route: Option<Route>,
    /// Whether the location is the key rather than the value.
    pub at_key: bool,
}

impl DeError {
    fn new(kind: DeErrorKind, message: String) -> DeError {
        DeError {
            kind,
            message,
            help: None,
            route: None,
            at_key: false,
        }
    }

    fn located(mut self, path: &Path<'_>) -> DeError {
        if self.route.is_none() {
            self.route = Some(path.route());
        }
        self
    }
}

/// Where a node is, built as the deserializer descends without allocating:
/// the prefix route of the document and the keys and indices below it,
/// borrowed from the tree. A [`Route`] is made only when a finding needs
/// one (an error or an unknown field); making one per visited node was a
/// third of the deserializer's time on 65,535 small policies.
#[derive(Debug, Clone, Copy)]
enum Path<'a> {
    Root(&'a Route),
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn route(&self) -> Route {
        let mut below: Vec<Segment> = Vec::new();
        let mut at = self;
        let root = loop {
            match at {
                Path::Root(root) => break root,
                Path::Key(parent, key) => {
                    below.push(Segment::Key((*key).to_owned()));
                    at = parent;
                }
                Path::Index(parent, index) => {
                    below.push(Segment::Index(*index));
                    at = parent;
                }
            }
        };
        let mut route = (*root).clone();
        route.0.extend(below.into_iter().rev());
        route
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError::new(DeErrorKind::Other, msg.to_string())
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError::new(
            DeErrorKind::Type,
            format!("expected {exp}, found {}", describe_unexpected(&unexp)),
        )
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError::new(
            DeErrorKind::Type,
            format!(
                "invalid value {}, expected {exp}",
                describe_unexpected(&unexp)
            ),
        )
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let mut error = DeError::new(
            DeErrorKind::UnknownVariant,
            format!("unknown value `{variant}`"),
        );
        error.help = Some(variant_help(variant, expected));
        error
    }

    fn missing_field(field: &'static str) -> Self {
        DeError::new(
            DeErrorKind::Missing,
            format!("missing required field `{field}`"),
        )
    }
}

fn describe_unexpected(unexp: &de::Unexpected<'_>) -> String {
    match unexp {
        de::Unexpected::Bool(b) => format!("boolean `{b}`"),
        de::Unexpected::Unsigned(n) => format!("integer `{n}`"),
        de::Unexpected::Signed(n) => format!("integer `{n}`"),
        de::Unexpected::Float(n) => format!("floating-point number `{n}`"),
        de::Unexpected::Str(s) => format!("string \"{s}\""),
        de::Unexpected::Unit => "null".to_owned(),
        de::Unexpected::Seq => "a sequence".to_owned(),
        de::Unexpected::Map => "a mapping".to_owned(),
        other => other.to_string(),
    }
}

fn variant_help(variant: &str, expected: &[&str]) -> String {
    let list = expected
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ");
    match did_you_mean(variant, expected.iter().copied()) {
        Some(best) => format!("did you mean `{best}`? valid values: {list}"),
        None => format!("valid values: {list}"),
    }
}

/// Fields the model accepts for compatibility but never suggests (`auth`,
/// the obsolete spelling of `authentication`).
pub const HIDDEN_FIELDS: &[&str] = &["auth"];

/// An unknown field found while deserializing (not fatal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Route of the unknown key.
    pub route: Route,
    /// The key as written.
    pub field: String,
    /// The closest known field, if close enough.
    pub suggestion: Option<&'static str>,
    /// All fields the mapping may have.
    pub expected: &'static [&'static str],
}

/// Side channel for findings that must not stop deserialization.
#[derive(Debug, Default)]
pub struct Ctx {
    /// Unknown fields, in document order.
    pub unknown_fields: RefCell<Vec<UnknownField>>,
}

/// A resolved plain scalar (YAML 1.2 core schema plus the YAML 1.1 booleans
/// that `kubectl`'s go-yaml still reads as booleans).
enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(&'a str),
}

fn resolve_plain(text: &str) -> Scalar<'_> {
    if is_null_text(text) {
        return Scalar::Null;
    }
    match text {
        "true" | "True" | "TRUE" => return Scalar::Bool(true),
        "false" | "False" | "FALSE" => return Scalar::Bool(false),
        // YAML 1.1 booleans: kubectl (go-yaml v2) turns these into booleans.
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Scalar::Bool(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => return Scalar::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Scalar::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Scalar::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Scalar::Float(f64::NAN),
        _ => {}
    }
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return parse_int(digits, 10, negative).unwrap_or(Scalar::Str(text));
    }
    if let Some(hex) = text.strip_prefix("0x")
        && !hex.is_empty()
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return parse_int(hex, 16, false).unwrap_or(Scalar::Str(text));
    }
    if let Some(oct) = text.strip_prefix("0o")
        && !oct.is_empty()
        && oct.bytes().all(|b| (b'0'..=b'7').contains(&b))
    {
        return parse_int(oct, 8, false).unwrap_or(Scalar::Str(text));
    }
    if looks_like_float(digits)
        && let Ok(value) = text.parse::<f64>()
    {
        return Scalar::Float(value);
    }
    Scalar::Str(text)
}

fn parse_int(digits: &str, radix: u32, negative: bool) -> Option<Scalar<'static>> {
    let magnitude = u64::from_str_radix(digits, radix).ok()?;
    if negative {
        let value = i64::try_from(magnitude)
            .ok()
            .map(|v| -v)
            .or_else(|| (magnitude == 1u64 << 63).then_some(i64::MIN))?;
        Some(Scalar::Int(value))
    } else if let Ok(value) = i64::try_from(magnitude) {
        Some(Scalar::Int(value))
    } else {
        Some(Scalar::UInt(magnitude))
    }
}

/// The core-schema float shape: `[0-9]*(\.[0-9]*)?([eE][-+]?[0-9]+)?` with at
/// least one digit and a dot or an exponent.
fn looks_like_float(text: &str) -> bool {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let has_dot = mantissa.contains('.');
    let mantissa_ok = mantissa.bytes().filter(|&b| b == b'.').count() <= 1
        && mantissa.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && mantissa.bytes().any(|b| b.is_ascii_digit());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exponent_ok && (has_dot || exponent.is_some())
}

/// Deserializes one node.
pub struct NodeDeserializer<'a> {
    node: &'a Node,
    route: Path<'a>,
    ctx: &'a Ctx,
}

impl<'a> NodeDeserializer<'a> {
    /// A deserializer for `node`, located at `route`.
    pub fn new(node: &'a Node, route: &'a Route, ctx: &'a Ctx) -> Self {
        NodeDeserializer {
            node,
            route: Path::Root(route),
            ctx,
        }
    }

    fn type_error(&self, expected: &str) -> DeError {
        let found = match &self.node.kind {
            NodeKind::Sequence(_) => "a sequence".to_owned(),
            NodeKind::Mapping(_) => "a mapping".to_owned(),
            NodeKind::Scalar(text, Style::Quoted) => format!("string \"{text}\""),
            NodeKind::Scalar(text, Style::Plain) => match resolve_plain(text) {
                Scalar::Null => "null".to_owned(),
                Scalar::Bool(_) => format!("boolean `{text}`"),
                Scalar::Int(_) | Scalar::UInt(_) => format!("integer `{text}`"),
                Scalar::Float(_) => format!("number `{text}`"),
                Scalar::Str(_) => format!("string \"{text}\""),
            },
        };
        let mut error = DeError::new(
            DeErrorKind::Type,
            format!("expected {expected}, found {found}"),
        );
        if expected == "a string"
            && let NodeKind::Scalar(text, Style::Plain) = &self.node.kind
            && !is_null_text(text)
        {
            error.help = Some(format!(
                "the field is a string; quote the value: \"{text}\""
            ));
        }
        error.located(&self.route)
    }
}

macro_rules! forward_to_any {
    ($($method:ident)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
                self.deserialize_any(visitor)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for NodeDeserializer<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let route = self.route;
        let result = match &self.node.kind {
            NodeKind::Scalar(text, Style::Quoted) => visitor.visit_str(text),
            NodeKind::Scalar(text, Style::Plain) => match resolve_plain(text) {
                Scalar::Null => visitor.visit_unit(),
                Scalar::Bool(b) => visitor.visit_bool(b),
                Scalar::Int(i) => visitor.visit_i64(i),
                Scalar::UInt(u) => visitor.visit_u64(u),
                Scalar::Float(f) => visitor.visit_f64(f),
                Scalar::Str(s) => visitor.visit_str(s),
            },
            NodeKind::Sequence(items) => visitor.visit_seq(Seq {
                items: items.iter().enumerate(),
                route: &self.route,
                ctx: self.ctx,
            }),
            NodeKind::Mapping(entries) => visitor.visit_map(Map {
                entries: entries.iter(),
                value: None,
                route: &self.route,
                ctx: self.ctx,
                fields: None,
            }),
        };
        result.map_err(|e: DeError| e.located(&route))
    }

    forward_to_any! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64
        deserialize_i128 deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64
        deserialize_u128 deserialize_f32 deserialize_f64 deserialize_char deserialize_bytes
        deserialize_byte_buf
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Scalar(text, Style::Quoted) => visitor
                .visit_str(text)
                .map_err(|e: DeError| e.located(&self.route)),
            NodeKind::Scalar(text, Style::Plain) => match resolve_plain(text) {
                Scalar::Str(s) => visitor
                    .visit_str(s)
                    .map_err(|e: DeError| e.located(&self.route)),
                _ => Err(self.type_error("a string")),
            },
            _ => Err(self.type_error("a string")),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            visitor.visit_none()
        } else {
            let route = self.route;
            visitor
                .visit_some(self)
                .map_err(|e: DeError| e.located(&route))
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.node.is_null() {
            visitor.visit_unit()
        } else {
            Err(self.type_error("null"))
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let route = self.route;
        visitor
            .visit_newtype_struct(self)
            .map_err(|e: DeError| e.located(&route))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Sequence(items) => visitor
                .visit_seq(Seq {
                    items: items.iter().enumerate(),
                    route: &self.route,
                    ctx: self.ctx,
                })
                .map_err(|e: DeError| e.located(&self.route)),
            _ => Err(self.type_error("a sequence")),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Mapping(entries) => visitor
                .visit_map(Map {
                    entries: entries.iter(),
                    value: None,
                    route: &self.route,
                    ctx: self.ctx,
                    fields: None,
                })
                .map_err(|e: DeError| e.located(&self.route)),
            _ => Err(self.type_error("a mapping")),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Mapping(entries) => visitor
                .visit_map(Map {
                    entries: entries.iter(),
                    value: None,
                    route: &self.route,
                    ctx: self.ctx,
                    fields: Some(fields),
                })
                .map_err(|e: DeError| e.located(&self.route)),
            _ => Err(self.type_error("a mapping")),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let text = match &self.node.kind {
            NodeKind::Scalar(text, Style::Quoted) => text.as_str(),
            NodeKind::Scalar(text, Style::Plain) if !self.node.is_null() => text.as_str(),
            _ => return Err(self.type_error("a string")),
        };
        if !variants.contains(&text) {
            let mut error = DeError::new(
                DeErrorKind::UnknownVariant,
                format!("unknown value `{text}`"),
            );
            error.help = Some(variant_help(text, variants));
            return Err(error.located(&self.route));
        }
        visitor
            .visit_enum(UnitVariant(text))
            .map_err(|e: DeError| e.located(&self.route))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

/// Unit enum variants are plain strings.
struct UnitVariant<'a>(&'a str);

impl<'de> EnumAccess<'de> for UnitVariant<'_> {
    type Error = DeError;
    type Variant = UnitOnly;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, UnitOnly), DeError> {
        let value = seed.deserialize(self.0.into_deserializer())?;
        Ok((value, UnitOnly))
    }
}

struct UnitOnly;

impl<'de> de::VariantAccess<'de> for UnitOnly {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, _seed: S) -> Result<S::Value, DeError> {
        Err(de::Error::custom(
            "expected a plain value, not a variant with data",
        ))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, DeError> {
        Err(de::Error::custom(
            "expected a plain value, not a variant with data",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, DeError> {
        Err(de::Error::custom(
            "expected a plain value, not a variant with data",
        ))
    }
}

struct Seq<'a, I> {
    items: I,
    route: &'a Path<'a>,
    ctx: &'a Ctx,
}

impl<'de, 'a, I: Iterator<Item = (usize, &'a Node)>> SeqAccess<'de> for Seq<'a, I> {
    type Error = DeError;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, DeError> {
        match self.items.next() {
            None => Ok(None),
            Some((index, node)) => seed
                .deserialize(NodeDeserializer {
                    node,
                    route: Path::Index(self.route, index),
                    ctx: self.ctx,
                })
                .map(Some),
        }
    }

    /// The items left: the tree holds them already, so a `Vec` is
    /// allocated at its length instead of growing to 4 slots for one
    /// item (a one-rule CNP's `egress` was ~3 KiB of a 4-slot `Vec` of
    /// rules; issue 14's 65,535 CIDR rules).
    fn size_hint(&self) -> Option<usize> {
        match self.items.size_hint() {
            (low, Some(high)) if low == high => Some(low),
            _ => None,
        }
    }
}

struct Map<'a, I> {
    entries: I,
    value: Option<(&'a Node, &'a str)>,
    route: &'a Path<'a>,
    ctx: &'a Ctx,
    /// The struct's field names when deserializing a struct: unknown keys are
    /// recorded in [`Ctx`] and skipped instead of failing the document.
    fields: Option<&'static [&'static str]>,
}

/// Map keys are taken as text whatever their YAML type, like kubectl does.
struct KeyDeserializer<'a> {
    text: &'a str,
}

impl<'de> de::Deserializer<'de> for KeyDeserializer<'_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_str(self.text)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, 'a, I: Iterator<Item = &'a (Node, Node)>> MapAccess<'de> for Map<'a, I> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        loop {
            let Some((key, value)) = self.entries.next() else {
                return Ok(None);
            };
            let Some(text) = key.as_scalar() else {
                let mut error =
                    DeError::new(DeErrorKind::Type, "mapping keys must be scalars".to_owned());
                error.at_key = true;
                return Err(error.located(self.route));
            };
            let route = Path::Key(self.route, text);
            if let Some(fields) = self.fields
                && !fields.contains(&text)
            {
                self.ctx.unknown_fields.borrow_mut().push(UnknownField {
                    route: route.route(),
                    field: text.to_owned(),
                    suggestion: did_you_mean(
                        text,
                        fields
                            .iter()
                            .copied()
                            .filter(|f| !HIDDEN_FIELDS.contains(f)),
                    ),
                    expected: fields,
                });
                continue;
            }
            self.value = Some((value, text));
            return seed
                .deserialize(KeyDeserializer { text })
                .map(Some)
                .map_err(|mut e| {
                    e.at_key = true;
                    e.located(&route)
                });
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, DeError> {
        match self.value.take() {
            Some((node, key)) => seed.deserialize(NodeDeserializer {
                node,
                route: Path::Key(self.route, key),
                ctx: self.ctx,
            }),
            None => Err(de::Error::custom("value requested before key")),
        }
    }
}
