//! The `#[stage]` attribute of `curator-sdk`. See the SDK's documentation.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote};
use serde_json::{Map, Value, json};
use syn::parse::Parser;
use syn::{Expr, ExprLit, Fields, GenericArgument, ItemStruct, Lit, PathArguments, Type};

use curator_core::{Abi, DirectoryRequest, Manifest, Permissions, PluginKind, Resources};

/// Turn a params struct into a curator stage. Arguments:
/// `name = "..."` (required), `cpus`, `gpus`, `gpu_memory_gb`, `memory_mb`, `batch_size`,
/// `inputs = [..]`, `input_params = [..]` (params whose value names a column the stage also
/// reads), `outputs = [..]`, `sums = [..]` (integer outputs the run summary totals), `dir = "name"` / `writable_dir = "name"` (repeatable),
/// `version` (default: the crate's). Field attribute: `#[param(default = EXPR, min = N,
/// max = N, one_of = [..])]`; `#[state]` marks a field that is not a param (built in `init`,
/// `Default` until then). The struct's and fields' doc comments become descriptions.
#[proc_macro_attribute]
pub fn stage(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand(args.into(), item.into()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

#[derive(Default)]
struct Args {
    name: Option<String>,
    version: Option<String>,
    resources: Resources,
    batch_size: Option<usize>,
    inputs: Option<Vec<String>>,
    input_params: Vec<String>,
    outputs: Vec<String>,
    sums: Vec<String>,
    dirs: Vec<DirectoryRequest>,
    /// A native (C ABI) plugin rather than a WASM component.
    native: bool,
    /// Add NeMo Curator ScoreFilter's params: `score_field`, `invert`, `filter`.
    score_filter: bool,
}

fn lit_f64(expr: &Expr) -> syn::Result<f64> {
    match literal_json(expr) {
        Some(Value::Number(n)) => n.as_f64().ok_or_else(|| syn::Error::new_spanned(expr, "expected a number")),
        _ => Err(syn::Error::new_spanned(expr, "expected a number literal")),
    }
}

fn lit_strings(expr: &Expr) -> syn::Result<Vec<String>> {
    match literal_json(expr) {
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| syn::Error::new_spanned(expr, "expected a list of strings")))
            .collect(),
        _ => Err(syn::Error::new_spanned(expr, "expected a list of strings")),
    }
}

fn parse_args(tokens: TokenStream2) -> syn::Result<Args> {
    let mut args = Args::default();
    let parser = syn::meta::parser(|meta| {
        let key = meta.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
        if key == "native" {
            args.native = true;
            return Ok(());
        }
        if key == "score_filter" {
            args.score_filter = true;
            return Ok(());
        }
        let expr: Expr = meta.value()?.parse()?;
        let string = || match &expr {
            Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Ok(s.value()),
            _ => Err(syn::Error::new_spanned(&expr, "expected a string literal")),
        };
        match key.as_str() {
            "name" => args.name = Some(string()?),
            "version" => args.version = Some(string()?),
            "cpus" => args.resources.cpus = lit_f64(&expr)?,
            "gpus" => args.resources.gpus = Some(lit_f64(&expr)?),
            "gpu_memory_gb" => args.resources.gpu_memory_gb = Some(lit_f64(&expr)?),
            "memory_mb" => args.resources.memory_mb = Some(lit_f64(&expr)? as u64),
            "batch_size" => args.batch_size = Some(lit_f64(&expr)? as usize),
            "inputs" => args.inputs = Some(lit_strings(&expr)?),
            "input_params" => args.input_params = lit_strings(&expr)?,
            "outputs" => args.outputs = lit_strings(&expr)?,
            "sums" => args.sums = lit_strings(&expr)?,
            "dir" | "writable_dir" => {
                args.dirs.push(DirectoryRequest { name: string()?, writable: key == "writable_dir", description: String::new() })
            }
            _ => return Err(meta.error(format!("unknown #[stage] argument `{key}`"))),
        }
        Ok(())
    });
    parser.parse2(tokens)?;
    Ok(args)
}

