//! Map contents an agent writes: the compiler's output as the object's
//! maps, byte by byte, with Cilium's key/entry rules (docs/semantics.md
//! §5.1/§5.2, `pkg/maps/policymap/policymap.go
//! NewKeyFromPolicyKey/NewEntryFromPolicyEntry`), the update forms an agent
//! uses, and the contract document kept in sync with the code.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::net::Ipv4Addr;
use std::path::Path;

use porin_compiler::compile::Compiled;
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::{Direction, Entry, Key};
use porin_ebpf::ObjectConfig;
use porin_ebpf::abi::{
    self, AbiError, Field, Ipcache4Key, IpcacheValue, Layout, PolicyEntry, PolicyKey,
};
use porin_ebpf::compiled::{CompiledMapsError, MapContents};
use porin_ebpf::maps::{
    self, MapUpdate, PolicySlot, Verdict, names, policy_replacement, proxy_port_of_mark,
    redirect_mark, updates_to_json,
};
use porin_policytest::prepare;

fn key(identity: u32, direction: Direction, proto: u8, port: u16, port_prefix_len: u8) -> Key {
    Key::new(
        direction,
        Identity::new(identity).unwrap(),
        proto,
        port,
        port_prefix_len,
    )
    .unwrap()
}

fn prefixlen(key: &Key) -> u32 {
    PolicyKey::from_key(key).prefixlen
}

#[test]
fn policy_key_prefix_lengths_follow_cilium_except_port_zero_ranges() {
    // docs/semantics.md §5.1: 40 L3-only, 48 proto only, 48+n, 64 exact.
    assert_eq!(prefixlen(&key(7, Direction::Ingress, 0, 0, 0)), 40);
    assert_eq!(prefixlen(&key(7, Direction::Ingress, 6, 0, 0)), 48);
    assert_eq!(prefixlen(&key(7, Direction::Ingress, 17, 7776, 15)), 63);
    assert_eq!(prefixlen(&key(7, Direction::Ingress, 6, 80, 16)), 64);
    // pkg/maps/policymap/policymap.go NewKeyFromPolicyKey adds port bits
    // only for a non-zero port (docs/semantics.md §4.5 quirk), so Cilium writes
    // port 0/6 as protocol-only (48) and allows every port. porin fails
    // closed and keeps the range it means (PC012): 48 + 6.
    assert_eq!(prefixlen(&key(7, Direction::Ingress, 6, 0, 6)), 54);
}

#[test]
fn raw_policy_bytes_are_checked() {
    let k = key(1, Direction::Egress, 6, 80, 16);
    let kb = PolicyKey::from_key(&k).to_bytes();
    let mut v = PolicyEntry::from_entry(&k, &Entry::allow()).to_bytes();
    let update = MapUpdate::policy_raw(PolicySlot::B, &kb, &v).unwrap();
    // An exact key (prefix 64) goes to the slot's hash (DATAPATH.md §2.2).
    assert_eq!(update.map, names::POLICY_B_EXACT);
    assert_eq!(
        update,
        MapUpdate::policy(PolicySlot::B, &k, &Entry::allow())
    );
    v[2] = 8 << 3; // claims prefix 48 for a /64 key
    assert_eq!(
        MapUpdate::policy_raw(PolicySlot::A, &kb, &v),
        Err(AbiError::PrefixLengthMismatch { entry: 8, key: 24 })
    );
    assert!(matches!(
        MapUpdate::policy_raw(PolicySlot::A, &kb[..11], &v),
        Err(AbiError::Length {
            expected: 12,
            got: 11,
            ..
        })
    ));
}

