//! The background thread: woken by `schedule`, it flushes frozen memtables and runs
//! compactions until none is due, hands `maint` to a caller that asks for it, and turns
//! a failure or a panic into the store's background error.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::compaction;
use crate::error::Result;

use super::inner::{lock, Inner};

/// Starts the background thread of a store open for writing.
pub(super) fn spawn(inner: &Arc<Inner>) -> std::io::Result<JoinHandle<()>> {
    let worker_inner = inner.clone();
    std::thread::Builder::new()
        .name("bloomkv-bg".into())
        .spawn(move || worker_inner.background_loop())
}

impl Inner {
    fn background_loop(&self) {
        loop {
            {
                let mut s = lock(&self.signal);
                while !s.pending && !s.shutdown {
                    s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
                }
                if s.shutdown {
                    return;
                }
                s.pending = false;
            }
            if lock(&self.journal.bg_error).is_some() {
                // Nothing will run again, but whoever scheduled this pass may be
                // waiting for progress: wake them to find the error.
                self.notify_progress();
                continue;
            }
            // A panic in background work must not leave writers waiting for progress
            // that will never come: it becomes the store's background error.
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.background_work()));
            let failure = match outcome {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(panic) => Some(format!(
                    "background thread panicked: {}",
                    panic_message(panic.as_ref())
                )),
            };
            if let Some(message) = failure {
                self.set_bg_error_message(message);
            }
            self.notify_progress();
        }
    }

    /// Flushes every frozen memtable, then compacts until no level is over budget.
    fn background_work(&self) -> Result<()> {
        let mut maint = lock(&self.maint);
        loop {
            if self.closing() {
                return Ok(());
            }
            if *lock(&self.maint_callers) > 0 {
                // A caller waits for `maint`: let it in, then queue behind it.
                drop(maint);
                let mut callers = lock(&self.maint_callers);
                while *callers > 0 {
                    callers = self
                        .maint_handoff
                        .wait(callers)
                        .unwrap_or_else(|p| p.into_inner());
                }
                drop(callers);
                maint = lock(&self.maint);
                continue;
            }
            // L0 over its trigger is compacted before the next flush: with flushes
            // first, a fast writer keeps the thread flushing and L0 grows without bound.
            let auto = !self.options.disable_auto_compaction;
            if auto && compaction::l0_over_trigger(&self.current().version, &self.options) {
                if let Some(pick) = self.pick_compaction(&mut maint) {
                    self.compact(&mut maint, pick.inputs, pick.output_level)?;
                    continue;
                }
            }
            if self.flush_oldest(&mut maint)? {
                continue;
            }
            if !auto {
                return Ok(());
            }
            match self.pick_compaction(&mut maint) {
                Some(pick) => self.compact(&mut maint, pick.inputs, pick.output_level)?,
                None => return Ok(()),
            }
        }
    }
}

/// The text of a caught panic's payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