/// A literal expression as JSON (numbers, strings, bools, negative numbers, lists).
fn literal_json(expr: &Expr) -> Option<Value> {
    match expr {
        Expr::Lit(ExprLit { lit, .. }) => match lit {
            Lit::Int(i) => i.base10_parse::<i64>().ok().map(Value::from),
            Lit::Float(f) => f.base10_parse::<f64>().ok().map(Value::from),
            Lit::Bool(b) => Some(Value::Bool(b.value)),
            Lit::Str(s) => Some(Value::String(s.value())),
            _ => None,
        },
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => match literal_json(&u.expr)? {
            Value::Number(n) => n.as_i64().map(|i| Value::from(-i)).or_else(|| n.as_f64().map(|f| Value::from(-f))),
            _ => None,
        },
        Expr::Array(a) => a.elems.iter().map(literal_json).collect::<Option<Vec<_>>>().map(Value::Array),
        Expr::Group(g) => literal_json(&g.expr),
        Expr::Paren(p) => literal_json(&p.expr),
        _ => None,
    }
}

fn docs(attrs: &[syn::Attribute]) -> String {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Some(s.value().trim().to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    lines.join(" ").trim().to_string()
}

fn single_generic(ty: &Type) -> Option<(&str, &Type)> {
    let Type::Path(p) = bare(ty) else { return None };
    let seg = p.path.segments.last()?;
    let PathArguments::AngleBracketed(ab) = &seg.arguments else {
        return None;
    };
    let inner = ab.args.iter().filter_map(|a| if let GenericArgument::Type(t) = a { Some(t) } else { None }).last()?;
    Some((
        match seg.ident.to_string().as_str() {
            "Option" => "Option",
            "Vec" => "Vec",
            "HashMap" | "BTreeMap" => "Map",
            _ => return None,
        },
        inner,
    ))
}

/// `ty` without the invisible group a `macro_rules!` `$t:ty` wraps it in (and without parentheses).
fn bare(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => bare(&g.elem),
        Type::Paren(p) => bare(&p.elem),
        _ => ty,
    }
}

/// JSON Schema for a field type, and whether the field may be omitted.
fn type_schema(ty: &Type) -> (Value, bool) {
    let ty = bare(ty);
    if let Some((wrapper, inner)) = single_generic(ty) {
        let (inner_schema, _) = type_schema(inner);
        return match wrapper {
            "Option" => (inner_schema, true),
            "Vec" => (json!({"type": "array", "items": inner_schema}), false),
            _ => (json!({"type": "object", "additionalProperties": inner_schema}), false),
        };
    }
    let name = match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        _ => String::new(),
    };
    let schema = match name.as_str() {
        "u8" | "u16" | "u32" | "u64" | "usize" => json!({"type": "integer", "minimum": 0}),
        "i8" | "i16" | "i32" | "i64" | "isize" => json!({"type": "integer"}),
        "f32" | "f64" => json!({"type": "number"}),
        "bool" => json!({"type": "boolean"}),
        "String" | "PathBuf" => json!({"type": "string"}),
        _ => json!({}),
    };
    (schema, false)
}

struct ParamAttr {
    default: Option<Expr>,
    extra: Map<String, Value>,
}

fn param_attr(field: &syn::Field) -> syn::Result<ParamAttr> {
    let mut out = ParamAttr { default: None, extra: Map::new() };
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("param")) {
        attr.parse_nested_meta(|meta| {
            let key = meta.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
            let expr: Expr = meta.value()?.parse()?;
            let lit = || literal_json(&expr).ok_or_else(|| syn::Error::new_spanned(&expr, "expected a literal"));
            match key.as_str() {
                "default" => out.default = Some(expr.clone()),
                "min" => {
                    out.extra.insert("minimum".into(), lit()?);
                }
                "max" => {
                    out.extra.insert("maximum".into(), lit()?);
                }
                "one_of" => {
                    out.extra.insert("enum".into(), lit()?);
                }
                _ => {
                    return Err(meta.error(format!("unknown #[param] argument `{key}` (use default, min, max, one_of)")));
                }
            }
            Ok(())
        })?;
    }
    Ok(out)
}

