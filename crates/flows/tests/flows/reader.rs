//! Streaming: line numbers, counts, rejected lines, bounded lines.

use std::io::{BufReader, Read};

use porin_flows::parse::Skip;
use porin_flows::reader::{FlowReader, ReadLimits};

use crate::common::workspace;

#[test]
fn a_malformed_line_is_reported_with_its_number_and_reading_goes_on() {
    let file = workspace().join("fixtures/flows/quickstart/malformed.json");
    let mut reader = FlowReader::new(
        BufReader::new(std::fs::File::open(file).unwrap()),
        ReadLimits::default(),
    );
    let items: Vec<_> = reader.by_ref().collect();
    let good: Vec<u64> = items
        .iter()
        .filter_map(|i| i.as_ref().ok().map(|(l, _)| *l))
        .collect();
    let bad: Vec<u64> = items
        .iter()
        .filter_map(|i| i.as_ref().err().map(|e| e.line))
        .collect();
    assert_eq!(good, [1, 6, 10]);
    assert_eq!(bad, [2, 3, 4, 5, 8, 9]);
    let stats = reader.stats();
    assert_eq!((stats.lines, stats.flows, stats.rejected), (10, 3, 6));
}

/// A reader that yields `n` bytes of `x` and never a newline, then a
/// newline and one good line: a corrupt file without line breaks.
struct Endless {
    left: usize,
    tail: std::io::Cursor<Vec<u8>>,
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return self.tail.read(buf);
        }
        let n = buf.len().min(self.left);
        buf[..n].fill(b'x');
        self.left -= n;
        Ok(n)
    }
}

#[test]
fn a_line_longer_than_the_bound_is_consumed_unread() {
    let good = r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.1","destination":"10.0.0.2"},"l4":{"TCP":{"destination_port":80}}}"#;
    let input = Endless {
        left: 50 << 20,
        tail: std::io::Cursor::new(format!("\n{good}\n").into_bytes()),
    };
    let mut reader = FlowReader::new(
        BufReader::with_capacity(8192, input),
        ReadLimits {
            max_line_bytes: 4096,
        },
    );
    let first = reader.next().unwrap().expect_err("too long");
    assert_eq!((first.line, first.code.code), (1, "PF002"));
    let (line, _) = reader.next().unwrap().expect("the next line is read");
    assert_eq!(line, 2);
    assert!(reader.next().is_none());
}

#[test]
fn both_encodings_of_the_quickstart_recording_read_alike() {
    let read = |name: &str| {
        let file = workspace().join("fixtures/flows/quickstart").join(name);
        let mut reader = FlowReader::new(
            BufReader::new(std::fs::File::open(file).unwrap()),
            ReadLimits::default(),
        );
        let flows: Vec<_> = reader.by_ref().map(|i| i.expect("well-formed").1).collect();
        (flows, reader.stats().clone())
    };
    let (bare, bare_stats) = read("observe.json");
    let (wrapped, wrapped_stats) = read("observe.jsonpb");
    assert_eq!(bare, wrapped);
    assert_eq!(bare_stats.skipped(Skip::Reply), 15);
    assert_eq!(bare_stats.skipped(Skip::NotL3L4), 2);
    assert_eq!(wrapped_stats.skipped(Skip::NotAFlow), 1);
    assert_eq!(wrapped_stats.lines, bare_stats.lines + 1);
}
