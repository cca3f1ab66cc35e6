//! The policy model's fields, read from its JSON Schema
//! ([`porin_model::schema::policy_schema`]): the same descriptions (the
//! model's doc comments, through schemars) that `schema/policy.schema.json`
//! gives yaml-language-server, so hover and completion cannot drift from it.

use serde_json::Value;

use crate::yamlpath::Segment;

/// The schema, and lookups along a YAML path.
pub struct Fields {
    root: &'static Value,
}

/// Generated once per process: it is the same for every server (and the
/// fuzz target starts a server per input).
static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();

/// A field as hover and completion show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// Its documentation (the field's own, then its type's).
    pub doc: String,
    /// A short type, e.g. `string`, `array of PortRule`.
    pub type_name: String,
}

/// An allowed value of an enumeration (or a boolean).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumValue {
    /// The value as written in YAML.
    pub value: String,
    /// What it means, where the model says.
    pub doc: Option<String>,
}

/// Chasing `$ref`s stops after this many hops (the schema has no cycles
/// of bare references, but a lookup must terminate whatever it reads).
const MAX_HOPS: usize = 32;

impl Default for Fields {
    fn default() -> Self {
        Fields {
            root: SCHEMA.get_or_init(porin_model::schema::policy_schema),
        }
    }
}

impl Fields {
    /// Follows `$ref`, single-branch `allOf` and `anyOf [X, null]` to the
    /// schema that describes the value.
    fn resolve<'a>(&'a self, mut node: &'a Value) -> &'a Value {
        for _ in 0..MAX_HOPS {
            if let Some(target) = node.get("$ref").and_then(Value::as_str) {
                match target
                    .strip_prefix("#/definitions/")
                    .and_then(|name| self.root.get("definitions")?.get(name))
                {
                    Some(next) => node = next,
                    None => return node,
                }
                continue;
            }
            let branches = node
                .get("allOf")
                .or_else(|| node.get("anyOf"))
                .and_then(Value::as_array);
            let mut real = branches
                .into_iter()
                .flatten()
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"));
            match (real.next(), real.next()) {
                (Some(only), None) => node = only,
                _ => return node,
            }
        }
        node
    }

    /// The root branches (one per kind), or the one whose `kind` is `kind`.
    fn roots(&self, kind: Option<&str>) -> Vec<&Value> {
        let branches: Vec<&Value> = self
            .root
            .get("oneOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|b| self.resolve(b))
            .collect();
        let chosen: Vec<&Value> = branches
            .iter()
            .copied()
            .filter(|b| {
                kind.is_some_and(|kind| {
                    b.pointer("/properties/kind/const").and_then(Value::as_str) == Some(kind)
                })
            })
            .collect();
        if chosen.is_empty() { branches } else { chosen }
    }

    /// The schemas of the value at `path` (several while the kind is unknown),
    /// each with the (unresolved) property schema that led there, for its
    /// field-level description.
    fn at<'a>(
        &'a self,
        kind: Option<&str>,
        path: &[Segment],
    ) -> Vec<(Option<&'a Value>, &'a Value)> {
        let mut nodes: Vec<(Option<&Value>, &Value)> =
            self.roots(kind).into_iter().map(|n| (None, n)).collect();
        for segment in path {
            nodes = nodes
                .into_iter()
                .filter_map(|(_, node)| {
                    let next = match segment {
                        Segment::Key(key) => node
                            .get("properties")
                            .and_then(|p| p.get(key.as_str()))
                            .or_else(|| {
                                node.get("additionalProperties").filter(|a| a.is_object())
                            })?,
                        Segment::Item => node.get("items")?,
                    };
                    Some((Some(next), self.resolve(next)))
                })
                .collect();
        }
        nodes
    }

