//! Human-readable rendering of the JSON reports: nested `key: value` lines.

use serde_json::Value;

/// Render `value` as indented text, one scalar per line.
pub fn text(value: &Value) -> String {
    let mut out = String::new();
    walk(value, 0, &mut out);
    out
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Null => Some("-".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Array(a) if a.is_empty() => Some("(none)".into()),
        Value::Object(o) if o.is_empty() => Some("(none)".into()),
        _ => None,
    }
}

fn walk(value: &Value, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match scalar(v) {
                    Some(s) => out.push_str(&format!("{pad}{k}: {s}\n")),
                    None => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        walk(v, depth + 1, out);
                    }
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                match scalar(v) {
                    Some(s) => out.push_str(&format!("{pad}- {s}\n")),
                    None => {
                        out.push_str(&format!("{pad}[{i}]\n"));
                        walk(v, depth + 1, out);
                    }
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other).unwrap_or_default())),
    }
}

/// Print `value` as pretty JSON or as text.
pub fn print(value: &Value, json: bool) {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(value)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
        );
    } else {
        print!("{}", text(value));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn nested_text() {
        let v = serde_json::json!({"a": 1, "b": {"c": "x", "d": []}, "e": [1, {"f": true}]});
        assert_eq!(
            super::text(&v),
            "a: 1\nb:\n  c: x\n  d: (none)\ne:\n  - 1\n  [1]\n    f: true\n"
        );
    }
}
