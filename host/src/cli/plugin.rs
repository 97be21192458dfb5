//! `curator-host plugin …`: list and inspect manifests; keygen, sign and verify; install and
//! publish. The work is in the library (`registry`, `trust`, `install`, `oci`); this file
//! parses the arguments and prints.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;

use curator_host::plan;
use curator_host::registry::{self, PluginEntry, Registry};

use super::{EXIT_FAILED, EXIT_INVALID, PluginDirs, fmt_resources, plain_table, render, scan};

#[derive(Subcommand)]
pub(crate) enum PluginCommand {
    /// List the plugins on the search path (manifests read without instantiating).
    List {
        #[command(flatten)]
        plugins: PluginDirs,
        #[arg(long)]
        json: bool,
    },
    /// Show one plugin's manifest, by name or by file.
    Inspect {
        name_or_file: String,
        #[command(flatten)]
        plugins: PluginDirs,
        #[arg(long)]
        json: bool,
    },
    /// Make a signing key pair: PREFIX.key (secret, keep it safe) and PREFIX.pub (put it in
    /// the trust store of whoever runs your plugins). Minisign-compatible.
    Keygen { prefix: PathBuf },
    /// Sign a plugin file: writes FILE.minisig beside it (minisign format).
    Sign {
        file: PathBuf,
        /// The secret key (from `plugin keygen`).
        #[arg(long)]
        key: PathBuf,
    },
    /// Put a plugin into a plugins directory, from a file or an OCI registry
    /// (`oci://host/repo:tag`), with its signature; it must pass the trust check first (and
    /// the lock, with --lock).
    Install {
        /// A plugin file (its FILE.minisig comes along), or oci://REGISTRY/REPO:TAG.
        src: String,
        /// The plugins directory to put it in.
        #[arg(long, default_value = "plugins")]
        dir: PathBuf,
        /// Refuse it unless it carries a valid signature by a trusted key.
        #[arg(long)]
        require_signature: bool,
        /// Refuse it unless this lock file pins its sha256.
        #[arg(long)]
        lock: Option<PathBuf>,
        /// Directory of trusted public keys (repeatable).
        #[arg(long = "trust-dir", value_name = "DIR")]
        trust_dirs: Vec<PathBuf>,
    },
    /// Push a plugin file (and its FILE.minisig, when there is one) to an OCI registry:
    /// oci://REGISTRY/REPO:TAG (credentials from CURATOR_OCI_USERNAME / _PASSWORD).
    Publish { file: PathBuf, reference: String },
    /// Check a plugin file's signature against the trust store (exit 1 if refused under
    /// `trust: signed`).
    Verify {
        file: PathBuf,
        /// Directory of trusted public keys (repeatable); then $CURATOR_TRUST_DIR and
        /// ~/.config/curator/trust.
        #[arg(long = "trust-dir", value_name = "DIR")]
        trust_dirs: Vec<PathBuf>,
    },
}

