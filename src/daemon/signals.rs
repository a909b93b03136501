//! What the operator asks of a running locker, as two flags the loop reads.
//!
//! SIGINT and SIGTERM set `stop`; SIGHUP sets `reload`. A signal handler
//! may only do async-signal-safe work, so it sets a flag and nothing more:
//! the loop, which owns the state, stops or reloads when it next looks
//! (within one tick). This module installs handlers and nothing else.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The flags a running loop follows.
#[derive(Debug, Clone, Default)]
pub struct Control {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
}

impl Control {
    /// Flags that only the caller sets: for tests and embedding.
    pub fn new() -> Control {
        Control::default()
    }

    /// Flags set by SIGINT and SIGTERM (stop) and SIGHUP (reload). SIGHUP
    /// no longer ends the process once this returns.
    pub fn from_signals() -> std::io::Result<Control> {
        let control = Control::new();
        for signal in [SIGINT, SIGTERM] {
            signal_hook::flag::register(signal, Arc::clone(&control.stop))?;
        }
        signal_hook::flag::register(SIGHUP, Arc::clone(&control.reload))?;
        Ok(control)
    }

    /// Whether a stop was asked for.
    pub fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Asks the loop to stop.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Asks the loop to read its config again.
    pub fn reload(&self) {
        self.reload.store(true, Ordering::Relaxed);
    }

    /// Whether a reload was asked for since the last call; several signals
    /// before the loop looks make one reload.
    pub fn take_reload(&self) -> bool {
        self.reload.swap(false, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reload_is_taken_once() {
        let control = Control::new();
        assert!(!control.take_reload());
        control.reload();
        control.reload();
        assert!(control.take_reload());
        assert!(!control.take_reload());
        assert!(!control.should_stop());
    }

    #[test]
    fn clones_share_the_flags() {
        let control = Control::new();
        control.clone().stop();
        assert!(control.should_stop());
    }
}
