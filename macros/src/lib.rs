//! `#[volt::main]` and `#[volt::test]`: run an `async fn` on a Volt runtime.
//!
//! Re-exported by `volt` (feature `macros`); use them through it, as `#[volt::main]`, or as
//! `#[tokio::main]` when the application's Cargo.toml names Volt `tokio`
//! (`tokio = { package = "volt", ... }`). The arguments are Tokio's:
//! `flavor = "multi_thread" | "current_thread" | "local"`, `worker_threads = N`,
//! `start_paused = true` and `crate = "path"`.
//!
//! The expansion names the runtime crate by the name the user's Cargo.toml gives it (found
//! with `proc-macro-crate`), so `volt` and a `tokio` renamed to Volt both work;
//! `crate = "..."` overrides that.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned, ToTokens};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, Lit, MetaNameValue, Token};

/// Start a Volt runtime and run the `async fn main` on it with `block_on`.
///
/// Multi-thread by default, with one worker per core. Arguments (all optional):
/// `flavor = "multi_thread"`, `"current_thread"` or `"local"` (a `LocalRuntime`, where
/// `spawn_local` works without a `LocalSet`), `worker_threads = N` (multi-thread only),
/// `start_paused = true` (current-thread and local only; needs the `test-util` feature),
/// `crate = "path"` (the path of the runtime crate, when it is re-exported under another
/// name).
///
/// ```ignore
/// #[volt::main(flavor = "current_thread")]
/// async fn main() {
///     volt::spawn(async { println!("hello") }).await.unwrap();
/// }
/// ```
#[proc_macro_attribute]
pub fn main(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into(), Kind::Main).into()
}

/// Run an `async fn` test on a fresh Volt runtime: `#[test]` plus `block_on`.
///
/// Current-thread by default. Takes the same arguments as [`macro@main`].
///
/// ```ignore
/// #[volt::test]
/// async fn adds() {
///     assert_eq!(volt::spawn(async { 1 + 1 }).await.unwrap(), 2);
/// }
/// ```
#[proc_macro_attribute]
pub fn test(args: TokenStream, item: TokenStream) -> TokenStream {
    expand(args.into(), item.into(), Kind::Test).into()
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Main,
    Test,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Main => "main",
            Kind::Test => "test",
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Flavor {
    CurrentThread,
    MultiThread,
    /// A current-thread runtime built as a `LocalRuntime` (`Builder::build_local`).
    Local,
}

/// The attribute's arguments, checked.
struct Config {
    flavor: Flavor,
    worker_threads: Option<(usize, Span)>,
    start_paused: Option<(bool, Span)>,
    crate_path: Option<syn::Path>,
    name: Option<String>,
}

fn expand(args: TokenStream2, item: TokenStream2, kind: Kind) -> TokenStream2 {
    // Parse the function first: on an error in the arguments, the function is still
    // emitted, so the user sees one error and not a cascade of "main not found".
    let input: syn::ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(e) => return with_item(e, item),
    };
    let config = match parse_config(args, kind).and_then(|c| check_fn(&input, kind).map(|()| c)) {
        Ok(c) => c,
        Err(e) => return with_item(e, input.to_token_stream()),
    };
    build(input, config, kind)
}

