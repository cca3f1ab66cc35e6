//! The L7 side of a port rule.

use porin_model::model::PortRule;

use crate::resolve::rule::{L7, L7Parser};

/// The L7 side of a port rule (`createL4Filter` in `pkg/policy/l4.go`).
pub(super) fn l7_of(rule: &PortRule) -> L7 {
    let mut l7 = L7::none();
    if let Some(rules) = &rule.rules {
        if let Some(http) = &rules.http {
            l7.parser = L7Parser::Http;
            l7.rule_count = http.len();
        } else if let Some(kafka) = &rules.kafka {
            l7.parser = L7Parser::Kafka;
            l7.rule_count = kafka.len();
        } else if let Some(dns) = &rules.dns {
            l7.parser = L7Parser::Dns;
            l7.rule_count = dns.len();
        } else if let Some(name) = &rules.l7proto {
            l7.parser = L7Parser::Proxylib(name.clone());
            l7.rule_count = rules.l7.as_ref().map_or(0, Vec::len);
        }
    }
    if let Some(listener) = &rule.listener {
        l7.parser = L7Parser::Crd;
        l7.listener = Some(format!("{}/{}", listener.envoy_config.name, listener.name));
        l7.listener_priority = listener
            .priority
            .and_then(|p| u8::try_from(p.clamp(1, 126)).ok());
    }
    if l7.parser == L7Parser::None
        && (rule.terminating_tls.is_some()
            || rule.originating_tls.is_some()
            || rule.server_names.as_ref().is_some_and(|s| !s.is_empty()))
    {
        l7.parser = L7Parser::Tls;
    }
    l7
}
