//! Mistakes in a pipeline file: each names the file and the path inside it, and a check
//! reports all it finds at once.

use std::fmt;

/// A pipeline file error: the file, the path inside it and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct SpecError {
    pub file: String,
    pub path: String,
    pub message: String,
}

/// Every mistake found in a pipeline file, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(|e| e.to_string()).collect();
        f.write_str(&lines.join("\n"))
    }
}

impl std::error::Error for SpecErrors {}

impl From<SpecError> for SpecErrors {
    fn from(e: SpecError) -> SpecErrors {
        SpecErrors(vec![e])
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() || self.path == "." {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.message)
        }
    }
}

impl SpecError {
    pub fn new(file: &str, path: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError { file: file.to_string(), path: path.into(), message: message.into() }
    }
}