/// The compile error, followed by the item as written.
fn with_item(e: syn::Error, item: TokenStream2) -> TokenStream2 {
    let e = e.to_compile_error();
    quote! { #e #item }
}

fn parse_config(args: TokenStream2, kind: Kind) -> syn::Result<Config> {
    let list = Punctuated::<MetaNameValue, Token![,]>::parse_terminated.parse2(args)?;
    let mut flavor = None;
    let mut worker_threads = None;
    let mut start_paused = None;
    let mut crate_path = None;
    let mut runtime_name = None;
    for arg in list {
        let name = arg.path.get_ident().map(|i| i.to_string()).unwrap_or_default();
        let span = arg.span();
        let once = |set: bool| {
            if set {
                Err(syn::Error::new(span, format!("`{name}` is given more than once")))
            } else {
                Ok(())
            }
        };
        match name.as_str() {
            "flavor" => {
                once(flavor.is_some())?;
                let s = lit_str(&arg.value, "flavor")?;
                flavor = Some(match s.as_str() {
                    "current_thread" => Flavor::CurrentThread,
                    "multi_thread" => Flavor::MultiThread,
                    "local" => Flavor::Local,
                    // Tokio's old name for the current-thread runtime.
                    "single_thread" => {
                        return Err(syn::Error::new(
                            arg.value.span(),
                            "the single-threaded runtime flavor is called `current_thread`",
                        ))
                    }
                    other => {
                        return Err(syn::Error::new(
                            arg.value.span(),
                            format!(
                                "no such runtime flavor `{other}`: the flavors are `current_thread`, `local` and `multi_thread`"
                            ),
                        ))
                    }
                });
            }
            "worker_threads" => {
                once(worker_threads.is_some())?;
                let n = lit_int(&arg.value, "worker_threads")?;
                if n == 0 {
                    return Err(syn::Error::new(arg.value.span(), "`worker_threads` must be greater than 0"));
                }
                worker_threads = Some((n, span));
            }
            "start_paused" => {
                once(start_paused.is_some())?;
                start_paused = Some((lit_bool(&arg.value, "start_paused")?, span));
            }
            "crate" => {
                once(crate_path.is_some())?;
                let s = lit_str(&arg.value, "crate")?;
                let path = syn::parse_str::<syn::Path>(&s).map_err(|e| {
                    syn::Error::new(arg.value.span(), format!("failed to parse `crate` as a path: {e}"))
                })?;
                crate_path = Some(path);
            }
            "name" => {
                once(runtime_name.is_some())?;
                let s = lit_str(&arg.value, "name")?;
                if s.trim().is_empty() {
                    return Err(syn::Error::new(arg.value.span(), "the runtime's `name` must not be empty"));
                }
                runtime_name = Some(s);
            }
            "core_threads" => {
                return Err(syn::Error::new(span, "`core_threads` was renamed `worker_threads`"));
            }
            _ => {
                let shown = if name.is_empty() { arg.path.to_token_stream().to_string() } else { name };
                return Err(syn::Error::new(
                    arg.path.span(),
                    format!(
                        "unknown attribute `{shown}`; expected one of: `flavor`, `worker_threads`, `start_paused`, `crate`, `name`"
                    ),
                ));
            }
        }
    }
    let flavor = flavor.unwrap_or(match kind {
        Kind::Main => Flavor::MultiThread,
        Kind::Test => Flavor::CurrentThread,
    });
    if flavor != Flavor::MultiThread {
        if let Some((_, span)) = worker_threads {
            return Err(syn::Error::new(
                span,
                format!(
                    "the `worker_threads` option requires the `multi_thread` runtime flavor; use `#[{}(flavor = \"multi_thread\")]`",
                    kind.name()
                ),
            ));
        }
    }
    if flavor == Flavor::MultiThread {
        if let Some((true, span)) = start_paused {
            return Err(syn::Error::new(
                span,
                format!(
                    "the `start_paused` option requires the `current_thread` runtime flavor; use `#[{}(flavor = \"current_thread\")]`",
                    kind.name()
                ),
            ));
        }
    }
    Ok(Config { flavor, worker_threads, start_paused, crate_path, name: runtime_name })
}

fn lit_str(e: &Expr, what: &str) -> syn::Result<String> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Ok(s.value()),
        // `flavor = current_thread` without quotes: take the word.
        Expr::Path(p) if p.path.get_ident().is_some() => {
            Ok(p.path.get_ident().map(|i| i.to_string()).unwrap_or_default())
        }
        _ => Err(syn::Error::new(e.span(), format!("failed to parse value of `{what}` as a string"))),
    }
}

