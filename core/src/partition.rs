//! How input files become partitions (tasks): the unit of reading, of output files and of
//! resumption. Pure policy; the host measures the files and reads the parts.
//!
//! * `files_per_partition: n` — n whole files per partition, in order.
//! * `blocksize: bytes` — files larger than a block are split (uncompressed JSONL at line
//!   boundaries by byte range, Parquet by row groups); smaller files are grouped until a
//!   partition holds about one block. Compressed JSONL cannot be split and stays whole.
//! * neither — one file per partition.

/// How a file can be split.
#[derive(Debug, Clone, PartialEq)]
pub enum Splittable {
    /// Only whole (compressed streams).
    No,
    /// At any byte offset; the reader snaps to the next line start.
    Bytes,
    /// At unit boundaries; the sizes of the units in order (Parquet row groups).
    Units(Vec<u64>),
}

/// What the policy needs to know about one input file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    pub size: u64,
    pub split: Splittable,
}

/// Which part of a file a partition reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    Whole,
    /// Lines that start in `[start, end)` bytes.
    Bytes {
        start: u64,
        end: u64,
    },
    /// Units (row groups) `[start, end)`.
    Units {
        start: usize,
        end: usize,
    },
}

/// One file (or part of one) in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    pub file: usize,
    pub extent: Extent,
    /// Index of this piece among the pieces its file was split into, and their count.
    pub piece: (usize, usize),
}

/// A unit of work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub index: usize,
    pub parts: Vec<Part>,
}

/// The partitioning rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionBy {
    Files(usize),
    Bytes(u64),
}

fn whole(file: usize) -> Part {
    Part { file, extent: Extent::Whole, piece: (0, 1) }
}

/// Split `files` into partitions, in file order.
pub fn partition(files: &[FileInfo], by: PartitionBy) -> Vec<Partition> {
    let mut groups: Vec<Vec<Part>> = Vec::new();
    match by {
        PartitionBy::Files(n) => {
            let n = n.max(1);
            for chunk in (0..files.len()).collect::<Vec<_>>().chunks(n) {
                groups.push(chunk.iter().map(|&f| whole(f)).collect());
            }
        }
        PartitionBy::Bytes(block) => {
            let block = block.max(1);
            let mut current: Vec<Part> = Vec::new();
            let mut current_size = 0u64;
            for (i, f) in files.iter().enumerate() {
                let pieces = split_file(i, f, block);
                if pieces.len() > 1 {
                    if !current.is_empty() {
                        groups.push(std::mem::take(&mut current));
                        current_size = 0;
                    }
                    groups.extend(pieces.into_iter().map(|p| vec![p]));
                    continue;
                }
                if !current.is_empty() && current_size + f.size > block {
                    groups.push(std::mem::take(&mut current));
                    current_size = 0;
                }
                current.push(whole(i));
                current_size += f.size;
            }
            if !current.is_empty() {
                groups.push(current);
            }
        }
    }
    groups.into_iter().enumerate().map(|(index, parts)| Partition { index, parts }).collect()
}

fn split_file(i: usize, f: &FileInfo, block: u64) -> Vec<Part> {
    if f.size <= block {
        return vec![whole(i)];
    }
    match &f.split {
        Splittable::No => vec![whole(i)],
        Splittable::Bytes => {
            let n = f.size.div_ceil(block);
            let step = f.size.div_ceil(n);
            (0..n)
                .map(|k| Part {
                    file: i,
                    extent: Extent::Bytes { start: k * step, end: ((k + 1) * step).min(f.size) },
                    piece: (k as usize, n as usize),
                })
                .collect()
        }
        Splittable::Units(units) => {
            let mut ranges = Vec::new();
            let (mut start, mut acc) = (0usize, 0u64);
            for (u, size) in units.iter().enumerate() {
                if acc > 0 && acc + size > block {
                    ranges.push((start, u));
                    start = u;
                    acc = 0;
                }
                acc += size;
            }
            if start < units.len() {
                ranges.push((start, units.len()));
            }
            if ranges.len() <= 1 {
                return vec![whole(i)];
            }
            let n = ranges.len();
            ranges
                .into_iter()
                .enumerate()
                .map(|(k, (s, e))| Part { file: i, extent: Extent::Units { start: s, end: e }, piece: (k, n) })
                .collect()
        }
    }
}

/// Parse a size like `64MB`, `1.5GiB`, `512k` or `1048576` into bytes (powers of 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return None,
    };
    let bytes = n * mult as f64;
    (bytes.is_finite() && bytes >= 1.0).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(size: u64, split: Splittable) -> FileInfo {
        FileInfo { size, split }
    }

    #[test]
    fn files_per_partition_groups_in_order() {
        let files: Vec<_> = (0..5).map(|_| f(10, Splittable::Bytes)).collect();
        let parts = partition(&files, PartitionBy::Files(2));
        let shape: Vec<Vec<usize>> = parts.iter().map(|p| p.parts.iter().map(|x| x.file).collect()).collect();
        assert_eq!(shape, vec![vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(partition(&files, PartitionBy::Files(1)).len(), 5);
        assert_eq!(partition(&[], PartitionBy::Files(3)).len(), 0);
    }

    #[test]
    fn blocksize_splits_big_and_groups_small() {
        let mb = 1 << 20;
        let files = vec![
            f(1024 * mb, Splittable::Bytes),
            f(10 * mb, Splittable::No),
            f(20 * mb, Splittable::Bytes),
            f(200 * mb, Splittable::No),
            f(40 * mb, Splittable::Bytes),
        ];
        let parts = partition(&files, PartitionBy::Bytes(64 * mb));
        // 1 GB / 64 MB = 16 byte ranges, then [1, 2] grouped (30 MB), [3] whole (compressed), [4]
        assert_eq!(parts.len(), 16 + 3);
        let ranges: Vec<Extent> = parts[..16].iter().map(|p| p.parts[0].extent).collect();
        assert_eq!(ranges[0], Extent::Bytes { start: 0, end: 64 * mb });
        assert_eq!(ranges[15], Extent::Bytes { start: 15 * 64 * mb, end: 1024 * mb });
        assert!(
            ranges.windows(2).all(|w| matches!((w[0], w[1]), (Extent::Bytes { end, .. }, Extent::Bytes { start, .. }) if end == start))
        );
        assert_eq!(parts[16].parts.iter().map(|p| p.file).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(parts[17].parts, vec![whole(3)]);
        assert_eq!(parts[18].parts, vec![whole(4)]);
        assert!(parts.iter().enumerate().all(|(i, p)| p.index == i));
    }

    #[test]
    fn row_groups_split_at_unit_boundaries() {
        let files = vec![f(100, Splittable::Units(vec![30, 30, 30, 10]))];
        let parts = partition(&files, PartitionBy::Bytes(60));
        let ext: Vec<Extent> = parts.iter().map(|p| p.parts[0].extent).collect();
        assert_eq!(ext, vec![Extent::Units { start: 0, end: 2 }, Extent::Units { start: 2, end: 4 }]);
        let one_group = vec![f(100, Splittable::Units(vec![100]))];
        assert_eq!(partition(&one_group, PartitionBy::Bytes(60))[0].parts, vec![whole(0)]);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MB"), Some(64 << 20));
        assert_eq!(parse_size("1.5 GiB"), Some(3 << 29));
        assert_eq!(parse_size("512k"), Some(512 << 10));
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("ten MB"), None);
        assert_eq!(parse_size("5 parsecs"), None);
        assert_eq!(parse_size("0"), None);
    }
}
