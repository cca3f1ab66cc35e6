//! A cluster's own view as an inventory: Cilium agent dumps.
//!
//! - `cilium-dbg identity list -o json`: `[{"id": N, "labels": ["k8s:a=b", ...]}]`.
//!   Each cluster identity (256 and up, not local scope) becomes one endpoint
//!   named `identity-N`, in the namespace its `io.kubernetes.pod.namespace`
//!   label names (none otherwise), without addresses of its own.
//! - `cilium-dbg endpoint list -o json`: endpoints with
//!   `status.identity.{id,labels}`, `status.networking.addressing[].{ipv4,ipv6}`,
//!   `status.external-identifiers.{k8s-namespace,k8s-pod-name}` and
//!   `status.named-ports[]`.
//!
//! In both, identity numbers and labels are taken as given (they already
//! went through the agent's label filter), once checked: a number must be
//! one an endpoint can hold ([`check_given_identity`]). The agent's own
//! endpoints are kept as porin's reserved endpoints: the host endpoint
//! (identity 1, `reserved:host`, named `host-<endpoint id>`), cilium-health
//! (4, `health-<id>`), endpoints still without labels (5, `init-<id>`) and
//! the Ingress endpoint (8, `ingress-<id>`). Errors name the file, the line
//! of the list item and the field.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Endpoint, Inventory, NamedPort, SourceLocation, container_port_proto};
use crate::allocation::check_given_identity;
use crate::error::InventoryError;
use crate::identity::Identity;
use crate::labels::{Label, LabelSet, POD_NAMESPACE_LABEL, SOURCE_UNSPEC};

const FIRST_CLUSTER_IDENTITY: u64 = 256;
const LOCAL_SCOPE: u64 = 0x0100_0000;

/// Where a dump item is: its file, the line it starts on and its index.
#[derive(Clone, Copy)]
struct Item<'a> {
    file: &'a str,
    line: u32,
    index: usize,
}

impl Item<'_> {
    /// An error about `field` of this item (`[3].status.identity.id: ...`).
    fn invalid(&self, field: &str, message: String) -> InventoryError {
        InventoryError::Invalid {
            file: self.file.to_owned(),
            line: self.line,
            message: format!("[{}].{field}: {message}", self.index),
        }
    }

    fn location(&self) -> SourceLocation {
        SourceLocation {
            file: self.file.to_owned(),
            line: self.line,
        }
    }
}

fn label_set(
    item: Item<'_>,
    field: &str,
    value: Option<&Value>,
) -> Result<LabelSet, InventoryError> {
    let Some(Value::Array(items)) = value else {
        return Err(item.invalid(field, "not a list of labels".into()));
    };
    let mut set = LabelSet::new();
    for label in items {
        let text = label
            .as_str()
            .ok_or_else(|| item.invalid(field, "a label is not a string".into()))?;
        set.insert(Label::parse(text, SOURCE_UNSPEC));
    }
    Ok(set)
}

/// The 1-based line each element of a top-level JSON array starts on (one
/// line for a single object). The text is valid JSON (serde_json parsed it
/// first), so counting brackets outside strings finds the elements.
fn item_lines(text: &str) -> Vec<u32> {
    let mut lines = Vec::new();
    let mut line: u32 = 1;
    let mut depth: u32 = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut expect_item = false;
    for c in text.chars() {
        if c == '\n' {
            line = line.saturating_add(1);
        }
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        if c.is_whitespace() {
            continue;
        }
        if depth == 0 && c == '{' {
            lines.push(line);
        }
        if expect_item && c != ']' {
            lines.push(line);
        }
        expect_item = false;
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth = depth.saturating_add(1);
                expect_item = depth == 1 && c == '[';
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            ',' => expect_item = depth == 1,
            _ => {}
        }
    }
    lines
}

/// Adds a JSON dump (identity list or endpoint list).
pub fn add_dump(inventory: &mut Inventory, file: &str, text: &str) -> Result<(), InventoryError> {
    let value: Value = serde_json::from_str(text).map_err(|e| InventoryError::Syntax {
        file: file.to_owned(),
        line: u32::try_from(e.line()).unwrap_or(u32::MAX),
        column: u32::try_from(e.column()).unwrap_or(u32::MAX),
        message: e.to_string(),
    })?;
    let items = match value {
        Value::Array(items) => items,
        single @ Value::Object(_) => vec![single],
        _ => {
            return Err(InventoryError::Invalid {
                file: file.to_owned(),
                line: 1,
                message: "expected a JSON list of identities or endpoints".into(),
            });
        }
    };
    let lines = item_lines(text);
    for (index, value) in items.iter().enumerate() {
        let item = Item {
            file,
            line: lines.get(index).copied().unwrap_or(0),
            index,
        };
        if value.get("status").is_some() {
            add_endpoint(inventory, item, value)?;
        } else {
            add_identity(inventory, item, value)?;
        }
    }
    Ok(())
}

