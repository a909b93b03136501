//! Handing freed heap memory back to the OS, when the loop step says a
//! flood of keys has gone (see `service::trim`): glibc's `malloc_trim`.
//! Elsewhere (other allocators, other systems) this does nothing.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn release_free_heap() {
    // SAFETY: malloc_trim only returns free memory to the OS; it changes no
    // allocation that is in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_heap() {}
