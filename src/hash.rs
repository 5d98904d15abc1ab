//! Deterministic hash maps for the core.
//!
//! hashbrown's default hasher is seeded at random, so iteration order (the order of
//! re-armed watches in SetWatches, for one) would differ between runs and a simulation
//! seed would not decide everything. The core uses this fixed FxHash-style hasher
//! instead: the same inputs give the same order in every process.

use core::hash::{BuildHasherDefault, Hasher};

/// The hasher: Firefox's FxHash (multiply-rotate), fast on short keys, seedless.
#[derive(Clone, Copy, Debug, Default)]
pub struct FxHasher(u64);

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 56));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map with the fixed hasher.
pub type HashMap<K, V> = hashbrown::HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A hash set with the fixed hasher.
pub type HashSet<K> = hashbrown::HashSet<K, BuildHasherDefault<FxHasher>>;

/// Capacity a table keeps however empty it gets.
const KEEP: usize = 64;

/// Gives back what a burst took: an emptied queue above [`KEEP`] slots shrinks to it.
/// Call after taking from the queue; O(1) unless it shrinks.
pub(crate) fn shed_queue<T>(q: &mut alloc::collections::VecDeque<T>) {
    if q.is_empty() && q.capacity() > KEEP {
        q.shrink_to(KEEP);
    }
}

/// Gives back what a burst took: a map filled to less than two fifths shrinks to fit
/// its length (the table's power-of-two rounding leaves room for up to twice that).
/// It shrinks again only after losing a fifth at least, and grows again only past its
/// room: amortized O(1) per removal; a no-op call is O(1). Fitting matters at scale:
/// 10,000 routes fit 16,384 buckets; shrinking only below a third, or to room for half
/// as many again, left them in 32,768.
pub(crate) fn shed_map<K: Eq + core::hash::Hash, V>(m: &mut HashMap<K, V>) {
    if m.capacity() > KEEP && m.len() * 5 < m.capacity() * 2 {
        m.shrink_to(KEEP.max(m.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    #[test]
    fn iteration_order_is_the_same_every_time() {
        let make = || {
            let mut m: HashMap<String, u32> = HashMap::default();
            for i in 0..200u32 {
                m.insert(alloc::format!("/path/{i}"), i);
            }
            m.keys().cloned().collect::<Vec<_>>()
        };
        assert_eq!(make(), make());
        // And not trivially insertion order (it is a hash map).
        let order = make();
        assert_ne!(order.first(), Some(&"/path/0".to_string()));
    }

    /// After a burst a map gives memory back, without resizing at every removal, and
    /// a length going up and down around one value does not resize back and forth.
    #[test]
    fn a_map_sheds_a_burst_with_few_resizes() {
        let mut m: HashMap<u64, u64> = HashMap::default();
        for i in 0..10_000 {
            m.insert(i, i);
        }
        let mut resizes = 0;
        for i in 0..9_900 {
            let cap = m.capacity();
            m.remove(&i);
            shed_map(&mut m);
            // A resize moves the capacity by half at least; removals that leave
            // tombstones only nibble at it.
            resizes += usize::from(m.capacity() * 3 < cap * 2 || m.capacity() * 2 > cap * 3);
        }
        assert!(m.capacity() <= 4 * 100, "{}", m.capacity());
        assert!(resizes <= 8, "{resizes}");
        let cap = m.capacity();
        for _ in 0..1_000 {
            m.insert(20_000, 0);
            shed_map(&mut m);
            m.remove(&20_000);
            shed_map(&mut m);
        }
        assert_eq!(m.capacity(), cap, "no back and forth");
        // A burst of 30,000 shed down to 10,000 keeps one table's worth of room, not
        // two (16,384 buckets: a capacity of 14,336).
        let mut m: HashMap<u64, u64> = HashMap::default();
        for i in 0..30_000 {
            m.insert(i, i);
        }
        for i in 10_000..30_000 {
            m.remove(&i);
            shed_map(&mut m);
        }
        assert_eq!(m.capacity(), 14_336);
        let mut q: alloc::collections::VecDeque<u8> = (0..10_000u32).map(|i| i as u8).collect();
        q.clear();
        shed_queue(&mut q);
        assert!(q.capacity() <= KEEP);
    }
}