fn add_identity(
    inventory: &mut Inventory,
    item: Item<'_>,
    value: &Value,
) -> Result<(), InventoryError> {
    let id = value
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| item.invalid("id", "identity without a numeric `id`".into()))?;
    if !(FIRST_CLUSTER_IDENTITY..LOCAL_SCOPE).contains(&id) {
        // Reserved, well-known and local (CIDR) identities are porin's own.
        return Ok(());
    }
    let labels = label_set(item, "labels", value.get("labels"))?;
    let id = u32::try_from(id).map_err(|e| item.invalid("id", e.to_string()))?;
    check_given_identity(id, &labels).map_err(|m| item.invalid("id", m.to_string()))?;
    let namespace = labels.get(POD_NAMESPACE_LABEL).map(|l| l.value.to_string());
    inventory.endpoints.push(Endpoint {
        name: format!("identity-{id}"),
        namespace,
        labels: BTreeMap::new(),
        ips: Vec::new(),
        service_account: None,
        ports: Vec::new(),
        identity: Some(id),
        identity_labels: Some(labels),
        location: item.location(),
    });
    Ok(())
}

fn add_endpoint(
    inventory: &mut Inventory,
    item: Item<'_>,
    value: &Value,
) -> Result<(), InventoryError> {
    let status = value.get("status");
    let endpoint_id = value.get("id").and_then(Value::as_u64).unwrap_or(0);
    let identity = status.and_then(|s| s.get("identity"));
    let id = identity
        .and_then(|i| i.get("id"))
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            item.invalid(
                "status.identity.id",
                format!("endpoint {endpoint_id} has no numeric identity"),
            )
        })?;
    let id = u32::try_from(id).map_err(|e| item.invalid("status.identity.id", e.to_string()))?;
    let labels = label_set(
        item,
        "status.identity.labels",
        identity.and_then(|i| i.get("labels")),
    )?;
    check_given_identity(id, &labels).map_err(|m| {
        item.invalid(
            "status.identity.id",
            format!("endpoint {endpoint_id}: identity {m}"),
        )
    })?;
    let external = status.and_then(|s| s.get("external-identifiers"));
    let text = |v: Option<&Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let namespace = text(external, "k8s-namespace")
        .or_else(|| labels.get(POD_NAMESPACE_LABEL).map(|l| l.value.to_string()));
    if namespace.is_some() && Identity::new(id).is_ok_and(Identity::is_reserved) {
        return Err(item.invalid(
            "status.identity.id",
            format!("endpoint {endpoint_id}: reserved identity {id} is the agent's own endpoint's, not a pod's"),
        ));
    }
    // The agent's own endpoints have no pod: they are named after their
    // reserved identity (`health-1781`), which check_given_identity tied to
    // their reserved label.
    let reserved = Identity::new(id)
        .ok()
        .and_then(Identity::reserved_name)
        .unwrap_or("endpoint");
    let name =
        text(external, "k8s-pod-name").unwrap_or_else(|| format!("{reserved}-{endpoint_id}"));
    let mut ips = Vec::new();
    if let Some(Value::Array(addressing)) = status
        .and_then(|s| s.get("networking"))
        .and_then(|n| n.get("addressing"))
    {
        for pair in addressing {
            for family in ["ipv4", "ipv6"] {
                if let Some(ip) = text(Some(pair), family).and_then(|t| t.parse().ok()) {
                    ips.push(ip);
                }
            }
        }
    }
    let mut ports = Vec::new();
    if let Some(Value::Array(named)) = status.and_then(|s| s.get("named-ports")) {
        for port in named {
            let (Some(port_name), Some(number)) = (
                text(Some(port), "name"),
                port.get("port")
                    .and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok()),
            ) else {
                continue;
            };
            if let Some(proto) = container_port_proto(port.get("protocol").and_then(Value::as_str))
            {
                ports.push(NamedPort {
                    name: port_name.to_ascii_lowercase(),
                    port: number,
                    proto,
                });
            }
        }
    }
    inventory.endpoints.push(Endpoint {
        name,
        namespace,
        labels: BTreeMap::new(),
        ips,
        service_account: None,
        ports,
        identity: Some(id),
        identity_labels: Some(labels),
        location: item.location(),
    });
    Ok(())
}
