//! Typed kernel launches. [`kernels!`](crate::kernels) declares a module's kernels with their C
//! signatures written as Rust types (`*const T` for a `const T*`, `*mut T` for a `T*`, a
//! scalar as itself) and generates a struct that loads them and one `unsafe` method per
//! kernel whose parameters are those types: a buffer of the wrong element type, a read-only
//! buffer where the kernel writes, a missing or extra argument, or a scalar of another width
//! does not compile. [`check_signatures`] holds the declarations against the CUDA source, so
//! the Rust side and the C side cannot drift apart either.
//!
//! ```
//! use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};
//! curator_gpu::kernels! {
//!     /// Doubles.
//!     pub struct Doubling {
//!         fn twice(x: *mut f32, n: i32);
//!     }
//! }
//! fn run(k: &Doubling, s: &CudaStream, x: &mut CudaSlice<f32>) -> Result<(), cudarc::driver::DriverError> {
//!     let cfg = LaunchConfig::for_num_elems(x.len() as u32);
//!     // SAFETY: the grid covers x.len() threads; the kernel writes x[i] for i < n = x.len().
//!     unsafe { k.twice(s, cfg, x, x.len() as i32) }
//! }
//! ```
//!
//! A launch with an argument of the wrong type does not compile:
//!
//! ```compile_fail
//! use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};
//! curator_gpu::kernels! {
//!     pub struct Doubling {
//!         fn twice(x: *mut f32, n: i32);
//!     }
//! }
//! fn run(k: &Doubling, s: &CudaStream, x: &mut CudaSlice<u32>) {
//!     // A u32 buffer where the kernel takes float*.
//!     let _ = unsafe { k.twice(s, LaunchConfig::for_num_elems(1), x, 1) };
//! }
//! ```
//!
//! Nor does a read-only buffer where the kernel writes:
//!
//! ```compile_fail
//! use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};
//! curator_gpu::kernels! {
//!     pub struct Doubling {
//!         fn twice(x: *mut f32, n: i32);
//!     }
//! }
//! fn run(k: &Doubling, s: &CudaStream, x: &CudaSlice<f32>) {
//!     let _ = unsafe { k.twice(s, LaunchConfig::for_num_elems(1), x, 1) };
//! }
//! ```

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, LaunchArgs, PushKernelArg};

/// A device buffer of `T` a kernel reads (a `const T*` parameter).
pub trait DeviceIn<T> {
    /// Push it as the launch's next argument.
    fn push_to<'a>(&'a self, args: &mut LaunchArgs<'a>);
}

/// A device buffer of `T` a kernel writes (a `T*` parameter).
pub trait DeviceOut<T> {
    /// Push it as the launch's next argument.
    fn push_to<'a>(&'a mut self, args: &mut LaunchArgs<'a>);
}

impl<T> DeviceIn<T> for CudaSlice<T> {
    fn push_to<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl<T> DeviceIn<T> for CudaView<'_, T> {
    fn push_to<'a>(&'a self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl<T> DeviceOut<T> for CudaSlice<T> {
    fn push_to<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

impl<T> DeviceOut<T> for CudaViewMut<'_, T> {
    fn push_to<'a>(&'a mut self, args: &mut LaunchArgs<'a>) {
        args.arg(self);
    }
}

