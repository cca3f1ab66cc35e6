//! `TestMapState_denyPreferredInsertWithSubnets` of Cilium's
//! `pkg/policy/mapstate_test.go`: all 162 rows, with the same expectation
//! generator. Selections (as in the Go test): `reserved:world` selects
//! {world, 192.0.2.3/32, 192.0.2.0/24}; `cidr:192.0.2.3/32` selects {IP};
//! `cidr:192.0.2.0/24` selects {subnet, IP}. Every insertion runs with all
//! features (`allFeatures`), so allows go through `authPreferredInsert`.
//! Levels are rule priorities (lower wins). Each row is checked in forward
//! and reverse insertion order, and then with A and B in different
//! directions (no interaction expected).

use super::*;

const AA: u32 = 1 << 1; // insertAllowAll
const A: u32 = 1 << 2; // insertA
const B: u32 = 1 << 3; // insertB
const IP_L3_ONLY: u32 = 1 << 4; // worldIPl3only
const IP_PROTO_ONLY: u32 = 1 << 5; // worldIPProtoOnly
const A_L3_NOT_IN_B: u32 = 1 << 11; // insertAL3NotInB
const B_L3_NOT_IN_A: u32 = 1 << 12; // insertBL3NotInA
const BOTH: u32 = A | B;

#[derive(Clone, Copy)]
enum Sel {
    /// `reservedWorldSelections`
    W,
    /// `worldIPSelections`
    I,
    /// `worldSubnetSelections`
    S,
}

fn ip() -> u32 {
    Identity::local(16324).unwrap().get()
}

fn subnet() -> u32 {
    Identity::local(16325).unwrap().get()
}

fn selections(sel: Sel) -> Vec<u32> {
    match sel {
        Sel::W => vec![2, ip(), subnet()],
        Sel::I => vec![ip()],
        Sel::S => vec![subnet(), ip()],
    }
}

struct Row {
    name: &'static str,
    with_allow_all: bool,
    allow_all_level: u32,
    a: Sel,
    a_level: u32,
    b: Sel,
    b_level: u32,
    a_deny: bool,
    b_deny: bool,
    a_port: u16,
    a_proto: u8,
    b_port: u16,
    b_proto: u8,
    outcome: u32,
}

#[expect(
    clippy::too_many_arguments,
    reason = "one argument per Go table column"
)]
const fn r(
    name: &'static str,
    with_allow_all: bool,
    allow_all_level: u32,
    a: Sel,
    a_level: u32,
    b: Sel,
    b_level: u32,
    a_deny: bool,
    b_deny: bool,
    ports: (u16, u8, u16, u8),
    outcome: u32,
) -> Row {
    Row {
        name,
        with_allow_all,
        allow_all_level,
        a,
        a_level,
        b,
        b_level,
        a_deny,
        b_deny,
        a_port: ports.0,
        a_proto: ports.1,
        b_port: ports.2,
        b_proto: ports.3,
        outcome,
    }
}

const Y: bool = true; // WithAllowAll / deny
const N: bool = false; // WithoutAllowAll / allow
use Sel::{I, S, W};

const L3: (u16, u8) = (0, 0);
const L4: (u16, u8) = (0, 6);
const L3L4: (u16, u8) = (80, 6);

const fn p(a: (u16, u8), b: (u16, u8)) -> (u16, u8, u16, u8) {
    (a.0, a.1, b.0, b.1)
}

