//! A deterministic synthetic cluster, for benchmarks ("compile 1,000
//! policies over 10,000 endpoints") and scale tests.
//!
//! Shape: `endpoints / 100` namespaces (at least 1); in each, apps
//! `app-0..app-9` with equal numbers of replicas, so endpoints of one app
//! share labels and therefore identity (as real Deployments do). Policies
//! are CNPs spread round-robin over namespaces and apps, mixing the kinds
//! of rule that cost work: endpoint peers, port ranges, CIDR peers with
//! excepts, entities, deny rules and an HTTP redirect.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};

use super::{Compiled, compile};
use crate::error::CompileError;
use crate::inventory::{Endpoint, Inventory, NamedPort, SourceLocation};
use crate::resolve::lower::PolicyInput;

/// Apps per namespace.
const APPS: usize = 10;

/// A generated cluster: policy YAML and an inventory.
#[derive(Debug, Clone)]
pub struct SyntheticCluster {
    /// All policies, as one multi-document YAML text.
    pub policy_yaml: String,
    /// The inventory (finished).
    pub inventory: Inventory,
}

impl SyntheticCluster {
    /// Loads the policies (they are valid by construction; load findings
    /// are returned with the outcome).
    pub fn load(&self) -> LoadOutcome {
        let limits = LoadLimits {
            max_file_bytes: u64::MAX,
            max_nodes: usize::MAX,
            max_documents: usize::MAX,
            ..LoadLimits::default()
        };
        load_str("synthetic.yaml", &self.policy_yaml, &limits)
    }

    /// Loads and compiles.
    pub fn compile(&self) -> Result<Compiled, CompileError> {
        let outcome = self.load();
        let inputs = PolicyInput::from_outcome(&outcome);
        compile(&inputs, &self.inventory)
    }
}

/// An endpoint without addresses, service account or named ports.
fn endpoint(name: String, namespace: String, labels: BTreeMap<String, String>) -> Endpoint {
    Endpoint {
        name,
        namespace: Some(namespace),
        labels,
        ips: Vec::new(),
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: SourceLocation::default(),
    }
}

/// Generates a cluster with `policies` CNPs over `endpoints` endpoints.
pub fn cluster(policies: usize, endpoints: usize) -> SyntheticCluster {
    let namespaces = (endpoints / 100).max(1);
    let mut inventory = Inventory::new();
    for n in 0..namespaces {
        let mut labels = BTreeMap::new();
        labels.insert("team".to_owned(), format!("team-{}", n % 7));
        inventory.namespaces.insert(format!("ns-{n}"), labels);
    }
    for e in 0..endpoints {
        let namespace = e % namespaces;
        let app = (e / namespaces) % APPS;
        let mut labels = BTreeMap::new();
        labels.insert("app".to_owned(), format!("app-{app}"));
        labels.insert(
            "tier".to_owned(),
            if app < 5 { "front" } else { "back" }.to_owned(),
        );
        let mut endpoint = endpoint(format!("pod-{e}"), format!("ns-{namespace}"), labels);
        endpoint.service_account = Some(format!("sa-{app}"));
        endpoint.ports = vec![NamedPort {
            name: "http".to_owned(),
            port: 8080,
            proto: 6,
        }];
        inventory.endpoints.push(endpoint);
    }
    // Generated data is consistent (unique names, no given addresses).
    let _ = inventory.finish();

    let mut yaml = String::new();
    for p in 0..policies {
        let namespace = p % namespaces;
        let app = (p / namespaces) % APPS;
        let peer = (app + 1) % APPS;
        let port = 8000 + (p % 50);
        let _ = writeln!(yaml, "---");
        let _ = writeln!(yaml, "apiVersion: cilium.io/v2");
        let _ = writeln!(yaml, "kind: CiliumNetworkPolicy");
        let _ = writeln!(
            yaml,
            "metadata:\n  name: policy-{p}\n  namespace: ns-{namespace}"
        );
        let _ = writeln!(yaml, "spec:");
        let _ = writeln!(
            yaml,
            "  endpointSelector:\n    matchLabels:\n      app: app-{app}"
        );
        let _ = writeln!(yaml, "  ingress:");
        let _ = writeln!(
            yaml,
            "  - fromEndpoints:\n    - matchLabels:\n        app: app-{peer}\n    toPorts:\n    - ports:\n      - port: \"{port}\"\n        protocol: TCP"
        );
        match p % 5 {
            0 => {
                let _ = writeln!(
                    yaml,
                    "  - fromCIDRSet:\n    - cidr: 10.{}.0.0/16\n      except:\n      - 10.{}.1.0/24\n    toPorts:\n    - ports:\n      - port: \"1024\"\n        endPort: 2047\n        protocol: TCP",
                    p % 200,
                    p % 200
                );
            }
            1 => {
                let _ = writeln!(
                    yaml,
                    "  - fromEndpoints:\n    - matchExpressions:\n      - key: tier\n        operator: In\n        values: [front]\n    toPorts:\n    - ports:\n      - port: \"http\"\n        protocol: TCP\n      rules:\n        http:\n        - method: GET\n          path: /api/.*"
                );
            }
            2 => {
                let _ = writeln!(
                    yaml,
                    "  - fromEntities:\n    - cluster\n    toPorts:\n    - ports:\n      - port: \"9090\"\n        protocol: ANY"
                );
            }
            _ => {}
        }
        if p % 3 == 0 {
            let _ = writeln!(
                yaml,
                "  ingressDeny:\n  - fromEndpoints:\n    - matchLabels:\n        app: app-{}\n    toPorts:\n    - ports:\n      - port: \"22\"\n        protocol: TCP",
                (app + 5) % APPS
            );
        }
        let _ = writeln!(
            yaml,
            "  egress:\n  - toEndpoints:\n    - matchLabels:\n        io.kubernetes.pod.namespace: kube-system\n        k8s-app: kube-dns\n    toPorts:\n    - ports:\n      - port: \"53\"\n        protocol: ANY\n  - toEndpoints:\n    - matchLabels:\n        app: app-{peer}\n    toPorts:\n    - ports:\n      - port: \"{port}\"\n        protocol: TCP"
        );
    }
    SyntheticCluster {
        policy_yaml: yaml,
        inventory,
    }
}