/// Declare a CUDA module's kernels with their C signatures as Rust types; see the
/// [module](crate::kernels) documentation. Generates `pub struct Name` with `load(&module)`,
/// `SIGNATURES` (for [`check_signatures`]) and one `unsafe fn kernel(&self, stream, cfg,
/// params…)` per kernel. The caller of a launch promises what the types cannot say: that
/// the grid reads and writes only inside the buffers (its SAFETY comment says how).
#[macro_export]
macro_rules! kernels {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$kmeta:meta])* fn $kernel:ident ( $($params:tt)* ); )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $kernel: $crate::cudarc::driver::CudaFunction, )*
        }

        #[allow(dead_code)]
        impl $name {
            /// Every kernel, with its parameters' Rust types in order (`*const f32`, `i32`, …).
            pub const SIGNATURES: &'static [(&'static str, &'static [&'static str])] =
                &[ $( (stringify!($kernel), $crate::kernels!(@sig [] $($params)* ,)), )* ];

            /// Every kernel of the compiled `module`; `Err` names the one that is missing.
            pub fn load(
                module: &::std::sync::Arc<$crate::cudarc::driver::CudaModule>,
            ) -> ::std::result::Result<Self, (&'static str, $crate::cudarc::driver::DriverError)> {
                Ok($name { $( $kernel: module.load_function(stringify!($kernel)).map_err(|e| (stringify!($kernel), e))?, )* })
            }

            $( $crate::kernels!(@fn [$(#[$kmeta])*] $kernel builder [] [] $($params)* ,); )*
        }
    };

    // The parameters, one at a time: a pointer the kernel reads, one it writes, a scalar.
    (@fn [$($kmeta:tt)*] $kernel:ident $b:ident [$($p:tt)*] [$($push:tt)*] $arg:ident : *const $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@fn [$($kmeta)*] $kernel $b
            [$($p)* $arg: &impl $crate::DeviceIn<$t>,]
            [$($push)* $crate::DeviceIn::<$t>::push_to($arg, &mut $b);]
            $($rest)*);
    };
    (@fn [$($kmeta:tt)*] $kernel:ident $b:ident [$($p:tt)*] [$($push:tt)*] $arg:ident : *mut $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@fn [$($kmeta)*] $kernel $b
            [$($p)* $arg: &mut impl $crate::DeviceOut<$t>,]
            [$($push)* $crate::DeviceOut::<$t>::push_to($arg, &mut $b);]
            $($rest)*);
    };
    (@fn [$($kmeta:tt)*] $kernel:ident $b:ident [$($p:tt)*] [$($push:tt)*] $arg:ident : $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@fn [$($kmeta)*] $kernel $b
            [$($p)* $arg: $t,]
            [$($push)* $crate::cudarc::driver::PushKernelArg::arg(&mut $b, &$arg);]
            $($rest)*);
    };
    (@fn [$($kmeta:tt)*] $kernel:ident $b:ident [$($p:tt)*] [$($push:tt)*] $(,)?) => {
        $($kmeta)*
        /// # Safety
        /// The launch configuration's threads read and write only inside the buffers passed.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $kernel(
            &self,
            stream: &$crate::cudarc::driver::CudaStream,
            cfg: $crate::cudarc::driver::LaunchConfig,
            $($p)*
        ) -> ::std::result::Result<(), $crate::cudarc::driver::DriverError> {
            let mut $b = stream.launch_builder(&self.$kernel);
            $($push)*
            // SAFETY: the arguments were pushed in the kernel's order with its types (this
            // method's parameters, checked against the CUDA source by `check_signatures`);
            // the caller vouches for the bounds.
            unsafe { $crate::cudarc::driver::LaunchArgs::launch(&mut $b, cfg) }.map(drop)
        }
    };

    // The parameters' types as strings.
    (@sig [$($s:tt)*] $arg:ident : *const $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@sig [$($s)* concat!("*const ", stringify!($t)),] $($rest)*)
    };
    (@sig [$($s:tt)*] $arg:ident : *mut $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@sig [$($s)* concat!("*mut ", stringify!($t)),] $($rest)*)
    };
    (@sig [$($s:tt)*] $arg:ident : $t:ty , $($rest:tt)*) => {
        $crate::kernels!(@sig [$($s)* stringify!($t),] $($rest)*)
    };
    (@sig [$($s:tt)*] $(,)?) => { &[$($s)*] };
}

/// The Rust types a C parameter type may be declared as (`const float*` → `*const f32`;
/// half-precision buffers are `unsigned short*` in C and `f16` or `u16` in Rust).
fn rust_types(c: &str) -> Vec<String> {
    let c = c.split_whitespace().collect::<Vec<_>>().join(" ");
    let (base, pointer) = match c.strip_suffix('*') {
        Some(b) => (b.trim().to_string(), true),
        None => (c.clone(), false),
    };
    let (base, constant) = match base.strip_prefix("const ") {
        Some(b) => (b.trim().to_string(), true),
        None => (base, false),
    };
    let scalars: &[&str] = match base.as_str() {
        "unsigned char" => &["u8"],
        "char" | "signed char" => &["i8"],
        "unsigned short" => &["u16", "f16"],
        "short" => &["i16"],
        "__half" | "half" => &["f16"],
        "int" => &["i32"],
        "unsigned int" | "unsigned" => &["u32"],
        "long long" => &["i64"],
        "unsigned long long" => &["u64"],
        "float" => &["f32"],
        "double" => &["f64"],
        _ => &[],
    };
    scalars
        .iter()
        .flat_map(|s| match (pointer, constant) {
            (false, _) => vec![s.to_string()],
            // A C pointer without const may be declared read-only on the Rust side (it
            // promises less); a const one never writable.
            (true, false) => vec![format!("*mut {s}"), format!("*const {s}")],
            (true, true) => vec![format!("*const {s}")],
        })
        .collect()
}

