//! One create per idempotency key at a time: the service looks a key up and, when no session
//! holds it yet, creates one, with no second create of the same key in between — whatever the
//! runtime. A key is held only while a create of it runs, so the map stays as small as the
//! number of creates in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The keys whose creates are in flight.
#[derive(Default)]
pub(super) struct KeyLocks {
    held: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A key held: the next create of it waits until this is dropped.
pub(super) struct KeyGuard<'a> {
    locks: &'a KeyLocks,
    key: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl KeyLocks {
    /// Waits until no other create holds `key`, then holds it.
    pub(super) async fn hold(&self, key: &str) -> KeyGuard<'_> {
        let lock = {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(held.entry(key.to_string()).or_default())
        };
        let guard = Arc::clone(&lock).lock_owned().await;
        KeyGuard {
            locks: self,
            key: key.to_string(),
            lock,
            guard: Some(guard),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut held = self.locks.held.lock().unwrap_or_else(|e| e.into_inner());
        // The map's handle and ours: nobody else waits for the key, so it goes.
        if Arc::strong_count(&self.lock) == 2 {
            held.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_second_create_of_a_key_waits_for_the_first_and_the_map_empties() {
        let locks = Arc::new(KeyLocks::default());
        let first = locks.hold("k").await;
        let other = locks.hold("other").await;
        drop(other);
        let waiter = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _second = locks.hold("k").await;
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        assert!(
            !waiter.is_finished(),
            "the second create of `k` ran beside the first"
        );
        assert_eq!(locks.len(), 1);
        drop(first);
        waiter.await.unwrap();
        assert_eq!(locks.len(), 0, "a key no create holds stays in the map");
    }
}
