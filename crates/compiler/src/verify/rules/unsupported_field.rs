//! PR016 `unsupported-field`: fields the configured Cilium version does not
//! support. Only fields whose introduction is recorded in semantics.md are
//! listed (porin models Cilium 1.19; older versions are a lint setting).

use porin_model::diagnostic::{Diagnostic, Location, Severity};
use serde_json::Value;

use crate::verify::{Context, codes};

/// (JSON field, first Cilium version supporting it, note).
pub const FIELD_VERSIONS: &[(&str, (u32, u32), &str)] = &[
    (
        "endPort",
        (1, 16),
        "port ranges (cilium/cilium PR #32807); older agents ignore endPort silently (cilium/cilium#28684)",
    ),
    (
        "enableDefaultDeny",
        (1, 15),
        "per-policy default-deny opt-out (cilium/cilium PR #30572); older API servers reject the unknown field",
    ),
    (
        "authentication",
        (1, 14),
        "mutual authentication (beta in Cilium 1.14); older API servers reject the unknown field",
    ),
];

fn walk(
    value: &Value,
    route: &str,
    found: &mut Vec<(String, &'static str, (u32, u32), &'static str)>,
) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let child_route = if route.is_empty() {
                    key.clone()
                } else {
                    format!("{route}.{key}")
                };
                if let Some((field, version, note)) =
                    FIELD_VERSIONS.iter().find(|(f, _, _)| f == key)
                {
                    found.push((child_route.clone(), field, *version, note));
                }
                walk(child, &child_route, found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{route}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// Reports fields newer than `ciliumVersion`.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let wanted = cx.config.cilium_version;
    for input in cx.inputs {
        let Ok(json) = serde_json::to_value(input.policy) else {
            continue;
        };
        let mut found = Vec::new();
        if let Some(spec) = json.get("spec") {
            walk(spec, "spec", &mut found);
        }
        if let Some(specs) = json.get("specs") {
            walk(specs, "specs", &mut found);
        }
        for (route, field, version, note) in found {
            if version <= wanted {
                continue;
            }
            let (line, column) = input.locate(&route);
            out.push(
                Diagnostic::new(
                    codes::UNSUPPORTED_FIELD,
                    Severity::Warning,
                    format!(
                        "`{field}` needs Cilium {}.{}; the configured version is {}.{}",
                        version.0, version.1, wanted.0, wanted.1
                    ),
                )
                .at(Location {
                    file: input.file.to_owned(),
                    document: input.document,
                    line,
                    column,
                    route,
                })
                .note(note)
                .help("upgrade Cilium, or express the rule with supported fields"),
            );
        }
    }
}
