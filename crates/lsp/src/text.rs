//! Positions: porin's locations are 1-based lines and 1-based columns in
//! characters; LSP positions are 0-based lines and 0-based offsets in the
//! negotiated encoding (UTF-16 unless the client offers another). Every
//! conversion clamps: a position past the end of a line or of the text is
//! the end, never a panic.

use lsp_types::{Position, PositionEncodingKind, Range};

/// The unit of an LSP `character` offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Bytes of UTF-8.
    Utf8,
    /// UTF-16 code units (the protocol's default).
    Utf16,
    /// Unicode scalar values: porin's own columns.
    Utf32,
}

impl Encoding {
    /// Picks from what the client offers, preferring porin's own unit
    /// (characters), then UTF-8; UTF-16 when the client says nothing.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Encoding {
        let offered = offered.unwrap_or_default();
        if offered.contains(&PositionEncodingKind::UTF32) {
            Encoding::Utf32
        } else if offered.contains(&PositionEncodingKind::UTF8) {
            Encoding::Utf8
        } else {
            Encoding::Utf16
        }
    }

    /// The protocol's name of this encoding.
    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Encoding::Utf8 => PositionEncodingKind::UTF8,
            Encoding::Utf16 => PositionEncodingKind::UTF16,
            Encoding::Utf32 => PositionEncodingKind::UTF32,
        }
    }

    fn units(self, c: char) -> u32 {
        match self {
            // A char is at most 4 bytes or 2 UTF-16 units: the casts are exact.
            Encoding::Utf8 => c.len_utf8() as u32,
            Encoding::Utf16 => c.len_utf16() as u32,
            Encoding::Utf32 => 1,
        }
    }
}

/// Line `index` (0-based) of `text`, without its line break.
pub fn line(text: &str, index: u32) -> Option<&str> {
    let line = text.split('\n').nth(usize::try_from(index).ok()?)?;
    Some(line.strip_suffix('\r').unwrap_or(line))
}

/// The LSP offset of the first `chars` characters of `line`.
fn units_of(line: &str, chars: usize, encoding: Encoding) -> u32 {
    line.chars()
        .take(chars)
        .map(|c| encoding.units(c))
        .fold(0, u32::saturating_add)
}

/// The range of `width` characters starting at porin's (1-based line,
/// 1-based character column).
pub fn range(text: &str, line_no: u32, column: u32, width: usize, encoding: Encoding) -> Range {
    let index = line_no.saturating_sub(1);
    let start_chars = usize::try_from(column.saturating_sub(1)).unwrap_or(usize::MAX);
    let content = line(text, index).unwrap_or_default();
    let start = units_of(content, start_chars, encoding);
    let end = units_of(content, start_chars.saturating_add(width), encoding);
    Range::new(
        Position::new(index, start),
        Position::new(index, end.max(start)),
    )
}

/// The byte index in `line` of an LSP `character` offset (clamped to the
/// line's end; an offset inside a character is that character's start).
pub fn byte_index(line: &str, character: u32, encoding: Encoding) -> usize {
    let mut units = 0u32;
    for (at, c) in line.char_indices() {
        if units >= character {
            return at;
        }
        units = units.saturating_add(encoding.units(c));
        if units > character {
            return at;
        }
    }
    line.len()
}

/// The LSP offset of byte `at` of `line` (clamped to the line).
pub fn offset_of_byte(line: &str, at: usize, encoding: Encoding) -> u32 {
    line.char_indices()
        .take_while(|(i, _)| *i < at)
        .map(|(_, c)| encoding.units(c))
        .fold(0, u32::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_and_convert_per_encoding() {
        // "é" is 2 UTF-8 bytes, 1 UTF-16 unit; "𝄞" is 4 bytes, 2 UTF-16 units.
        let text = "a: é𝄞x\n";
        let r = range(text, 1, 6, 1, Encoding::Utf16);
        assert_eq!((r.start.character, r.end.character), (6, 7));
        let r = range(text, 1, 6, 1, Encoding::Utf8);
        assert_eq!((r.start.character, r.end.character), (9, 10));
        let r = range(text, 1, 6, 1, Encoding::Utf32);
        assert_eq!((r.start.character, r.end.character), (5, 6));
        assert_eq!(byte_index("a: é𝄞x", 6, Encoding::Utf16), 9);
        assert_eq!(byte_index("a: é𝄞x", 5, Encoding::Utf16), 5);
        assert_eq!(offset_of_byte("a: é𝄞x", 9, Encoding::Utf16), 6);
    }

    #[test]
    fn out_of_range_positions_clamp() {
        let r = range("ab", 7, 99, 3, Encoding::Utf16);
        assert_eq!(
            (r.start.line, r.start.character, r.end.character),
            (6, 0, 0)
        );
        assert_eq!(byte_index("ab", u32::MAX, Encoding::Utf8), 2);
        assert_eq!(line("a\r\nb", 0), Some("a"));
        assert_eq!(line("a", u32::MAX), None);
    }
}
