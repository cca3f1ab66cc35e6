//! Streaming a flow file: one line at a time, in bounded memory.
//!
//! A line is read into one reused buffer of at most
//! [`ReadLimits::max_line_bytes`]; a longer line is consumed without being
//! kept and reported ([`crate::codes::LINE_TOO_LONG`]). Each line is parsed
//! ([`crate::parse::parse_line`]) and dropped, so the memory a file needs
//! is that of its longest line, however many lines it has. A malformed
//! line is an error item with its line number; reading goes on.

use std::io::BufRead;

use crate::parse::{Event, Skip, parse_line};
use crate::record::FlowRecord;

/// The reader's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// The longest line read (bytes, without the line terminator).
    pub max_line_bytes: usize,
}

impl Default for ReadLimits {
    /// 1 MiB: a Hubble flow line is a few KiB (labels included); the
    /// longest a real agent writes stays far below.
    fn default() -> Self {
        ReadLimits {
            max_line_bytes: 1 << 20,
        }
    }
}

/// What was read, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Lines read (blank ones included).
    pub lines: u64,
    /// Flows returned.
    pub flows: u64,
    /// Well-formed events skipped, per reason (in [`Skip::ALL`] order).
    pub skipped: [u64; 4],
    /// Lines rejected (malformed or too long).
    pub rejected: u64,
}

impl ReadStats {
    /// The count of one skip reason.
    pub fn skipped(&self, reason: Skip) -> u64 {
        self.skipped[reason as usize]
    }

    /// Adds another file's counts.
    pub fn add(&mut self, other: &ReadStats) {
        self.lines += other.lines;
        self.flows += other.flows;
        for (a, b) in self.skipped.iter_mut().zip(other.skipped) {
            *a += b;
        }
        self.rejected += other.rejected;
    }
}

/// Why a line was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number.
    pub line: u64,
    /// 1-based column.
    pub column: usize,
    /// [`crate::codes::MALFORMED_LINE`] or [`crate::codes::LINE_TOO_LONG`].
    pub code: porin_model::CodeInfo,
    /// What is wrong.
    pub message: String,
}

/// One item of a flow file: a flow with its line, or a rejected line.
pub type Item = Result<(u64, FlowRecord), LineError>;

/// One line as read, before parsing ([`FlowReader::next_raw`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawLine {
    /// The line's number and bytes (without the terminator).
    Line(u64, Vec<u8>),
    /// A line longer than the bound, consumed unread.
    TooLong(u64),
}

/// What one line is, parsed ([`classify`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Classified {
    /// A flow.
    Flow(u64, Box<FlowRecord>),
    /// A well-formed event that is not replayed.
    Skipped(Skip),
    /// A blank line.
    Blank,
    /// A rejected line.
    Rejected(LineError),
}

/// Parses one raw line (a pure function of the line: batches of lines are
/// parsed on every core, then accounted in order).
pub fn classify(raw: &RawLine, max_line_bytes: usize) -> Classified {
    let (line, bytes) = match raw {
        RawLine::TooLong(line) => {
            return Classified::Rejected(LineError {
                line: *line,
                column: 1,
                code: crate::codes::LINE_TOO_LONG,
                message: format!(
                    "the line is longer than {max_line_bytes} bytes (--max-flow-line-bytes)"
                ),
            });
        }
        RawLine::Line(line, bytes) => (*line, bytes.as_slice()),
    };
    let mut bytes = bytes;
    if let Some(rest) = bytes.strip_suffix(b"\r") {
        bytes = rest;
    }
    // A file may start with a UTF-8 byte-order mark.
    if line == 1
        && let Some(rest) = bytes.strip_prefix(b"\xef\xbb\xbf")
    {
        bytes = rest;
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Classified::Blank;
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return Classified::Rejected(LineError {
                line,
                column: e.valid_up_to() + 1,
                code: crate::codes::MALFORMED_LINE,
                message: "the line is not UTF-8".to_owned(),
            });
        }
    };
    match parse_line(text) {
        Ok(Event::Flow(flow)) => Classified::Flow(line, flow),
        Ok(Event::Skipped(reason)) => Classified::Skipped(reason),
        Err(e) => Classified::Rejected(LineError {
            line,
            column: e.column,
            code: crate::codes::MALFORMED_LINE,
            message: e.message,
        }),
    }
}

impl ReadStats {
    /// Counts one classified line.
    pub fn account(&mut self, item: &Classified) {
        self.lines += 1;
        match item {
            Classified::Flow(..) => self.flows += 1,
            Classified::Skipped(reason) => self.skipped[*reason as usize] += 1,
            Classified::Blank => {}
            Classified::Rejected(_) => self.rejected += 1,
        }
    }
}

/// Reads flows from a buffered reader, line by line.
pub struct FlowReader<R> {
    input: R,
    limits: ReadLimits,
    buffer: Vec<u8>,
    stats: ReadStats,
    io_error: Option<std::io::Error>,
    done: bool,
    /// Lines handed out by [`Self::next_raw`].
    raw_lines: u64,
}

impl<R: BufRead> FlowReader<R> {
    /// A reader of `input` under `limits`.
    pub fn new(input: R, limits: ReadLimits) -> Self {
        FlowReader {
            input,
            limits,
            buffer: Vec::new(),
            stats: ReadStats::default(),
            io_error: None,
            done: false,
            raw_lines: 0,
        }
    }

    /// The counts so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// The I/O error that ended reading early, if any.
    pub fn take_io_error(&mut self) -> Option<std::io::Error> {
        self.io_error.take()
    }

    /// The next line, unparsed (its bytes copied out of the reused
    /// buffer); `None` at the end or on an I/O error
    /// ([`Self::take_io_error`]). Lines read this way are the caller's to
    /// count ([`ReadStats::account`]).
    pub fn next_raw(&mut self) -> Option<RawLine> {
        if self.done {
            return None;
        }
        match self.next_line() {
            Ok(Some(too_long)) => {
                self.raw_lines += 1;
                Some(if too_long {
                    RawLine::TooLong(self.raw_lines)
                } else {
                    RawLine::Line(self.raw_lines, self.buffer.clone())
                })
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.io_error = Some(e);
                self.done = true;
                None
            }
        }
    }

    /// The line limit.
    pub fn limits(&self) -> ReadLimits {
        self.limits
    }

    /// Reads the next line into the buffer: `Ok(Some(false))` a line that
    /// fits, `Ok(Some(true))` a line too long (consumed, not kept),
    /// `Ok(None)` the end.
    fn next_line(&mut self) -> std::io::Result<Option<bool>> {
        self.buffer.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(any.then_some(too_long));
            }
            any = true;
            let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..i], Some(i + 1)),
                None => (available, None),
            };
            if !too_long {
                if self.buffer.len() + chunk.len() > self.limits.max_line_bytes {
                    too_long = true;
                    self.buffer.clear();
                } else {
                    self.buffer.extend_from_slice(chunk);
                }
            }
            let used = found.unwrap_or(available.len());
            self.input.consume(used);
            if found.is_some() {
                return Ok(Some(too_long));
            }
        }
    }
}

impl<R: BufRead> Iterator for FlowReader<R> {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            let raw = self.next_raw()?;
            let item = classify(&raw, self.limits.max_line_bytes);
            self.stats.account(&item);
            match item {
                Classified::Flow(line, flow) => return Some(Ok((line, *flow))),
                Classified::Rejected(error) => return Some(Err(error)),
                Classified::Skipped(_) | Classified::Blank => {}
            }
        }
    }
}
