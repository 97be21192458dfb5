//! The WASM side: WIT bindings and the glue the `#[stage]` attribute exports.

use std::cell::RefCell;

use crate::Level;
use crate::batch::{Batch, Column, ColumnType, Output};
use crate::runner::{Runner, StageDef, StageError};

/// Bindings generated from `sdk/wit/stage.wit`.
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "stage",
        pub_export_macro: true,
        export_macro_name: "export_stage_world",
        default_bindings_module: "curator_sdk::__private::bindings",
    });
}

use bindings::curator::stage::types as wit;

thread_local! {
    static RUNNER: RefCell<Option<Box<dyn Runner>>> = const { RefCell::new(None) };
}

pub fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => wit::Level::Trace,
        Level::Debug => wit::Level::Debug,
        Level::Info => wit::Level::Info,
        Level::Warn => wit::Level::Warn,
        Level::Error => wit::Level::Error,
    };
    bindings::curator::stage::log::log(level, message);
}

fn to_wit_error(e: StageError) -> wit::StageError {
    match e {
        StageError::InvalidParams(m) => wit::StageError::InvalidParams(m),
        StageError::Failed(m) => wit::StageError::Failed(m),
        StageError::OutOfMemory(m) => wit::StageError::OutOfMemory(m),
    }
}

fn from_wit_column(c: wit::Column) -> Column {
    let ty = match c.ty {
        wit::ColumnType::Utf8 => ColumnType::Utf8,
        wit::ColumnType::Binary => ColumnType::Binary,
        wit::ColumnType::Int64 => ColumnType::Int64,
        wit::ColumnType::Float64 => ColumnType::Float64,
        wit::ColumnType::Boolean => ColumnType::Boolean,
        wit::ColumnType::Float32Vector => ColumnType::Float32Vector,
    };
    Column { name: c.name, ty, validity: c.validity, offsets: c.offsets, data: c.data }
}

fn to_wit_column(c: Column) -> wit::Column {
    let ty = match c.ty {
        ColumnType::Utf8 => wit::ColumnType::Utf8,
        ColumnType::Binary => wit::ColumnType::Binary,
        ColumnType::Int64 => wit::ColumnType::Int64,
        ColumnType::Float64 => wit::ColumnType::Float64,
        ColumnType::Boolean => wit::ColumnType::Boolean,
        ColumnType::Float32Vector => wit::ColumnType::Float32Vector,
    };
    wit::Column { name: c.name, ty, validity: c.validity, offsets: c.offsets, data: c.data }
}

fn to_wit_batch(b: Batch) -> wit::Batch {
    wit::Batch { num_rows: b.num_rows, columns: b.columns.into_iter().map(to_wit_column).collect() }
}

/// `setup` export: parse params and build the instance.
pub fn setup<T: StageDef>(params: String) -> Result<(), wit::StageError> {
    let runner = T::build(&params).map_err(to_wit_error)?;
    RUNNER.with(|r| *r.borrow_mut() = Some(runner));
    Ok(())
}

/// `process` export.
pub fn process(input: wit::Batch) -> Result<wit::Output, wit::StageError> {
    let batch = Batch { num_rows: input.num_rows, columns: input.columns.into_iter().map(from_wit_column).collect() };
    let out = RUNNER.with(|r| match r.borrow_mut().as_mut() {
        Some(runner) => runner.process(batch),
        None => Err(StageError::Failed("process called before setup".into())),
    });
    match out.map_err(to_wit_error)? {
        Output::Selection(rows) => Ok(wit::Output::Selection(rows)),
        Output::Columns(cols) => Ok(wit::Output::Columns(cols.into_iter().map(to_wit_column).collect())),
        Output::Batch(b) => Ok(wit::Output::Batch(to_wit_batch(b))),
        Output::Scored { columns, keep } => {
            Ok(wit::Output::Scored(wit::Scored { columns: columns.into_iter().map(to_wit_column).collect(), keep }))
        }
    }
}

/// `teardown` export.
pub fn teardown() {
    RUNNER.with(|r| r.borrow_mut().take());
}