#[test]
fn replacement_fills_the_inactive_slot_then_flips() {
    let updates = policy_replacement(
        PolicySlot::A,
        &[(key(1, Direction::Egress, 6, 80, 16), Entry::allow())],
    );
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[0].map, names::POLICY_B_EXACT);
    assert_eq!(updates[1].map, names::CONFIG);
    assert_eq!(updates[1].key, vec![0, 0, 0, 0]);
    // Slot B, B's trie is empty (prefix_free bit 1) and B holds no
    // identity-0 key in either direction (bits 4 and 5).
    assert_eq!(updates[1].value, vec![1, 0, 0, 0, 0, 2 | 16 | 32, 0, 0]);
    assert_eq!(MapUpdate::activate(PolicySlot::A).value, vec![0; 8]);
    // A port range is a prefix: into the trie, and the trie is consulted.
    let updates = policy_replacement(
        PolicySlot::B,
        &[
            (key(1, Direction::Egress, 6, 80, 16), Entry::allow()),
            (key(1, Direction::Egress, 6, 1024, 6), Entry::allow()),
        ],
    );
    assert_eq!(updates[0].map, names::POLICY_A_EXACT);
    assert_eq!(updates[1].map, names::POLICY_A);
    // The trie bit is clear; no identity-0 key: A's wildcard bits 2 and 3.
    assert_eq!(updates[2].value, vec![0, 0, 0, 0, 0, 4 | 8, 0, 0]);
    // An L4-only (identity 0) ingress key clears only ingress's bit.
    let updates = policy_replacement(
        PolicySlot::B,
        &[
            (key(1, Direction::Egress, 6, 80, 16), Entry::allow()),
            (key(0, Direction::Ingress, 6, 80, 16), Entry::allow()),
        ],
    );
    assert_eq!(updates[2].value, vec![0, 0, 0, 0, 0, 1 | 8, 0, 0]);
}

#[test]
fn json_and_bpftool_forms() {
    let update = MapUpdate::ipcache4(
        Ipcache4Key::new(24, Ipv4Addr::new(10, 0, 0, 0)).unwrap(),
        IpcacheValue::new(Identity::new(1000).unwrap()),
    );
    let json: serde_json::Value =
        serde_json::from_str(&updates_to_json(std::slice::from_ref(&update)).unwrap()).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{"map": "porin_ipcache4", "key": "18 00 00 00 0a 00 00 00", "value": "e8 03 00 00 00 00 00 00"}])
    );
    let args = update.bpftool_args("/sys/fs/bpf/tc/globals/porin_ipcache4");
    assert_eq!(
        args.join(" "),
        "map update pinned /sys/fs/bpf/tc/globals/porin_ipcache4 key hex 18 00 00 00 0a 00 00 00 value hex e8 03 00 00 00 00 00 00"
    );
}

// ------------------------------------------------ a compilation's map contents

/// A small compiled policy: `web` (10.0.0.1, fd00::1) accepts TCP 80 from
/// `client` (10.0.0.2) and denies UDP 53 from 192.0.2.0/24 except
/// 192.0.2.128/25; `client` has no policy.
const TEST: &str = r#"
kind: PolicyTest
endpoints:
  - name: web
    namespace: prod
    labels: {app: web}
    ips: [10.0.0.1, "fd00::1"]
  - name: client
    namespace: prod
    labels: {app: client}
    ips: [10.0.0.2]
policies:
  - inline: |
      apiVersion: cilium.io/v2
      kind: CiliumNetworkPolicy
      metadata: {name: web, namespace: prod}
      spec:
        endpointSelector: {matchLabels: {app: web}}
        ingress:
          - fromEndpoints: [{matchLabels: {app: client}}]
            toPorts: [{ports: [{port: "80", protocol: TCP}]}]
        ingressDeny:
          - fromCIDRSet: [{cidr: 192.0.2.0/24, except: [192.0.2.128/25]}]
            toPorts: [{ports: [{port: "53", protocol: UDP}]}]
cases: []
"#;

fn compiled() -> Compiled {
    // Tests run in parallel threads of one process: each call gets its own
    // folder, or one test would delete the file another is reading.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("porin-compiled-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("test.yaml");
    std::fs::write(&path, TEST).unwrap();
    let prepared = prepare(Path::new(&path)).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    prepared.compiled
}

fn ipcache4_bytes(maps: &MapContents) -> Vec<([u8; 8], [u8; 8])> {
    maps.ipcache4
        .iter()
        .map(|(k, v)| (k.to_bytes(), v.to_bytes()))
        .collect()
}

