//! Validation of a stage's `params:` against the JSON Schema in its manifest.
//!
//! Supports the subset of JSON Schema that `curator-sdk` generates and that hand-written
//! manifests commonly use: `type` (string or list), `properties`, `required`,
//! `additionalProperties` (bool or schema), `items`, `enum`, `const`, `minimum`, `maximum`,
//! `exclusiveMinimum`, `exclusiveMaximum`, `minLength`, `maxLength`, `minItems`, `maxItems`,
//! `anyOf`. Unknown keywords are ignored, as JSON Schema requires.

use serde_json::Value;

/// One reason a params object does not fit its schema; `path` is dotted from the params root.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ParamError {
    pub path: String,
    pub message: String,
}

/// Validate `value` against `schema`. `root` prefixes every error path, e.g.
/// `stages[2].params`.
pub fn validate_params(schema: &Value, value: &Value, root: &str) -> Vec<ParamError> {
    let mut errors = Vec::new();
    check(schema, value, root, &mut errors);
    errors
}

/// Describe a JSON value for an error message: `"ten"`, `3.5`, `an object`.
pub fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut shown: String = s.chars().take(40).collect();
            if shown.len() < s.len() {
                shown.push('…');
            }
            format!("{shown:?}")
        }
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a mapping".into(),
    }
}

fn type_matches(ty: &str, value: &Value) -> bool {
    match ty {
        "integer" => value.as_i64().is_some() || value.as_u64().is_some() || value.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn type_word(ty: &str) -> &str {
    match ty {
        "integer" => "an integer",
        "number" => "a number",
        "string" => "a string",
        "boolean" => "true or false",
        "array" => "a list",
        "object" => "a mapping",
        "null" => "null",
        other => other,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn check(schema: &Value, value: &Value, path: &str, errors: &mut Vec<ParamError>) {
    let Some(schema) = schema.as_object() else {
        return; // `true` / `{}`-like schemas accept anything
    };
    let mut err = |message: String| errors.push(ParamError { path: path.to_string(), message });

    if let Some(ty) = schema.get("type") {
        let types: Vec<&str> = match ty {
            Value::String(s) => vec![s.as_str()],
            Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        if !types.is_empty() && !types.iter().any(|t| type_matches(t, value)) {
            let wanted: Vec<&str> = types.iter().map(|t| type_word(t)).collect();
            err(format!("expected {}, found {}", wanted.join(" or "), describe(value)));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let shown: Vec<String> = options.iter().map(describe).collect();
        err(format!("expected one of {}, found {}", shown.join(", "), describe(value)));
        return;
    }
    if let Some(c) = schema.get("const")
        && c != value
    {
        err(format!("expected {}, found {}", describe(c), describe(value)));
        return;
    }
    if let Some(n) = value.as_f64() {
        let bound = |k: &str| schema.get(k).and_then(Value::as_f64);
        if let Some(min) = bound("minimum").filter(|m| n < *m) {
            err(format!("must be at least {min}, found {n}"));
        }
        if let Some(max) = bound("maximum").filter(|m| n > *m) {
            err(format!("must be at most {max}, found {n}"));
        }
        if let Some(min) = bound("exclusiveMinimum").filter(|m| n <= *m) {
            err(format!("must be greater than {min}, found {n}"));
        }
        if let Some(max) = bound("exclusiveMaximum").filter(|m| n >= *m) {
            err(format!("must be less than {max}, found {n}"));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64).filter(|m| len < *m) {
            err(format!("must be at least {min} characters long"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64).filter(|m| len > *m) {
            err(format!("must be at most {max} characters long"));
        }
    }
    if let Some(items) = value.as_array() {
        let n = items.len() as u64;
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64).filter(|m| n < *m) {
            err(format!("must have at least {min} items, found {n}"));
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64).filter(|m| n > *m) {
            err(format!("must have at most {max} items, found {n}"));
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                check(item_schema, item, &format!("{path}[{i}]"), errors);
            }
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for key in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(key) {
                    errors.push(ParamError { path: join(path, key), message: "is required but missing".into() });
                }
            }
        }
        for (key, v) in obj {
            let sub = join(path, key);
            match props.and_then(|p| p.get(key)) {
                Some(prop_schema) => check(prop_schema, v, &sub, errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        let mut known: Vec<&str> = props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                        known.sort_unstable();
                        errors.push(ParamError {
                            path: sub,
                            message: format!(
                                "unknown parameter (known: {})",
                                if known.is_empty() { "none".to_string() } else { known.join(", ") }
                            ),
                        });
                    }
                    Some(extra @ Value::Object(_)) => check(extra, v, &sub, errors),
                    _ => {}
                },
            }
        }
    }
    if let Some(alternatives) = schema.get("anyOf").and_then(Value::as_array) {
        let fits = alternatives.iter().any(|alt| validate_params(alt, value, path).is_empty());
        if !fits {
            errors.push(ParamError { path: path.to_string(), message: format!("{} matches none of the allowed forms", describe(value)) });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["min_words"],
            "properties": {
                "min_words": {"type": "integer", "minimum": 0},
                "max_words": {"type": "integer", "minimum": 0},
                "form": {"type": "string", "enum": ["nfc", "nfkc"]},
                "stop": {"type": "array", "items": {"type": "string"}},
                "ratio": {"type": ["number", "null"], "maximum": 1.0}
            }
        })
    }

    fn errs(v: Value) -> Vec<String> {
        validate_params(&schema(), &v, "stages[2].params").into_iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn accepts_valid() {
        assert!(errs(json!({"min_words": 10, "form": "nfc", "stop": ["a"], "ratio": null})).is_empty());
        assert!(errs(json!({"min_words": 10.0})).is_empty());
    }

    #[test]
    fn wrong_type_named_with_path() {
        assert_eq!(errs(json!({"min_words": "ten"})), vec![r#"stages[2].params.min_words: expected an integer, found "ten""#]);
    }

    #[test]
    fn missing_unknown_and_bounds() {
        let e = errs(json!({"max_words": -1, "colour": 1, "stop": ["a", 3], "ratio": 2.0, "form": "nfd"}));
        assert!(e.contains(&"stages[2].params.min_words: is required but missing".to_string()), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("stages[2].params.colour: unknown parameter (known: form, max_words")), "{e:?}");
        assert!(e.contains(&"stages[2].params.max_words: must be at least 0, found -1".to_string()), "{e:?}");
        assert!(e.contains(&"stages[2].params.stop[1]: expected a string, found 3".to_string()), "{e:?}");
        assert!(e.contains(&"stages[2].params.ratio: must be at most 1, found 2".to_string()), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("stages[2].params.form: expected one of \"nfc\", \"nfkc\"")), "{e:?}");
    }

    #[test]
    fn params_must_be_mapping() {
        assert_eq!(errs(json!([1])), vec!["stages[2].params: expected a mapping, found a list"]);
    }
}
