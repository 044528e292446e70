//! Turning a stack's addresses into frames a person reads: function names and lines, and
//! which frames are plumbing.
//!
//! # When and where
//! A stall's stack is a list of instruction addresses, taken on the stuck thread without
//! a lock or an allocation. Names come later, on the thread of whoever reads the stall
//! (`Telemetry::stalls`, the console's publisher), never on a worker and never on the
//! way to counting the stall. The first lookup of a process loads the binary's debug
//! info through the `backtrace` crate, which keeps it for the life of the process (its
//! cache holds at most four objects: the binary and the libraries stacks pass through).
//! That is the memory symbols cost, once: a few megabytes for a binary built with
//! `debug = "line-tables-only"`, tens of megabytes with full debug info. On top, the
//! frames of each address looked up are kept in a table of at most [`CACHE_ADDRESSES`]
//! entries (emptied when full), so a stall seen again costs no lookup.
//!
//! # Plumbing
//! A worker's stack is mostly machinery: the C library's system-call wrappers, std's
//! `thread::sleep` and mutexes, `core`'s future glue, the runtime's poll, `catch_unwind`
//! and thread start. The user's function sits somewhere in the middle. Frames of `std`,
//! `core`, `alloc`, this runtime (`volt`) and `backtrace`, and frames with no Rust path
//! (C functions, the vDSO, addresses with no symbol) are marked `plumbing`; views show
//! the others first and fold these away ([`super::Stall::user_frames`]).

use super::StackFrame;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Addresses whose frames the lookup table keeps.
pub(crate) const CACHE_ADDRESSES: usize = 16_384;

/// The frames of `ips`, innermost first. `ips[0]` is the exact address the thread was
/// stopped at; the others are return addresses, looked up one byte back so that the
/// line is the call's.
pub(crate) fn resolve(ips: &[usize]) -> Vec<StackFrame> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<[StackFrame]>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut out = Vec::with_capacity(ips.len());
    for (i, &ip) in ips.iter().enumerate() {
        let at = if i == 0 { ip } else { ip.saturating_sub(1) };
        let cached = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&at).cloned();
        let frames = match cached {
            Some(f) => f,
            None => {
                // Looked up without the table's lock: the first lookup loads debug info.
                let f: Arc<[StackFrame]> = lookup(at).into();
                let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
                if c.len() >= CACHE_ADDRESSES {
                    c.clear();
                }
                c.insert(at, Arc::clone(&f));
                f
            }
        };
        out.extend(frames.iter().cloned());
    }
    out
}

/// One address's frames (several where calls were inlined into it, innermost first).
fn lookup(ip: usize) -> Vec<StackFrame> {
    let mut frames = Vec::new();
    backtrace::resolve(ip as *mut std::ffi::c_void, |sym| {
        let function = sym.name().map(|n| format!("{n:#}")).unwrap_or_else(|| format!("{ip:#x}"));
        let location = match (sym.filename(), sym.lineno()) {
            (Some(f), Some(l)) => Some(format!("{}:{l}", f.display())),
            _ => None,
        };
        let plumbing = is_plumbing(&function);
        frames.push(StackFrame { function, location, plumbing });
    });
    if frames.is_empty() {
        frames.push(StackFrame { function: format!("{ip:#x}"), location: None, plumbing: true });
    }
    frames
}

/// Whether a frame of this (demangled) function is machinery rather than the program's
/// own code (see "Plumbing").
pub(crate) fn is_plumbing(function: &str) -> bool {
    // `<alloc::boxed::Box<F> as core::ops::FnOnce<A>>::call_once`: the type's path.
    let path = function.trim_start_matches(['<', '&', '*']).trim_start_matches("mut ").trim_start_matches("dyn ");
    let Some((krate, _)) = path.split_once("::") else {
        // No Rust path: a C function (the C library, the vDSO) or a bare address.
        return true;
    };
    if let Some((_, trait_path)) = krate.split_once(" as ") {
        // `<i64 as core::cmp::PartialOrd>::partial_cmp`: a type with no path of its own (a
        // number, a slice, a tuple) in a trait's method, whose code is the trait's crate's.
        // (Read as a crate name, "i64 as core" matched nothing, and a stall inside
        // `Instant::elapsed` showed that comparison as the program's own first frame.)
        return is_plumbing(&path[krate.len() - trait_path.len()..]);
    }
    // A crate name is a plain identifier; anything else (`<impl ...>`, `{{closure}}`
    // at the top) is not a path we know.
    matches!(krate, "std" | "core" | "alloc" | "volt" | "backtrace" | "libc" | "rustc_std_workspace_core")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plumbing_is_std_core_alloc_the_runtime_and_c() {
        for f in [
            "std::thread::sleep",
            "core::ops::function::FnOnce::call_once",
            "<alloc::boxed::Box<F,A> as core::ops::function::FnOnce<Args>>::call_once",
            "<core::pin::Pin<P> as core::future::future::Future>::poll",
            "volt::task::raw::poll",
            "<&mut volt::net::TcpStream as futures_io::AsyncRead>::poll_read",
            "__GI___clock_nanosleep",
            "clock_nanosleep",
            "start_thread",
            "0x7f3a2b1c",
            "<i64 as core::cmp::PartialOrd>::partial_cmp",
            "<[u8] as core::fmt::Debug>::fmt",
            "<&str as core::fmt::Display>::fmt",
            "<(A, B) as core::clone::Clone>::clone",
        ] {
            assert!(is_plumbing(f), "{f}");
        }
        for f in [
            "stall::a_poll_that_blocks",
            "my_service::handler::{{closure}}",
            "<my_service::Db as core::future::future::Future>::poll",
            "hyper::proto::h1::dispatch::Dispatcher<D,Bs,I,T>::poll_inner",
            "serde_json::de::from_str",
            "<u64 as my_service::Codec>::decode",
            "<[u8] as bytes::Buf>::advance",
        ] {
            assert!(!is_plumbing(f), "{f}");
        }
    }

    /// The addresses of a stack walked in a function resolve to that function's name
    /// (a unit test of the runtime's is itself under `volt::`, so only the name is
    /// checked here), and a second lookup comes from the table, the same.
    #[test]
    fn addresses_resolve_to_their_functions() {
        #[inline(never)]
        fn marker_function_for_symbols() -> Vec<usize> {
            let mut ips = Vec::new();
            backtrace::trace(|f| {
                ips.push(f.ip() as usize);
                ips.len() < 8
            });
            std::hint::black_box(ips)
        }
        let ips = marker_function_for_symbols();
        let frames = resolve(&ips);
        assert!(frames.iter().any(|f| f.function.contains("marker_function_for_symbols")), "{frames:#?}");
        assert_eq!(resolve(&ips), frames);
    }
}