/// Every `__global__` kernel of a CUDA source: its name and parameter types. A kernel defined
/// by a macro (`void __launch_bounds__(…) NAME(…)` in a `#define`) is listed under its
/// template name.
pub fn cuda_signatures(source: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = source;
    while let Some(k) = rest.find("__global__") {
        rest = &rest[k + "__global__".len()..];
        let Some(open) = rest.find('(') else { break };
        let mut head = rest[..open].trim().trim_start_matches("void").trim();
        // `__launch_bounds__(a, b) name(`: the bounds' own parentheses come first.
        if head.starts_with("__launch_bounds__") {
            let Some(close) = rest.find(')') else { break };
            rest = &rest[close + 1..];
            let Some(open2) = rest.find('(') else { break };
            head = rest[..open2].trim();
            rest = &rest[open2..];
        } else {
            rest = &rest[open..];
        }
        let Some(close) = rest.find(')') else { break };
        let params = rest[1..close].replace('\\', " ");
        let types = params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                // Drop the parameter's name (the last identifier), keep the type and its `*`s.
                let name_start = p.rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
                p[..name_start].trim().replace(" *", "*").to_string()
            })
            .collect();
        out.push((head.to_string(), types));
        rest = &rest[close..];
    }
    out
}

/// Check `declared` (a [`kernels!`](crate::kernels) struct's `SIGNATURES`) against the CUDA
/// source the kernels are compiled from: every kernel is there, with as many parameters, each
/// of a matching type. A kernel the source defines through a macro is checked against the
/// macro's template (the one signature named in capitals) when the source names it.
pub fn check_signatures(source: &str, declared: &[(&str, &[&str])]) -> Result<(), String> {
    let found = cuda_signatures(source);
    let mut problems = Vec::new();
    for (name, params) in declared {
        let c = found.iter().find(|(n, _)| n == name).or_else(|| {
            let templated = found.iter().filter(|(n, _)| n.chars().all(|c| c.is_ascii_uppercase() || c == '_')).collect::<Vec<_>>();
            (templated.len() == 1 && source.contains(name)).then(|| templated[0])
        });
        let Some((_, c_params)) = c else {
            problems.push(format!("{name}: no such __global__ kernel in the CUDA source"));
            continue;
        };
        if c_params.len() != params.len() {
            problems.push(format!("{name}: {} parameters declared, the kernel takes {}", params.len(), c_params.len()));
            continue;
        }
        for (k, (rust, c)) in params.iter().zip(c_params).enumerate() {
            let rust = rust.split_whitespace().collect::<Vec<_>>().join(" ");
            if !rust_types(c).contains(&rust) {
                problems.push(format!("{name}: parameter {k} is `{c}` in C, declared `{rust}`"));
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    const SOURCE: &str = r#"
extern "C" __global__ void fold(const float* sims, int jn, long long rows,
                                float* best, unsigned short* half_out) { }
#define ATT(NAME, D) \
    extern "C" __global__ void __launch_bounds__(128, 4) NAME(const unsigned short* qkv, int L) { body<D>(); }
ATT(att32, 32)
"#;

    kernels! {
        struct Good {
            fn fold(sims: *const f32, jn: i32, rows: i64, best: *mut f32, half_out: *mut f16);
            fn att32(qkv: *const u16, l: i32);
        }
    }

    kernels! {
        struct Bad {
            fn fold(sims: *mut f32, jn: i64, rows: i64, best: *const f32);
            fn gone(x: *const f32);
        }
    }

    #[test]
    fn the_source_is_parsed_with_templates_and_launch_bounds() {
        let s = cuda_signatures(SOURCE);
        assert_eq!(
            s[0],
            ("fold".into(), vec!["const float*".into(), "int".into(), "long long".into(), "float*".into(), "unsigned short*".into()])
        );
        assert_eq!(s[1], ("NAME".into(), vec!["const unsigned short*".into(), "int".into()]));
    }

    #[test]
    fn declarations_that_match_pass_and_every_mismatch_is_named() {
        assert_eq!(Good::SIGNATURES[0].1, ["*const f32", "i32", "i64", "*mut f32", "*mut f16"]);
        assert_eq!(check_signatures(SOURCE, Good::SIGNATURES), Ok(()));
        let e = check_signatures(SOURCE, Bad::SIGNATURES).unwrap_err();
        assert!(e.contains("fold: 4 parameters declared, the kernel takes 5"), "{e}");
        assert!(e.contains("gone: no such __global__ kernel"), "{e}");
        let one_off = [("fold", &["*mut f32", "i64", "i64", "*const f32", "*mut u16"][..])];
        let e = check_signatures(SOURCE, &one_off).unwrap_err();
        assert!(e.contains("parameter 0 is `const float*` in C, declared `*mut f32`"), "{e}");
        assert!(e.contains("parameter 1 is `int` in C, declared `i64`"), "{e}");
        assert!(!e.contains("parameter 3"), "a read-only view of a writable pointer is allowed: {e}");
    }
}