pub(crate) fn run(command: PluginCommand) -> Result<ExitCode> {
    match command {
        PluginCommand::List { plugins, json } => {
            let reg = scan(&plugins);
            plugin_list(&reg, json)?;
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Inspect { name_or_file, plugins, json } => plugin_inspect(&name_or_file, &plugins, json),
        PluginCommand::Keygen { prefix } => {
            let id = curator_host::trust::keygen(&prefix)?;
            out!("key {id}: secret key {0}.key (keep it private), public key {0}.pub", prefix.display());
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Sign { file, key } => {
            let (sig, id) = curator_host::trust::sign(&file, &key)?;
            out!("signed {} with key {id}: {}", file.display(), sig.display());
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Install { src, dir, require_signature, lock, trust_dirs } => {
            use curator_core::trust::{TrustMode, TrustSpec};
            use curator_host::trust;
            let (store, problems) = trust::TrustStore::load(&trust::TrustStore::default_dirs(&trust_dirs));
            for p in problems {
                tracing::warn!("trust store: {p}");
            }
            let policy = TrustSpec::Mode(if require_signature { TrustMode::Signed } else { TrustMode::Any });
            let lock = match lock.as_deref().map(plan::lock::load).transpose() {
                Ok(l) => l.flatten(),
                Err(e) => {
                    eprintln!("error: {e}");
                    return Ok(ExitCode::from(EXIT_INVALID));
                }
            };
            match curator_host::install::install(&src, &dir, &policy, &store, lock.as_ref()) {
                Ok((path, standing)) => {
                    if let Some(w) = standing.warning() {
                        tracing::warn!("{} {w}", path.display());
                    }
                    out!("installed {} ({standing:?})", path.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        PluginCommand::Publish { file, reference } => {
            let artifact = curator_host::install::read_local(&file)?;
            let signed = artifact.signature.is_some();
            let url = curator_host::oci::publish(&artifact, &reference)?;
            out!("published {} ({}) to {url}", file.display(), if signed { "with its signature" } else { "unsigned" });
            Ok(ExitCode::SUCCESS)
        }
        PluginCommand::Verify { file, trust_dirs } => {
            use curator_host::trust;
            let (store, problems) = trust::TrustStore::load(&trust::TrustStore::default_dirs(&trust_dirs));
            for p in problems {
                tracing::warn!("trust store: {p}");
            }
            let signed = curator_core::trust::TrustSpec::Mode(curator_core::trust::TrustMode::Signed);
            match trust::check(&file, &signed, &store) {
                Ok(s) => {
                    out!("{}: ok ({s:?})", file.display());
                    Ok(ExitCode::SUCCESS)
                }
                Err(reason) => {
                    eprintln!("error: {}: {reason}", file.display());
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}

fn entry_json(e: &PluginEntry) -> serde_json::Value {
    let m = &e.manifest;
    serde_json::json!({
        "name": m.name,
        "version": m.version,
        "kind": m.kind,
        "description": m.description,
        "license": m.license,
        "abi": m.abi,
        "resources": m.resources,
        "batch_size": m.batch_size,
        "input_columns": m.input_columns,
        "input_params": m.input_params,
        "output_columns": m.output_columns,
        "permissions": m.permissions,
        "params_schema": m.params_schema,
        "path": e.path,
        "size_bytes": e.size,
    })
}

fn plugin_list(reg: &Registry, json: bool) -> Result<()> {
    if json {
        let list: Vec<_> = reg.plugins.values().map(entry_json).collect();
        out!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    if reg.plugins.is_empty() {
        out!("no plugins found in: {}", reg.dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", "));
        return Ok(());
    }
    let mut table = plain_table(&["NAME", "VERSION", "KIND", "RESOURCES", "PATH"]);
    for e in reg.plugins.values() {
        let m = &e.manifest;
        table.add_row(vec![
            m.name.clone(),
            m.version.clone(),
            format!("{:?}", m.kind).to_lowercase(),
            fmt_resources(&m.resources),
            e.path.display().to_string(),
        ]);
    }
    out!("{}", render(table));
    Ok(())
}

fn plugin_inspect(what: &str, dirs: &PluginDirs, json: bool) -> Result<ExitCode> {
    let path = Path::new(what);
    let entry = if path.is_file() {
        let manifest = registry::read_manifest(path)?;
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        PluginEntry { manifest, path: path.to_path_buf(), size, standing: curator_host::trust::Standing::Unsigned }
    } else {
        let reg = scan(dirs);
        match reg.get(what) {
            Some(e) => e.clone(),
            None => bail!("no plugin named {what:?} (installed: {})", reg.names().join(", ")),
        }
    };
    let v = entry_json(&entry);
    if json {
        out!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let m = &entry.manifest;
        out!("{} {} ({:?}, ABI {}.{})", m.name, m.version, m.kind, m.abi.major, m.abi.minor);
        if !m.description.is_empty() {
            out!("  {}", m.description);
        }
        out!("file:        {} ({} bytes)", entry.path.display(), entry.size);
        out!("resources:   {}", fmt_resources(&m.resources));
        out!("columns:     reads {:?}, writes {:?}", m.input_columns, m.output_columns);
        if !m.input_params.is_empty() {
            out!("             and the columns its params {:?} name", m.input_params);
        }
        let dirs: Vec<String> =
            m.permissions.directories.iter().map(|d| format!("{} ({})", d.name, if d.writable { "rw" } else { "ro" })).collect();
        out!("directories: {}", if dirs.is_empty() { "none".into() } else { dirs.join(", ") });
        out!("params:");
        if let Some(props) = m.params_schema.get("properties").and_then(|p| p.as_object()) {
            for (k, s) in props {
                let ty = s.get("type").map(|t| t.to_string()).unwrap_or_else(|| "any".into());
                let default = s.get("default").map(|d| format!(" = {d}")).unwrap_or_default();
                let desc = s.get("description").and_then(|d| d.as_str()).unwrap_or("");
                out!("  {k}: {}{default}  {desc}", ty.trim_matches('"'));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
