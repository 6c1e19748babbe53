//! The connector sets the stream, gRPC and Kafka ops keep, one per namespace. A host serves one
//! engine, but the set types are generic over it: the registry holds them type-erased, and a
//! lookup checks the type it gets back.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::protocol::{bad, HostError};

type Erased = Arc<dyn Any + Send + Sync>;

pub struct Registry {
    sets: Mutex<BTreeMap<String, Erased>>,
    /// What the sets connect (for the "another engine" refusal).
    what: &'static str,
    /// The error kind and hint when a namespace has no set: the op to call first.
    missing: (&'static str, &'static str),
}

impl Registry {
    pub const fn new(
        what: &'static str,
        missing_kind: &'static str,
        open_first: &'static str,
    ) -> Self {
        Self {
            sets: Mutex::new(BTreeMap::new()),
            what,
            missing: (missing_kind, open_first),
        }
    }

    fn map(&self) -> MutexGuard<'_, BTreeMap<String, Erased>> {
        // A panicked op cannot leave the map half-written: every change is one insert/remove.
        self.sets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The namespace's set; a `missing` error when it has none.
    pub fn get<T: Any + Send + Sync>(&self, namespace: &str) -> anyhow::Result<Arc<T>> {
        let found = self
            .map()
            .get(namespace)
            .cloned()
            .ok_or_else(|| HostError::new(self.missing.0, self.missing.1))?;
        found
            .downcast::<T>()
            .map_err(|_| bad(format!("{} set of another engine", self.what)))
    }

    /// Keeps `set` for the namespace; answers the set it replaced, if it was of this type.
    pub fn insert<T: Any + Send + Sync>(&self, namespace: String, set: T) -> Option<Arc<T>> {
        let previous = self.map().insert(namespace, Arc::new(set));
        previous.and_then(|any| any.downcast::<T>().ok())
    }

    /// Forgets the namespace's set; answers it, if it was of this type.
    pub fn remove<T: Any + Send + Sync>(&self, namespace: &str) -> Option<Arc<T>> {
        let found = self.map().remove(namespace);
        found.and_then(|any| any.downcast::<T>().ok())
    }
}