    /// The fields of the mapping at `path`, sorted, without duplicates.
    pub fn fields(&self, kind: Option<&str>, path: &[Segment]) -> Vec<Field> {
        let mut out: Vec<Field> = Vec::new();
        for (_, node) in self.at(kind, path) {
            let Some(properties) = node.get("properties").and_then(Value::as_object) else {
                continue;
            };
            for (name, property) in properties {
                if !out.iter().any(|f| &f.name == name)
                    && !porin_model::yaml::de::HIDDEN_FIELDS.contains(&name.as_str())
                {
                    out.push(self.describe(name, Some(property), self.resolve(property)));
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The field at `path` (its last segment names it).
    pub fn field(&self, kind: Option<&str>, path: &[Segment]) -> Option<Field> {
        let name = match path.last()? {
            Segment::Key(key) => key.clone(),
            Segment::Item => "item".to_owned(),
        };
        let (property, node) = self.at(kind, path).into_iter().next()?;
        Some(self.describe(&name, property, node))
    }

    /// The values allowed at `path`: enumerations and booleans.
    pub fn values(&self, kind: Option<&str>, path: &[Segment]) -> Vec<EnumValue> {
        let mut out: Vec<EnumValue> = Vec::new();
        for (_, node) in self.at(kind, path) {
            for value in self.enum_values(node) {
                if !out.iter().any(|v| v.value == value.value) {
                    out.push(value);
                }
            }
        }
        out
    }

    fn enum_values(&self, node: &Value) -> Vec<EnumValue> {
        let scalar = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        if let Some(value) = node.get("const").and_then(scalar) {
            let doc = node
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned);
            return vec![EnumValue { value, doc }];
        }
        if let Some(values) = node.get("enum").and_then(Value::as_array) {
            return values
                .iter()
                .filter_map(scalar)
                .map(|value| EnumValue { value, doc: None })
                .collect();
        }
        if let Some(branches) = node.get("oneOf").and_then(Value::as_array) {
            return branches
                .iter()
                .flat_map(|b| self.enum_values(self.resolve(b)))
                .collect();
        }
        if types(node).contains(&"boolean") {
            return ["true", "false"]
                .into_iter()
                .map(|v| EnumValue {
                    value: v.to_owned(),
                    doc: None,
                })
                .collect();
        }
        Vec::new()
    }

    fn describe(&self, name: &str, property: Option<&Value>, node: &Value) -> Field {
        let own = property
            .and_then(|p| p.get("description"))
            .and_then(Value::as_str);
        let of_type = node.get("description").and_then(Value::as_str);
        let doc = match (own, of_type) {
            (Some(a), Some(b)) if a != b => format!("{a}\n\n{b}"),
            (Some(a), _) => a.to_owned(),
            (None, Some(b)) => b.to_owned(),
            (None, None) => String::new(),
        };
        Field {
            name: name.to_owned(),
            doc,
            type_name: self.type_name(property.unwrap_or(node), 0),
        }
    }

    /// `string`, `integer`, `array of PortRule`, `PortRule` (a definition's
    /// name), `map of string`.
    fn type_name(&self, node: &Value, depth: usize) -> String {
        if depth > 4 {
            return "value".to_owned();
        }
        if let Some(target) = node.get("$ref").and_then(Value::as_str) {
            return target.rsplit('/').next().unwrap_or("value").to_owned();
        }
        for key in ["allOf", "anyOf"] {
            if let Some(branches) = node.get(key).and_then(Value::as_array) {
                let names: Vec<String> = branches
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                    .map(|b| self.type_name(b, depth + 1))
                    .collect();
                if !names.is_empty() {
                    return names.join(" or ");
                }
            }
        }
        let kinds = types(node);
        if kinds.contains(&"array") {
            let item = node
                .get("items")
                .map_or_else(|| "value".to_owned(), |i| self.type_name(i, depth + 1));
            return format!("array of {item}");
        }
        if kinds.contains(&"object") {
            if let Some(values) = node.get("additionalProperties").filter(|a| a.is_object()) {
                return format!("map of {}", self.type_name(values, depth + 1));
            }
            return "object".to_owned();
        }
        kinds
            .into_iter()
            .find(|k| *k != "null")
            .map_or_else(|| "value".to_owned(), str::to_owned)
    }
}

/// The `type` of a schema node as a list (`"string"` or `["string", "null"]`).
fn types(node: &Value) -> Vec<&str> {
    match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(keys: &[&str]) -> Vec<Segment> {
        keys.iter()
            .map(|k| {
                if *k == "-" {
                    Segment::Item
                } else {
                    Segment::Key((*k).to_owned())
                }
            })
            .collect()
    }

    #[test]
    fn fields_and_values_follow_the_model() {
        let fields = Fields::default();
        let names: Vec<String> = fields
            .fields(
                Some("CiliumNetworkPolicy"),
                &path(&["spec", "ingress", "-"]),
            )
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert!(names.contains(&"fromEndpoints".to_owned()), "{names:?}");
        assert!(names.contains(&"toPorts".to_owned()));
        assert!(!names.contains(&"auth".to_owned()));
        let protocols: Vec<String> = fields
            .values(
                None,
                &path(&[
                    "spec", "ingress", "-", "toPorts", "-", "ports", "-", "protocol",
                ]),
            )
            .into_iter()
            .map(|v| v.value)
            .collect();
        assert_eq!(protocols, ["TCP", "UDP", "SCTP", "VRRP", "IGMP", "ANY"]);
        let port = fields
            .field(
                None,
                &path(&["spec", "ingress", "-", "toPorts", "-", "ports", "-", "port"]),
            )
            .unwrap();
        assert!(
            port.doc.contains("unquoted YAML integer is\nrejected"),
            "{}",
            port.doc
        );
        let kinds: Vec<String> = fields
            .values(None, &path(&["kind"]))
            .into_iter()
            .map(|v| v.value)
            .collect();
        assert_eq!(
            kinds,
            [
                "CiliumNetworkPolicy",
                "CiliumClusterwideNetworkPolicy",
                "NetworkPolicy",
                "ClusterNetworkPolicy"
            ]
        );
        // NetworkPolicy has podSelector, a CNP does not.
        assert!(
            fields
                .fields(Some("NetworkPolicy"), &path(&["spec"]))
                .iter()
                .any(|f| f.name == "podSelector")
        );
        assert!(
            !fields
                .fields(Some("CiliumNetworkPolicy"), &path(&["spec"]))
                .iter()
                .any(|f| f.name == "podSelector")
        );
        // Labels are free-form: any key, typed by additionalProperties.
        let label = fields.field(
            None,
            &path(&["spec", "endpointSelector", "matchLabels", "app"]),
        );
        assert_eq!(label.map(|f| f.type_name), Some("string".to_owned()));
    }
}
