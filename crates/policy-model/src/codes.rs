//! The model stage's diagnostic codes (`PM0xx`), in the registry's one
//! shape ([`CodeInfo`]). Codes are stable: a code is never reused for
//! another condition; retired codes stay listed. `CODES.md` is generated
//! from [`ALL`].

use crate::registry::{self, CodeInfo};

crate::code_table! {
    stage: Model, needs_inventory: false;
    /// Not valid YAML, or not UTF-8.
    YAML_SYNTAX = "PM001", "yaml-syntax", Error, "The file is not valid YAML (or not UTF-8); nothing after the error is read.";
    /// A [`crate::LoadLimits`] bound was hit.
    LIMIT_EXCEEDED = "PM002", "limit-exceeded", Error, "The input exceeds a LoadLimits bound (size, depth, node count incl. alias expansion, documents).";
    /// Field the type does not have.
    UNKNOWN_FIELD = "PM003", "unknown-field", Error, "A field the resource does not define; the API server rejects unknown fields (strict field validation).";
    /// Wrong YAML type.
    WRONG_TYPE = "PM004", "wrong-type", Error, "A value has the wrong type, e.g. an unquoted integer where the CRD wants a string (`port: 8080`).";
    /// Required field missing.
    MISSING_FIELD = "PM005", "missing-field", Error, "A field the CRD/API marks required is missing.";
    /// Value outside an enum.
    INVALID_ENUM = "PM006", "invalid-enum-value", Error, "A value outside the CRD enumeration (protocol, entity, operator, family, ...).";
    /// Repeated mapping key.
    DUPLICATE_KEY = "PM007", "duplicate-key", Error, "The same key twice in one mapping; kubectl refuses it.";
    /// Document of another kind.
    SKIPPED_DOCUMENT = "PM008", "skipped-document", Info, "A document that is not a policy (e.g. a Deployment) is skipped.";
    /// Wrong apiVersion/kind/document shape.
    BAD_RESOURCE = "PM009", "bad-resource", Error, "A policy kind with an unsupported apiVersion, or a document/list that is not a mapping of the expected shape.";
    /// `metadata.name` missing.
    MISSING_NAME = "PM010", "missing-name", Error, "`metadata.name` is required (`CiliumNetworkPolicy must have name`, cnp_types.go).";
    /// Neither `spec` nor `specs`.
    EMPTY_POLICY = "PM011", "empty-policy", Error, "A CNP/CCNP has neither `spec` nor `specs` (`Invalid CiliumNetworkPolicy spec(s): empty policy`).";
    /// Rule without any direction list.
    NO_DIRECTION = "PM012", "rule-without-direction", Error, "`rule must have at least one of Ingress, IngressDeny, Egress, EgressDeny` (rule_validation.go).";
    /// Subject selector missing or doubled.
    SUBJECT_SELECTOR = "PM013", "subject-selector", Error, "A rule needs exactly one of endpointSelector/nodeSelector (rule_validation.go).";
    /// nodeSelector in a namespaced policy.
    NODE_SELECTOR_IN_CNP = "PM014", "node-selector-in-cnp", Error, "`rule cannot have NodeSelector` in a CiliumNetworkPolicy (cnp_types.go Parse).";
    /// Invalid label selector.
    LABEL_SELECTOR = "PM015", "invalid-label-selector", Error, "`invalid label selector`: k8s ValidateLabelSelector plus the CRD's matchLabels value pattern.";
    /// Mixed L3 kinds in one rule item.
    L3_MIXING = "PM016", "l3-mixing", Error, "`combining %s and %s is not supported yet`: one rule item may use one L3 peer kind (rule_validation.go).";
    /// Entity not accepted.
    ENTITY = "PM017", "unsupported-entity", Error, "`unsupported entity`: an entity outside the CRD enum (world-ipv4/world-ipv6 are Go-only).";
    /// Invalid CIDR.
    CIDR = "PM018", "invalid-cidr", Error, "A CIDR that does not parse, lacks a prefix length (CRD format: cidr), or has host bits set where Cilium rejects it.";
    /// CIDR rule shape or except.
    CIDR_RULE = "PM019", "invalid-cidr-rule", Error, "CIDRRule needs exactly one of cidr/cidrGroupRef/cidrGroupSelector, and every except a CIDR inside `cidr` (rule_validation.go); beside a CIDR group an except is a carve-out (pkg/policy/api/cidr.go).";
    /// FQDN selector.
    FQDN = "PM020", "invalid-fqdn-selector", Error, "matchName/matchPattern: exactly one, valid characters, at most 255 characters (fqdn.go, matchpattern.go).";
    /// Port value.
    PORT = "PM021", "invalid-port", Error, "A port must be a number 0-65535 or a valid port name (`unable to parse port`, `port must be specified`, `port must be empty or 0`); a VRRP/IGMP port without a number, valid only with enable-extended-ip-protocols, is left to the compile stage, which knows the setting (PC033).";
    /// Too many ports.
    TOO_MANY_PORTS = "PM022", "too-many-ports", Error, "`too many ports, the max is 40` (CRD maxItems 40, rule_validation.go).";
    /// Protocol value.
    PROTOCOL = "PM023", "invalid-protocol", Error, "`invalid protocol %q, must be { tcp | udp | sctp | vrrp | igmp | any }`; the CRD accepts upper case only.";
    /// endPort problems.
    END_PORT = "PM024", "invalid-end-port", Error, "endPort out of 0-65535, or (NetworkPolicy) endPort < port / endPort with a named port.";
    /// L7 rule constraints.
    L7 = "PM025", "invalid-l7-rules", Error, "L7 rules: one kind per port rule, TCP only (except DNS), not on port 0, l7 needs l7proto, no empty keys.";
    /// DNS rule constraints.
    DNS = "PM026", "invalid-dns-rules", Error, "DNS rules: egress only, ports required, no port ranges, matchName/matchPattern valid.";
    /// ICMP constraints.
    ICMP = "PM027", "invalid-icmp", Error, "ICMP: at most 40 fields, known type names, 0-255, family IPv4/IPv6, not together with toPorts.";
    /// SNI / TLS.
    SERVER_NAMES = "PM028", "invalid-server-names", Error, "serverNames: non-empty, valid pattern, not with L7 rules unless TLS is terminated.";
    /// Listener.
    LISTENER = "PM029", "invalid-listener", Error, "listener: not on ingress, not with L7 rules, names non-empty, priority 1-100.";
    /// HTTP rules.
    HTTP = "PM030", "invalid-http-rule", Error, "HTTP rules: regexes must compile, header matches need a name, secrets a name.";
    /// fromRequires / toRequires.
    REQUIRES_REMOVED = "PM031", "requires-removed", Error, "fromRequires/toRequires were removed in Cilium 1.19 (CRD maxItems: 0).";
    /// Host (nodeSelector) L7.
    HOST_L7 = "PM032", "host-policy-l7", Error, "Host policies (nodeSelector) reject L7 on ingress and HTTP/Kafka on egress (rule_validation.go).";
    /// reserved:init in CNP.
    RESERVED_INIT_CNP = "PM033", "reserved-init-in-cnp", Error, "`CiliumNetworkPolicy incorrectly matches reserved:init label`; use a CCNP (validator).";
    /// log value.
    LOG = "PM034", "invalid-log", Error, "log.value: at most 32 printable characters (CRD).";
    /// NetworkPolicy specifics.
    NETWORK_POLICY = "PM035", "invalid-network-policy", Error, "Kubernetes NetworkPolicy API validation: podSelector, peers, ipBlock, ports; a missing spec or podSelector, which Kubernetes reads as every pod, is a warning.";
    /// Node selector labels flag.
    NODES_FLAG = "PM037", "nodes-need-flag", Warning, "Retired (no longer reported): this stage warned that fromNodes/toNodes need enable-node-selector-labels=true without knowing the agent's settings, so a cluster with the setting on saw a false warning; the compile stage, which knows them, reports PC001 when the setting is off and compiles the peers when it is on.";
    /// Label / string patterns.
    PATTERN = "PM038", "invalid-string-format", Error, "A string outside the CRD's pattern or length (cidrGroupRef, label values, listener names, ...).";
    /// Obsolete field kept for compatibility.
    OBSOLETE_FIELD = "PM041", "obsolete-field", Warning, "A pre-1.14 field (`auth`) the 1.19 CRD does not define: the API server prunes it, so it has no effect — a warning.";
    /// Two documents name the same object.
    DUPLICATE_POLICY = "PM042", "duplicate-policy", Error, "Two documents with the same kind, namespace and name: a cluster keeps one object per name (a second apply replaces the first), so applying both over-allows; the later copy is an error.";
    /// A field the target Cilium version's CRD no longer defines.
    REMOVED_IN_VERSION = "PM050", "removed-in-version", Error, "A field the chosen Cilium version (`--cilium-version`, `ciliumVersion`) removed from its CRD (e.g. `kafka`, `l7proto`, `l7` in 1.20): the API server rejects the policy.";
    /// A kind the target enforces that porin does not model yet.
    KIND_NOT_MODELLED = "PM051", "kind-not-modelled", Error, "Retired (no longer reported): ClusterNetworkPolicy, the one kind it refused (Cilium 1.20 with --enable-k8s-cluster-network-policy), is compiled now; refusing a kind the target enforces but porin cannot check stays the rule for any future kind.";
    /// ClusterNetworkPolicy CRD constraints.
    CLUSTER_NETWORK_POLICY = "PM065", "invalid-cluster-network-policy", Error, "ClusterNetworkPolicy CRD validation (network-policy-api v1alpha2/v1beta1): priority 0-1000, exactly one field per subject/peer/protocol/port, 1-25 rules/peers/protocols/networks/domainNames, port ranges start < end, no named port with networks/nodes/domainNames; and what Cilium 1.20 refuses (domainNames outside Accept rules).";
    /// ClusterNetworkPolicy under a target that does not enforce it.
    CLUSTER_NETWORK_POLICY_NOT_ENFORCED = "PM066", "cluster-network-policy-not-enforced", Error, "A ClusterNetworkPolicy checked for a Cilium that does not enforce it (before 1.20, or without --enable-k8s-cluster-network-policy): the cluster would ignore every rule, Deny included, so porin refuses the set rather than report it; pass --cilium-version 1.20 --enable-k8s-cluster-network-policy (or `ciliumVersion: \"1.20\"` and `enableK8sClusterNetworkPolicy: true` in the inventory, PolicyTest file or .porin.yaml) if the cluster runs that.";
    /// An upgrade starts enforcing a ClusterNetworkPolicy.
    CLUSTER_NETWORK_POLICY_ENFORCED_BY_UPGRADE = "PM067", "cluster-network-policy-enforced-by-upgrade", Warning, "Upgrade check (`porin lint --upgrade-to`, and the old side of `porin diff --to-cilium-version`, which runs without it as the cluster does): a ClusterNetworkPolicy the current target ignores (before 1.20, or without --enable-k8s-cluster-network-policy) is enforced by the new one, so every rule of it, Deny included, starts to apply with the upgrade (row `cluster-network-policy` of porin's version table). Review its verdicts under the new target (`porin test`/`porin query --cilium-version 1.20 --enable-k8s-cluster-network-policy`).";
}

/// The model code with this code or name, case-insensitive.
pub fn lookup(code_or_name: &str) -> Option<&'static CodeInfo> {
    registry::lookup(ALL, code_or_name)
}
