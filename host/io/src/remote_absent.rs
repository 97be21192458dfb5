//! `remote.rs`'s API in a build without the `remote` feature (README command 1's lean host):
//! no object store can be opened, so an [`Object`] never exists (it holds an `Infallible`:
//! every method is unreachable, and the compiler checks it), and opening one says how to get
//! a host that can.

use std::convert::Infallible;
use std::io::{Read, Write};
use std::path::Path;

use bytes::Bytes;

/// Why an object store, plugin URL or OCI registry cannot be reached by this build.
pub const NOT_BUILT: &str = concat!("object stores, plugin URLs and OCI registries: ", crate::not_built!("remote"));

fn not_built() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Unsupported, NOT_BUILT)
}

/// Object-store retries: nothing to configure without object stores.
pub fn configure_retry(_spec: &curator_core::pipeline::RetrySpec) {}

/// No object can be opened in this build. (A private `Infallible` rather than an empty enum,
/// so callers' arms on it are not flagged unreachable.)
#[derive(Clone)]
pub struct Object(Infallible);

pub struct Version(Infallible);

pub type PutMode = crate::PutMode<Version>;
pub use crate::PutError;

impl Object {
    pub fn open(_url: &url::Url) -> Result<Object, std::io::Error> {
        Err(not_built())
    }
    pub fn display(&self) -> String {
        match self.0 {}
    }
    pub fn join(&self, _rel: &str) -> Object {
        match self.0 {}
    }
    pub fn file_name(&self) -> String {
        match self.0 {}
    }
    pub fn sibling(&self, _name: &str) -> Object {
        match self.0 {}
    }
    pub fn list(&self) -> Result<Vec<(String, Object, u64)>, std::io::Error> {
        match self.0 {}
    }
    pub fn list_here(&self) -> Result<Vec<Object>, std::io::Error> {
        match self.0 {}
    }
    pub fn exists(&self) -> bool {
        match self.0 {}
    }
    pub fn delete(&self) -> Result<(), std::io::Error> {
        match self.0 {}
    }
    pub fn size(&self) -> Result<u64, std::io::Error> {
        match self.0 {}
    }
    pub fn reader(&self, _start: u64) -> Result<Box<dyn Read + Send>, std::io::Error> {
        match self.0 {}
    }
    pub fn read_range(&self, _start: u64, _end: u64) -> Result<Bytes, std::io::Error> {
        match self.0 {}
    }
    pub fn get_versioned(&self) -> Result<Option<(Bytes, Version)>, std::io::Error> {
        match self.0 {}
    }
    pub fn put(&self, _bytes: Vec<u8>, _mode: PutMode) -> Result<(), PutError> {
        match self.0 {}
    }
    pub fn upload(&self, _from: &Path) -> Result<(), std::io::Error> {
        match self.0 {}
    }
    pub fn download(&self, _out: &mut dyn Write) -> Result<(), std::io::Error> {
        match self.0 {}
    }
    pub fn remove_all(&self) -> Result<u64, std::io::Error> {
        match self.0 {}
    }
}

/// Plugin URLs need the `remote` feature.
pub fn fetch_with(_url: &url::Url, _allow_http: bool, _suffix: &str) -> Result<(Vec<u8>, Option<Vec<u8>>), std::io::Error> {
    Err(not_built())
}
