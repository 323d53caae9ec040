//! One FIFO queue per key, for limiters keyed by nature: a key's queue is made when
//! its first waiter arrives and dropped when its last one leaves, so keys nobody
//! waits on cost nothing here.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;

use super::gate::Gate;
use super::queue::Waiting;
use crate::sync::{Arc, AtomicBool, AtomicU64, Mutex, Ordering};

/// The queues of the keys that have waiters.
pub(crate) struct Queues<K, G> {
    map: Mutex<HashMap<K, Arc<Waiting<G>>>>,
    /// Queues in the map: zero spares a decision the lookup.
    len: AtomicU64,
    closed: AtomicBool,
}

impl<K, G> Default for Queues<K, G> {
    fn default() -> Self {
        Queues {
            map: Mutex::new(HashMap::new()),
            len: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        }
    }
}

impl<K: Hash + Eq + Clone, G: Gate> Queues<K, G> {
    /// The queue of `key`, if anyone waits on it.
    #[inline]
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<Arc<Waiting<G>>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.map.lock().get(key).cloned()
    }

    /// Joins the queue of `key`, making it with `gate` if it has none. A queue made
    /// after [`close`](Queues::close) is closed from the start.
    pub(crate) fn join(self: &Arc<Self>, key: &K, gate: impl FnOnce() -> G) -> Joined<K, G> {
        let queue = {
            let mut map = self.map.lock();
            match map.get(key) {
                Some(queue) => Arc::clone(queue),
                None => {
                    let queue = Waiting::new(gate());
                    if self.closed.load(Ordering::Acquire) {
                        queue.close();
                    }
                    map.insert(key.clone(), Arc::clone(&queue));
                    self.len.fetch_add(1, Ordering::AcqRel);
                    queue
                }
            }
        };
        Joined {
            queue: Some(queue),
            queues: Arc::clone(self),
            key: key.clone(),
        }
    }

    /// Closes every queue, and those made later.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let queues: Vec<Arc<Waiting<G>>> = self.map.lock().values().cloned().collect();
        for queue in queues {
            queue.close();
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Serves every key's waiters with the gates as they are now: a reconfiguration
    /// may have made room.
    pub(crate) fn serve_all(&self) {
        if self.len.load(Ordering::Acquire) == 0 {
            return;
        }
        let queues: Vec<Arc<Waiting<G>>> = self.map.lock().values().cloned().collect();
        for queue in queues {
            queue.serve();
        }
    }

    /// Waiters on every key.
    pub(crate) fn waiters(&self) -> usize {
        if self.len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        self.map.lock().values().map(|q| q.waiters()).sum()
    }
}

/// A waiter's hold on its key's queue; the last one to leave removes the queue.
pub(crate) struct Joined<K: Hash + Eq, G> {
    queue: Option<Arc<Waiting<G>>>,
    queues: Arc<Queues<K, G>>,
    key: K,
}

impl<K: Hash + Eq, G> Deref for Joined<K, G> {
    type Target = Waiting<G>;

    fn deref(&self) -> &Waiting<G> {
        self.queue.as_ref().expect("held until dropped")
    }
}

impl<K: Hash + Eq, G> Drop for Joined<K, G> {
    fn drop(&mut self) {
        let mut map = self.queues.map.lock();
        // Dropped under the map's lock, where every join takes its handle: if only
        // the map holds the queue now, nobody else can reach it.
        drop(self.queue.take());
        if map
            .get(&self.key)
            .is_some_and(|q| Arc::strong_count(q) == 1)
        {
            map.remove(&self.key);
            self.queues.len.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl<K: Hash + Eq, G> fmt::Debug for Joined<K, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Joined").finish_non_exhaustive()
    }
}

impl<K, G> fmt::Debug for Queues<K, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queues")
            .field("keys", &self.len.load(Ordering::Relaxed))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish()
    }
}
