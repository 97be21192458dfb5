//! WebDataset shards (`.tar`), the image datasets' layout (img2dataset, LAION, NeMo Curator's
//! image reader): a sample is the run of consecutive members that share a key, the member's
//! path up to the first dot of its file name (`dir/000123.jpg`, `dir/000123.json` → key
//! `dir/000123`). Members without an extension are skipped, as webdataset skips them.
//!
//! One document per sample: `id` the key; `text` its caption (the `.txt` member, else
//! `.caption`, else empty); `image` (binary) the bytes of its first member with an image
//! extension ([`curator_image::EXTENSIONS`]); `_meta` holds `id` (the key), `__url__` (the
//! shard) and the fields of its `.json` member (an object; its own `id`, if any, gives way
//! to the key), and `cls` from a `.cls` member; and
//! `_sample` (binary, hidden from JSONL and Parquet sinks) every member but the image, as they
//! were, for the WebDataset sink to write back ([`pack`]/[`unpack`]).
//!
//! A sample without an image member, or whose image member is not an image by its magic
//! bytes or is cut short ([`curator_image::check`]), or whose `.json` member is not a JSON
//! object, is a [`Reject`](crate::Reject) at its header's offset; so is a shard cut short (the member's offset
//! and how many bytes are missing), after which the shard ends. Whether the pixels decode is
//! the image stages' business (a member that does not decode fails there, named by its row).

mod format;
mod read;
mod write;

pub use format::{EXTENSIONS, WEBDATASET};
pub use read::WebdatasetReader;
pub(crate) use read::{Doc, batch, document};
pub use write::WebdatasetWriter;

/// The column that holds each sample's image bytes.
pub const IMAGE: &str = "image";
pub use super::SAMPLE;

/// The key and extension of a member path (`a/b/0001.seg.png` → `("a/b/0001", "seg.png")`),
/// or `None` when the file name has no dot.
pub fn split_key(path: &str) -> Option<(&str, &str)> {
    let start = path.rfind('/').map_or(0, |i| i + 1);
    let dot = path[start..].find('.')? + start;
    (dot > start).then(|| (&path[..dot], &path[dot + 1..]))
}

/// One member: its path in the shard and bytes (`None` for the image, which is in [`IMAGE`]).
pub type Member = (String, Option<Vec<u8>>);

/// A sample's members in their order as one binary value: per member, its path's length
/// (u32 LE), the path, then `u64::MAX` for the image or the data's length (u64 LE) and data.
pub fn pack(members: &[(&str, Option<&[u8]>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in members {
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        match data {
            None => out.extend_from_slice(&u64::MAX.to_le_bytes()),
            Some(d) => {
                out.extend_from_slice(&(d.len() as u64).to_le_bytes());
                out.extend_from_slice(d);
            }
        }
    }
    out
}

/// [`pack`]'s members back, or `None` when `bytes` is not such a value.
pub fn unpack(mut bytes: &[u8]) -> Option<Vec<Member>> {
    let mut out = Vec::new();
    let take = |n: usize, b: &mut &[u8]| -> Option<Vec<u8>> {
        let (head, rest) = (b.get(..n)?, b.get(n..)?);
        *b = rest;
        Some(head.to_vec())
    };
    while !bytes.is_empty() {
        let n = u32::from_le_bytes(take(4, &mut bytes)?.try_into().ok()?) as usize;
        let name = String::from_utf8(take(n, &mut bytes)?).ok()?;
        let len = u64::from_le_bytes(take(8, &mut bytes)?.try_into().ok()?);
        let data = if len == u64::MAX { None } else { Some(take(usize::try_from(len).ok()?, &mut bytes)?) };
        out.push((name, data));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_end_at_the_first_dot_of_the_file_name() {
        assert_eq!(split_key("a/b.c/0001.seg.png"), Some(("a/b.c/0001", "seg.png")));
        assert_eq!(split_key("0001.jpg"), Some(("0001", "jpg")));
        assert_eq!(split_key("dir/README"), None);
        assert_eq!(split_key("dir/.hidden"), None);
    }

    #[test]
    fn members_pack_and_unpack() {
        let packed = pack(&[("k.json", Some(b"{}")), ("k.jpg", None), ("k.txt", Some(b""))]);
        let back = unpack(&packed).unwrap();
        assert_eq!(back, vec![("k.json".into(), Some(b"{}".to_vec())), ("k.jpg".into(), None), ("k.txt".into(), Some(Vec::new()))]);
        assert!(unpack(&packed[..packed.len() - 1]).is_none());
        assert_eq!(unpack(&[]), Some(Vec::new()));
    }
}
