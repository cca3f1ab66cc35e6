//! One line to a flow record: both Hubble encodings, every L4 protocol,
//! and what is skipped or rejected.

use porin_flows::parse::{Event, Skip, parse_line};
use porin_flows::record::{Recorded, TrafficDirection, Verdict};

fn flow(line: &str) -> porin_flows::record::FlowRecord {
    match parse_line(line) {
        Ok(Event::Flow(flow)) => *flow,
        other => panic!("not a flow: {other:?}"),
    }
}

const BARE: &str = r#"{"time":"2026-11-30T10:00:02.015838Z","verdict":"FORWARDED","IP":{"source":"10.0.1.10","destination":"10.0.1.20","ipVersion":"IPv4"},"l4":{"TCP":{"source_port":40000,"destination_port":8080,"flags":{"SYN":true}}},"source":{"ID":1201,"identity":21045,"namespace":"shop","labels":["k8s:app=frontend"],"pod_name":"frontend-7c9d8f6b5-x2x9k","workloads":[{"name":"frontend","kind":"Deployment"}]},"destination":{"identity":33210,"namespace":"shop","labels":["k8s:app=api"],"pod_name":"api-1"},"Type":"L3_L4","traffic_direction":"INGRESS","is_reply":false,"ingress_allowed_by":[{"name":"api","namespace":"shop","kind":"CiliumNetworkPolicy","revision":"7"}],"some_future_field":{"x":1}}"#;

#[test]
fn a_bare_flow_and_its_get_flows_response_wrapper_are_the_same_record() {
    let bare = flow(BARE);
    let wrapped = flow(&format!(
        r#"{{"flow":{BARE},"node_name":"kind-worker","time":"2026-11-30T10:00:02Z"}}"#
    ));
    assert_eq!(bare, wrapped);
    assert_eq!(bare.verdict, Verdict::Forwarded);
    assert_eq!(bare.recorded(), Some(Recorded::Allowed));
    assert_eq!(bare.direction, TrafficDirection::Ingress);
    assert_eq!((bare.l4.proto, bare.l4.port), (6, 8080));
    assert_eq!(bare.source.workload.as_deref(), Some("frontend"));
    assert_eq!(
        bare.source.pod_name.as_deref(),
        Some("frontend-7c9d8f6b5-x2x9k")
    );
    assert_eq!(
        bare.allowed_by[0].to_string(),
        "CiliumNetworkPolicy shop/api"
    );
    assert_eq!(
        bare.time.map(|t| t.to_string()).as_deref(),
        Some("2026-11-30T10:00:02.015838Z")
    );
}

#[test]
fn lower_camel_case_names_and_enum_numbers_are_read_as_protojson_reads_them() {
    let line = r#"{"verdict":2,"dropReasonDesc":181,"IP":{"source":"fd00::110","destination":"fd00::120","ipVersion":2},"l4":{"UDP":{"sourcePort":5353,"destinationPort":53}},"source":{"podName":"a","namespace":"n"},"destination":{},"trafficDirection":2,"isReply":false}"#;
    let f = flow(line);
    assert_eq!(f.verdict, Verdict::Dropped);
    assert_eq!(f.drop_reason.as_deref(), Some("POLICY_DENY"));
    assert_eq!(f.recorded(), Some(Recorded::Denied));
    assert_eq!(f.direction, TrafficDirection::Egress);
    assert_eq!((f.l4.proto, f.l4.port), (17, 53));
    assert_eq!(f.source.pod_name.as_deref(), Some("a"));
}