fn lit_int(e: &Expr, what: &str) -> syn::Result<usize> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<usize>().map_err(|err| {
            syn::Error::new(e.span(), format!("failed to parse value of `{what}` as an integer: {err}"))
        }),
        _ => Err(syn::Error::new(e.span(), format!("failed to parse value of `{what}` as an integer"))),
    }
}

fn lit_bool(e: &Expr, what: &str) -> syn::Result<bool> {
    match e {
        Expr::Lit(ExprLit { lit: Lit::Bool(b), .. }) => Ok(b.value),
        _ => Err(syn::Error::new(e.span(), format!("failed to parse value of `{what}` as a bool"))),
    }
}

fn check_fn(f: &syn::ItemFn, kind: Kind) -> syn::Result<()> {
    if f.sig.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            f.sig.fn_token,
            "the `async` keyword is missing from the function declaration",
        ));
    }
    match kind {
        Kind::Main => {
            if f.sig.ident != "main" {
                // Tokio allows `#[tokio::main]` on any fn (it then only runs it); so do we.
            } else if !f.sig.inputs.is_empty() {
                return Err(syn::Error::new_spanned(&f.sig.inputs, "the main function cannot accept arguments"));
            }
        }
        Kind::Test => {
            if !f.sig.inputs.is_empty() {
                return Err(syn::Error::new_spanned(&f.sig.inputs, "the test function cannot accept arguments"));
            }
            if let Some(attr) = f.attrs.iter().find(|a| is_test_attr(a)) {
                return Err(syn::Error::new_spanned(
                    attr,
                    "second test attribute is supplied, consider removing or changing the order of your test attributes",
                ));
            }
        }
    }
    Ok(())
}

/// `#[test]` or `#[core::prelude::*::test]`-like paths that end in `test`.
fn is_test_attr(a: &syn::Attribute) -> bool {
    let segs = &a.path().segments;
    segs.last().is_some_and(|s| s.ident == "test")
        && (segs.len() == 1 || segs.first().is_some_and(|s| s.ident == "core" || s.ident == "std"))
}

