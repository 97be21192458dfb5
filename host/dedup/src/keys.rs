//! What dedup computes of each document, below every phase: exact dedup's 128-bit text hash
//! and its 16-byte key, the MinHash signatures a batch carries (binary or hex), their LSH band
//! keys (xxh3-64 of a band's values, seeded with the band's number), the record a scan keeps
//! per document, and the shingling a pair check compares texts with.

use std::borrow::Cow;

use arrow_array::Array;
use curator_core::dedup::{ExactHash, FuzzyParams, Shingle};
use curator_sdk::shingle::Shingles;
use md5::Digest;

use super::DedupError;

/// The column the `minhash` stage writes.
pub const SIGNATURE: &str = "minhash_signature";
/// Each docs shard's signatures, in position order (`scans.rs`).
pub const SIGS: &str = "sigs.bin";
/// Each docs shard's band keys, in position order, when the pairs are not checked.
pub const BANDS: &str = "bands.bin";
pub fn hash(text: &str, h: ExactHash) -> (u64, u64) {
    let v: u128 = match h {
        ExactHash::Xxh3 => xxhash_rust::xxh3::xxh3_128(text.as_bytes()),
        ExactHash::Md5 => u128::from_be_bytes(md5::Md5::digest(text.as_bytes()).into()),
    };
    ((v >> 64) as u64, v as u64)
}

/// A text's key as 16 bytes, the high half first, each little-endian: the layout of the
/// key files' records and of the lean spill's key column.
pub fn key(text: &str, h: ExactHash) -> [u8; 16] {
    let (hi, lo) = hash(text, h);
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&hi.to_le_bytes());
    k[8..].copy_from_slice(&lo.to_le_bytes());
    k
}

/// Value of each hex digit, 0xff for anything else.
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Decode one hex signature (8 digits per value) into little-endian u32 bytes.
fn decode(hex: &str, hashes: usize, out: &mut Vec<u8>) -> Option<()> {
    let b = hex.as_bytes();
    if b.len() != hashes * 8 {
        return None;
    }
    let mut bad = 0u8;
    for word in b.chunks_exact(8) {
        let mut v = 0u32;
        for &d in word {
            let x = HEX[d as usize];
            bad |= x;
            v = (v << 4) | (x & 0xf) as u32;
        }
        out.extend_from_slice(&v.to_le_bytes());
    }
    // Every valid digit is < 16; 0xff marks an invalid one.
    (bad & 0xf0 == 0).then_some(())
}

/// The signatures of `batch`'s documents, back to back (`hashes` little-endian u32 each):
/// the `minhash` plugin's binary column as it is, or hex text (8 digits a value) decoded.
/// `name` says where the batch came from, for the error.
pub fn signatures<'b>(batch: &'b arrow_array::RecordBatch, hashes: usize, name: &str) -> Result<Cow<'b, [u8]>, DedupError> {
    let bad = |r: usize| DedupError::Data {
        path: name.to_string(),
        message: format!("row {r}: {SIGNATURE} is not {hashes} u32 values (binary, or hex text)"),
    };
    let col = batch.column_by_name(SIGNATURE);
    if let Some(col) = col.and_then(|c| c.as_any().downcast_ref::<arrow_array::BinaryArray>()) {
        let (offsets, values) = (col.value_offsets(), col.value_data());
        let (first, last) = (offsets[0] as usize, offsets[col.len()] as usize);
        if col.null_count() > 0 || last - first != col.len() * hashes * 4 {
            return Err(bad((0..col.len()).find(|&r| col.is_null(r) || col.value(r).len() != hashes * 4).unwrap_or(0)));
        }
        // Every row has exactly `hashes * 4` bytes, so the rows lie back to back.
        return Ok(Cow::Borrowed(&values[first..last]));
    }
    let Some(col) = col.and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>()) else {
        return Err(DedupError::Data { path: name.to_string(), message: format!("no {SIGNATURE} column (binary, or hex text)") });
    };
    let mut buf = Vec::with_capacity(col.len() * hashes * 4);
    for r in 0..col.len() {
        decode(col.value(r), hashes, &mut buf).ok_or_else(|| bad(r))?;
    }
    Ok(Cow::Owned(buf))
}

/// Band `b`'s key of one signature: xxh3-64 of the band's values, seeded with `b`.
fn band_key(sig: &[u8], rows: usize, b: usize) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(&sig[b * rows * 4..(b + 1) * rows * 4], b as u64)
}

/// Every band's key of each signature in `sigs` (back to back), appended to `out`: 8 bytes
/// (little-endian) a band, `num_bands` a document.
pub fn band_keys(sigs: &[u8], p: &FuzzyParams, out: &mut Vec<u8>) {
    out.reserve(sigs.len() / (p.num_hashes() * 4).max(1) * p.num_bands * 8);
    for sig in sigs.chunks_exact(p.num_hashes() * 4) {
        for b in 0..p.num_bands {
            out.extend_from_slice(&band_key(sig, p.rows, b).to_le_bytes());
        }
    }
}

