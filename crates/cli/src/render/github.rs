//! GitHub Actions workflow commands: one `::error`/`::warning`/`::notice`
//! line per finding, so findings appear as annotations on the pull
//! request (<https://docs.github.com/actions/reference/workflow-commands-for-github-actions>).

use std::fmt::Write as _;

use porin_model::diagnostic::{Diagnostic, Severity};

/// Escapes a message (`%`, CR, LF).
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escapes a property value (also `:` and `,`).
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// Renders findings as workflow commands.
pub fn render(diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let command = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let mut properties = Vec::new();
        if let Some(location) = &d.primary {
            properties.push(format!("file={}", escape_property(&location.file)));
            if location.line > 0 {
                properties.push(format!("line={}", location.line));
                properties.push(format!("col={}", location.column.max(1)));
            }
        }
        properties.push(format!(
            "title={}",
            escape_property(&format!("porin {}", d.code))
        ));
        let mut message = d.message.clone();
        for (location, label) in &d.related {
            let _ = write!(message, "\n{label}: {}:{}", location.file, location.line);
        }
        for note in &d.notes {
            let _ = write!(message, "\nnote: {note}");
        }
        if let Some(help) = &d.help {
            let _ = write!(message, "\nhelp: {help}");
        }
        let _ = writeln!(
            out,
            "::{command} {}::{}",
            properties.join(","),
            escape_data(&message)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use porin_model::diagnostic::Location;

    use super::*;

    #[test]
    fn escapes_like_the_actions_toolkit() {
        let redundant = porin_lint::codes::lookup("PR005").copied().unwrap();
        let d = Diagnostic::new(redundant, "50% done\nnext").at(Location {
            file: "a,b:c.yaml".to_owned(),
            document: 0,
            line: 3,
            column: 5,
            route: String::new(),
        });
        assert_eq!(
            render(&[d]),
            "::warning file=a%2Cb%3Ac.yaml,line=3,col=5,title=porin PR005::50%25 done%0Anext\n"
        );
    }
}