/// The path of the runtime crate: `crate = ".."`, else the name the user's Cargo.toml
/// gives the `volt` package, else `::volt`.
fn crate_path(config: &Config) -> TokenStream2 {
    if let Some(p) = &config.crate_path {
        return p.to_token_stream();
    }
    match proc_macro_crate::crate_name("volt") {
        Ok(proc_macro_crate::FoundCrate::Name(name)) => {
            let ident = syn::Ident::new(&name, Span::call_site());
            quote!(::#ident)
        }
        // Inside the volt package itself only its integration tests, examples and doc
        // tests use the macros, and they name the library `volt`.
        Ok(proc_macro_crate::FoundCrate::Itself) | Err(_) => quote!(::volt),
    }
}

fn build(mut f: syn::ItemFn, config: Config, kind: Kind) -> TokenStream2 {
    let krate = crate_path(&config);
    let span = f.sig.fn_token.span();
    let mut rt = match config.flavor {
        Flavor::CurrentThread | Flavor::Local => {
            quote_spanned! {span=> #krate::runtime::Builder::new_current_thread() }
        }
        Flavor::MultiThread => quote_spanned! {span=> #krate::runtime::Builder::new_multi_thread() },
    };
    if let Some((n, _)) = config.worker_threads {
        rt = quote_spanned! {span=> #rt.worker_threads(#n) };
    }
    if matches!(kind, Kind::Main) {
        // Volt's own defaults for a program's runtime (the console, with the `console`
        // feature); tests keep Tokio's.
        rt = quote_spanned! {span=> #rt.__main_defaults() };
    }
    if let Some((paused, _)) = config.start_paused {
        rt = quote_spanned! {span=> #rt.start_paused(#paused) };
    }
    if let Some(name) = &config.name {
        rt = quote_spanned! {span=> #rt.name(#name) };
    }
    let build = match config.flavor {
        Flavor::Local => quote_spanned! {span=> build_local(::core::default::Default::default()) },
        Flavor::CurrentThread | Flavor::MultiThread => quote_spanned! {span=> build() },
    };
    f.sig.asyncness = None;
    let body = &f.block;
    let output = match &f.sig.output {
        syn::ReturnType::Default => quote!(()),
        syn::ReturnType::Type(_, ty) => quote!(#ty),
    };
    // The body becomes an `async` block driven by `block_on`. Pinning it as a `dyn Future`
    // with the function's return type lets `?` and `Ok(())` inside infer their types
    // from the signature, as they would in the `async fn`. A type that cannot be named
    // there (`!`, which is unstable outside a return type, or an `impl Trait`) leaves the
    // block's output to be inferred from the `return`.
    let unnameable = match &f.sig.output {
        syn::ReturnType::Type(_, ty) => matches!(**ty, syn::Type::Never(_) | syn::Type::ImplTrait(_)),
        syn::ReturnType::Default => false,
    };
    let pin_as_dyn = if unnameable {
        quote!()
    } else {
        quote_spanned! {span=>
            let body: ::core::pin::Pin<&mut dyn ::core::future::Future<Output = #output>> =
                ::core::pin::pin!(body);
        }
    };
    let new_body = quote_spanned! {span=>
        {
            let body = async #body;
            #[allow(clippy::expect_used, clippy::diverging_sub_expression, clippy::needless_return)]
            {
                #pin_as_dyn
                return #rt
                    .enable_all()
                    .#build
                    .expect("Failed building the Runtime")
                    .block_on(body);
            }
        }
    };
    *f.block = syn::parse2(new_body).expect("the generated body parses");
    let test_attr = match kind {
        Kind::Test => quote!(#[::core::prelude::v1::test]),
        Kind::Main => quote!(),
    };
    quote! {
        #test_attr
        #f
    }
}

#[cfg(test)]
mod tests {
    use super::{expand, Kind};

    fn err_of(args: &str, item: &str, kind: Kind) -> String {
        let out = expand(args.parse().unwrap(), item.parse().unwrap(), kind).to_string();
        assert!(out.contains("compile_error"), "no error in: {out}");
        out
    }

    fn ok_of(args: &str, item: &str, kind: Kind) -> String {
        let out = expand(args.parse().unwrap(), item.parse().unwrap(), kind).to_string();
        assert!(!out.contains("compile_error"), "an error in: {out}");
        out
    }

    #[test]
    fn a_fn_that_is_not_async_is_an_error() {
        let e = err_of("", "fn main() {}", Kind::Main);
        assert!(e.contains("the `async` keyword is missing from the function declaration"), "{e}");
        let e = err_of("", "fn t() {}", Kind::Test);
        assert!(e.contains("the `async` keyword is missing"), "{e}");
        // The function is still emitted, so the error is the only one.
        assert!(e.contains("fn t"), "{e}");
    }

    #[test]
    fn unknown_arguments_are_errors() {
        let e = err_of("foo = 1", "async fn main() {}", Kind::Main);
        assert!(e.contains("unknown attribute `foo`"), "{e}");
        let e = err_of("flavor = \"single\"", "async fn main() {}", Kind::Main);
        assert!(e.contains("no such runtime flavor `single`"), "{e}");
        let e = err_of("worker_threads = \"x\"", "async fn main() {}", Kind::Main);
        assert!(e.contains("failed to parse value of `worker_threads` as an integer"), "{e}");
        let e = err_of("worker_threads = 0", "async fn main() {}", Kind::Main);
        assert!(e.contains("must be greater than 0"), "{e}");
        let e = err_of("flavor = \"multi_thread\", flavor = \"multi_thread\"", "async fn main() {}", Kind::Main);
        assert!(e.contains("more than once"), "{e}");
        let e = err_of("crate = \"1x\"", "async fn main() {}", Kind::Main);
        assert!(e.contains("failed to parse `crate` as a path"), "{e}");
    }

    #[test]
    fn worker_threads_needs_multi_thread() {
        // `test` defaults to current_thread.
        let e = err_of("worker_threads = 2", "async fn t() {}", Kind::Test);
        assert!(e.contains("the `worker_threads` option requires the `multi_thread` runtime flavor"), "{e}");
        let e = err_of("flavor = \"current_thread\", worker_threads = 2", "async fn main() {}", Kind::Main);
        assert!(e.contains("requires the `multi_thread` runtime flavor"), "{e}");
        ok_of("flavor = \"multi_thread\", worker_threads = 2", "async fn t() {}", Kind::Test);
    }

    #[test]
    fn the_local_flavor_builds_a_local_runtime() {
        let out = ok_of("flavor = \"local\"", "async fn main() {}", Kind::Main);
        assert!(out.contains("new_current_thread"), "{out}");
        assert!(out.contains("build_local"), "{out}");
        let out = ok_of("flavor = \"local\", start_paused = true", "async fn t() {}", Kind::Test);
        assert!(out.contains("build_local") && out.contains("start_paused"), "{out}");
        let out = ok_of("flavor = \"current_thread\"", "async fn t() {}", Kind::Test);
        assert!(!out.contains("build_local"), "{out}");
        let e = err_of("flavor = \"local\", worker_threads = 2", "async fn t() {}", Kind::Test);
        assert!(e.contains("the `worker_threads` option requires the `multi_thread` runtime flavor"), "{e}");
    }

    #[test]
    fn start_paused_needs_current_thread() {
        let e = err_of("start_paused = true", "async fn main() {}", Kind::Main);
        assert!(e.contains("the `start_paused` option requires the `current_thread` runtime flavor"), "{e}");
        let out = ok_of("start_paused = true", "async fn t() {}", Kind::Test);
        assert!(out.contains("start_paused (true)"), "{out}");
    }

    #[test]
    fn main_takes_no_arguments_and_tests_have_one_test_attribute() {
        let e = err_of("", "async fn main(x: u8) {}", Kind::Main);
        assert!(e.contains("the main function cannot accept arguments"), "{e}");
        let e = err_of("", "#[test] async fn t() {}", Kind::Test);
        assert!(e.contains("second test attribute is supplied"), "{e}");
    }

    #[test]
    fn defaults_and_crate_path() {
        let out = ok_of("", "async fn main() {}", Kind::Main);
        assert!(out.contains("new_multi_thread"), "{out}");
        let out = ok_of("", "async fn t() {}", Kind::Test);
        assert!(out.contains("new_current_thread"), "{out}");
        assert!(out.contains("test"), "{out}");
        let out = ok_of("crate = \"my::rt\"", "async fn t() {}", Kind::Test);
        assert!(out.contains("my :: rt :: runtime :: Builder"), "{out}");
        // This package names no `volt` dependency: the fallback is `::volt`.
        let out = ok_of("", "async fn t() {}", Kind::Test);
        assert!(out.contains(":: volt :: runtime :: Builder"), "{out}");
    }

    #[test]
    fn a_runtime_name_is_passed_on_and_an_empty_one_refused() {
        let out = ok_of("name = \"edge\"", "async fn main() {}", Kind::Main);
        assert!(out.contains(". name (\"edge\")"), "{out}");
        let e = err_of("name = \"  \"", "async fn main() {}", Kind::Main);
        assert!(e.contains("the runtime's `name` must not be empty"), "{e}");
        let e = err_of("name = \"a\", name = \"b\"", "async fn main() {}", Kind::Main);
        assert!(e.contains("`name` is given more than once"), "{e}");
    }

    #[test]
    fn a_never_or_impl_trait_return_is_not_named_in_a_dyn_future() {
        for ret in ["!", "impl std::fmt::Display"] {
            let out = ok_of("", &format!("async fn main() -> {ret} {{ loop {{}} }}"), Kind::Main);
            assert!(!out.contains("dyn"), "{out}");
            assert!(out.contains("block_on (body)"), "{out}");
        }
        let out = ok_of("", "async fn main() -> u8 { 1 }", Kind::Main);
        assert!(out.contains("Output = u8"), "{out}");
    }
}
