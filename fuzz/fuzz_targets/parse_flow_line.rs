//! Any bytes → `porin_flows::reader::FlowReader` over them (what `porin
//! replay --flows FILE` reads), each line through
//! `porin_flows::parse::parse_line`: never panics; every line is counted
//! once (a flow, a skip or a rejection) and numbered in order; a flow it
//! accepts is one porin can decide (both addresses of one family, ICMP of
//! the family, an L4 protocol porin knows).

#![no_main]

use std::io::BufReader;

use libfuzzer_sys::fuzz_target;
use porin_flows::parse::{Event, parse_line};
use porin_flows::reader::{FlowReader, ReadLimits};

fuzz_target!(|data: &[u8]| {
    let mut reader = FlowReader::new(
        BufReader::with_capacity(64, data),
        // Small, so long lines are exercised too.
        ReadLimits {
            max_line_bytes: 512,
        },
    );
    let mut last = 0;
    let mut items = 0u64;
    for item in reader.by_ref() {
        let line = match &item {
            Ok((line, flow)) => {
                let (Some(from), Some(to)) = (flow.source.ip, flow.destination.ip) else {
                    panic!("a flow without both addresses: {flow:?}");
                };
                assert_eq!(from.is_ipv6(), to.is_ipv6(), "{flow:?}");
                match flow.l4.proto {
                    1 => assert!(!from.is_ipv6() && flow.l4.port <= 255),
                    58 => assert!(from.is_ipv6() && flow.l4.port <= 255),
                    6 | 17 | 132 => {}
                    other => panic!("protocol {other}: {flow:?}"),
                }
                *line
            }
            Err(e) => {
                assert!(e.column >= 1);
                e.line
            }
        };
        assert!(line > last, "line {line} after {last}");
        last = line;
        items += 1;
    }
    let stats = reader.stats();
    assert_eq!(stats.flows + stats.rejected, items);
    assert!(stats.flows + stats.rejected + stats.skipped.iter().sum::<u64>() <= stats.lines);
    // The parser alone agrees with the reader on a single line.
    if let Ok(text) = std::str::from_utf8(data)
        && !text.contains('\n')
        && let Ok(Event::Flow(flow)) = parse_line(text)
    {
        assert!(flow.source.ip.is_some() && flow.destination.ip.is_some());
    }
});
