//! Test-file errors in the format of `porin lint`'s diagnostics: a test
//! file that does not parse reads like a policy file that does not (code,
//! message, the location once, the source line and a caret).

/// A test file that does not parse, rendered as `porin lint` renders a
/// policy file that does not (`error[PM004]: ...`, ` --> file:line:column`,
/// the source line and a caret): the code of the condition (unknown field,
/// wrong type, missing field, invalid enum value, duplicate key; YAML
/// syntax otherwise), located once.
pub(crate) fn render_parse_error(file: &str, text: &str, error: &serde_saphyr::Error) -> String {
    render_inventory_error(
        file,
        text,
        porin_compiler::inventory::yaml::syntax_error(file, error),
    )
}

/// [`render_parse_error`] of an error reading the test file as an
/// inventory (its `endpoints`, `identities`, ...); other errors (another
/// file, a limit) as they are.
pub(crate) fn render_inventory_error(
    file: &str,
    text: &str,
    error: porin_compiler::error::InventoryError,
) -> String {
    use porin_compiler::error::InventoryError;
    use porin_model::codes;
    use porin_model::diagnostic::{Diagnostic, Location, SourceMap, render_human};

    let (line, column, message) = match error {
        InventoryError::Syntax {
            file: of,
            line,
            column,
            message,
        } if of == file => (line, column, message),
        other => return other.to_string(),
    };
    // serde-saphyr says `error: line 4 column 13: unclosed bracket '{'`;
    // the location is printed once, below.
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    let message = match message.split_once(": ") {
        Some((at, rest)) if at.starts_with("line ") && at.contains(" column ") => rest,
        _ => message,
    };
    let code = if message.contains("unknown field") {
        codes::UNKNOWN_FIELD
    } else if message.contains("invalid type") {
        codes::WRONG_TYPE
    } else if message.contains("missing field") {
        codes::MISSING_FIELD
    } else if message.contains("unknown variant") {
        codes::INVALID_ENUM
    } else if message.contains("duplicate") {
        codes::DUPLICATE_KEY
    } else {
        codes::YAML_SYNTAX
    };
    let what = if code.code == codes::YAML_SYNTAX.code {
        "invalid YAML"
    } else {
        "invalid test file"
    };
    let mut diagnostic = Diagnostic::new(code, format!("{what}: {message}"));
    if line > 0 {
        diagnostic = diagnostic.at(Location {
            file: file.to_owned(),
            document: 0,
            line,
            column: column.max(1),
            route: String::new(),
        });
    }
    let mut sources = SourceMap::default();
    sources.insert(file, text);
    render_human(&diagnostic, &sources).trim_end().to_owned()
}

/// An unknown top-level field of a test file (`check_top_level_fields`
/// reports its line), rendered like [`render_parse_error`]: the same code
/// (PM003), the location once with the column of the key, the source line
/// and a caret, as a misspelt field anywhere else in the file.
pub(crate) fn render_top_level_error(
    file: &str,
    text: &str,
    error: porin_compiler::error::InventoryError,
) -> String {
    use porin_compiler::error::InventoryError;
    match error {
        InventoryError::Invalid {
            file: of,
            line,
            message,
        } if of == file && line > 0 => {
            let column = usize::try_from(line - 1)
                .ok()
                .and_then(|index| text.lines().nth(index))
                .map_or(1, |l| l.len() - l.trim_start().len() + 1);
            let syntax = InventoryError::Syntax {
                file: of,
                line,
                column: u32::try_from(column).unwrap_or(1),
                message,
            };
            render_inventory_error(file, text, syntax)
        }
        other => render_inventory_error(file, text, other),
    }
}
