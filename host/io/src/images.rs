//! A folder of image files as a source (`format: images`; img2dataset's `files` layout): one
//! document per image, made as the WebDataset reader makes one per sample. `id` is the
//! image's path under the source up to its file name's first dot (`00000/000000001.jpg` →
//! `00000/000000001`), `image` its bytes; the files beside it that share that name (`.txt`
//! or `.caption` the text, `.json` fields and `.cls` into `_meta`) are its sample's other
//! members, packed in `_sample`, so a WebDataset sink writes each kept image back with them.
//! Such files are looked up beside local images; images in an object store are read alone.
//!
//! A partition holds many images ([`IMAGES_PER_PARTITION`] by default) and is read into batches
//! that span its files, cut at `image_batch_bytes` of images (32 MiB by default): a GPU stage
//! gets full batches, not one image at a time. A file that is not an image by its magic bytes, is cut short, or is larger than
//! `max_line_bytes` is a [`Reject`] naming the file.

use arrow_array::RecordBatch;

use super::records::ReadOptions;
use super::webdataset::{Doc, batch, document};
use super::{InputFile, IoError, Loc, Reject, Rejects};

/// The files beside an image that belong to its sample.
const SIDECARS: &[&str] = &["txt", "caption", "json", "cls"];

/// Whether a local file has an image beside it with its name up to the first dot (a
/// sidecar of a folder of images, read as something else).
pub fn beside_an_image(loc: &Loc) -> bool {
    let Loc::Local(path) = loc else { return false };
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().map(|n| n.to_string_lossy())) else { return false };
    let stem = name.split_once('.').map_or(name.as_ref(), |(s, _)| s);
    curator_image::EXTENSIONS.iter().any(|ext| dir.join(format!("{stem}.{ext}")).is_file())
}

/// The format's name in a pipeline (`format: images`).
pub const NAME: &str = "images";

/// A folder of image files as a source format (`format: images`).
pub struct Images;
pub static IMAGES: Images = Images;

/// Image files per partition when the source sets neither `files_per_partition` nor
/// `blocksize`: a batch never spans partitions, and one image each would starve a GPU stage.
pub const IMAGES_PER_PARTITION: usize = 1024;

/// Its file names: an image's extension ([`curator_image::EXTENSIONS`], with its dot).
static FILE_NAMES: std::sync::LazyLock<super::format::FileNames> = std::sync::LazyLock::new(|| super::format::FileNames {
    format: NAME,
    extensions: curator_image::EXTENSIONS.iter().map(|e| &*format!(".{e}").leak()).collect::<Vec<_>>().leak(),
    unnamed: &[],
    outputs_drop_extension: false,
});

impl super::format::SourceFormat for Images {
    fn names(&self) -> &super::format::FileNames {
        &FILE_NAMES
    }
    fn files_per_partition(&self) -> usize {
        IMAGES_PER_PARTITION
    }
    fn reads_files_together(&self) -> bool {
        true
    }
    fn open(&self, part: &super::format::ReadPart<'_>) -> Result<Box<dyn super::format::PartReader>, IoError> {
        Ok(Box::new(ImagesReader::open(part.files.to_vec(), part.opts)))
    }
    fn not_a_sink(&self) -> String {
        "images is a source format; write the images as webdataset shards, or the documents as parquet or jsonl".into()
    }
}

/// The images of one partition, read in order.
pub struct ImagesReader {
    files: Vec<InputFile>,
    next: usize,
    max_bytes: u64,
    rejects: Rejects,
    /// A batch is cut when its images reach this many bytes.
    batch_bytes: usize,
}

impl ImagesReader {
    pub fn open(files: Vec<InputFile>, opts: &ReadOptions) -> ImagesReader {
        ImagesReader {
            files,
            next: 0,
            max_bytes: opts.max_line_bytes,
            rejects: Rejects::new(opts.strict),
            batch_bytes: opts.image_batch_bytes,
        }
    }
}

impl super::format::PartReader for ImagesReader {
    /// The next batch of at most `n` images (fewer when they reach `image_batch_bytes`), spanning
    /// files.
    fn next_batch(&mut self, n: usize) -> Result<Option<RecordBatch>, IoError> {
        let mut docs: Vec<Doc> = Vec::new();
        let mut bytes = 0usize;
        while docs.len() < n.max(1) && bytes < self.batch_bytes && self.next < self.files.len() {
            let file = self.files[self.next].clone();
            self.next += 1;
            match sample(&file, self.max_bytes)? {
                Ok(doc) => {
                    bytes += doc.image_bytes();
                    docs.push(doc);
                }
                Err(reason) => {
                    self.rejects.add(Reject { source: file.display(), line: None, byte_offset: 0, reason, excerpt: String::new() })?
                }
            }
        }
        if docs.is_empty() {
            return Ok(None);
        }
        let at = self.files[self.next - 1].display();
        batch(&docs).map(Some).map_err(|e| IoError::Line { at, message: format!("cannot build the batch: {e}") })
    }

