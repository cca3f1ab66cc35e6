//! String formats the API server and Cilium check: DNS names, label keys and
//! values, IANA service names, ports, CIDRs. Each mirrors the named Go
//! function; none uses a regex engine, so each is linear in its input.

use std::net::IpAddr;

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// k8s `IsDNS1123Label`: at most 63 of `[a-z0-9-]`, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// k8s `IsDNS1123Subdomain`: at most 253 characters of dot-separated labels.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// The name part of a qualified name / a label value:
/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_label_token(s: &str) -> bool {
    let mut chars = s.chars();
    match (chars.next(), s.chars().last()) {
        (Some(first), Some(last)) => {
            is_alnum(first)
                && is_alnum(last)
                && s.chars()
                    .all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'))
        }
        _ => false,
    }
}

/// k8s `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123 subdomain, name
/// at most 63 characters of the label-token form. Returns the problem.
pub fn qualified_name_problem(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Some("the prefix before `/` must be non-empty".to_owned());
        }
        if !is_dns1123_subdomain(prefix) {
            return Some(format!(
                "the prefix `{prefix}` must be a lower-case DNS subdomain (e.g. `example.com`)"
            ));
        }
    }
    if name.is_empty() {
        return Some("the name part must be non-empty".to_owned());
    }
    if name.len() > 63 {
        return Some(format!(
            "the name part must be at most 63 characters (it has {})",
            name.len()
        ));
    }
    if !is_label_token(name) {
        return Some(
            "the name part must consist of alphanumerics, `-`, `_` or `.`, and start and end with an alphanumeric"
                .to_owned(),
        );
    }
    None
}

/// k8s `IsValidLabelValue` (also the CRD pattern of `matchLabels` values):
/// empty, or at most 63 characters of the label-token form.
pub fn label_value_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    if s.len() > 63 {
        return Some(format!(
            "a label value must be at most 63 characters (it has {})",
            s.len()
        ));
    }
    if !is_label_token(s) {
        return Some(
            "a label value must consist of alphanumerics, `-`, `_` or `.`, and start and end with an alphanumeric"
                .to_owned(),
        );
    }
    None
}

/// Cilium `iana.IsSvcName` (`pkg/iana/svcname.go`): 1-15 characters matching
/// `^([a-zA-Z0-9]-?)*[a-zA-Z](-?[a-zA-Z0-9])*$` — alphanumerics and single
/// inner hyphens, at least one letter.
pub fn is_iana_svc_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.chars().all(|c| is_alnum(c) || c == '-')
        && s.chars().any(|c| c.is_ascii_alphabetic())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// k8s `IsValidPortName` (NetworkPolicy named ports): like an IANA service
/// name but lower case only.
pub fn is_k8s_port_name(s: &str) -> bool {
    is_iana_svc_name(s) && !s.chars().any(|c| c.is_ascii_uppercase())
}

/// Go `strconv.ParseUint(s, 0, 16)`: base from the prefix (`0x`, `0o`, `0b`,
/// leading `0` = octal), `_` allowed between digits. Cilium parses ports this
/// way, so `"010"` is port 8 (docs/semantics.md §10.2, a quirk porin mirrors).
pub fn parse_go_uint16(s: &str) -> Result<u16, ParseUintError> {
    let lower = s.to_ascii_lowercase();
    let (radix, digits) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    let prefixed = radix != 10;
    let underscores_ok = {
        // Go's underscoreOK: `_` only between digits or right after a base prefix.
        let bytes = digits.as_bytes();
        bytes.iter().enumerate().all(|(i, &b)| {
            b != b'_'
                || ((i > 0 && bytes[i - 1] != b'_' || (i == 0 && prefixed))
                    && i + 1 < bytes.len()
                    && bytes[i + 1] != b'_')
        })
    };
    let cleaned: String = digits.chars().filter(|&c| c != '_').collect();
    let syntax = || ParseUintError::Syntax { text: s.to_owned() };
    let range = || ParseUintError::Range { text: s.to_owned() };
    if cleaned.is_empty() || !underscores_ok {
        return Err(syntax());
    }
    match u64::from_str_radix(&cleaned, radix) {
        Ok(value) => u16::try_from(value).map_err(|_| range()),
        Err(error) if matches!(error.kind(), std::num::IntErrorKind::PosOverflow) => Err(range()),
        Err(_) => Err(syntax()),
    }
}

/// Why [`parse_go_uint16`] refused a text: Go's `strconv.ParseUint` error,
/// word for word (Cilium reports it so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseUintError {
    /// Not a number in any base Go accepts.
    #[error("strconv.ParseUint: parsing \"{text}\": invalid syntax")]
    Syntax {
        /// The text.
        text: String,
    },
    /// A number above 65535.
    #[error("strconv.ParseUint: parsing \"{text}\": value out of range")]
    Range {
        /// The text.
        text: String,
    },
}