#[test]
fn icmp_sctp_and_the_deprecated_drop_reason_number() {
    let icmp = flow(
        r#"{"verdict":"DROPPED","drop_reason":133,"IP":{"source":"10.0.0.1","destination":"10.0.0.2"},"l4":{"ICMPv4":{"type":8,"code":0}}}"#,
    );
    assert_eq!((icmp.l4.proto, icmp.l4.port), (1, 8));
    assert_eq!(icmp.drop_reason.as_deref(), Some("POLICY_DENIED"));
    let icmp6 = flow(
        r#"{"verdict":"FORWARDED","IP":{"source":"fd00::1","destination":"fd00::2"},"l4":{"ICMPv6":{"type":128}}}"#,
    );
    assert_eq!((icmp6.l4.proto, icmp6.l4.port), (58, 128));
    let sctp = flow(
        r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.1","destination":"10.0.0.2"},"l4":{"SCTP":{"source_port":1,"destination_port":36412}}}"#,
    );
    assert_eq!((sctp.l4.proto, sctp.l4.port), (132, 36412));
    // A drop for another reason is no policy decision.
    let ct = flow(
        r#"{"verdict":"DROPPED","drop_reason_desc":"CT_MAP_INSERTION_FAILED","IP":{"source":"10.0.0.1","destination":"10.0.0.2"},"l4":{"TCP":{"destination_port":80}}}"#,
    );
    assert_eq!(ct.recorded(), None);
}

#[test]
fn replies_l7_socket_and_non_flow_events_are_skipped_with_their_reason() {
    let cases = [
        (BARE.replace(r#""is_reply":false"#, r#""is_reply":true"#), Skip::Reply),
        (BARE.replace(r#""Type":"L3_L4""#, r#""Type":"L7""#), Skip::NotL3L4),
        (BARE.replace(r#""Type":"L3_L4""#, r#""Type":"SOCK""#), Skip::NotL3L4),
        (
            BARE.replace(r#""Type":"L3_L4""#, r#""l7":{"type":"REQUEST","http":{"method":"GET"}}"#),
            Skip::NotL3L4,
        ),
        (
            r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.1","destination":"10.0.0.2"}}"#.to_owned(),
            Skip::NoL4,
        ),
        (
            r#"{"node_status":{"state_change":"NODE_CONNECTED"},"node_name":"n","time":"2026-11-30T10:00:02Z"}"#.to_owned(),
            Skip::NotAFlow,
        ),
        (
            r#"{"lost_events":{"source":"HUBBLE_RING_BUFFER","num_events_lost":"12"}}"#.to_owned(),
            Skip::NotAFlow,
        ),
    ];
    for (line, reason) in cases {
        assert_eq!(parse_line(&line), Ok(Event::Skipped(reason)), "{line}");
    }
}

#[test]
fn a_malformed_line_names_the_field_or_the_column() {
    let cases = [
        ("not json", 1, "not a JSON object"),
        (r#"{"verdict":"FORWARDED","#, 23, "EOF while parsing"),
        ("[1]", 1, "not a JSON object"),
        ("{}", 1, "neither a flow"),
        (r#"{"verdict":"MAYBE"}"#, 1, "field `verdict`: `MAYBE`"),
        (r#"{"verdict":9}"#, 1, "field `verdict`: 9"),
        (
            r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.300","destination":"10.0.0.2"}}"#,
            1,
            "field `IP.source`",
        ),
        (
            r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.1","destination":"fd00::1"}}"#,
            1,
            "different families",
        ),
        (
            r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.1","destination":"10.0.0.2","ipVersion":"IPv6"}}"#,
            1,
            "field `IP.ipVersion`",
        ),
        (
            r#"{"verdict":"FORWARDED","IP":{"source":"10.0.0.1","destination":"10.0.0.2"},"l4":{"TCP":{"destination_port":70000}}}"#,
            1,
            "70000 is not a port",
        ),
        (
            r#"{"verdict":"FORWARDED","IP":{"source":"fd00::1","destination":"fd00::2"},"l4":{"ICMPv4":{"type":8}}}"#,
            1,
            "cannot be carried",
        ),
        (
            r#"{"verdict":"FORWARDED","time":"yesterday"}"#,
            1,
            "field `time`",
        ),
    ];
    for (line, column, text) in cases {
        let error = parse_line(line).expect_err(line);
        assert!(error.message.contains(text), "{line}: {error:?}");
        assert_eq!(error.column, column, "{line}: {error:?}");
    }
}
