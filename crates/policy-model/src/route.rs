//! Symbolic routes into a document (`spec.ingress[0].toPorts[1].ports[0].port`).
//!
//! Validation and later stages speak in routes; the loader's source tree turns
//! a route into a line and column.

use std::fmt;

/// One step of a [`Route`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// A path from a document's root to one node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Route(pub Vec<Segment>);

impl Route {
    /// The empty route (the document root).
    pub fn root() -> Route {
        Route(Vec::new())
    }

    /// This route extended by a key.
    pub fn key(&self, key: &str) -> Route {
        self.with(Segment::Key(key.to_owned()))
    }

    /// This route extended by an index.
    pub fn index(&self, index: usize) -> Route {
        self.with(Segment::Index(index))
    }

    /// This route extended by `segment`, allocated once at its length
    /// (validation extends a route for every field it checks; a clone
    /// then a push reallocated each one).
    fn with(&self, segment: Segment) -> Route {
        let mut segments = Vec::with_capacity(self.0.len() + 1);
        segments.extend_from_slice(&self.0);
        segments.push(segment);
        Route(segments)
    }

    /// Parses the display form back (`a.b[0]["k:x"]`); used by later stages that
    /// store routes as strings. Returns `None` on malformed input.
    pub fn parse(text: &str) -> Option<Route> {
        let mut segments = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("[\"") {
                let end = after.find("\"]")?;
                segments.push(Segment::Key(after[..end].to_owned()));
                rest = &after[end + 2..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after.find(']')?;
                segments.push(Segment::Index(after[..end].parse().ok()?));
                rest = &after[end + 1..];
            } else {
                let after = rest.strip_prefix('.').unwrap_or(rest);
                let end = after.find(['.', '[']).unwrap_or(after.len());
                if end == 0 {
                    return None;
                }
                segments.push(Segment::Key(after[..end].to_owned()));
                rest = &after[end..];
            }
        }
        Some(Route(segments))
    }
}

fn is_plain_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if is_plain_key(key) => {
                    if position > 0 {
                        f.write_str(".")?;
                    }
                    f.write_str(key)?;
                }
                Segment::Key(key) => write!(f, "[\"{key}\"]")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_parse_round_trip() {
        let route = Route::root()
            .key("spec")
            .key("ingress")
            .index(0)
            .key("fromEndpoints")
            .index(2)
            .key("matchLabels")
            .key("k8s:io.kubernetes.pod.namespace");
        let text = route.to_string();
        assert_eq!(
            text,
            "spec.ingress[0].fromEndpoints[2].matchLabels[\"k8s:io.kubernetes.pod.namespace\"]"
        );
        assert_eq!(Route::parse(&text), Some(route));
    }
}
