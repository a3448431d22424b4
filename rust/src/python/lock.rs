//! Taking a core object's lock from Python without deadlocking on the GIL: try first, and only
//! if that fails wait with the GIL released, so a thread holding the lock can always get the GIL
//! back.

use parking_lot::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use pyo3::Python;

pub fn read<'a, T: Send + Sync>(py: Python<'_>, lock: &'a RwLock<T>) -> RwLockReadGuard<'a, T> {
    lock.try_read().unwrap_or_else(|| py.detach(|| lock.read()))
}

pub fn write<'a, T: Send + Sync>(py: Python<'_>, lock: &'a RwLock<T>) -> RwLockWriteGuard<'a, T> {
    lock.try_write().unwrap_or_else(|| py.detach(|| lock.write()))
}
