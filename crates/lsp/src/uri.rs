//! `file:` URIs and the file names porin's diagnostics carry.
//!
//! A document is named by its path when its URI is a `file:` URI (so its
//! diagnostics read like `porin lint`'s, and a policy set loaded from disk
//! names the same file the same way), otherwise by the URI itself
//! (`untitled:Untitled-1`).

use std::path::{Path, PathBuf};
use std::str::FromStr;

use lsp_types::Uri;

/// The local path of a `file:` URI (percent-decoded), if it is one.
pub fn to_path(uri: &Uri) -> Option<PathBuf> {
    let text = uri.as_str();
    let rest = text.strip_prefix("file://")?;
    // `file://host/path`: only the empty host and `localhost` are local.
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")?
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let decoded = percent_decode(path)?;
    Some(PathBuf::from(decoded))
}

/// The name porin uses for the document at `uri`.
pub fn to_name(uri: &Uri) -> String {
    to_path(uri).map_or_else(|| uri.as_str().to_owned(), |p| p.display().to_string())
}

/// The URI of a name [`to_name`] gave (a path, or a URI kept as it was).
pub fn from_name(name: &str) -> Option<Uri> {
    if name.starts_with('/') {
        from_path(Path::new(name))
    } else {
        Uri::from_str(name).ok()
    }
}

/// The `file:` URI of an absolute path.
pub fn from_path(path: &Path) -> Option<Uri> {
    let text = path.to_str()?;
    if !text.starts_with('/') {
        return None;
    }
    let mut uri = String::from("file://");
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    Uri::from_str(&uri).ok()
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = text.get(at + 1..at + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_uris() {
        let path = Path::new("/tmp/a b/ünï%.yaml");
        let uri = from_path(path).unwrap();
        assert_eq!(uri.as_str(), "file:///tmp/a%20b/%C3%BCn%C3%AF%25.yaml");
        assert_eq!(to_path(&uri).unwrap(), path);
        assert_eq!(to_name(&uri), "/tmp/a b/ünï%.yaml");
        assert_eq!(from_name(&to_name(&uri)).unwrap(), uri);
    }

    #[test]
    fn other_uris_keep_their_text() {
        let uri = Uri::from_str("untitled:Untitled-1").unwrap();
        assert_eq!(to_path(&uri), None);
        assert_eq!(to_name(&uri), "untitled:Untitled-1");
        assert_eq!(from_name("untitled:Untitled-1").unwrap(), uri);
        let remote = Uri::from_str("file://server/share/x.yaml").unwrap();
        assert_eq!(to_path(&remote), None);
        assert_eq!(percent_decode("/a%zz"), None);
        assert_eq!(percent_decode("/a%C3"), None);
    }
}
