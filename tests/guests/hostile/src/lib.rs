//! A stage that misbehaves on purpose, to prove the sandbox holds. Never ship it.

use curator_sdk::prelude::*;

/// Misbehaves according to `mode` when it sees a document containing `trigger`.
#[stage(name = "hostile", cpus = 1.0, memory_mb = 64)]
pub struct Hostile {
    /// loop | bomb | open | fail | panic | bad_output | huge_output (a batch claiming 2^32 - 1
    /// rows and 4 GiB of text) | slow (sleep 20 ms a batch) | leak (1 MiB a batch, never freed) | none
    #[param(one_of = ["loop", "bomb", "open", "fail", "panic", "bad_output", "huge_output", "slow", "leak", "none"])]
    pub mode: String,
    /// Path to open in `open` mode.
    #[param(default = "/etc/passwd")]
    pub path: String,
    /// Misbehave only on documents containing this (default: every document).
    #[param(default = "")]
    pub trigger: String,
}

impl Stage for Hostile {
    fn process(&mut self, batch: Batch) -> Result<Output, StageError> {
        let mut triggered = false;
        batch.for_each_doc(|doc| {
            triggered |= doc.text().contains(self.trigger.as_str());
            Ok::<_, StageError>(())
        })?;
        if !triggered {
            return Ok(Output::Selection((0..batch.num_rows).collect()));
        }
        match self.mode.as_str() {
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "open" => match std::fs::read_to_string(&self.path) {
                Ok(content) => Ok(Output::Columns(vec![Column::utf8("leaked", std::iter::repeat_n(content.as_str(), batch.len()))])),
                Err(e) => Err(StageError::Failed(format!("cannot open {}: {e}", self.path))),
            },
            "fail" => Err(StageError::Failed("refusing this batch on purpose".into())),
            "panic" => panic!("hostile stage panicked on purpose"),
            "bad_output" => Ok(Output::Selection(vec![u32::MAX])),
            "huge_output" => Ok(Output::Batch(Batch {
                num_rows: u32::MAX,
                columns: vec![Column {
                    name: "text".into(),
                    ty: ColumnType::Utf8,
                    validity: Vec::new(),
                    offsets: vec![0, u32::MAX],
                    data: Vec::new(),
                }],
            })),
            "leak" => {
                std::hint::black_box(Box::leak(vec![7u8; 1 << 20].into_boxed_slice()));
                Ok(Output::Selection((0..batch.num_rows).collect()))
            }
            "slow" => {
                std::thread::sleep(std::time::Duration::from_millis(20));
                Ok(Output::Selection((0..batch.num_rows).collect()))
            }
            _ => Ok(Output::Selection((0..batch.num_rows).collect())),
        }
    }
}