fn bytes(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

#[test]
fn ipcache_pairs_are_byte_exact() {
    let compiled = compiled();
    let maps = MapContents::from_compiled(&compiled).unwrap();
    let web = compiled.endpoint("prod/web").unwrap().identity;
    let client = compiled.endpoint("prod/client").unwrap().identity;
    let cidr24 = compiled.identity_of_ip("192.0.2.1".parse().unwrap());
    let cidr25 = compiled.identity_of_ip("192.0.2.200".parse().unwrap());
    assert!(cidr24 != 9 && cidr25 != 9 && cidr24 != cidr25);
    // IPv4: world /0, the policy /24 and /25, the two endpoint /32s, in
    // (prefix length, address) order.
    let id = |i: u32| i.to_le_bytes();
    let expected: Vec<([u8; 8], [u8; 8])> = vec![
        ([0, 0, 0, 0, 0, 0, 0, 0], [9, 0, 0, 0, 0, 0, 0, 0]),
        ([24, 0, 0, 0, 192, 0, 2, 0], {
            let mut v = [0u8; 8];
            v[0..4].copy_from_slice(&id(cidr24));
            v
        }),
        ([25, 0, 0, 0, 192, 0, 2, 128], {
            let mut v = [0u8; 8];
            v[0..4].copy_from_slice(&id(cidr25));
            v
        }),
        ([32, 0, 0, 0, 10, 0, 0, 1], {
            let mut v = [0u8; 8];
            v[0..4].copy_from_slice(&id(web));
            v
        }),
        ([32, 0, 0, 0, 10, 0, 0, 2], {
            let mut v = [0u8; 8];
            v[0..4].copy_from_slice(&id(client));
            v
        }),
    ];
    assert_eq!(ipcache4_bytes(&maps), expected);
    // IPv6: world /0 and web's /128.
    let v6: Vec<_> = maps
        .ipcache6
        .iter()
        .map(|(k, v)| (k.to_bytes(), v.to_bytes()))
        .collect();
    assert_eq!(v6.len(), 2);
    assert_eq!(v6[0], ([0u8; 20], [10, 0, 0, 0, 0, 0, 0, 0]));
    let mut key = [0u8; 20];
    key[0] = 128;
    key[4] = 0xfd;
    key[19] = 1;
    assert_eq!(v6[1].0, key);
    assert_eq!(v6[1].1[0..4], id(web));
}

#[test]
fn policy_pairs_are_byte_exact() {
    let compiled = compiled();
    let maps = MapContents::from_compiled(&compiled).unwrap();
    let web_index = compiled
        .endpoints
        .iter()
        .position(|e| e.name == "web")
        .unwrap();
    let client = compiled.endpoint("prod/client").unwrap().identity;
    let cidr24 = compiled.identity_of_ip("192.0.2.1".parse().unwrap());
    let web = maps.endpoint_policy(web_index).unwrap();
    let with_id = |hexed: &str, id: u32| {
        let mut b = bytes(hexed);
        b[4..8].copy_from_slice(&id.to_le_bytes());
        b
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = web
        .iter()
        .map(|(k, v)| (k.to_bytes().to_vec(), v.to_bytes().to_vec()))
        .collect();
    // Egress is not enforced: the allow-all key (prefixlen 40, identity
    // 0, egress) with allow precedence 0xFFFFFF01.
    let egress_all = (
        bytes("28 00 00 00 00 00 00 00 01 00 00 00"),
        bytes("00 00 00 00 01 ff ff ff 00 00 00 00"),
    );
    assert!(pairs.contains(&egress_all), "{pairs:?}");
    // Ingress: client may reach TCP/80: prefixlen 64, identity client,
    // ingress, proto 6, port 0x0050 BE; entry lpm 24 (0xc0), allow.
    let allow80 = (
        with_id("40 00 00 00 00 00 00 00 00 06 00 50", client),
        bytes("00 00 c0 00 01 ff ff ff 00 00 00 00"),
    );
    assert!(pairs.contains(&allow80), "{pairs:?}");
    // Ingress deny of UDP/53 from the /24 identity: deny flag 1 | lpm 24
    // (0xc1), precedence 0xFFFFFFFF.
    let deny53 = (
        with_id("40 00 00 00 00 00 00 00 00 11 00 35", cidr24),
        bytes("00 00 c1 00 ff ff ff ff 00 00 00 00"),
    );
    assert!(pairs.contains(&deny53), "{pairs:?}");
    // The excepted /25 gets no deny entry.
    let cidr25 = compiled.identity_of_ip("192.0.2.200".parse().unwrap());
    assert!(
        !pairs
            .iter()
            .any(|(k, _)| k[4..8] == cidr25.to_le_bytes() && k[9] == 17),
        "{pairs:?}"
    );
    // The endpoint has a namespace, so allow-localhost (`auto`, Cilium in
    // Kubernetes mode; `determineAllowLocalhostIngress`,
    // pkg/policy/mapstate.go) lets the host in: L3-only ingress key of
    // identity 1 (prefixlen 40), a plain allow.
    let localhost = (
        bytes("28 00 00 00 01 00 00 00 00 00 00 00"),
        bytes("00 00 00 00 01 ff ff ff 00 00 00 00"),
    );
    assert!(pairs.contains(&localhost), "{pairs:?}");
    // Exactly these four pairs: nothing else is allowed or denied.
    assert_eq!(pairs.len(), 4, "{pairs:?}");
}

#[test]
fn json_shows_hex_and_decoded_fields() {
    let compiled = compiled();
    let maps = MapContents::from_compiled(&compiled).unwrap();
    let json: serde_json::Value = serde_json::from_str(&maps.to_json().unwrap()).unwrap();
    assert_eq!(json["ipcache4"][0]["prefix"], "0.0.0.0/0");
    assert_eq!(json["ipcache4"][0]["key"], "00 00 00 00 00 00 00 00");
    assert_eq!(json["ipcache4"][0]["value"], "09 00 00 00 00 00 00 00");
    assert_eq!(json["ipcache6"][1]["prefix"], "fd00::1/128");
    let web = json["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["endpoint"] == "prod/web")
        .unwrap();
    let deny = web["policy"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["deny"] == true)
        .unwrap();
    assert_eq!(deny["proto"], 17);
    assert_eq!(deny["dport"], 53);
    assert_eq!(deny["prefixlen"], 64);
    assert_eq!(deny["lpm_prefix_length"], 24);
    assert_eq!(deny["precedence"], 0xFFFF_FFFFu32);
    assert_eq!(deny["direction"], "ingress");
}

#[test]
fn extra_entries_override_and_capacity_is_checked() {
    let compiled = compiled();
    let extra = [("100.64.0.1/32".parse().unwrap(), 1)];
    let maps = MapContents::with_extra_ipcache(&compiled, &extra).unwrap();
    assert!(
        ipcache4_bytes(&maps).contains(&([32, 0, 0, 0, 100, 64, 0, 1], [1, 0, 0, 0, 0, 0, 0, 0]))
    );
    // Scope byte 0x07 is no identity scope.
    let bad = [("100.64.0.1/32".parse().unwrap(), 0x0700_0001)];
    assert!(matches!(
        MapContents::with_extra_ipcache(&compiled, &bad),
        Err(CompiledMapsError::BadIdentity {
            identity: 0x0700_0001,
            ..
        })
    ));
    let tiny = ObjectConfig {
        ipcache4_max_entries: 2,
        ..ObjectConfig::default()
    };
    assert!(matches!(
        maps.check_capacity(&tiny),
        Err(CompiledMapsError::IpcacheTooLarge { family: 4, .. })
    ));
    assert!(maps.check_capacity(&ObjectConfig::default()).is_ok());
}

#[test]
fn redirect_mark_round_trips() {
    assert_eq!(redirect_mark(15001), 0x3a99_0200);
    assert_eq!(proxy_port_of_mark(redirect_mark(15001)), Some(15001));
    assert_eq!(proxy_port_of_mark(0), None);
    assert_eq!(proxy_port_of_mark(0x3a99_0201), None);
    for port in [1u16, 80, 15001, 65535] {
        assert_eq!(proxy_port_of_mark(redirect_mark(port)), Some(port));
    }
}

fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn datapath_md() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/DATAPATH.md")).unwrap()
}

/// The cells of a Markdown table row (`\|` is a pipe inside a cell).
fn cells(row: &str) -> Vec<String> {
    let row = row.trim().trim_start_matches('|').trim_end_matches('|');
    row.replace("\\|", "\u{0}")
        .split('|')
        .map(|cell| cell.trim().replace('\u{0}', "|"))
        .collect()
}

fn unquote(cell: &str) -> String {
    cell.trim_matches('`').to_owned()
}

/// One layout table of DATAPATH.md §2: the struct named (with its size) in the
/// line that introduces it, and its `(offset, size, field, type)` rows.
#[derive(Debug)]
struct LayoutTable {
    name: String,
    size: usize,
    rows: Vec<(usize, usize, String, String)>,
}

const LAYOUT_HEADER: &str = "| offset | size | field | type | encoding |";

fn layout_tables(doc: &str) -> Vec<LayoutTable> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut tables = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if line.trim() != LAYOUT_HEADER {
            continue;
        }
        // The paragraph above the table.
        let mut paragraph: Vec<&str> = lines[..at]
            .iter()
            .rev()
            .skip_while(|l| l.trim().is_empty())
            .take_while(|l| !l.trim().is_empty())
            .copied()
            .collect();
        paragraph.reverse();
        let intro = paragraph.join(" ");
        // "... `porin_x` (N bytes):": the last struct name of the line, then its size.
        let (before, after) = intro
            .rsplit_once(" bytes)")
            .map(|(before, _)| before.rsplit_once(" (").unwrap_or(("", "")))
            .unwrap_or_else(|| panic!("line {at}: {intro:?} does not state `(N bytes)`"));
        let name = before.rsplit('`').nth(1).unwrap_or_default().to_owned();
        let size = after
            .parse()
            .unwrap_or_else(|_| panic!("line {at}: size in {intro:?}"));
        let rows = lines[at + 2..]
            .iter()
            .take_while(|l| l.trim_start().starts_with('|'))
            .map(|row| {
                let c = cells(row);
                let number = |i: usize| -> usize {
                    c[i].parse()
                        .unwrap_or_else(|_| panic!("{row:?}: column {i} is not a number"))
                };
                (number(0), number(1), unquote(&c[2]), unquote(&c[3]))
            })
            .collect();
        tables.push(LayoutTable { name, size, rows });
    }
    tables
}

