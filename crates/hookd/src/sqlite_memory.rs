//! SQLite's memory: hookd's allocator, without SQLite's own accounting.
//!
//! Left alone, SQLite allocates with the C library's `malloc` and counts every allocation
//! under one process-wide mutex (for `sqlite3_memory_used`, which hookd never reads). Its
//! writer thread allocates and frees for every statement of every publish, claim and record,
//! so both are paid on each delivery. [`configure`] points SQLite at mimalloc, the allocator
//! the rest of hookd uses, and turns the accounting off. SQLite takes such settings only
//! before it starts, so `main` calls it first, before any database opens.

use std::ffi::{c_int, c_void};

use rusqlite::ffi;

/// Configures SQLite's allocator. A refusal (SQLite already started) leaves its defaults,
/// which work, only slower.
pub fn configure() {
    let methods = ffi::sqlite3_mem_methods {
        xMalloc: Some(malloc),
        xFree: Some(free),
        xRealloc: Some(realloc),
        xSize: Some(size),
        xRoundup: Some(roundup),
        xInit: Some(init),
        xShutdown: Some(shutdown),
        pAppData: std::ptr::null_mut(),
    };
    // SAFETY: both options take the arguments given (SQLite copies `methods` before the call
    // returns), and SQLite has not started: nothing in this process has opened a database.
    unsafe {
        ffi::sqlite3_config(
            ffi::SQLITE_CONFIG_MALLOC,
            &methods as *const ffi::sqlite3_mem_methods,
        );
        ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int);
    }
}

// SQLite asks for sizes as `int`, never negative; mimalloc's blocks are aligned to 16 bytes,
// more than the 8 SQLite needs.

unsafe extern "C" fn malloc(bytes: c_int) -> *mut c_void {
    // SAFETY: any size is a valid request.
    unsafe { libmimalloc_sys::mi_malloc(bytes.max(0) as usize) }
}

unsafe extern "C" fn free(block: *mut c_void) {
    // SAFETY: SQLite frees only what `malloc` or `realloc` gave it (or null).
    unsafe { libmimalloc_sys::mi_free(block) }
}

unsafe extern "C" fn realloc(block: *mut c_void, bytes: c_int) -> *mut c_void {
    // SAFETY: as `free`, for `block`.
    unsafe { libmimalloc_sys::mi_realloc(block, bytes.max(0) as usize) }
}

unsafe extern "C" fn size(block: *mut c_void) -> c_int {
    // SAFETY: as `free`, for `block`.
    let usable = unsafe { libmimalloc_sys::mi_usable_size(block) };
    c_int::try_from(usable).unwrap_or(c_int::MAX)
}

unsafe extern "C" fn roundup(bytes: c_int) -> c_int {
    // SAFETY: a pure function of its argument.
    let good = unsafe { libmimalloc_sys::mi_good_size(bytes.max(0) as usize) };
    c_int::try_from(good).unwrap_or(bytes)
}

unsafe extern "C" fn init(_: *mut c_void) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn shutdown(_: *mut c_void) {}
