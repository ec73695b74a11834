//! Values made from a shared list and kept for as long as that very list lives (`PerArc`): a
//! session's tool list is one `Arc` while its tools stay the same, so what is derived from it
//! (the model's view of the tools, their encoding) is made once per list, not once per call.

use std::sync::{Arc, Mutex, Weak};

use crate::sync::lock;

/// Values kept per `Arc<K>`, found by the list's address: each entry holds its key weakly, so
/// a list that is gone is not kept alive, and its address is not reused while the entry holds
/// it (the same pointer is the same list). The most recent first, at most `most`; entries of
/// lists gone are dropped when a value is made.
pub struct PerArc<K, V> {
    kept: Mutex<Vec<(Weak<K>, V)>>,
    most: usize,
}

impl<K, V: Clone> PerArc<K, V> {
    pub const fn new(most: usize) -> PerArc<K, V> {
        PerArc { kept: Mutex::new(Vec::new()), most }
    }

    /// The value kept for this very `key`, or the one `make` makes from it, then kept. The lock
    /// is not held while `make` runs.
    pub fn get_or_make<E>(&self, key: &Arc<K>, make: impl FnOnce(&K) -> Result<V, E>) -> Result<V, E> {
        if let Some((_, v)) = lock(&self.kept).iter().find(|(k, _)| k.as_ptr() == Arc::as_ptr(key)) {
            return Ok(v.clone());
        }
        let v = make(key)?;
        let mut kept = lock(&self.kept);
        kept.retain(|(k, _)| k.strong_count() > 0);
        kept.insert(0, (Arc::downgrade(key), v.clone()));
        kept.truncate(self.most);
        Ok(v)
    }

    /// `get_or_make` with a `make` that cannot fail.
    pub fn get_or_insert_with(&self, key: &Arc<K>, make: impl FnOnce(&K) -> V) -> V {
        match self.get_or_make(key, |k| Ok::<V, std::convert::Infallible>(make(k))) {
            Ok(v) => v,
            Err(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_made_once_per_list_and_not_kept_past_it() {
        let kept: PerArc<Vec<u32>, usize> = PerArc::new(2);
        let made = std::cell::Cell::new(0);
        let sum = |l: &Vec<u32>| -> Result<usize, ()> {
            made.set(made.get() + 1);
            Ok(l.iter().sum::<u32>() as usize)
        };
        let a = Arc::new(vec![1, 2]);
        assert_eq!(kept.get_or_make(&a, sum), Ok(3));
        assert_eq!(kept.get_or_make(&a, sum), Ok(3));
        assert_eq!(made.get(), 1, "the same list: made once");
        // An equal list that is another `Arc` is another list.
        let b = Arc::new(vec![1, 2]);
        assert_eq!(kept.get_or_make(&b, sum), Ok(3));
        assert_eq!(made.get(), 2);
        // A list gone takes its entry with it when the next value is made.
        drop(a);
        let c = Arc::new(vec![5]);
        assert_eq!(kept.get_or_make(&c, sum), Ok(5));
        assert_eq!(lock(&kept.kept).len(), 2, "b and c; a's entry dropped");
        // At most `most`, the oldest dropped.
        let d = Arc::new(vec![7]);
        assert_eq!(kept.get_or_make(&d, sum), Ok(7));
        assert_eq!(kept.get_or_make(&b, sum), Ok(3));
        assert_eq!(made.get(), 5, "b's entry went with the bound");
        // A failure keeps nothing.
        let e = Arc::new(vec![9]);
        assert_eq!(kept.get_or_make(&e, |_| Err::<usize, ()>(())), Err(()));
        assert_eq!(kept.get_or_insert_with(&e, |l| l[0] as usize), 9);
        assert_eq!(kept.get_or_make(&e, sum), Ok(9), "kept by the call before");
    }
}
