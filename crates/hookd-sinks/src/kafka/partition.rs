//! Which partition a record goes to: the Java client's default partitioner (murmur2 of the
//! key), so a key lands where other Kafka producers would put it and one ordering key keeps
//! one partition, which is what orders it.

/// The partition, of `partitions`, for a record keyed `key`.
pub fn for_key(key: &[u8], partitions: usize) -> usize {
    let positive = murmur2(key) & 0x7fff_ffff;
    usize::try_from(positive).expect("a positive i32 fits") % partitions
}

/// Kafka's `Utils.murmur2` (seed `0x9747b28c`), in the Java client's signed arithmetic.
fn murmur2(data: &[u8]) -> i32 {
    const M: i32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = i32::try_from(data.len()).unwrap_or(i32::MAX);
    let mut h = 0x9747_b28c_u32.cast_signed() ^ length;
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = i32::from_le_bytes(chunk.try_into().expect("four bytes"));
        k = k.wrapping_mul(M);
        k ^= k.cast_unsigned().wrapping_shr(R).cast_signed();
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate().rev() {
            h ^= i32::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h.cast_unsigned().wrapping_shr(13).cast_signed();
    h = h.wrapping_mul(M);
    h ^= h.cast_unsigned().wrapping_shr(15).cast_signed();
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values Kafka's own `UtilsTest.testMurmur2` expects.
    #[test]
    fn murmur2_matches_the_java_client() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, expected) in cases {
            assert_eq!(murmur2(key), expected, "{}", String::from_utf8_lossy(key));
        }
    }
}