/// [`cluster`] with one more label (`pod: <name>`) on every other
/// endpoint: units then span several identities, several units share one
/// L4 policy and one map state, and some states are distilled once for
/// many units (what the parallel-equals-serial tests of the compiler and
/// lint need).
pub fn mixed_cluster(policies: usize, endpoints: usize) -> SyntheticCluster {
    let mut synthetic = cluster(policies, endpoints);
    for (i, endpoint) in synthetic.inventory.endpoints.iter_mut().enumerate() {
        if i % 2 == 0 {
            endpoint
                .labels
                .insert("pod".to_owned(), endpoint.name.clone());
        }
    }
    synthetic
}

/// Generates a cluster of `rules` CIDR rules over ten endpoints (apps
/// `app-0..app-9` in namespace `ns-0`, one endpoint each): policy `i`
/// selects `app-{i % 10}` and allows egress TCP/443 to one distinct
/// prefix. Every 256th rule names the /24 around the next 255 rules' /32s
/// (so CIDR selectors contain other CIDR identities); the others name one
/// /32 (`10.0.0.0 + i`). Every prefix is distinct, so the cluster has one
/// CIDR identity per rule (65,535 rules fit the default limit of 65,536
/// prefixes).
pub fn cidr_cluster(rules: usize) -> SyntheticCluster {
    let mut inventory = Inventory::new();
    inventory
        .namespaces
        .insert("ns-0".to_owned(), BTreeMap::new());
    for app in 0..APPS {
        let mut labels = BTreeMap::new();
        labels.insert("app".to_owned(), format!("app-{app}"));
        inventory
            .endpoints
            .push(endpoint(format!("pod-{app}"), "ns-0".to_owned(), labels));
    }
    // Generated data is consistent (unique names, no given addresses).
    let _ = inventory.finish();

    let mut yaml = String::new();
    for i in 0..rules {
        let address = std::net::Ipv4Addr::from(0x0a00_0000_u32.wrapping_add(i as u32));
        let prefix = if i % 256 == 0 {
            format!("{address}/24")
        } else {
            format!("{address}/32")
        };
        let _ = write!(
            yaml,
            "---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: cidr-{i}\n  namespace: ns-0\nspec:\n  endpointSelector:\n    matchLabels:\n      app: app-{}\n  egress:\n  - toCIDR:\n    - {prefix}\n    toPorts:\n    - ports:\n      - port: \"443\"\n        protocol: TCP\n",
            i % APPS
        );
    }
    SyntheticCluster {
        policy_yaml: yaml,
        inventory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_synthetic_cluster_compiles_without_errors() {
        let cluster = cluster(20, 200);
        let outcome = cluster.load();
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        assert_eq!(outcome.documents.len(), 20);
        let compiled = cluster.compile().unwrap();
        assert_eq!(compiled.endpoints.len(), 200);
        assert!(compiled.endpoints.iter().any(|e| e.enforcement.ingress));
        assert!(compiled.endpoints.iter().all(|e| !e.state.is_empty()));
    }

    #[test]
    fn cidr_cluster_has_one_cidr_identity_per_rule() {
        let cluster = cidr_cluster(600);
        let outcome = cluster.load();
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let compiled = cluster.compile().unwrap();
        let cidr_identities = compiled
            .identities
            .iter()
            .filter(|i| i.id >> 24 == 1)
            .count();
        assert_eq!(cidr_identities, 600);
        // app-0 has rule 0 (10.0.0.0/24, which contains the /32s of rules
        // 1..=255) and every tenth rule: its egress selects more than its
        // own 60 prefixes.
        let app0 = compiled.endpoint("ns-0/pod-0").unwrap();
        assert!(app0.enforcement.egress);
        assert!(app0.state.len() > 255, "{}", app0.state.len());
    }
}
