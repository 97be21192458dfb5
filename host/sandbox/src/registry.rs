//! The plugin registry: scans plugin directories and reads each manifest without running
//! the plugin in the host: from a WASM component's `curator-manifest` custom section, or
//! from a native library's vtable inside a throw-away `curator-host worker --manifest`
//! process (loading a library runs its initialisers, which must not happen in the host).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use curator_core::manifest::MANIFEST_SECTION;
use curator_core::{Manifest, ManifestError};

/// A plugin file and its manifest.
#[derive(Debug, Clone)]
pub struct PluginEntry {
    pub manifest: Manifest,
    pub path: PathBuf,
    pub size: u64,
    /// How the file stands against the trust check it passed (`trust.rs`).
    pub standing: crate::trust::Standing,
}

/// A problem found while scanning; the scan goes on.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{path}: cannot read: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a WebAssembly component: {message}")]
    NotWasm { path: PathBuf, message: String },
    #[error("{path}: has no {MANIFEST_SECTION} section (not built with curator-sdk?)")]
    NoManifest { path: PathBuf },
    #[error("{path}: {source}")]
    BadManifest { path: PathBuf, source: ManifestError },
    #[error("{path}: manifest is {kind:?} but the file is a WASM component")]
    WrongKind { path: PathBuf, kind: curator_core::PluginKind },
    #[error(transparent)]
    Native(#[from] crate::stage::StageFailure),
    #[error("duplicate plugin {name:?}: {second} is ignored, {first} comes first in the search path")]
    Duplicate { name: String, first: PathBuf, second: PathBuf },
    #[error("{path}: refused before loading: it {reason}")]
    Untrusted { path: PathBuf, reason: String },
}

/// The check each plugin file passes before its manifest is read (and, for a native
/// library, before any process loads it): its standing, or why it is refused.
pub type Gate<'a> = &'a dyn Fn(&Path) -> Result<crate::trust::Standing, String>;

/// The plugin search path: `--plugins` dirs, then `$CURATOR_PLUGINS` (colon-separated),
/// then `./plugins`, then the plugins installed with the binary (`os::installed`).
pub fn search_path(cli_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = cli_dirs.to_vec();
    if let Some(env) = std::env::var_os("CURATOR_PLUGINS") {
        dirs.extend(std::env::split_paths(&env).filter(|p| !p.as_os_str().is_empty()));
    }
    dirs.push(PathBuf::from("plugins"));
    dirs.extend(crate::os::installed("plugins").filter(|d| d.is_dir()));
    // A directory named twice (`--plugins plugins` and the default) is searched once.
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.canonicalize().unwrap_or_else(|_| d.clone())));
    dirs
}

/// File extensions of native plugins.
pub const NATIVE_EXTENSIONS: [&str; 3] = ["so", "dylib", "dll"];

fn is_native(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| NATIVE_EXTENSIONS.contains(&e))
}

/// Read the manifest of a plugin file (WASM component or native library); its JSON is
/// remembered until the file changes (`plugin_facts.rs`), and checked on every read.
pub fn read_manifest(path: &Path) -> Result<Manifest, RegistryError> {
    let json = crate::plugin_facts::FactCache::default_dir().manifest(path, || -> Result<String, RegistryError> {
        if is_native(path) {
            return Ok(crate::worker::read_manifest_json(path)?);
        }
        let bytes = std::fs::read(path).map_err(|source| RegistryError::Io { path: path.into(), source })?;
        String::from_utf8(manifest_section(path, &bytes)?).map_err(|e| RegistryError::BadManifest {
            path: path.into(),
            source: ManifestError::Parse { path: MANIFEST_SECTION.into(), message: e.to_string() },
        })
    })?;
    let manifest = Manifest::from_json(json.as_bytes()).map_err(|source| RegistryError::BadManifest { path: path.into(), source })?;
    let wasm = !is_native(path);
    if wasm && manifest.kind != curator_core::PluginKind::Wasm {
        return Err(RegistryError::WrongKind { path: path.into(), kind: manifest.kind });
    }
    Ok(manifest)
}

/// Find the manifest section in a component (or core module), descending into nested modules.
pub fn manifest_from_bytes(path: &Path, bytes: &[u8]) -> Result<Manifest, RegistryError> {
    let data = manifest_section(path, bytes)?;
    let manifest = Manifest::from_json(&data).map_err(|source| RegistryError::BadManifest { path: path.into(), source })?;
    if manifest.kind != curator_core::PluginKind::Wasm {
        return Err(RegistryError::WrongKind { path: path.into(), kind: manifest.kind });
    }
    Ok(manifest)
}