#[rustfmt::skip]
fn rows() -> Vec<Row> {
    vec![
        // deny-allow insertions
        r("deny-allow: a superset a|b L3-only; subset allow inserted as deny", Y, 0, W, 0, S, 0, Y, N, p(L3, L3), AA | A),
        r("deny-allow: a superset a|b L3-only; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L3, L3), AA | A),
        r("deny-allow: a superset a|b L3-only; later order keys not inserted", N, 0, W, 0, S, 1, Y, N, p(L3, L3), A),
        r("deny-allow: a superset a|b L3-only; later order allowAll", Y, 3, W, 2, S, 1, Y, N, p(L3, L3), AA | BOTH),
        r("deny-allow: a superset a|b L3-only; without allow-all", N, 0, W, 0, S, 0, Y, N, p(L3, L3), A),
        r("deny-allow: a superset a|b L3-only; without allow-all, later order allow", N, 0, W, 0, S, 1, Y, N, p(L3, L3), A),
        r("deny-allow: a superset a|b L3-only; without allow-all, later order world deny inserted", N, 0, W, 2, S, 1, Y, N, p(L3, L3), BOTH),

        r("deny-allow: b superset a|b L3-only", Y, 0, I, 0, S, 0, Y, N, p(L3, L3), AA | BOTH),
        r("deny-allow: b superset a|b L3-only; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L3, L3), AA | BOTH),
        r("deny-allow: b superset a|b L3-only; later order keys not inserted", N, 0, I, 2, S, 1, Y, N, p(L3, L3), B),
        r("deny-allow: b superset a|b L3-only; later order less specific deny NOT inserted", Y, 3, I, 2, S, 1, Y, N, p(L3, L3), AA | B),
        r("deny-allow: b superset a|b L3-only; without allow-all", N, 0, I, 0, S, 0, Y, N, p(L3, L3), BOTH),
        r("deny-allow: b superset a|b L3-only; without allow-all, later order allow", N, 0, I, 0, S, 1, Y, N, p(L3, L3), BOTH),
        r("deny-allow: b superset a|b L3-only; without allow-all, later order more specific deny NOT inserted", N, 0, I, 2, S, 1, Y, N, p(L3, L3), B),

        r("deny-allow: a superset a L3-only, b L4; subset allow inserted as deny", Y, 0, W, 0, S, 0, Y, N, p(L3, L4), AA | A),
        r("deny-allow: a superset a L3-only, b L4; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L3, L4), AA | A),
        r("deny-allow: a superset a L3-only, b L4; later order keys not inserted", N, 0, S, 0, I, 1, Y, N, p(L3, L4), A),
        r("deny-allow: a superset a L3-only, b L4; earlier order allow inserted as allow", Y, 3, W, 2, S, 1, Y, N, p(L3, L4), AA | BOTH),
        r("deny-allow: a superset a L3-only, b L4; without allow-all, subset allow inserted as deny", N, 0, W, 0, S, 0, Y, N, p(L3, L4), A),
        r("deny-allow: a superset a L3-only, b L4; without allow-all, later order subset allow inserted as deny", N, 0, W, 0, S, 1, Y, N, p(L3, L4), A),
        r("deny-allow: a superset a L3-only, b L4; without allow-all, earlier order allow inserted as allow", N, 0, W, 2, S, 1, Y, N, p(L3, L4), BOTH),

        r("deny-allow: b superset a L3-only, b L4", Y, 0, I, 0, S, 0, Y, N, p(L3, L4), AA | BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L4; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L3, L4), AA | BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L4; later order wider keys inserted", N, 0, I, 2, S, 1, Y, N, p(L3, L4), BOTH),
        r("deny-allow: b superset a L3-only, b L4; later order more specific deny inserted", Y, 3, I, 2, S, 1, Y, N, p(L3, L4), AA | BOTH),
        r("deny-allow: b superset a L3-only, b L4; without allow-all, added deny TCP due to intersecting deny", N, 0, I, 0, S, 0, Y, N, p(L3, L4), BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L4; without allow-all, added deny TCP due to intersecting deny", N, 0, I, 0, S, 1, Y, N, p(L3, L4), BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L4; without allow-all, later order more specific deny inserted without denying TCP", N, 0, I, 2, S, 1, Y, N, p(L3, L4), BOTH),

        r("deny-allow: a superset a L3-only, b L3L4; subset allow inserted as deny", Y, 0, W, 0, S, 0, Y, N, p(L3, L3L4), AA | A),
        r("deny-allow: a superset a L3-only, b L3L4; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L3, L3L4), AA | A),
        r("deny-allow: a superset a L3-only, b L3L4; later order keys not inserted", N, 0, S, 0, I, 1, Y, N, p(L3, L3L4), A),
        r("deny-allow: a superset a L3-only, b L3L4; earlier order allow inserted as allow", Y, 3, W, 2, S, 1, Y, N, p(L3, L3L4), AA | BOTH),
        r("deny-allow: a superset a L3-only, b L3L4; without allow-all, subset allow inserted as deny", N, 0, W, 0, S, 0, Y, N, p(L3, L3L4), A),
        r("deny-allow: a superset a L3-only, b L3L4; without allow-all, later order subset allow inserted as deny", N, 0, W, 0, S, 1, Y, N, p(L3, L3L4), A),
        r("deny-allow: a superset a L3-only, b L3L4; without allow-all, earlier order allow inserted as allow", N, 0, W, 2, S, 1, Y, N, p(L3, L3L4), BOTH),

        r("deny-allow: b superset a L3-only, b L3L4; IP allow not inserted", Y, 0, I, 0, S, 0, Y, N, p(L3, L3L4), AA | BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L3L4; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L3, L3L4), AA | BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L3L4; later order wider keys inserted", N, 0, I, 2, S, 1, Y, N, p(L3, L3L4), BOTH),
        r("deny-allow: b superset a L3-only, b L3L4; later order allow-all, more specific deny inserted", Y, 3, I, 2, S, 1, Y, N, p(L3, L3L4), AA | BOTH),
        r("deny-allow: b superset a L3-only, b L3L4; without allow-all, IP allow not inserted", N, 0, I, 0, S, 0, Y, N, p(L3, L3L4), BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L3L4; without allow-all, IP allow not inserted", N, 0, I, 0, S, 1, Y, N, p(L3, L3L4), BOTH | IP_L3_ONLY),
        r("deny-allow: b superset a L3-only, b L3L4; without allow-all, later order more specific deny inserted without denying TCP/80", N, 0, I, 2, S, 1, Y, N, p(L3, L3L4), BOTH),

        r("deny-allow: a superset a L4, b L3-only", Y, 0, W, 0, S, 0, Y, N, p(L4, L3), AA | BOTH),
        r("deny-allow: a superset a L4, b L3-only; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L4, L3), AA | BOTH),
        r("deny-allow: a superset a L4, b L3-only; later order wider keys inserted", N, 0, S, 0, I, 1, Y, N, p(L4, L3), BOTH),
        r("deny-allow: a superset a L4, b L3-only; later order allow-all, world deny inserted", Y, 3, W, 2, S, 1, Y, N, p(L4, L3), AA | BOTH | A_L3_NOT_IN_B),
        r("deny-allow: a superset a L4, b L3-only; without allow-all", N, 0, W, 0, S, 0, Y, N, p(L4, L3), BOTH),
        r("deny-allow: a superset a L4, b L3-only; without allow-all, later order allow the same", N, 0, W, 0, S, 1, Y, N, p(L4, L3), BOTH),
        r("deny-allow: a superset a L4, b L3-only; without allow-all, later order world/TCP deny inserted", N, 0, W, 2, S, 1, Y, N, p(L4, L3), BOTH | A_L3_NOT_IN_B),

        r("deny-allow: b superset a L4, b L3-only", Y, 0, I, 0, S, 0, Y, N, p(L4, L3), AA | BOTH),
        r("deny-allow: b superset a L4, b L3-only; later order allows the same", N, 0, I, 0, S, 1, Y, N, p(L4, L3), BOTH),
        r("deny-allow: b superset a L4, b L3-only; later order keys not inserted", N, 0, I, 2, S, 1, Y, N, p(L4, L3), B),
        r("deny-allow: b superset a L4, b L3-only; later order more specific deny NOT inserted", Y, 3, I, 2, S, 1, Y, N, p(L4, L3), AA | B),
        r("deny-allow: b superset a L4, b L3-only; without allow-all, more specific deny added", N, 0, I, 0, S, 0, Y, N, p(L4, L3), BOTH),
        r("deny-allow: b superset a L4, b L3-only; without allow-all, later order allows the same", N, 0, I, 0, S, 1, Y, N, p(L4, L3), BOTH),
        r("deny-allow: b superset a L4, b L3-only; without allow-all, later order more specific deny not inserted", N, 0, I, 2, S, 1, Y, N, p(L4, L3), B),

        r("deny-allow: a superset a L4, b L4; subset allow inserted as deny", Y, 0, W, 0, S, 0, Y, N, p(L4, L4), AA | A),
        r("deny-allow: a superset a L4, b L4; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L4, L4), AA | A),
        r("deny-allow: a superset a L4, b L4; later order keys not inserted", N, 0, S, 0, I, 1, Y, N, p(L4, L4), A),
        r("deny-allow: a superset a L4, b L4; later order world deny inserted", Y, 3, W, 2, S, 1, Y, N, p(L4, L4), AA | BOTH),
        r("deny-allow: a superset a L4, b L4; without allow-all, subset allow inserted as deny", N, 0, W, 0, S, 0, Y, N, p(L4, L4), A),
        r("deny-allow: a superset a L4, b L4; without allow-all, later order subset allow inserted as deny", N, 0, W, 0, S, 1, Y, N, p(L4, L4), A),
        r("deny-allow: a superset a L4, b L4; without allow-all, earlier order allow inserted as allow", N, 0, W, 2, S, 1, Y, N, p(L4, L4), BOTH),

        r("deny-allow: b superset a L4, b L4", Y, 0, I, 0, S, 0, Y, N, p(L4, L4), AA | BOTH),
        r("deny-allow: b superset a L4, b L4; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L4, L4), AA | BOTH),
        r("deny-allow: b superset a L4, b L4; later order keys not inserted", N, 0, I, 2, S, 1, Y, N, p(L4, L4), B),
        r("deny-allow: b superset a L4, b L4; later order more specific deny NOT inserted", Y, 3, I, 2, S, 1, Y, N, p(L4, L4), AA | B),
        r("deny-allow: b superset a L4, b L4; without allow-all", N, 0, I, 0, S, 0, Y, N, p(L4, L4), BOTH),
        r("deny-allow: b superset a L4, b L4; without allow-all, later order allows the same", N, 0, I, 0, S, 1, Y, N, p(L4, L4), BOTH),
        r("deny-allow: b superset a L4, b L4; without allow-all, later order more specific deny NOT inserted", N, 0, I, 2, S, 1, Y, N, p(L4, L4), B),

        r("deny-allow: a superset a L4, b L3L4; subset allow not inserted", Y, 0, W, 0, S, 0, Y, N, p(L4, L3L4), AA | A),
        r("deny-allow: a superset a L4, b L3L4; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L4, L3L4), AA | A),
        r("deny-allow: a superset a L4, b L3L4; later order keys not inserted", N, 0, S, 0, I, 1, Y, N, p(L4, L3L4), A),
        r("deny-allow: a superset a L4, b L3L4; later order world deny inserted", Y, 3, W, 2, S, 1, Y, N, p(L4, L3L4), AA | BOTH),
        r("deny-allow: a superset a L4, b L3L4; without allow-all, subset allow not inserted", N, 0, W, 0, S, 0, Y, N, p(L4, L3L4), A),
        r("deny-allow: a superset a L4, b L3L4; without allow-all, later order allows the same", N, 0, W, 0, S, 1, Y, N, p(L4, L3L4), A),
        r("deny-allow: a superset a L4, b L3L4; without allow-all, earlier order allow inserted as allow", N, 0, W, 2, S, 1, Y, N, p(L4, L3L4), BOTH),

        r("deny-allow: b superset a L4, b L3L4", Y, 0, I, 0, S, 0, Y, N, p(L4, L3L4), AA | BOTH | IP_PROTO_ONLY),
        r("deny-allow: b superset a L4, b L3L4; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L4, L3L4), AA | BOTH | IP_PROTO_ONLY),
        r("deny-allow: b superset a L4, b L3L4; later order wider keys inserted", N, 0, I, 2, S, 1, Y, N, p(L4, L3L4), BOTH),
        r("deny-allow: b superset a L4, b L3L4; later order more specific deny inserted", Y, 3, I, 2, S, 1, Y, N, p(L4, L3L4), AA | BOTH),
        r("deny-allow: b superset a L4, b L3L4; without allow-all", N, 0, I, 0, S, 0, Y, N, p(L4, L3L4), BOTH | IP_PROTO_ONLY),
        r("deny-allow: b superset a L4, b L3L4; without allow-all, later order allows the same", N, 0, I, 0, S, 1, Y, N, p(L4, L3L4), BOTH | IP_PROTO_ONLY),
        r("deny-allow: b superset a L4, b L3L4; without allow-all, later order more specific deny inserted", N, 0, I, 2, S, 1, Y, N, p(L4, L3L4), BOTH),

        r("deny-allow: a superset a L3L4, b L3-only", Y, 0, W, 0, S, 0, Y, N, p(L3L4, L3), AA | BOTH),
        r("deny-allow: a superset a L3L4, b L3-only; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L3L4, L3), AA | BOTH),
        r("deny-allow: a superset a L3L4, b L3-only; later order wider keys inserted", N, 0, S, 0, I, 1, Y, N, p(L3L4, L3), BOTH),
        r("deny-allow: a superset a L3L4, b L3-only; later order world deny inserted", Y, 3, W, 2, S, 1, Y, N, p(L3L4, L3), AA | BOTH | A_L3_NOT_IN_B),
        r("deny-allow: a superset a L3L4, b L3-only; without allow-all", N, 0, W, 0, S, 0, Y, N, p(L3L4, L3), BOTH),
        r("deny-allow: a superset a L3L4, b L3-only; without allow-all, later order allows the same", N, 0, W, 0, S, 1, Y, N, p(L3L4, L3), BOTH),
        r("deny-allow: a superset a L3L4, b L3-only; without allow-all, later order world deny inserted", N, 0, W, 2, S, 1, Y, N, p(L3L4, L3), BOTH | A_L3_NOT_IN_B),

        r("deny-allow: b superset a L3L4, b L3-only", Y, 0, I, 0, S, 0, Y, N, p(L3L4, L3), AA | BOTH),
        r("deny-allow: b superset a L3L4, b L3-only; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L3L4, L3), AA | BOTH),
        r("deny-allow: b superset a L3L4, b L3-only; later order keys not inserted", N, 0, I, 2, S, 1, Y, N, p(L3L4, L3), B),
        r("deny-allow: b superset a L3L4, b L3-only; later order more specific deny NOT inserted", Y, 3, I, 2, S, 1, Y, N, p(L3L4, L3), AA | B),
        r("deny-allow: b superset a L3L4, b L3-only; without allow-all", N, 0, I, 0, S, 0, Y, N, p(L3L4, L3), BOTH),
        r("deny-allow: b superset a L3L4, b L3-only; without allow-all, later order allows the same", N, 0, I, 0, S, 1, Y, N, p(L3L4, L3), BOTH),
        r("deny-allow: b superset a L3L4, b L3-only; without allow-all, later order more specific deny NOT inserted", N, 0, I, 2, S, 1, Y, N, p(L3L4, L3), B),

        r("deny-allow: a superset a L3L4, b L4", Y, 0, W, 0, S, 0, Y, N, p(L3L4, L4), AA | BOTH),
        r("deny-allow: a superset a L3L4, b L4; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L3L4, L4), AA | BOTH),
        r("deny-allow: a superset a L3L4, b L4; later order wider keys inserted", N, 0, S, 0, I, 1, Y, N, p(L3L4, L4), BOTH),
        r("deny-allow: a superset a L3L4, b L4; later order world deny inserted", Y, 3, W, 2, S, 1, Y, N, p(L3L4, L4), AA | BOTH | A_L3_NOT_IN_B),
        r("deny-allow: a superset a L3L4, b L4; without allow-all", N, 0, W, 0, S, 0, Y, N, p(L3L4, L4), BOTH),
        r("deny-allow: a superset a L3L4, b L4; without allow-all, later order allows the same", N, 0, W, 0, S, 1, Y, N, p(L3L4, L4), BOTH),
        r("deny-allow: a superset a L3L4, b L4; without allow-all, later order world deny inserted", N, 0, W, 2, S, 1, Y, N, p(L3L4, L4), BOTH | A_L3_NOT_IN_B),

        r("deny-allow: b superset a L3L4, b L4", Y, 0, I, 0, S, 0, Y, N, p(L3L4, L4), AA | BOTH),
        r("deny-allow: b superset a L3L4, b L4; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L3L4, L4), AA | BOTH),
        r("deny-allow: b superset a L3L4, b L4; later order keys not inserted", N, 0, I, 2, S, 1, Y, N, p(L3L4, L4), B),
        r("deny-allow: b superset a L3L4, b L4; later order more specific deny NOT inserted", Y, 3, I, 2, S, 1, Y, N, p(L3L4, L4), AA | B),
        r("deny-allow: b superset a L3L4, b L4; without allow-all", N, 0, I, 0, S, 0, Y, N, p(L3L4, L4), BOTH),
        r("deny-allow: b superset a L3L4, b L4; without allow-all, later order allows the same", N, 0, I, 0, S, 1, Y, N, p(L3L4, L4), BOTH),
        r("deny-allow: b superset a L3L4, b L4; without allow-all, later order more specific deny NOT inserted", N, 0, I, 2, S, 1, Y, N, p(L3L4, L4), B),

        r("deny-allow: a superset a L3L4, b L3L4", Y, 0, W, 0, S, 0, Y, N, p(L3L4, L3L4), AA | A),
        r("deny-allow: a superset a L3L4, b L3L4; later order allows the same", Y, 2, W, 0, S, 1, Y, N, p(L3L4, L3L4), AA | A),
        r("deny-allow: a superset a L3L4, b L3L4; later order keys not inserted", N, 0, S, 0, I, 1, Y, N, p(L3L4, L3L4), A),
        r("deny-allow: a superset a L3L4, b L3L4; later order world deny inserted", Y, 3, W, 2, S, 1, Y, N, p(L3L4, L3L4), AA | BOTH),
        r("deny-allow: a superset a L3L4, b L3L4; without allow-all", N, 0, W, 0, S, 0, Y, N, p(L3L4, L3L4), A),
        r("deny-allow: a superset a L3L4, b L3L4; without allow-all, later order allows the same", N, 0, W, 0, S, 1, Y, N, p(L3L4, L3L4), A),
        r("deny-allow: a superset a L3L4, b L3L4; without allow-all, later order world deny inserted", N, 0, W, 2, S, 1, Y, N, p(L3L4, L3L4), BOTH),

        r("deny-allow: b superset a L3L4, b L3L4", Y, 0, I, 0, S, 0, Y, N, p(L3L4, L3L4), AA | BOTH),
        r("deny-allow: b superset a L3L4, b L3L4; later order allows the same", Y, 2, I, 0, S, 1, Y, N, p(L3L4, L3L4), AA | BOTH),
        r("deny-allow: b superset a L3L4, b L3L4; later order keys not inserted", N, 0, I, 2, S, 1, Y, N, p(L3L4, L3L4), B),
        r("deny-allow: b superset a L3L4, b L3L4; later order more specific deny NOT inserted", Y, 3, I, 2, S, 1, Y, N, p(L3L4, L3L4), AA | B),
        r("deny-allow: b superset a L3L4, b L3L4; without allow-all", N, 0, I, 0, S, 0, Y, N, p(L3L4, L3L4), BOTH),
        r("deny-allow: b superset a L3L4, b L3L4; without allow-all, later order allows the same", N, 2, I, 0, S, 1, Y, N, p(L3L4, L3L4), BOTH),
        r("deny-allow: b superset a L3L4, b L3L4; without allow-all, later order more specific deny NOT inserted", N, 3, I, 2, S, 1, Y, N, p(L3L4, L3L4), B),

        // deny-deny insertions: no redundancy between different non-zero IDs.
        r("deny-deny: a superset a|b L3-only", Y, 0, S, 0, I, 0, Y, Y, p(L3, L3), AA | BOTH),
        r("deny-deny: a superset a|b L3-only; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L3, L3), BOTH),
        r("deny-deny: b superset a|b L3-only", Y, 0, S, 0, W, 0, Y, Y, p(L3, L3), AA | BOTH),
        r("deny-deny: b superset a|b L3-only; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L3, L3), BOTH),
        r("deny-deny: a superset a L3-only, b L4", Y, 0, S, 0, I, 0, Y, Y, p(L3, L4), AA | A),
        r("deny-deny: a superset a L3-only, b L4; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L3, L4), A),
        r("deny-deny: b superset a L3-only, b L4", Y, 0, S, 0, W, 0, Y, Y, p(L3, L4), AA | BOTH | B_L3_NOT_IN_A),
        r("deny-deny: b superset a L3-only, b L4; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L3, L4), BOTH | B_L3_NOT_IN_A),
        r("deny-deny: a superset a L3-only, b L3L4", Y, 0, S, 0, I, 0, Y, Y, p(L3, L3L4), AA | A),
        r("deny-deny: a superset a L3-only, b L3L4; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L3, L3L4), A),
        r("deny-deny: b superset a L3-only, b L3L4", Y, 0, S, 0, W, 0, Y, Y, p(L3, L3L4), AA | BOTH | B_L3_NOT_IN_A),
        r("deny-deny: b superset a L3-only, b L3L4; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L3, L3L4), BOTH | B_L3_NOT_IN_A),
        r("deny-deny: a superset a L4, b L3-only", Y, 0, S, 0, I, 0, Y, Y, p(L4, L3), AA | BOTH | A_L3_NOT_IN_B),
        r("deny-deny: a superset a L4, b L3-only; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L4, L3), BOTH | A_L3_NOT_IN_B),
        r("deny-deny: b superset a L4, b L3-only", Y, 0, S, 0, W, 0, Y, Y, p(L4, L3), AA | B),
        r("deny-deny: b superset a L4, b L3-only; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L4, L3), B),
        r("deny-deny: a superset a L4, b L4", Y, 0, S, 0, I, 0, Y, Y, p(L4, L4), AA | BOTH),
        r("deny-deny: a superset a L4, b L4; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L4, L4), BOTH),
        r("deny-deny: b superset a L4, b L4", Y, 0, S, 0, W, 0, Y, Y, p(L4, L4), AA | BOTH),
        r("deny-deny: b superset a L4, b L4; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L4, L4), BOTH),
        r("deny-deny: a superset a L4, b L3L4", Y, 0, S, 0, I, 0, Y, Y, p(L4, L3L4), AA | A),
        r("deny-deny: a superset a L4, b L3L4; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L4, L3L4), A),
        r("deny-deny: b superset a L4, b L3L4", Y, 0, S, 0, W, 0, Y, Y, p(L4, L3L4), AA | BOTH | B_L3_NOT_IN_A),
        r("deny-deny: b superset a L4, b L3L4; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L4, L3L4), BOTH | B_L3_NOT_IN_A),
        r("deny-deny: a superset a L3L4, b L3-only", Y, 0, S, 0, I, 0, Y, Y, p(L3L4, L3), AA | BOTH | A_L3_NOT_IN_B),
        r("deny-deny: a superset a L3L4, b L3-only; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L3L4, L3), BOTH | A_L3_NOT_IN_B),
        r("deny-deny: b superset a L3L4, b L3-only", Y, 0, S, 0, W, 0, Y, Y, p(L3L4, L3), AA | B),
        r("deny-deny: b superset a L3L4, b L3-only; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L3L4, L3), B),
        r("deny-deny: a superset a L3L4, b L4", Y, 0, S, 0, I, 0, Y, Y, p(L3L4, L4), AA | BOTH | A_L3_NOT_IN_B),
        r("deny-deny: a superset a L3L4, b L4; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L3L4, L4), BOTH | A_L3_NOT_IN_B),
        r("deny-deny: b superset a L3L4, b L4", Y, 0, S, 0, W, 0, Y, Y, p(L3L4, L4), AA | B),
        r("deny-deny: b superset a L3L4, b L4; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L3L4, L4), B),
        r("deny-deny: a superset a L3L4, b L3L4", Y, 0, S, 0, I, 0, Y, Y, p(L3L4, L3L4), AA | BOTH),
        r("deny-deny: a superset a L3L4, b L3L4; without allow-all", N, 0, S, 0, I, 0, Y, Y, p(L3L4, L3L4), BOTH),
        r("deny-deny: b superset a L3L4, b L3L4", Y, 0, S, 0, W, 0, Y, Y, p(L3L4, L3L4), AA | BOTH),
        r("deny-deny: b superset a L3L4, b L3L4; without allow-all", N, 0, S, 0, W, 0, Y, Y, p(L3L4, L3L4), BOTH),
    ]
}

fn level_entry(level: u32, is_deny: bool) -> Entry {
    Entry::new(
        Priority::new(level).unwrap(),
        is_deny,
        0,
        ListenerPriority::NONE,
        AuthRequirement::NONE,
    )
}

/// `WithPortProto(proto, port)`: a non-zero port is exact.
fn key(dir: Direction, identity: u32, proto: u8, port: u16) -> Key {
    Key::for_direction(dir)
        .with_identity(id(identity))
        .with_port_proto(proto, port)
        .unwrap()
}

/// The Go test's expectation generator, verbatim in behaviour.
fn expected(row: &Row) -> MapState {
    let o = row.outcome;
    let skip = |identity: u32, proto: u8, port: u16| {
        (o & IP_L3_ONLY != 0 && identity == ip() && (proto != 0 || port != 0))
            || (o & IP_PROTO_ONLY != 0 && identity == ip() && port != 0)
    };
    let a_keys: Vec<Key> = selections(row.a)
        .into_iter()
        .filter(|n| !skip(*n, row.a_proto, row.a_port))
        .map(|n| key(Direction::Ingress, n, row.a_proto, row.a_port))
        .collect();
    let b_keys: Vec<Key> = selections(row.b)
        .into_iter()
        .filter(|n| !skip(*n, row.b_proto, row.b_port))
        .map(|n| key(Direction::Ingress, n, row.b_proto, row.b_port))
        .collect();
    let a_entry = level_entry(row.a_level, row.a_deny);
    let b_entry = level_entry(row.b_level, row.b_deny);
    let mut ms = MapState::new();
    if o & AA != 0 {
        ms.upsert(Key::ingress(), level_entry(row.allow_all_level, false))
            .unwrap();
    }
    let insert_b = |ms: &mut MapState| {
        for bk in &b_keys {
            if o & B_L3_NOT_IN_A != 0 && a_keys.iter().any(|ak| ak.identity() == bk.identity()) {
                continue;
            }
            ms.upsert(*bk, b_entry.clone()).unwrap();
        }
    };
    if row.a_level <= row.b_level && o & B != 0 {
        insert_b(&mut ms);
    }
    if o & A != 0 {
        for ak in &a_keys {
            if o & A_L3_NOT_IN_B != 0 && b_keys.iter().any(|bk| bk.identity() == ak.identity()) {
                continue;
            }
            ms.upsert(*ak, a_entry.clone()).unwrap();
        }
    }
    if row.a_level > row.b_level && o & B != 0 {
        insert_b(&mut ms);
    }
    ms
}

fn run(steps: &[(Key, Entry)]) -> MapState {
    let mut ms = MapState::new();
    for (k, e) in steps {
        ms.insert_with_features(*k, e.clone(), PolicyFeatures::ALL)
            .unwrap();
    }
    ms
}

#[test]
fn mapstate_test_go_deny_preferred_insert_with_subnets() {
    let rows = rows();
    assert_eq!(rows.len(), 162);
    for row in &rows {
        let allow_all = (Key::ingress(), level_entry(row.allow_all_level, false));
        let a: Vec<(Key, Entry)> = selections(row.a)
            .into_iter()
            .map(|n| {
                (
                    key(Direction::Ingress, n, row.a_proto, row.a_port),
                    level_entry(row.a_level, row.a_deny),
                )
            })
            .collect();
        let b: Vec<(Key, Entry)> = selections(row.b)
            .into_iter()
            .map(|n| {
                (
                    key(Direction::Ingress, n, row.b_proto, row.b_port),
                    level_entry(row.b_level, row.b_deny),
                )
            })
            .collect();
        let want = expected(row);

        let mut forward = Vec::new();
        if row.with_allow_all {
            forward.push(allow_all.clone());
        }
        forward.extend(a.iter().cloned());
        forward.extend(b.iter().cloned());
        assert_eq!(run(&forward), want, "{}", row.name);

        let mut reverse: Vec<(Key, Entry)> = b.clone();
        reverse.extend(a.iter().cloned());
        if row.with_allow_all {
            reverse.push(allow_all.clone());
        }
        assert_eq!(run(&reverse), want, "{} (in reverse)", row.name);
    }
}

#[test]
fn mapstate_test_go_deny_preferred_insert_with_subnets_other_direction() {
    for row in &rows() {
        let a: Vec<(Key, Entry)> = selections(row.a)
            .into_iter()
            .map(|n| {
                (
                    key(Direction::Ingress, n, row.a_proto, row.a_port),
                    level_entry(row.a_level, row.a_deny),
                )
            })
            .collect();
        let b: Vec<(Key, Entry)> = selections(row.b)
            .into_iter()
            .map(|n| {
                (
                    key(Direction::Egress, n, row.b_proto, row.b_port),
                    level_entry(row.b_level, row.b_deny),
                )
            })
            .collect();
        let allow_all_entry = level_entry(row.allow_all_level, false);
        let mut want = MapState::new();
        if row.outcome & AA != 0 {
            want.upsert(Key::ingress(), allow_all_entry.clone())
                .unwrap();
            want.upsert(Key::egress(), allow_all_entry.clone()).unwrap();
        }
        let keeps = |level: u32, is_deny: bool| {
            !row.with_allow_all
                || (!is_deny && level < row.allow_all_level)
                || level <= row.allow_all_level
        };
        if keeps(row.a_level, row.a_deny) {
            for (k, e) in &a {
                want.upsert(*k, e.clone()).unwrap();
            }
        }
        if keeps(row.b_level, row.b_deny) {
            for (k, e) in &b {
                want.upsert(*k, e.clone()).unwrap();
            }
        }

        let mut forward = Vec::new();
        if row.with_allow_all {
            forward.push((Key::ingress(), allow_all_entry.clone()));
            forward.push((Key::egress(), allow_all_entry.clone()));
        }
        forward.extend(a.iter().cloned());
        forward.extend(b.iter().cloned());
        assert_eq!(
            run(&forward),
            want,
            "{} different traffic directions",
            row.name
        );

        let mut reverse: Vec<(Key, Entry)> = b.clone();
        reverse.extend(a.iter().cloned());
        if row.with_allow_all {
            reverse.push((Key::egress(), allow_all_entry.clone()));
            reverse.push((Key::ingress(), allow_all_entry.clone()));
        }
        assert_eq!(
            run(&reverse),
            want,
            "{} different traffic directions (in reverse)",
            row.name
        );
    }
}
