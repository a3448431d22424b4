//! The TOML of an ATTP answer (the model's `[tool_call]` table), read in time linear in its text.
//!
//! Python's `tomllib` takes time quadratic in the length of a dotted key (a 98 KB answer holding
//! one key of 49,000 parts took 85 s) and reads integers of any length (one of over 4,300 digits
//! then fails to convert). The `toml` crate reads a document in one pass, refuses nesting deeper
//! than 80 levels (tables, arrays, the parts of a dotted key) and integers beyond 64 bits, and
//! reports every problem as an error, never a panic. Only the two fields ATTP reads leave this
//! module: the `status` and the `code` of the `[tool_call]` table.

use toml::{Table, Value};

/// What a well-formed ATTP answer asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum ToolCall {
    /// `status = "success"`: run this code.
    Run(String),
    /// `status = "fail"`: the model gave up, nothing is to run.
    GaveUp,
}

/// The `[tool_call]` of the ATTP answer `text`, or why it is refused (a sentence for the model to
/// read: the TOML error with its line and column, a missing table, a wrong status, no code string).
/// O(text).
pub fn read_tool_call(text: &str) -> Result<ToolCall, String> {
    let doc: Table = text.parse().map_err(|e: toml::de::Error| not_toml(text, &e))?;
    let Some(Value::Table(call)) = doc.get("tool_call") else {
        return Err("the answer has no [tool_call] table".to_owned());
    };
    match call.get("status") {
        Some(Value::String(s)) if s == "fail" => return Ok(ToolCall::GaveUp),
        Some(Value::String(s)) if s == "success" => {}
        other => {
            return Err(format!(
                r#"the tool_call status must be "success" or "fail", got {}"#,
                shown(other)
            ));
        }
    }
    match call.get("code") {
        Some(Value::String(code)) => Ok(ToolCall::Run(code.clone())),
        _ => Err("the tool_call has no code string".to_owned()),
    }
}

/// Why `text` is not TOML, with the line and column (counted in characters) where it stops.
fn not_toml(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim_end();
    let Some(at) = error.span().map(|span| span.start.min(text.len())) else {
        return format!("the answer is not valid TOML ({message})");
    };
    // The span starts on a character boundary; stepping back to one keeps the slice safe if not.
    let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap_or(0);
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("the answer is not valid TOML ({message}, at line {line}, column {column})")
}

/// A value the model gave where a status belongs, as the refusal quotes it: a string in quotes,
/// cut at 60 characters, anything else by its TOML type.
fn shown(value: Option<&Value>) -> String {
    match value {
        None => "nothing".to_owned(),
        Some(Value::String(s)) if s.chars().count() <= 60 => format!("{s:?}"),
        Some(Value::String(s)) => format!("{:?}…", s.chars().take(60).collect::<String>()),
        Some(other) => format!("a TOML {}", other.type_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: &str, code: &str) -> String {
        format!("[tool_call]\nstatus = \"{status}\"\ncode = '''\n{code}'''\n")
    }

    #[test]
    fn a_success_gives_its_code_and_a_fail_nothing_to_run() {
        let code = "__result__ = recall_page(1)\n";
        assert_eq!(
            read_tool_call(&answer("success", code)),
            Ok(ToolCall::Run(code.to_owned()))
        );
        assert_eq!(read_tool_call(&answer("fail", code)), Ok(ToolCall::GaveUp));
    }

    #[test]
    fn what_is_not_a_tool_call_is_refused_with_the_reason() {
        let cases = [
            (
                "[tool_call",
                "not valid TOML (unclosed table, expected `]`, at line 1, column 11)",
            ),
            ("x = 1", "no [tool_call] table"),
            ("[[tool_call]]\nstatus = \"success\"", "no [tool_call] table"),
            ("[tool_call]\nstatus = \"ok\"", r#"got "ok""#),
            ("[tool_call]\nstatus = 3", "got a TOML integer"),
            ("[tool_call]", "got nothing"),
            ("[tool_call]\nstatus = \"success\"\ncode = 3", "no code string"),
        ];
        for (text, reason) in cases {
            let refused = read_tool_call(text).expect_err(text);
            assert!(refused.contains(reason), "{text:?}: {refused}");
        }
    }

    #[test]
    fn an_integer_beyond_64_bits_is_refused_not_read() {
        let text = format!(
            "[tool_call]\nstatus = \"success\"\ncode = 'x'\nn = {}\n",
            "9".repeat(5000)
        );
        let refused = read_tool_call(&text).expect_err("a 5,000-digit integer");
        assert!(refused.contains("at line 4, column 5"), "{refused}");
    }

    #[test]
    fn a_dotted_key_or_nesting_deeper_than_80_levels_is_refused() {
        for text in [
            format!("[tool_call]\na{} = 1\n", ".a".repeat(49_000)),
            format!("x = {}\n", "[".repeat(49_000)),
            format!("x = {}\n", "{a=".repeat(49_000)),
        ] {
            let refused = read_tool_call(&text).expect_err("deep nesting");
            assert!(refused.starts_with("the answer is not valid TOML ("), "{refused}");
        }
        let shallow = format!("[tool_call]\nstatus = \"fail\"\na{} = 1\n", ".a".repeat(60));
        assert_eq!(read_tool_call(&shallow), Ok(ToolCall::GaveUp));
    }

    #[test]
    fn the_position_of_an_error_counts_characters_not_bytes() {
        let refused = read_tool_call("[tool_call]\nnote = \"ééé\" x\n").expect_err("junk after a value");
        assert!(refused.contains("at line 2, column 14"), "{refused}");
    }
}
