//! One definition of a rule set's params. A rule set (datatrove's `GopherQualityFilter`, …)
//! is used two ways: as a library struct (the fused chain, the parity tests) and as the params
//! of the stage that runs it alone. Both are generated from one field list — name, type,
//! default, doc — so a default or a doc is written once and the two cannot drift.
//!
//! The rule sets' lists are one macro (`__datatrove_params!` in [`crate::datatrove`]) that hands
//! a rule set's fields to a generator: [`__rules_struct!`] makes the library struct and its `Default`;
//! [`__rules_stage!`] makes a `#[stage]` struct whose `#[param]`s are the same fields (the SDK
//! derives the params schema and serde defaults from them) plus the built rules as state.
//! Defaults are written as JSON literals (`50`, `true`, `[[2, 0.2]]`, `["the"]`): the stage
//! puts them in its schema, the library parses them into the field's type. A field with no
//! default must be an `Option` (absent: `None`).
//!
//! Stage crates call [`crate::datatrove_stage!`].

/// The library struct of a rule set and its `Default`, from the rule set's field list.
#[doc(hidden)]
#[macro_export]
macro_rules! __rules_struct {
    (($(#[$m:meta])* $lib:ident) { $( $(#[doc = $doc:literal])* $field:ident : $ty:ty $(= $default:tt)? ),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $lib {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl Default for $lib {
            fn default() -> Self {
                $lib { $( $field: $crate::__rules_default!($field: $ty $(= $default)?), )* }
            }
        }
    };
}

/// A field's default: its JSON literal parsed into its type, or `Default::default()`.
#[doc(hidden)]
#[macro_export]
macro_rules! __rules_default {
    ($field:ident : $ty:ty) => {
        ::core::default::Default::default()
    };
    ($field:ident : $ty:ty = $default:tt) => {
        match serde_json::from_str::<$ty>(stringify!($default)) {
            Ok(v) => v,
            Err(e) => panic!("the default of `{}` ({}) does not fit its type: {e}", stringify!($field), stringify!($default)),
        }
    };
}

/// A `#[stage]` struct whose params are a rule set's fields, plus `rules` (the rule set built
/// from them, as state) and `rules_from_params()`, which builds it.
#[doc(hidden)]
#[macro_export]
macro_rules! __rules_stage {
    (($lib:path, $(#[$m:meta])* $vis:vis struct $stage:ident) { $( $(#[doc = $doc:literal])* $field:ident : $ty:ty $(= $default:tt)? ),* $(,)? }) => {
        $(#[$m])*
        $vis struct $stage {
            $( $(#[doc = $doc])* $(#[param(default = $default)])? pub $field: $ty, )*
            /// The rules, built from the params once.
            #[state]
            rules: $lib,
        }

        impl $stage {
            /// The rule set these params describe.
            fn rules_from_params(&self) -> $lib {
                $lib { $( $field: ::core::clone::Clone::clone(&self.$field), )* }
            }
        }
    };
}

/// Declares a stage whose params are a datatrove rule set's (same names, types, defaults and
/// docs as the library struct), with the built rules in `self.rules` once `init` runs
/// `self.rules = self.rules_from_params()`.
///
/// ```text
/// curator_heuristics::datatrove_stage!(GopherQuality,
///     /// Drops documents outside Gopher's quality bounds.
///     #[stage(name = "gopher_quality_filter", cpus = 1.0, memory_mb = 128)]
///     pub struct GopherQualityFilter);
/// ```
#[macro_export]
macro_rules! datatrove_stage {
    ($lib:ident, $($head:tt)*) => {
        $crate::__datatrove_params!($lib, __rules_stage ($crate::datatrove::$lib, $($head)*));
    };
}
