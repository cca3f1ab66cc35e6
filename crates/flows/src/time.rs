//! RFC 3339 timestamps (`google.protobuf.Timestamp` in JSON) to and from
//! nanoseconds since the Unix epoch, so that first/last times compare as
//! numbers whatever the precision or offset each line was written with.

use std::fmt;

/// Nanoseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

/// Days since the epoch of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (the inverse of [`days_from_civil`]).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn digits(text: &str, range: std::ops::Range<usize>) -> Option<i64> {
    let part = text.get(range)?;
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

impl Timestamp {
    /// Parses `2024-05-01T12:00:00.123456789Z` (or `+02:00`, `-05:30`
    /// offsets, `t`/`z` in lower case, any fraction up to nanoseconds).
    pub fn parse(text: &str) -> Option<Self> {
        let b = text.as_bytes();
        if b.len() < 20
            || b[4] != b'-'
            || b[7] != b'-'
            || !matches!(b[10], b'T' | b't' | b' ')
            || b[13] != b':'
            || b[16] != b':'
        {
            return None;
        }
        let (year, month, day) = (
            digits(text, 0..4)?,
            digits(text, 5..7)?,
            digits(text, 8..10)?,
        );
        let (hour, minute, second) = (
            digits(text, 11..13)?,
            digits(text, 14..16)?,
            digits(text, 17..19)?,
        );
        if !(1..=12).contains(&month)
            || !(1..=31).contains(&day)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return None;
        }
        let mut rest = &text[19..];
        let mut nanos = 0i64;
        if let Some(fraction) = rest.strip_prefix('.') {
            let end = fraction
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(fraction.len());
            if end == 0 || end > 9 {
                return None;
            }
            nanos = digits(fraction, 0..end)? * 10i64.pow(9 - end as u32);
            rest = &fraction[end..];
        }
        let offset = match rest {
            "Z" | "z" => 0,
            _ if rest.len() == 6 && matches!(rest.as_bytes()[0], b'+' | b'-') => {
                if rest.as_bytes()[3] != b':' {
                    return None;
                }
                let minutes = digits(rest, 1..3)? * 60 + digits(rest, 4..6)?;
                if rest.starts_with('-') {
                    -minutes
                } else {
                    minutes
                }
            }
            _ => return None,
        };
        let days = days_from_civil(year, month, day);
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset * 60;
        seconds
            .checked_mul(1_000_000_000)
            .and_then(|s| s.checked_add(nanos))
            .map(Timestamp)
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC, with as many fraction digits as needed (0, 3, 6 or 9).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.0.div_euclid(1_000_000_000);
        let nanos = self.0.rem_euclid(1_000_000_000);
        let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
        let time = seconds.rem_euclid(86_400);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
            time / 3600,
            time / 60 % 60,
            time % 60
        )?;
        if nanos == 0 {
        } else if nanos % 1_000_000 == 0 {
            write!(f, ".{:03}", nanos / 1_000_000)?;
        } else if nanos % 1000 == 0 {
            write!(f, ".{:06}", nanos / 1000)?;
        } else {
            write!(f, ".{nanos:09}")?;
        }
        f.write_str("Z")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_and_order_across_precisions_and_offsets() {
        let a = Timestamp::parse("2024-05-01T12:00:05Z").unwrap();
        let b = Timestamp::parse("2024-05-01T12:00:05.5Z").unwrap();
        let c = Timestamp::parse("2024-05-01T14:00:06+02:00").unwrap();
        assert!(a < b && b < c, "{a:?} {b:?} {c:?}");
        assert_eq!(a.to_string(), "2024-05-01T12:00:05Z");
        assert_eq!(b.to_string(), "2024-05-01T12:00:05.500Z");
        assert_eq!(c.to_string(), "2024-05-01T12:00:06Z");
        assert_eq!(Timestamp::parse("1970-01-01T00:00:00Z"), Some(Timestamp(0)));
        let n = Timestamp::parse("2026-12-01T14:30:56.123456789Z").unwrap();
        assert_eq!(n.to_string(), "2026-12-01T14:30:56.123456789Z");
        for bad in [
            "",
            "2024-13-01T00:00:00Z",
            "2024-05-01T00:00:00",
            "2024-05-01T00:00:00.Z",
            "2024-05-01T00:00:00+0200",
        ] {
            assert_eq!(Timestamp::parse(bad), None, "{bad}");
        }
    }
}
