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

/// Reads flows from a buffered reader, line by line.
pub struct FlowReader<R> {
    input: R,
    limits: ReadLimits,
    buffer: Vec<u8>,
    stats: ReadStats,
    io_error: Option<std::io::Error>,
    done: bool,
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
        while !self.done {
            let too_long = match self.next_line() {
                Ok(Some(too_long)) => too_long,
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Err(e) => {
                    self.io_error = Some(e);
                    self.done = true;
                    break;
                }
            };
            self.stats.lines += 1;
            let line = self.stats.lines;
            if too_long {
                self.stats.rejected += 1;
                return Some(Err(LineError {
                    line,
                    column: 1,
                    code: crate::codes::LINE_TOO_LONG,
                    message: format!(
                        "the line is longer than {} bytes (--max-flow-line-bytes)",
                        self.limits.max_line_bytes
                    ),
                }));
            }
            let mut bytes = self.buffer.as_slice();
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
                continue;
            }
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => {
                    self.stats.rejected += 1;
                    return Some(Err(LineError {
                        line,
                        column: e.valid_up_to() + 1,
                        code: crate::codes::MALFORMED_LINE,
                        message: "the line is not UTF-8".to_owned(),
                    }));
                }
            };
            match parse_line(text) {
                Ok(Event::Flow(flow)) => {
                    self.stats.flows += 1;
                    return Some(Ok((line, *flow)));
                }
                Ok(Event::Skipped(reason)) => self.stats.skipped[reason as usize] += 1,
                Err(e) => {
                    self.stats.rejected += 1;
                    return Some(Err(LineError {
                        line,
                        column: e.column,
                        code: crate::codes::MALFORMED_LINE,
                        message: e.message,
                    }));
                }
            }
        }
        None
    }
}