/// The bytes of a component's manifest section.
fn manifest_section(path: &Path, bytes: &[u8]) -> Result<Vec<u8>, RegistryError> {
    if !wasmparser::Parser::is_component(bytes) && !wasmparser::Parser::is_core_wasm(bytes) {
        return Err(RegistryError::NotWasm { path: path.into(), message: "bad magic number".into() });
    }
    let mut found = None;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| RegistryError::NotWasm { path: path.into(), message: e.to_string() })?;
        if let wasmparser::Payload::CustomSection(section) = payload
            && section.name() == MANIFEST_SECTION
        {
            found = Some(section.data().to_vec());
            break;
        }
    }
    found.ok_or_else(|| RegistryError::NoManifest { path: path.into() })
}

/// All plugins found on a search path.
#[derive(Debug, Default)]
pub struct Registry {
    pub plugins: BTreeMap<String, PluginEntry>,
    pub problems: Vec<RegistryError>,
    pub dirs: Vec<PathBuf>,
    /// Files the trust check refused, with the reason.
    pub refused: Vec<(PathBuf, String)>,
    /// Every version found of each name, in search-path order (`plugins` holds the first).
    pub versions: BTreeMap<String, Vec<PluginEntry>>,
}

impl Registry {
    /// Scan `dirs` in order (missing directories are skipped). Within a directory files are
    /// read in name order; the first plugin of a name wins and later ones are reported.
    pub fn scan(dirs: &[PathBuf]) -> Registry {
        Self::scan_gated(dirs, &|_| Ok(crate::trust::Standing::Unsigned))
    }