/// Why [`parse_prefix`] refused a text: Go's `netip.ParsePrefix` error,
/// word for word.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// No `/`.
    #[error("netip.ParsePrefix(\"{text}\"): no '/'")]
    NoSlash {
        /// The text.
        text: String,
    },
    /// An IPv6 zone (`%eth0`).
    #[error("netip.ParsePrefix(\"{text}\"): IPv6 zones cannot be present in a prefix")]
    Zone {
        /// The text.
        text: String,
    },
    /// The address does not parse.
    #[error("netip.ParsePrefix(\"{text}\"): ParseAddr(\"{addr}\"): invalid IP address")]
    Address {
        /// The text.
        text: String,
        /// The part before the `/`.
        addr: String,
    },
    /// The length is not a decimal without leading zeros.
    #[error("netip.ParsePrefix(\"{text}\"): bad bits after slash: \"{len}\"")]
    Bits {
        /// The text.
        text: String,
        /// The part after the `/`.
        len: String,
    },
    /// The length is longer than the family's address.
    #[error("netip.ParsePrefix(\"{text}\"): prefix length out of range")]
    Length {
        /// The text.
        text: String,
    },
}

/// A parsed `address/length` prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    /// The address as written (host bits may be set, as Go's `netip.ParsePrefix` allows).
    pub addr: IpAddr,
    /// Prefix length.
    pub len: u8,
}

impl Prefix {
    /// Whether `addr` lies inside this prefix (Go `netip.Prefix.Contains`;
    /// false across families).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(self.len))
                };
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = if self.len == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.len))
                };
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Go `netip.ParsePrefix`: `addr/len`, decimal length without leading zeros,
/// no IPv6 zone, length within the family. Rust's address parser, like Go's,
/// rejects IPv4 octets with leading zeros.
pub fn parse_prefix(s: &str) -> Result<Prefix, PrefixError> {
    let text = || s.to_owned();
    let Some((addr, len)) = s.split_once('/') else {
        return Err(PrefixError::NoSlash { text: text() });
    };
    if addr.contains('%') {
        return Err(PrefixError::Zone { text: text() });
    }
    let addr: IpAddr = addr.parse().map_err(|_| PrefixError::Address {
        text: text(),
        addr: addr.to_owned(),
    })?;
    let bad_len = || PrefixError::Bits {
        text: text(),
        len: len.to_owned(),
    };
    if len.is_empty()
        || !len.bytes().all(|b| b.is_ascii_digit())
        || (len.len() > 1 && len.starts_with('0'))
    {
        return Err(bad_len());
    }
    let bits: u8 = len.parse().map_err(|_| bad_len())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if bits > max {
        return Err(PrefixError::Length { text: text() });
    }
    Ok(Prefix { addr, len: bits })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_port_parsing_matches_cilium() {
        // Cilium pkg/policy/api/rule_validation.go: strconv.ParseUint(port, 0, 16).
        assert_eq!(parse_go_uint16("80"), Ok(80));
        assert_eq!(parse_go_uint16("010"), Ok(8));
        assert_eq!(parse_go_uint16("1_000"), Ok(1000));
        assert_eq!(parse_go_uint16("0"), Ok(0));
        assert!(parse_go_uint16("65536").is_err());
        assert!(parse_go_uint16("99999").is_err());
        assert!(parse_go_uint16("-1").is_err());
        assert!(parse_go_uint16("1__0").is_err());
        assert!(parse_go_uint16("08").is_err());
    }

    #[test]
    fn svc_names() {
        // pkg/iana/svcname.go
        assert!(is_iana_svc_name("http"));
        assert!(is_iana_svc_name("http-8080"));
        assert!(is_iana_svc_name("0x10"));
        assert!(!is_iana_svc_name("8080"));
        assert!(!is_iana_svc_name("http--x"));
        assert!(!is_iana_svc_name("a-very-long-service-name"));
        assert!(!is_iana_svc_name("http_1"));
    }

    #[test]
    fn prefixes_follow_netip() {
        assert!(parse_prefix("10.0.0.0/8").is_ok());
        assert!(
            parse_prefix("10.1.2.3/8").is_ok(),
            "host bits are allowed by netip.ParsePrefix"
        );
        assert!(parse_prefix("10.0.0.1").is_err());
        assert!(parse_prefix("10.0.0.0/33").is_err());
        assert!(parse_prefix("10.0.0.0/08").is_err());
        assert!(parse_prefix("010.0.0.0/8").is_err());
        assert!(parse_prefix("2001:db8::/32").is_ok());
        let p = parse_prefix("10.0.0.0/8").unwrap();
        assert!(p.contains("10.9.9.9".parse().unwrap()));
        assert!(!p.contains("11.0.0.0".parse().unwrap()));
        assert!(!p.contains("::1".parse().unwrap()));
    }

    #[test]
    fn qualified_names() {
        assert_eq!(qualified_name_problem("app"), None);
        assert_eq!(
            qualified_name_problem("k8s.io.kubernetes.pod.namespace"),
            None
        );
        assert_eq!(qualified_name_problem("kubernetes.io/metadata.name"), None);
        assert!(qualified_name_problem("Example.com/app").is_some());
        assert!(qualified_name_problem("bad key").is_some());
        assert!(qualified_name_problem("").is_some());
    }
}
