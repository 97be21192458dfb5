//! GPU discovery through NVML (nvml-wrapper, which loads `libnvidia-ml.so` at run time, so the
//! host builds and runs on machines without a driver). No driver or no GPU is a normal state:
//! the inventory is empty and says why.

use curator_core::placement::GpuDevice;

/// The GPUs of this machine.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Inventory {
    pub gpus: Vec<GpuDevice>,
    /// NVIDIA driver version, when a driver answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Why the inventory is empty, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How a worker process is told its device: the card's UUID (which CUDA accepts in
/// `CUDA_VISIBLE_DEVICES` and which, unlike an ordinal, means the same card whatever order
/// CUDA enumerates in), or the index when the UUID is not known.
pub fn cuda_id(index: u32) -> String {
    static INVENTORY: std::sync::OnceLock<Inventory> = std::sync::OnceLock::new();
    INVENTORY
        .get_or_init(discover)
        .gpus
        .iter()
        .find(|g| g.index == index && !g.uuid.is_empty())
        .map(|g| g.uuid.clone())
        .unwrap_or_else(|| index.to_string())
}

/// Ask NVML for every device this process may use (`CUDA_VISIBLE_DEVICES`, when a scheduler
/// set it, narrows the list; indices stay NVML's); never fails.
pub fn discover() -> Inventory {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => return Inventory { note: Some(format!("no NVIDIA driver found (NVML: {e})")), ..Default::default() },
    };
    let driver = nvml.sys_driver_version().ok();
    let count = match nvml.device_count() {
        Ok(c) => c,
        Err(e) => return Inventory { driver, note: Some(format!("NVML could not count devices: {e}")), ..Default::default() },
    };
    let mut gpus = Vec::new();
    let mut problems = Vec::new();
    for index in 0..count {
        let device = match nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                problems.push(format!("device {index}: {e}"));
                continue;
            }
        };
        let mem = device.memory_info();
        let (total, free) = mem.map(|m| (m.total >> 20, m.free >> 20)).unwrap_or((0, 0));
        gpus.push(GpuDevice {
            index,
            uuid: device.uuid().unwrap_or_default(),
            name: device.name().unwrap_or_default(),
            memory_total_mb: total,
            memory_free_mb: free,
        });
    }
    let found = !gpus.is_empty();
    let spec = std::env::var("CUDA_VISIBLE_DEVICES").ok();
    let (gpus, unknown) = curator_core::placement::visible_devices(spec.as_deref(), gpus);
    if !unknown.is_empty() {
        problems.push(format!("CUDA_VISIBLE_DEVICES names no device for {}", unknown.join(", ")));
    }
    let note = if gpus.is_empty() {
        Some(if found {
            format!(
                "CUDA_VISIBLE_DEVICES={:?} hides every GPU{}",
                spec.unwrap_or_default(),
                if problems.is_empty() { String::new() } else { format!(" ({})", problems.join("; ")) }
            )
        } else if problems.is_empty() {
            "the driver reports no GPU".to_string()
        } else {
            problems.join("; ")
        })
    } else if problems.is_empty() {
        None
    } else {
        Some(problems.join("; "))
    };
    Inventory { gpus, driver, note }
}