    /// `scan`, each file passing `gate` first: a refused file is never read or loaded.
    pub fn scan_gated(dirs: &[PathBuf], gate: Gate<'_>) -> Registry {
        let mut reg = Registry { dirs: dirs.to_vec(), ..Default::default() };
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| (p.extension().is_some_and(|e| e == "wasm") || is_native(p)) && p.is_file())
                .collect();
            files.sort();
            for path in files {
                match gate(&path) {
                    Ok(standing) => reg.add_checked(&path, standing),
                    Err(reason) => {
                        reg.refused.push((path.clone(), reason.clone()));
                        reg.problems.push(RegistryError::Untrusted { path, reason });
                    }
                }
            }
        }
        reg
    }

    /// Add one plugin file (as `plugin inspect FILE` and tests do).
    pub fn add_file(&mut self, path: &Path) {
        self.add_checked(path, crate::trust::Standing::Unsigned)
    }

    fn add_checked(&mut self, path: &Path, standing: crate::trust::Standing) {
        match read_manifest(path) {
            Ok(manifest) => {
                let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
                let entry = PluginEntry { manifest, path: path.into(), size, standing };
                let name = entry.manifest.name.clone();
                let versions = self.versions.entry(name.clone()).or_default();
                // Another version is not a duplicate: `plugin: name@^1.2` picks among them.
                if let Some(first) = versions.iter().find(|e| e.manifest.version == entry.manifest.version) {
                    self.problems.push(RegistryError::Duplicate { name, first: first.path.clone(), second: path.into() });
                } else {
                    versions.push(entry.clone());
                    self.plugins.entry(name).or_insert(entry);
                }
            }
            Err(e) => self.problems.push(e),
        }
    }

    pub fn get(&self, name: &str) -> Option<&PluginEntry> {
        self.plugins.get(name)
    }

    /// A pipeline's `plugin:` value: `name` (the first found on the search path) or
    /// `name@REQ` (a semver requirement such as `^1.2` or `=0.3.1`: the highest version found
    /// that matches). `None` when the name is unknown; `Err` says why no version fits.
    pub fn resolve(&self, spec: &str) -> Option<Result<&PluginEntry, String>> {
        let Some((name, req)) = spec.split_once('@') else { return self.get(spec).map(Ok) };
        let found = self.versions.get(name.trim())?;
        let req = match semver::VersionReq::parse(req.trim()) {
            Ok(r) => r,
            Err(e) => return Some(Err(format!("{req:?} is not a version requirement such as ^1.2: {e}"))),
        };
        let listed = || found.iter().map(|e| format!("{} ({})", e.manifest.version, e.path.display())).collect::<Vec<_>>().join(", ");
        let best = found
            .iter()
            .filter_map(|e| semver::Version::parse(&e.manifest.version).ok().filter(|v| req.matches(v)).map(|v| (v, e)))
            .max_by(|a, b| a.0.cmp(&b.0));
        Some(best.map(|(_, e)| e).ok_or_else(|| format!("no version of {name} matches {req}; found {}", listed())))
    }

    /// Names of all plugins, for "did you mean" messages.
    pub fn names(&self) -> Vec<&str> {
        self.plugins.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_wasm_and_sectionless_files_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.wasm"), b"not wasm").unwrap();
        // A minimal empty core module: magic + version, no sections.
        std::fs::write(dir.path().join("b.wasm"), b"\0asm\x01\0\0\0").unwrap();
        let reg = Registry::scan(&[dir.path().to_path_buf()]);
        assert!(reg.plugins.is_empty());
        let msgs: Vec<String> = reg.problems.iter().map(|p| p.to_string()).collect();
        assert!(msgs[0].contains("a.wasm") && msgs[0].contains("not a WebAssembly"), "{msgs:?}");
        assert!(msgs[1].contains("b.wasm") && msgs[1].contains("no curator-manifest section"), "{msgs:?}");
    }

    /// A core module whose only content is a manifest section for `name` at `version`.
    fn module(name: &str, version: &str) -> Vec<u8> {
        let manifest = serde_json::json!({
            "name": name, "version": version, "abi": {"major": curator_core::ABI_MAJOR, "minor": curator_core::ABI_MINOR},
            "kind": "wasm", "params_schema": {"type": "object"}
        })
        .to_string();
        let section = MANIFEST_SECTION.as_bytes();
        let mut body = vec![section.len() as u8];
        body.extend_from_slice(section);
        body.extend_from_slice(manifest.as_bytes());
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.push(0);
        m.push(body.len() as u8); // < 128, single-byte LEB128
        m.extend(body);
        m
    }

    #[test]
    fn version_requirements_pick_the_highest_match() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(a.path().join("x-1.2.wasm"), module("x", "1.2.0")).unwrap();
        std::fs::write(a.path().join("x-0.1.wasm"), module("x", "0.1.0")).unwrap();
        std::fs::write(b.path().join("x-1.4.wasm"), module("x", "1.4.1")).unwrap();
        std::fs::write(b.path().join("x-2.0.wasm"), module("x", "2.0.0")).unwrap();
        std::fs::write(b.path().join("x-1.2-again.wasm"), module("x", "1.2.0")).unwrap();
        let reg = Registry::scan(&[a.path().to_path_buf(), b.path().to_path_buf()]);
        let version = |spec: &str| reg.resolve(spec).unwrap().map(|e| e.manifest.version.clone());
        assert_eq!(version("x@^1.2").unwrap(), "1.4.1");
        assert_eq!(version("x@=0.1.0").unwrap(), "0.1.0");
        assert_eq!(version("x@>=1, <1.3").unwrap(), "1.2.0");
        assert_eq!(version("x").unwrap(), "0.1.0", "a bare name: the first file of the search path");
        let none = version("x@^3").unwrap_err();
        assert!(none.contains("no version of x matches ^3") && none.contains("2.0.0"), "{none}");
        assert!(version("x@not a req").is_err());
        assert!(reg.resolve("y@^1").is_none());
        // The same version twice is reported, the first kept.
        assert!(reg.problems.iter().any(|p| matches!(p, RegistryError::Duplicate { second, .. } if second.ends_with("x-1.2-again.wasm"))));
    }

    #[test]
    fn manifest_read_from_custom_section() {
        // Core module with one custom section: id 0, size, name len, name, payload.
        let module = module("x", "1.0.0");
        let m = manifest_from_bytes(Path::new("x.wasm"), &module).unwrap();
        assert_eq!(m.name, "x");

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("1.wasm"), &module).unwrap();
        std::fs::write(dir.path().join("2.wasm"), &module).unwrap();
        let reg = Registry::scan(&[dir.path().to_path_buf()]);
        assert_eq!(reg.names(), vec!["x"]);
        assert!(matches!(&reg.problems[0], RegistryError::Duplicate { name, .. } if name == "x"));
    }
}