/// DATAPATH.md's layout tables are the ABI (`porin_ebpf::abi`), field for
/// field: name, offset, size and type, every struct once, in order. A field
/// added to an ABI struct and not to the document fails here.
#[test]
fn datapath_md_layout_tables_are_the_abi() {
    let tables = layout_tables(&datapath_md());
    let structs: Vec<(&str, usize, &[Field])> = abi::ALL
        .iter()
        .filter_map(|layout| match layout {
            Layout::Struct { name, size, fields } => Some((*name, *size, *fields)),
            Layout::U32 | Layout::None => None,
        })
        .collect();
    assert_eq!(
        tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        structs.iter().map(|(name, ..)| *name).collect::<Vec<_>>(),
        "DATAPATH.md's layout tables name other structs than the ABI"
    );
    for (table, (name, size, fields)) in tables.iter().zip(&structs) {
        assert_eq!(table.size, *size, "DATAPATH.md: size of `{name}`");
        let expected: Vec<(usize, usize, String, String)> = fields
            .iter()
            .map(|f| (f.offset, f.ty.size(), f.name.to_owned(), f.type_name()))
            .collect();
        assert_eq!(table.rows, expected, "DATAPATH.md: fields of `{name}`");
    }
}

/// The table parser itself: a document whose table lacks a field of the
/// ABI struct, or misstates an offset, is caught.
#[test]
fn a_layout_table_missing_a_field_is_caught() {
    let doc = datapath_md();
    let tables = layout_tables(&doc);
    let policy = tables
        .iter()
        .find(|t| t.name == "porin_policy_entry")
        .unwrap();
    assert_eq!(policy.rows.len(), PolicyEntry::FIELDS.len());
    let cookie = "| 8 | 4 | `cookie` | `u32 LE` | not used by the datapath; kept for the agent |\n";
    assert!(doc.contains(cookie));
    let without = layout_tables(&doc.replace(cookie, ""));
    let policy = without
        .iter()
        .find(|t| t.name == "porin_policy_entry")
        .unwrap();
    assert_eq!(policy.rows.len(), PolicyEntry::FIELDS.len() - 1);
    let shifted = layout_tables(&doc.replace("| 8 | 4 | `cookie`", "| 9 | 4 | `cookie`"));
    let policy = shifted
        .iter()
        .find(|t| t.name == "porin_policy_entry")
        .unwrap();
    assert_ne!(
        policy.rows.last().map(|r| r.0),
        Some(PolicyEntry::OFF_COOKIE)
    );
}

