//! hookd's allocator: mimalloc, on ordinary pages.
//!
//! Every delivery allocates and frees many small buffers on several threads at once, which
//! mimalloc does in less CPU than glibc's malloc (docs/benchmarks.md). It reserves its memory
//! in large aligned regions and asks the kernel to back them with transparent huge pages
//! (2 MiB). A huge page is resident as a whole once any byte of it is touched, so with many
//! threads each using a little of several regions, a fan-out to 100 endpoints held about
//! twice the memory it uses, and no delivery got faster. [`configure`] turns transparent huge
//! pages off for the process, whatever the system's setting (`always` or `madvise`).

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Takes transparent huge pages away from this process. Linux checks the flag at every page
/// fault, so regions mimalloc reserved before `main` are covered too. A refusal (a kernel
/// without the option) leaves huge pages on, which only costs memory.
pub fn configure() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes the flag and no pointers; the unused arguments must be 0.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
