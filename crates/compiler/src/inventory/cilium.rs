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
//! went through the agent's label filter).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Endpoint, Inventory, NamedPort, SourceLocation, container_port_proto};
use crate::error::InventoryError;
use crate::labels::{Label, LabelSet, POD_NAMESPACE_LABEL, SOURCE_UNSPEC};

const FIRST_CLUSTER_IDENTITY: u64 = 256;
const LOCAL_SCOPE: u64 = 0x0100_0000;

fn invalid(file: &str, message: String) -> InventoryError {
    InventoryError::Invalid {
        file: file.to_owned(),
        line: 0,
        message,
    }
}

fn label_set(file: &str, what: &str, value: Option<&Value>) -> Result<LabelSet, InventoryError> {
    let Some(Value::Array(items)) = value else {
        return Err(invalid(file, format!("{what}: `labels` is not a list")));
    };
    let mut set = LabelSet::new();
    for item in items {
        let text = item
            .as_str()
            .ok_or_else(|| invalid(file, format!("{what}: a label is not a string")))?;
        set.insert(Label::parse(text, SOURCE_UNSPEC));
    }
    Ok(set)
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
            return Err(invalid(
                file,
                "expected a JSON list of identities or endpoints".into(),
            ));
        }
    };
    for item in &items {
        if item.get("status").is_some() {
            add_endpoint(inventory, file, item)?;
        } else {
            add_identity(inventory, file, item)?;
        }
    }
    Ok(())
}

fn add_identity(inventory: &mut Inventory, file: &str, item: &Value) -> Result<(), InventoryError> {
    let id = item
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| invalid(file, "identity without a numeric `id`".into()))?;
    if !(FIRST_CLUSTER_IDENTITY..LOCAL_SCOPE).contains(&id) {
        // Reserved, well-known and local (CIDR) identities are porin's own.
        return Ok(());
    }
    let what = format!("identity {id}");
    let labels = label_set(file, &what, item.get("labels"))?;
    let namespace = labels.get(POD_NAMESPACE_LABEL).map(|l| l.value.clone());
    inventory.endpoints.push(Endpoint {
        name: format!("identity-{id}"),
        namespace,
        labels: BTreeMap::new(),
        ips: Vec::new(),
        service_account: None,
        ports: Vec::new(),
        identity: u32::try_from(id).ok(),
        identity_labels: Some(labels),
        location: SourceLocation {
            file: file.to_owned(),
            line: 0,
        },
    });
    Ok(())
}

fn add_endpoint(inventory: &mut Inventory, file: &str, item: &Value) -> Result<(), InventoryError> {
    let status = item.get("status");
    let endpoint_id = item.get("id").and_then(Value::as_u64).unwrap_or(0);
    let what = format!("endpoint {endpoint_id}");
    let identity = status.and_then(|s| s.get("identity"));
    let id = identity
        .and_then(|i| i.get("id"))
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| invalid(file, format!("{what}: no status.identity.id")))?;
    let labels = label_set(file, &what, identity.and_then(|i| i.get("labels")))?;
    let external = status.and_then(|s| s.get("external-identifiers"));
    let text = |v: Option<&Value>, key: &str| {
        v.and_then(|v| v.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let namespace = text(external, "k8s-namespace")
        .or_else(|| labels.get(POD_NAMESPACE_LABEL).map(|l| l.value.clone()));
    let name = text(external, "k8s-pod-name").unwrap_or_else(|| format!("endpoint-{endpoint_id}"));
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
        location: SourceLocation {
            file: file.to_owned(),
            line: 0,
        },
    });
    Ok(())
}
