//! L4 of a rule item: `toPorts` and `icmps`.

use porin_model::model::{
    IcmpFamily, IcmpRule, IntOrString, L4Proto, PortProtocol, RuleItem, ToPorts,
};

use super::l7::l7_of;
use super::{Ctx, PolicyInput};
use crate::codes;
use crate::resolve::rule::{L7, PortRef, PortSpec, icmp_type, parse_port_number, proto};

impl Ctx<'_> {
    /// The L4 of an item: its `toPorts` (with L7 for allow items), then its
    /// `icmps`.
    pub(super) fn port_rules(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        item: &RuleItem<'_>,
    ) -> Vec<PortSpec> {
        let mut specs = Vec::new();
        // (L7 of the port rule, its ports), for allow and deny port rules alike.
        let port_rules: Vec<(L7, Option<&Vec<PortProtocol>>)> = match item.to_ports {
            Some(ToPorts::Allow(list)) => {
                list.iter().map(|p| (l7_of(p), p.ports.as_ref())).collect()
            }
            Some(ToPorts::Deny(list)) => list
                .iter()
                .map(|p| (L7::none(), p.ports.as_ref()))
                .collect(),
            None => Vec::new(),
        };
        for (i, (l7, ports)) in port_rules.into_iter().enumerate() {
            for (j, pp) in ports.iter().flat_map(|l| l.iter()).enumerate() {
                let r = format!("{route}.toPorts[{i}].ports[{j}]");
                if let Some(spec) =
                    self.port_spec(input, &r, pp, l7.clone(), item.section.is_deny())
                {
                    specs.push(spec);
                }
            }
        }
        self.icmp_specs(input, route, item.icmps, &mut specs);
        // Kept for the whole compilation, one per rule item: not at the
        // capacity of four that the first push gives (25 MiB for 65,535
        // one-port rules).
        specs.shrink_to_fit();
        specs
    }

    pub(super) fn icmp_specs(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        icmps: Option<&Vec<IcmpRule>>,
        specs: &mut Vec<PortSpec>,
    ) {
        for (i, rule) in icmps.iter().flat_map(|l| l.iter()).enumerate() {
            for (j, field) in rule.fields.iter().flat_map(|l| l.iter()).enumerate() {
                let ipv6 = field.family == Some(IcmpFamily::IPv6);
                let text = match &field.icmp_type {
                    IntOrString::Int(n) => n.to_string(),
                    IntOrString::String(s) => s.clone(),
                };
                match icmp_type(&text, ipv6) {
                    Some(0) => {
                        let r = format!("{route}.icmps[{i}].fields[{j}].type");
                        let index = self.diag(
                            input,
                            codes::CILIUM_QUIRK,
                            &r,
                            format!(
                                "ICMP type 0 ({}) becomes port \"0\" in Cilium 1.19, which means every {} type; porin mirrors this",
                                if ipv6 { "0" } else { "EchoReply" },
                                if ipv6 { "ICMPv6" } else { "ICMP" }
                            ),
                        );
                        if let Some(d) = self.out.diagnostics.get_mut(index) {
                            d.notes.push("pkg/policy/api/icmp.go ICMPField.PortProtocol; cilium/cilium#41304, fixed after 1.19 by PR #44338".to_owned());
                        }
                        specs.push(PortSpec {
                            port: PortRef::Number(0),
                            end_port: 0,
                            proto: if ipv6 { proto::ICMPV6 } else { proto::ICMP },
                            l7: L7::none(),
                        });
                    }
                    Some(code) => specs.push(PortSpec {
                        port: PortRef::Number(u16::from(code)),
                        end_port: 0,
                        proto: if ipv6 { proto::ICMPV6 } else { proto::ICMP },
                        l7: L7::none(),
                    }),
                    None => {
                        let r = format!("{route}.icmps[{i}].fields[{j}].type");
                        self.diag(
                            input,
                            codes::INVALID_PORT,
                            &r,
                            format!("ICMP type `{text}` is not known; the field is ignored"),
                        );
                    }
                }
            }
        }
    }

    pub(super) fn port_spec(
        &mut self,
        input: &PolicyInput<'_>,
        route: &str,
        pp: &PortProtocol,
        l7: L7,
        deny: bool,
    ) -> Option<PortSpec> {
        let proto = match pp.protocol {
            None | Some(L4Proto::Any) => proto::ANY,
            Some(L4Proto::Tcp) => proto::TCP,
            Some(L4Proto::Udp) => proto::UDP,
            Some(L4Proto::Sctp) => proto::SCTP,
            Some(L4Proto::Vrrp) => proto::VRRP,
            Some(L4Proto::Igmp) => proto::IGMP,
        };
        let text = pp.port.clone().unwrap_or_default();
        if text.trim().is_empty()
            && matches!(proto, proto::VRRP | proto::IGMP)
            && !self.inventory.settings.enable_extended_ip_protocols
        {
            // PortProtocol.Validate (pkg/policy/api/rule_validation.go):
            // an empty port is valid only with enable-extended-ip-protocols.
            // No entry: Cilium refuses the rule, and without the setting its
            // datapath drops these protocols before policy anyway.
            let name = proto::name(proto);
            let index = self.diag(
                input,
                codes::PORT_NEEDS_EXTENDED_PROTOCOLS,
                route,
                format!(
                    "port must be specified unless the \"enable-extended-ip-protocols\" flag is set: this {name} port is ignored (no entry), and without the setting {name} packets are dropped before policy"
                ),
            );
            if let Some(d) = self.out.diagnostics.get_mut(index) {
                d.notes.push("set `enable-extended-ip-protocols: true` under `settings:` of the inventory, PolicyTest file or .porin.yaml when the cluster's agents run with it (Cilium's default is false)".to_owned());
            }
            return None;
        }
        let port = if text.trim().is_empty() {
            // A port without a number: port 0, every packet of the protocol
            // (L4Filter Port 0, pkg/policy/l4.go createL4Filter; Cilium's
            // TestIPProtocolsWithNoTransportPorts expects `0/vrrp`).
            PortRef::Number(0)
        } else if let Some(n) = parse_port_number(&text) {
            PortRef::Number(n)
        } else if text.chars().all(|c| c.is_ascii_digit()) {
            self.diag(
                input,
                codes::INVALID_PORT,
                route,
                format!("port `{text}` is out of range; the port is ignored"),
            );
            return None;
        } else {
            PortRef::Named(text.to_ascii_lowercase())
        };
        let mut end_port = pp
            .end_port
            .map(|e| u16::try_from(e.clamp(0, 65_535)).unwrap_or(u16::MAX))
            .unwrap_or(0);
        if port == PortRef::Number(0) && end_port != 0 && end_port != u16::MAX {
            // policymap.go NewKeyFromPolicyKey adds port prefix bits only
            // when DestPort != 0, so the masked port 0/n of such a range is
            // an all-ports key in the datapath. Failing closed means the
            // narrow range for an allow, but every port for a deny (keeping
            // the range would allow what Cilium denies).
            let consequence = if deny {
                "porin denies every port of the protocol, like Cilium's datapath"
            } else {
                "porin keeps the range (fail closed)"
            };
            self.diag(
                input,
                codes::PORT_ZERO_RANGE,
                route,
                format!(
                    "port \"0\" with endPort {end_port}: Cilium writes this as an all-ports key in the datapath (semantics.md §4.5); {consequence}"
                ),
            );
            if deny {
                end_port = 0;
            }
        }
        Some(PortSpec {
            port,
            end_port,
            proto,
            l7,
        })
    }
}