/// What the scan keeps of each document for the bucket passes: its signature when the pairs
/// are checked (the check reads it), else only its band keys (8 bytes a band, not 4 a hash).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Records {
    Signatures,
    BandKeys,
}

impl Records {
    pub fn of(p: &FuzzyParams) -> Records {
        if p.checks_pairs() { Records::Signatures } else { Records::BandKeys }
    }
    /// The scan's file of them, in position order.
    pub fn file(self) -> &'static str {
        match self {
            Records::Signatures => SIGS,
            Records::BandKeys => BANDS,
        }
    }
    /// Bytes per document.
    pub fn width(self, p: &FuzzyParams) -> usize {
        match self {
            Records::Signatures => p.num_hashes() * 4,
            Records::BandKeys => p.num_bands * 8,
        }
    }
    /// Band `b`'s key of one document's record.
    pub fn band_key(self, record: &[u8], p: &FuzzyParams, b: usize) -> u64 {
        match self {
            Records::Signatures => band_key(record, p.rows, b),
            Records::BandKeys => u64::from_le_bytes(record[b * 8..b * 8 + 8].try_into().unwrap_or_default()),
        }
    }
}

pub fn shingles(p: &FuzzyParams) -> Shingles {
    match p.shingle {
        Shingle::Chars(n) => Shingles::Chars(n),
        Shingle::Words(n) => Shingles::Words(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curator_core::dedup::Shingle;

    /// A lean batch's band keys bucket a document as its signature does, and the signature
    /// column (binary or hex) is refused with its row when a value is short.
    #[test]
    fn band_keys_of_a_lean_batch_bucket_as_the_signature_does() {
        use arrow_array::{ArrayRef, BinaryArray, RecordBatch, StringArray};
        use std::sync::Arc;
        let p = FuzzyParams { shingle: Shingle::Chars(5), num_bands: 3, rows: 2, seed: 1, jaccard_threshold: 0.0 };
        let sigs: Vec<Vec<u8>> = (0..4u32).map(|d| (0..6u32).flat_map(|h| (d * 7 + h % 3).to_le_bytes()).collect()).collect();
        let batch = |sig: ArrayRef| {
            let text: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d"]));
            RecordBatch::try_from_iter([(crate::io::TEXT, text), (SIGNATURE, sig)]).unwrap()
        };
        let binary = batch(Arc::new(BinaryArray::from_iter_values(sigs.iter())));
        let lean = super::super::lean::lean_batch(&binary, &super::super::lean::DocKey::Bands(p)).unwrap();
        let names: Vec<String> = lean.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, [super::super::lean::KEY], "the text and the signatures are left out");
        let keys = super::super::lean::key_bytes(&lean).unwrap();
        assert_eq!(keys.len(), 4 * 3 * 8);
        for (d, sig) in sigs.iter().enumerate() {
            let record = &keys[d * 24..(d + 1) * 24];
            for b in 0..3 {
                assert_eq!(Records::BandKeys.band_key(record, &p, b), Records::Signatures.band_key(sig, &p, b), "doc {d} band {b}");
            }
        }
        // Documents with other values get other keys.
        assert_ne!(keys[..8], keys[24..32]);
        let hex = batch(Arc::new(StringArray::from_iter_values(
            sigs.iter().map(|s| s.chunks(4).map(|v| format!("{:08x}", u32::from_le_bytes(v.try_into().unwrap()))).collect::<String>()),
        )));
        assert_eq!(signatures(&hex, 6, "x").unwrap(), signatures(&binary, 6, "x").unwrap());
        let short = batch(Arc::new(BinaryArray::from_iter_values([&sigs[0][..], &sigs[1][..4], &sigs[2][..], &sigs[3][..]])));
        let e = signatures(&short, 6, "docs/f.arrow").unwrap_err().to_string();
        assert!(e.contains("docs/f.arrow") && e.contains("row 1"), "{e}");
    }

    #[test]
    fn hex_signatures_decode_or_refuse() {
        let mut out = Vec::new();
        assert!(decode("0000000aFFFFFFFF", 2, &mut out).is_some());
        assert_eq!(out, [10, 0, 0, 0, 255, 255, 255, 255]);
        assert!(decode("0000000a", 2, &mut out).is_none());
        assert!(decode("0000000g", 1, &mut out).is_none());
    }

    #[test]
    fn md5_matches_the_reference_digest() {
        let (hi, lo) = hash("hello", ExactHash::Md5);
        assert_eq!(format!("{hi:016x}{lo:016x}"), "5d41402abc4b2a76b9719d911017c592");
    }
}