    fn take_rejects(&mut self) -> Vec<Reject> {
        self.rejects.take()
    }
}

/// One image file and the files beside it as a document, or why it is not one.
fn sample(file: &InputFile, max_bytes: u64) -> Result<Result<Doc, String>, IoError> {
    if file.size > max_bytes {
        return Ok(Err(format!("{} bytes, more than max_line_bytes ({max_bytes})", file.size)));
    }
    let mut members = vec![(file.rel.clone(), file.loc.read_all()?)];
    members.extend(sidecars(file)?);
    Ok(document(members, &file.display()).map_err(|(_, why)| why))
}

/// The files beside a local image that share its name up to the first dot, in [`SIDECARS`]
/// order, as members (their paths under the source, and bytes).
fn sidecars(image: &InputFile) -> Result<Vec<(String, Vec<u8>)>, IoError> {
    let Loc::Local(path) = &image.loc else { return Ok(Vec::new()) };
    let Some((dir, rel_dir)) = path.parent().map(|d| (d, image.rel.rsplit_once('/').map_or("", |(d, _)| d))) else {
        return Ok(Vec::new());
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = name.split_once('.').map_or(name.as_str(), |(s, _)| s);
    let mut out = Vec::new();
    for ext in SIDECARS {
        let side = dir.join(format!("{stem}.{ext}"));
        if side.is_file() {
            let bytes = std::fs::read(&side).map_err(|e| IoError::Read { file: side.display().to_string(), line: 0, source: e })?;
            let rel = if rel_dir.is_empty() { format!("{stem}.{ext}") } else { format!("{rel_dir}/{stem}.{ext}") };
            out.push((rel, bytes));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{PartReader, SourceFormat};

    fn input(dir: &std::path::Path, rel: &str) -> InputFile {
        let path = dir.join(rel);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        InputFile { loc: Loc::Local(path), rel: rel.into(), size, format: crate::Source(&IMAGES), compressed: false }
    }

    /// A 1×1 PNG.
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63,
        0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
        0xae, 0x42, 0x60, 0x82,
    ];

    #[test]
    fn a_partitions_images_fill_batches_across_files_with_their_sidecars() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("00000")).unwrap();
        for i in 0..5 {
            std::fs::write(tmp.path().join(format!("00000/{i:04}.png")), PNG).unwrap();
        }
        std::fs::write(tmp.path().join("00000/0001.txt"), "a caption").unwrap();
        std::fs::write(tmp.path().join("00000/0001.json"), r#"{"width": 1, "url": "http://x"}"#).unwrap();
        std::fs::write(tmp.path().join("00000/0003.png.bak"), "not beside: another name").unwrap();
        std::fs::write(tmp.path().join("00000/0004.png"), "text, not a PNG").unwrap();
        let files: Vec<InputFile> = (0..5).map(|i| input(tmp.path(), &format!("00000/{i:04}.png"))).collect();
        let opts = ReadOptions::default();
        let mut r = ImagesReader::open(files, &opts);
        let first = r.next_batch(3).unwrap().unwrap();
        assert_eq!(first.num_rows(), 3, "one batch spans three files");
        let ids = first.column(0).as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
        assert_eq!((ids.value(0), ids.value(2)), ("00000/0000", "00000/0002"));
        let texts = first.column(1).as_any().downcast_ref::<arrow_array::StringArray>().unwrap();
        assert_eq!((texts.value(0), texts.value(1)), ("", "a caption"));
        let meta: serde_json::Value =
            serde_json::from_str(first.column(2).as_any().downcast_ref::<arrow_array::StringArray>().unwrap().value(1)).unwrap();
        assert_eq!(meta["url"], "http://x");
        let second = r.next_batch(3).unwrap().unwrap();
        assert_eq!(second.num_rows(), 1, "0004.png is not an image");
        let rejects = r.take_rejects();
        assert_eq!(rejects.len(), 1);
        assert!(rejects[0].source.ends_with("00000/0004.png") && rejects[0].reason.contains("not an image"), "{:?}", rejects[0]);
        assert!(r.next_batch(3).unwrap().is_none());
        // `image_batch_bytes` cuts a batch once its images reach it: two PNGs' worth, two.
        let files: Vec<InputFile> = (0..4).map(|i| input(tmp.path(), &format!("00000/{i:04}.png"))).collect();
        let opts = ReadOptions { image_batch_bytes: 2 * PNG.len(), ..ReadOptions::default() };
        let mut r = ImagesReader::open(files, &opts);
        assert_eq!(r.next_batch(10).unwrap().unwrap().num_rows(), 2);
        assert_eq!(r.next_batch(10).unwrap().unwrap().num_rows(), 2);
    }

    #[test]
    fn image_names_by_extension() {
        let is_image_name = |n: &str| IMAGES.claims(n);
        assert!(is_image_name("a/b.jpg") && is_image_name("x.webp") && is_image_name("c.d.png"));
        assert!(!is_image_name("a.txt") && !is_image_name("jpg") && !is_image_name("a.jpg.json"));
    }
}
