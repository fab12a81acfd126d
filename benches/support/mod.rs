//! What the cache benchmarks (`benches/cache.rs`) and `examples/bump_cost.rs` build alike:
//! a framed response and a cache holding N entries of one table.

use bytes::{BufMut, Bytes, BytesMut};

use qcache::cache::{key, Cache, Entry, Stamps, TableHandle};
use qcache::config::CacheConfig;
use qcache::protocol::packets::status;

/// A framed response of `len` bytes ending in an EOF whose status flags sit at the returned
/// offset. The content is filler: the store never looks inside.
pub fn response(len: usize) -> (Bytes, usize) {
    let mut b = BytesMut::with_capacity(len);
    let body = len.saturating_sub(4 + 9);
    b.put_uint_le(body as u64, 3);
    b.put_u8(1);
    b.put_bytes(b'x', body);
    b.put_slice(&[5, 0, 0, 2, 0xfe, 0, 0]);
    let at = b.len();
    b.put_u16_le(status::AUTOCOMMIT);
    (b.freeze(), at)
}

/// A 1 GiB cache with `n` 64-byte entries, every one stamped with `shop.orders`, and that
/// table's handle.
pub fn cache_with_entries(n: u64) -> (Cache, TableHandle) {
    let cache = Cache::new(&CacheConfig {
        max_bytes: 1 << 30,
        max_result_bytes: 1 << 20,
        ..CacheConfig::default()
    });
    let t = cache.versions().table("shop", "orders");
    let (bytes, at) = response(64);
    for i in 0..n {
        let stamps = Stamps::capture(cache.versions(), std::slice::from_ref(&t));
        let e = Entry::new(bytes.clone(), at, stamps, i);
        assert!(cache.insert(key(1, 0, &i.to_le_bytes()), e));
    }
    assert_eq!(cache.len() as u64, n, "every entry must be resident");
    (cache, t)
}
