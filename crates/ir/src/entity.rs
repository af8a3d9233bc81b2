//! Entity references: `u32` newtypes that index typed tables, as in Cranelift.
//! A `Block` can only index a table of blocks, a `Var` only a table of variables.

use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A `u32` newtype used as an index into an [`EntityVec`].
pub trait EntityRef: Copy + Eq + std::hash::Hash + Ord + std::fmt::Debug {
    fn new(index: usize) -> Self;
    fn index(self) -> usize;
}

/// Declares an entity type printed as `prefix` followed by its number (`b3`, `v7`).
#[macro_export]
macro_rules! entity {
    ($(#[$attr:meta])* $name:ident, $prefix:expr) => {
        $(#[$attr])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $crate::entity::EntityRef for $name {
            fn new(index: usize) -> Self {
                $name(u32::try_from(index).expect("entity table overflow"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(self, f)
            }
        }
    };
}

/// A table of `V` indexed by the entity `K`.
#[derive(Clone, PartialEq)]
pub struct EntityVec<K: EntityRef, V> {
    items: Vec<V>,
    _key: PhantomData<K>,
}

impl<K: EntityRef, V: std::fmt::Debug> std::fmt::Debug for EntityVec<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: EntityRef, V> Default for EntityVec<K, V> {
    fn default() -> Self {
        EntityVec {
            items: Vec::new(),
            _key: PhantomData,
        }
    }
}

impl<K: EntityRef, V> EntityVec<K, V> {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, v: V) -> K {
        let k = K::new(self.items.len());
        self.items.push(v);
        k
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn get(&self, k: K) -> Option<&V> {
        self.items.get(k.index())
    }
    pub fn contains(&self, k: K) -> bool {
        k.index() < self.items.len()
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator {
        (0..self.items.len()).map(K::new)
    }
    pub fn values(&self) -> std::slice::Iter<'_, V> {
        self.items.iter()
    }
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.items.iter_mut()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> + ExactSizeIterator {
        self.items.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (K, &mut V)> {
        self.items
            .iter_mut()
            .enumerate()
            .map(|(i, v)| (K::new(i), v))
    }
}

impl<K: EntityRef, V> Index<K> for EntityVec<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        &self.items[k.index()]
    }
}

impl<K: EntityRef, V> IndexMut<K> for EntityVec<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.items[k.index()]
    }
}

impl<K: EntityRef, V> FromIterator<V> for EntityVec<K, V> {
    fn from_iter<I: IntoIterator<Item = V>>(iter: I) -> Self {
        EntityVec {
            items: iter.into_iter().collect(),
            _key: PhantomData,
        }
    }
}
