//! The worker's side: `curator-host worker PLUGIN …` loads one stage (a native library, or a
//! WASM component with `--wasm`), says READY, then answers batch frames until told to stop or
//! until the host goes away. Batches are read from the input arena in place and answers
//! written to the output arena (`arena.rs`, `layout/`).

use std::io::{BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::path::Path;

use curator_sdk::abi::WorkerContext;

use super::layout::{Arena, Decoder, Encoder, Source};
use super::protocol::{
    self, TAG_BATCH, TAG_ERROR, TAG_FATAL, TAG_INVALID_PARAMS, TAG_MANIFEST, TAG_OOM, TAG_OUTPUT, TAG_READY, TAG_SHUTDOWN,
};
use super::{WasmWorkerSpec, ffi::Library};
use crate::stage::{FailureClass, StageCall, StageFailure};
use crate::wasm::WasmRuntime;

/// How the host started this worker.
pub struct WorkerArgs<'a> {
    pub plugin: &'a Path,
    pub params: &'a str,
    pub context: &'a WorkerContext,
    pub cpus: &'a [usize],
    /// Input and output arena descriptors (inherited from the host).
    pub shm: (RawFd, RawFd),
    /// Serve a WASM component with this spec instead of a native library.
    pub wasm: Option<&'a WasmWorkerSpec>,
}

/// `curator-host worker PLUGIN --manifest`: print a native plugin's manifest and exit (how the
/// registry reads native manifests without loading libraries into the host).
pub fn serve_manifest(plugin: &Path) -> i32 {
    let mut out = std::io::stdout().lock();
    match Library::load(plugin) {
        Ok(lib) => {
            let json = serde_json::to_vec(&lib.manifest).unwrap_or_default();
            let _ = protocol::write_frame(&mut out, TAG_MANIFEST, &json);
            0
        }
        Err(e) => {
            let _ = protocol::write_frame(&mut out, TAG_FATAL, e.to_string().as_bytes());
            3
        }
    }
}

/// A stage instance and how to make a fresh one (after a trap leaves it in an unknown state).
type Start<'a> = Box<dyn Fn() -> Result<Box<dyn StageCall>, StageFailure> + 'a>;

fn start_native(args: &WorkerArgs<'_>) -> Result<Start<'static>, StageFailure> {
    let lib = Library::load(args.plugin)?;
    let (params, context) = (args.params.to_string(), args.context.clone());
    Ok(Box::new(move || Ok(Box::new(lib.create(&params, &context)?) as Box<dyn StageCall>)))
}

fn start_wasm(args: &WorkerArgs<'_>, spec: &WasmWorkerSpec) -> Result<Start<'static>, StageFailure> {
    let params: serde_json::Value =
        serde_json::from_str(args.params).map_err(|e| StageFailure::Load(format!("--params is not JSON: {e}")))?;
    let runtime = WasmRuntime::without_deadline_checks(spec.cache_dir.clone())?;
    let compiled = runtime.load(args.plugin, spec.manifest.clone())?;
    let (label, limits) = (spec.label.clone(), spec.limits());
    Ok(Box::new(move || Ok(Box::new(compiled.instantiate(&label, &params, &limits)?) as Box<dyn StageCall>)))
}

/// Serve one stage until the host says stop. The exit code.
pub fn serve(args: &WorkerArgs<'_>) -> i32 {
    let mut out = std::io::stdout().lock();
    let fail = |out: &mut std::io::StdoutLock<'_>, e: StageFailure| {
        let tag = if matches!(e, StageFailure::InvalidParams(_)) { TAG_INVALID_PARAMS } else { TAG_FATAL };
        let msg = match e {
            StageFailure::InvalidParams(m) => m,
            e => e.to_string(),
        };
        let _ = protocol::write_frame(out, tag, msg.as_bytes());
        3
    };
    if !args.cpus.is_empty() {
        crate::os::set_affinity(args.cpus);
    }
    crate::os::keep_large_allocations();
    // SAFETY: the host passed these descriptors to this process for exactly this use.
    let (in_fd, out_fd) = unsafe { (OwnedFd::from_raw_fd(args.shm.0), OwnedFd::from_raw_fd(args.shm.1)) };
    let arenas = Arena::open(in_fd, false).and_then(|i| Ok((i, Arena::open(out_fd, true)?)));
    let (mut input, mut output) = match arenas {
        Ok(a) => a,
        Err(e) => return fail(&mut out, StageFailure::Load(format!("cannot map the batch arenas: {e}"))),
    };
    let start = match args.wasm {
        Some(spec) => start_wasm(args, spec),
        None => start_native(args),
    };
    let start = match start {
        Ok(s) => s,
        Err(e) => return fail(&mut out, e),
    };
    let mut inst = match start() {
        Ok(i) => i,
        Err(e) => return fail(&mut out, e),
    };
    if protocol::write_frame(&mut out, TAG_READY, &[]).is_err() {
        return 1;
    }
    let mut control = BufReader::with_capacity(1 << 16, std::io::stdin().lock());
    let (mut encoder, mut decoder) = (Encoder::default(), Decoder::default());
    loop {
        let Ok((tag, descriptor)) = protocol::read_frame(&mut control) else { return 0 };
        match tag {
            TAG_BATCH => {}
            TAG_SHUTDOWN => {
                inst.teardown();
                return 0;
            }
            _ => return 4,
        }
        // The whole process's CPU time: a native stage may work on threads of its own (the
        // calling thread's alone counted 0.001 s for a stage that decodes on eight).
        let cpu0 = crate::os::process_cpu_time();
        let answer = (|| -> Result<Vec<u8>, StageFailure> {
            let proto = |e: super::layout::ShmError| StageFailure::Protocol(e.to_string());
            input.follow().map_err(|e| StageFailure::Protocol(e.to_string()))?;
            let batch = decoder.read(&descriptor, &Source::Worker(&input)).map_err(proto)?.batch;
            let rows = batch.num_rows();
            let result = inst.call(&batch)?;
            let (kind, b) = protocol::output_to_wire(result, rows)?;
            encoder.write_output(&b, &mut output, &input, kind).map_err(|e| match e {
                super::layout::ShmError::Unsupported(_) => StageFailure::InvalidOutput(e.to_string()),
                e => proto(e),
            })
        })();
        let sent = match answer {
            Ok(d) => {
                let cpu = crate::os::process_cpu_time().saturating_sub(cpu0);
                protocol::write_frame(&mut out, TAG_OUTPUT, &protocol::join_cpu(cpu, &d))
            }
            Err(e) => {
                if e.instance_lost() {
                    // A trap or a memory cap leaves the instance unusable: a fresh one.
                    inst = match start() {
                        Ok(i) => i,
                        Err(e2) => {
                            let _ = protocol::write_frame(&mut out, TAG_FATAL, format!("{e}; cannot restart the stage: {e2}").as_bytes());
                            return 3;
                        }
                    };
                }
                let (tag, msg) = match e {
                    StageFailure::Failed(m) => (TAG_ERROR, m),
                    StageFailure::OutOfMemory(m) => (TAG_OOM, m),
                    e if e.class() == FailureClass::OutOfMemory => (TAG_OOM, e.to_string()),
                    e => (TAG_ERROR, e.to_string()),
                };
                protocol::write_frame(&mut out, tag, msg.as_bytes())
            }
        };
        if sent.and_then(|_| out.flush()).is_err() {
            return 1;
        }
    }
}
