//! A sink on a filesystem that fills up: the run fails naming the file and the filesystem,
//! leaves no partial file under a final name, and a rerun once there is space resumes and
//! ends with the same output as a run that never ran out. The test mounts its own small tmpfs
//! (it needs root, as CI and the development machines have).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// A size-limited tmpfs, unmounted on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(at: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(at).status();
        assert!(ok.is_ok_and(|s| s.success()), "cannot mount a tmpfs at {} (the disk-full test needs root and mount(8))", at.display());
        SmallFs(at.to_path_buf())
    }

    fn grow(&self, size: &str) {
        let ok = Command::new("mount").args(["-o", &format!("remount,size={size}")]).arg(&self.0).status().unwrap();
        assert!(ok.success());
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_fails_clearly_keeps_no_partial_file_and_the_rerun_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    std::fs::create_dir_all(&input).unwrap();
    // 24 files of ~240 kB: ~5.8 MB of output for a 2 MB filesystem.
    for f in 0..24 {
        let texts: Vec<String> = (0..400).map(|i| format!("file {f} doc {i} {}", "filler words ".repeat(45))).collect();
        write_docs(&input.join(format!("part-{f:02}.jsonl")), &texts);
    }
    let yaml = |out: &Path| format!("source:\n  path: in\nsink:\n  path: {}\nbatch_size: 64\n", out.display());
    let clean = write_pipeline(tmp.path(), &yaml(&tmp.path().join("clean")));
    run_with_guests(&["run", clean.to_str().unwrap()]).ok();
    let want = output_docs(&tmp.path().join("clean"), ".jsonl");
    assert_eq!(want.len(), 24 * 400);

    let fs = SmallFs::mount(&tmp.path().join("small"), "2m");
    let out = tmp.path().join("small/out");
    let p = tmp.path().join("full.yaml");
    std::fs::write(&p, yaml(&out)).unwrap();
    let run = run_with_guests(&["run", p.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let fs_root = fs.0.canonicalize().unwrap();
    assert!(run.stderr.contains(&format!("no space left on the filesystem mounted at {}", fs_root.display())), "{}", run.stderr);
    // The message names the output file that could not be written.
    assert!(run.stderr.contains(&format!("{}/part-", out.display())), "{}", run.stderr);
    // What is there under a final name is whole: each file holds all of its input's documents.
    let mut complete = 0;
    for e in std::fs::read_dir(&out).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(['_', '.']) {
            continue;
        }
        let docs = read_jsonl(&e.path());
        assert_eq!(docs.len(), 400, "{name} is partial");
        complete += 1;
    }
    assert!(complete < 24, "the filesystem never filled up");
    assert!(temp_leftovers(&out).is_empty(), "{:?}", temp_leftovers(&out));

    fs.grow("64m");
    let rerun = run_with_guests(&["run", p.to_str().unwrap()]);
    rerun.ok();
    assert_eq!(output_docs(&out, ".jsonl"), want);
    assert!(!out.join("_journal.jsonl").exists());
    eprintln!("{complete} partitions were whole when the disk filled; {}", rerun.stdout.lines().last().unwrap_or(""));
}
