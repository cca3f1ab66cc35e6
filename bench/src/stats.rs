//! Small statistics: percentiles of samples and the median/min/max of repeated runs.

/// The `p`-th percentile (0..=100) of `sorted` by the nearest-rank method; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Median and range of one figure over repeated runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median of the runs (the lower middle value for an even count).
    pub median: f64,
    /// Smallest run.
    pub min: f64,
    /// Largest run.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none (or one is not a number).
    pub fn of(values: &[f64]) -> Option<Self> {
        if values.is_empty() || values.iter().any(|v| v.is_nan()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(Self {
            median: sorted[(sorted.len() - 1) / 2],
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        })
    }

    /// `median (min–max)` with `digits` decimals; a single run shows only its value.
    pub fn show(&self, digits: usize) -> String {
        let value = |v: f64| group(v, digits);
        #[allow(
            clippy::float_cmp,
            reason = "equal only when every run measured the same value"
        )]
        if self.min == self.max {
            value(self.median)
        } else {
            format!(
                "{} ({}–{})",
                value(self.median),
                value(self.min),
                value(self.max)
            )
        }
    }
}

/// `value` with `digits` decimals and thousands separators (`12,345.6`).
pub fn group(value: f64, digits: usize) -> String {
    let text = format!("{:.*}", digits, value.abs());
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i.to_owned(), Some(f.to_owned())),
        None => (text.clone(), None),
    };
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let sign = if value < 0.0 { "-" } else { "" };
    match frac {
        Some(f) => format!("{sign}{grouped}.{f}"),
        None => format!("{sign}{grouped}"),
    }
}

/// `a / b` as `1.23×`, or `n/a` when either side is missing or zero.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => format!("{:.2}×", a / b),
        _ => "n/a".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&samples, 50.0), 50);
        assert_eq!(percentile(&samples, 99.0), 99);
        assert_eq!(percentile(&samples, 100.0), 100);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn spread_takes_median_and_range() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(s.show(0), "2 (1–3)");
        assert_eq!(Spread::of(&[5.0]).unwrap().show(1), "5.0");
        assert!(Spread::of(&[]).is_none());
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(group(1_234_567.0, 0), "1,234,567");
        assert_eq!(group(999.0, 0), "999");
        assert_eq!(group(1234.5, 1), "1,234.5");
        assert_eq!(group(-1000.0, 0), "-1,000");
        assert_eq!(ratio(Some(3.0), Some(2.0)), "1.50×");
        assert_eq!(ratio(None, Some(2.0)), "n/a");
    }
}
