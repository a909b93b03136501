// Changed from upstream: libzmq is built against the libsodium that
// `libsodium-sys-stable` builds, so that CURVE is available (upstream passes
// `None` and gets a libzmq without CURVE).
use std::env;

pub fn configure() {
    println!("cargo:rerun-if-changed=build/main.rs");
    println!("cargo:rerun-if-env-changed=PROFILE");

    // As a path dependency, this crate's build warnings are shown on every
    // build of the locker; libzmq's own C++ warnings are not ours to fix.
    for var in ["CFLAGS", "CXXFLAGS"].iter() {
        let flags = env::var(var).unwrap_or_default();
        env::set_var(var, format!("{} -w", flags).trim());
    }

    let lib = env::var("DEP_SODIUM_LIB").expect("libsodium-sys-stable sets DEP_SODIUM_LIB");
    let include = env::var("DEP_SODIUM_INCLUDE").expect("libsodium-sys-stable sets DEP_SODIUM_INCLUDE");
    zeromq_src::Build::new()
        .with_libsodium(Some(zeromq_src::LibLocation::new(lib, include)))
        .build();
}

fn main() {
    configure()
}