/// The object's map table (§2) is the emitter's: name, type, key and value
/// struct with their sizes, default `max_entries`, flags.
#[test]
fn datapath_md_map_table_is_the_object() {
    let doc = datapath_md();
    let header = "| map | type | key | value | max_entries (default) | map_flags |";
    let at = doc.find(header).expect("DATAPATH.md §2 map table");
    let rows: Vec<Vec<String>> = doc[at..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(cells)
        .collect();
    let specs = ObjectConfig::default().maps();
    assert_eq!(rows.len(), specs.len());
    let layout = |layout: &Layout| match layout {
        Layout::U32 => format!("{} `u32`", layout.size()),
        Layout::None => "0 (none)".to_owned(),
        Layout::Struct { name, size, .. } => format!("{size} `{name}`"),
    };
    for (row, spec) in rows.iter().zip(&specs) {
        assert_eq!(unquote(&row[0]), spec.name);
        assert!(
            spec.name.len() <= 15,
            "{} exceeds the kernel's 15 characters",
            spec.name
        );
        assert!(
            row[1].ends_with(&format!("({})", spec.kind.number())),
            "{}: type {:?}",
            spec.name,
            row[1]
        );
        assert!(
            row[2].starts_with(&layout(&spec.key)),
            "{}: key {:?}",
            spec.name,
            row[2]
        );
        assert!(
            row[3].starts_with(&layout(&spec.value)),
            "{}: value {:?}",
            spec.name,
            row[3]
        );
        assert_eq!(row[4], spec.max_entries.to_string(), "{}", spec.name);
        let flags = row[5]
            .rsplit(['(', ' '])
            .next()
            .unwrap_or_default()
            .trim_end_matches(')');
        let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).unwrap();
        assert_eq!(flags, spec.flags, "{}: flags {:?}", spec.name, row[5]);
    }
}

/// DATAPATH.md is the contract: its counter table must list exactly the
/// `Verdict` indices and names.
#[test]
fn datapath_md_counter_table_is_the_verdicts() {
    let doc = datapath_md();
    for verdict in Verdict::ALL {
        let name = screaming(&format!("{verdict:?}"));
        let row = format!("| {} | `{}` |", verdict.index(), name);
        assert!(doc.contains(&row), "DATAPATH.md lacks counter row {row:?}");
    }
    let indices: std::collections::BTreeSet<u32> = Verdict::ALL.iter().map(|v| v.index()).collect();
    assert_eq!(indices.len(), Verdict::ALL.len());
    assert!(indices.iter().all(|i| *i < maps::VERDICT_COUNTERS));
}

#[test]
fn verdict_pass_set_matches_the_return_codes() {
    let passing: Vec<Verdict> = Verdict::ALL.into_iter().filter(|v| v.passes()).collect();
    assert_eq!(
        passing,
        [
            Verdict::AllowedNew,
            Verdict::AllowedEstablished,
            Verdict::AllowedReply,
            Verdict::Redirected,
            Verdict::PassedNonIp,
            Verdict::AllowedIcmpFragNeeded,
            Verdict::PassedIpv6Ndp
        ]
    );
}