fn expand(args: TokenStream2, item: TokenStream2) -> syn::Result<TokenStream2> {
    let args = parse_args(args)?;
    let mut item: ItemStruct = syn::parse2(item)?;
    let ident = item.ident.clone();
    if !item.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(&item.generics, "#[stage] structs cannot be generic"));
    }
    let name = args.name.clone().ok_or_else(|| syn::Error::new(Span::call_site(), "#[stage] needs `name = \"...\"`"))?;

    if args.score_filter {
        let Fields::Named(fields) = &mut item.fields else {
            return Err(syn::Error::new_spanned(&item, "score_filter needs a struct with named fields"));
        };
        let extra: syn::FieldsNamed = syn::parse_quote!({
            /// Write the score to this column (float64), as NeMo Curator's ScoreFilter `score_field`.
            pub score_field: ::core::option::Option<::std::string::String>,
            /// Keep the documents the filter would drop, and drop the others.
            #[param(default = false)]
            pub invert: bool,
            /// Drop documents; false: only write the score.
            #[param(default = true)]
            pub filter: bool,
        });
        fields.named.extend(extra.named);
    }

    // Params schema and serde defaults.
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut default_fns = Vec::new();
    if let Fields::Named(fields) = &mut item.fields {
        for field in fields.named.iter_mut() {
            let fname = field.ident.clone().ok_or_else(|| syn::Error::new_spanned(&*field, "unnamed field"))?;
            if field.attrs.iter().any(|a| a.path().is_ident("state")) {
                field.attrs.retain(|a| !a.path().is_ident("state"));
                field.attrs.push(syn::parse_quote!(#[serde(skip)]));
                continue;
            }
            let attr = param_attr(field)?;
            field.attrs.retain(|a| !a.path().is_ident("param"));
            let (mut schema, optional) = type_schema(&field.ty);
            if let Value::Object(obj) = &mut schema {
                obj.extend(attr.extra);
                let d = docs(&field.attrs);
                if !d.is_empty() {
                    obj.insert("description".into(), Value::String(d));
                }
            }
            match &attr.default {
                Some(expr) => {
                    let fn_name = format_ident!("__curator_default_{}", fname);
                    let fn_path = format!("{ident}::{fn_name}");
                    let ty = &field.ty;
                    let body = match literal_json(expr) {
                        Some(v) => {
                            if let Value::Object(obj) = &mut schema {
                                obj.insert("default".into(), v.clone());
                            }
                            let text = v.to_string();
                            let msg = format!("#[param(default = {text})] of `{fname}` does not fit its type");
                            quote! {
                                match ::curator_sdk::serde_json::from_str::<#ty>(#text) {
                                    ::core::result::Result::Ok(v) => v,
                                    ::core::result::Result::Err(e) => ::core::panic!("{}: {}", #msg, e),
                                }
                            }
                        }
                        None => quote! { #expr },
                    };
                    default_fns.push(quote! {
                        #[doc(hidden)]
                        #[allow(non_snake_case)]
                        fn #fn_name() -> #ty { #body }
                    });
                    field.attrs.push(syn::parse_quote!(#[serde(default = #fn_path)]));
                }
                None if optional => field.attrs.push(syn::parse_quote!(#[serde(default)])),
                None => required.push(Value::String(fname.to_string())),
            }
            properties.insert(fname.to_string(), schema);
        }
    }
    let params_schema = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
        "required": required,
    });

    let version = match args.version {
        Some(v) => v,
        None => std::env::var("CARGO_PKG_VERSION").unwrap_or_else(|_| "0.0.0".into()),
    };
    let manifest = Manifest {
        name,
        version,
        description: docs(&item.attrs),
        license: std::env::var("CARGO_PKG_LICENSE").unwrap_or_default(),
        abi: Abi::default(),
        kind: if args.native { PluginKind::Native } else { PluginKind::Wasm },
        resources: args.resources,
        batch_size: args.batch_size,
        input_columns: args.inputs.unwrap_or_else(|| vec!["text".into()]),
        input_params: args.input_params,
        output_columns: args.outputs,
        sums: args.sums,
        params_schema,
        permissions: Permissions { directories: args.dirs },
        setup_on_node: Vec::new(),
    };
    if let Err(e) = manifest.validate() {
        return Err(syn::Error::new(Span::call_site(), e.to_string()));
    }
    let manifest_json = serde_json::to_string(&manifest).map_err(|e| syn::Error::new(Span::call_site(), e.to_string()))?;
    let manifest_bytes = proc_macro2::Literal::byte_string(manifest_json.as_bytes());
    let manifest_len = manifest_json.len();

    let types = quote!(::curator_sdk::__private::bindings::curator::stage::types);
    // Built natively, every stage exports the C ABI entry point (the manifest, saying
    // `native`, travels in the vtable): a native plugin is built only that way, a WASM one can
    // be built that way too (`curator-host bench` compares the two builds).
    let native_export = {
        let native_manifest = Manifest { kind: PluginKind::Native, ..manifest.clone() };
        let native_json = serde_json::to_string(&native_manifest).map_err(|e| syn::Error::new(Span::call_site(), e.to_string()))?;
        let manifest_c = proc_macro2::Literal::byte_string(format!("{native_json}\0").as_bytes());
        quote! {
            #[cfg(not(target_arch = "wasm32"))]
            const _: () = {
                static __CURATOR_MANIFEST_C: &[u8] = #manifest_c;
                static __CURATOR_VTABLE: ::curator_sdk::abi::StageVTable =
                    ::curator_sdk::abi::vtable::<#ident>(__CURATOR_MANIFEST_C.as_ptr() as *const ::std::ffi::c_char);
                /// The native stage entry point (`curator_stage.h`).
                #[unsafe(no_mangle)]
                pub extern "C" fn curator_stage_entry() -> *const ::curator_sdk::abi::StageVTable {
                    &__CURATOR_VTABLE
                }
            };
        }
    };
    Ok(quote! {
        #native_export

        #[derive(::curator_sdk::serde::Deserialize)]
        #[serde(crate = "::curator_sdk::serde", deny_unknown_fields)]
        #item

        impl #ident {
            #(#default_fns)*
        }

        impl ::curator_sdk::StageDef for #ident {
            const MANIFEST: &'static str = #manifest_json;

            fn build(params_json: &str) -> ::core::result::Result<::std::boxed::Box<dyn ::curator_sdk::Runner>, ::curator_sdk::StageError> {
                #[allow(unused_imports)]
                use ::curator_sdk::__private::{ViaFilter as _, ViaMap as _, ViaRewrite as _, ViaScore as _, ViaStage as _};
                let stage: #ident = ::curator_sdk::native::parse_params(params_json)?;
                let mut runner = (&&&&::curator_sdk::__private::Probe::<#ident>::new()).runner(stage);
                runner.init()?;
                ::core::result::Result::Ok(runner)
            }
        }

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            #[unsafe(link_section = "curator-manifest")]
            #[used]
            static __CURATOR_MANIFEST: [u8; #manifest_len] = *#manifest_bytes;

            struct __CuratorGuest;

            impl ::curator_sdk::__private::bindings::Guest for __CuratorGuest {
                fn manifest() -> ::std::string::String {
                    <#ident as ::curator_sdk::StageDef>::MANIFEST.to_string()
                }
                fn setup(params: ::std::string::String) -> ::core::result::Result<(), #types::StageError> {
                    ::curator_sdk::__private::setup::<#ident>(params)
                }
                fn process(input: #types::Batch) -> ::core::result::Result<#types::Output, #types::StageError> {
                    ::curator_sdk::__private::process(input)
                }
                fn teardown() {
                    ::curator_sdk::__private::teardown()
                }
            }

            ::curator_sdk::__private::bindings::export_stage_world!(__CuratorGuest with_types_in ::curator_sdk::__private::bindings);
        };
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    fn expanded(args: TokenStream2, item: TokenStream2) -> String {
        let tokens = expand(args, item).unwrap_or_else(|e| e.to_compile_error());
        match syn::parse2::<syn::File>(tokens.clone()) {
            Ok(file) => prettyplease::unparse(&file),
            Err(_) => tokens.to_string(),
        }
    }

    /// The whole expansion of a filter with every kind of param: the manifest (params schema,
    /// resources, custom section), the `StageDef` impl, the C ABI entry point, the component
    /// exports. A change to what `#[stage]` emits shows up here, line by line.
    #[test]
    fn a_filter_expands_to_its_manifest_and_entry_points() {
        let out = expanded(
            quote!(name = "length_filter", cpus = 0.5, memory_mb = 64, dir = "models"),
            quote! {
                /// Keeps documents of a length.
                pub struct LengthFilter {
                    /// Shortest kept.
                    #[param(default = 3, min = 0)]
                    pub min_len: usize,
                    /// Longest kept, if any.
                    pub max_len: Option<u64>,
                    /// Languages to keep.
                    #[param(default = ["en", "de"])]
                    pub langs: Vec<String>,
                    #[param(default = -1.5)]
                    pub offset: f64,
                    #[state]
                    seen: u64,
                }
            },
        );
        insta::assert_snapshot!(out);
    }

    /// The params schema alone, the part users read (`curator-host plugin info`).
    #[test]
    fn params_schemas_follow_the_field_types() {
        let item = quote! {
            pub struct S {
                /// A count.
                #[param(default = 5)]
                pub n: u32,
                pub ratio: Option<f32>,
                pub on: bool,
                pub names: std::collections::BTreeMap<String, String>,
            }
        };
        insta::assert_snapshot!(serde_json::to_string_pretty(&params_schema(item)).unwrap_or_default());
    }

    /// The params schema in the manifest `#[stage(name = "s")]` makes of `item`.
    fn params_schema(item: TokenStream2) -> Value {
        let out = expanded(quote!(name = "s"), item);
        let start = out.find("const MANIFEST").expect("a MANIFEST constant");
        let manifest = &out[start..];
        let json_start = manifest.find('"').expect("a string literal");
        let literal: syn::LitStr =
            syn::parse_str(&manifest[json_start..manifest[json_start..].find(";").map(|e| json_start + e).unwrap_or(manifest.len())])
                .expect("the manifest is a string literal");
        let m: Value = serde_json::from_str(&literal.value()).expect("the manifest is JSON");
        m["params_schema"].clone()
    }

    /// A `macro_rules!` that forwards a field's type (`$t:ty`) hands it over wrapped in an
    /// invisible group; the schema must not lose the type (it read `{}` and made an `Option`
    /// required).
    #[test]
    fn types_forwarded_by_macro_rules_keep_their_schema() {
        let grouped = |t: TokenStream2| proc_macro2::Group::new(proc_macro2::Delimiter::None, t);
        let (opt, list, n) = (grouped(quote!(Option<Vec<String>>)), grouped(quote!(Vec<String>)), grouped(quote!(f64)));
        let forwarded = quote! {
            pub struct S {
                pub stop: #opt,
                #[param(default = ["a"])]
                pub words: #list,
                #[param(default = 0.5)]
                pub ratio: #n,
            }
        };
        let plain = quote! {
            pub struct S {
                pub stop: Option<Vec<String>>,
                #[param(default = ["a"])]
                pub words: Vec<String>,
                #[param(default = 0.5)]
                pub ratio: f64,
            }
        };
        let (f, p) = (params_schema(forwarded), params_schema(plain));
        assert_eq!(p["required"], json!([]), "{p}");
        assert_eq!(p["properties"]["ratio"]["type"], "number", "{p}");
        assert_eq!(f, p);
    }

    #[test]
    fn mistakes_are_compile_errors_naming_them() {
        let errors: Vec<String> = [
            (
                quote!(name = "x", colour = "red"),
                quote!(
                    pub struct S {}
                ),
            ),
            (
                quote!(cpus = 1.0),
                quote!(
                    pub struct S {}
                ),
            ),
            (
                quote!(name = "x"),
                quote!(
                    pub enum E {
                        A,
                    }
                ),
            ),
        ]
        .into_iter()
        .map(|(a, i)| expand(a, i).err().map(|e| e.to_string()).unwrap_or_else(|| "(expanded)".into()))
        .collect();
        insta::assert_snapshot!(errors.join("\n"));
    }
}
