//! The power-cut filesystem on its own: mounted for real through FUSE,
//! used through ordinary system calls, cut, and looked at again. What
//! survives a cut is what POSIX promises survives a crash of the machine,
//! and no more.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use seckill::lab::powercut::PowerCutFs;

/// A fresh filesystem in a directory of its own.
fn mounted() -> (tempfile::TempDir, PowerCutFs) {
    let dir = tempfile::tempdir().expect("temp dir");
    let fs = PowerCutFs::mount(&dir.path().join("disk"), &dir.path().join("mnt")).expect("mount");
    (dir, fs)
}

fn fsync_dir(path: &Path) {
    File::open(path)
        .expect("open dir")
        .sync_all()
        .expect("fsync dir");
}

fn write(path: &Path, text: &str) -> File {
    let mut file = File::create(path).expect("create");
    file.write_all(text.as_bytes()).expect("write");
    file
}

#[test]
fn a_file_written_and_fsynced_survives_a_cut() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("kept");
    write(&path, "sold 1").sync_all().expect("fsync");
    fsync_dir(fs.path());
    fs.cut().expect("cut");
    assert_eq!(fs::read_to_string(&path).expect("read"), "sold 1");
}

#[test]
fn a_file_written_and_not_fsynced_loses_its_data() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("unsynced");
    let mut file = write(&path, "first");
    file.sync_all().expect("fsync");
    fsync_dir(fs.path());
    file.write_all(b", then more").expect("write");
    assert_eq!(fs::read_to_string(&path).expect("read"), "first, then more");
    drop(file);
    fs.cut().expect("cut");
    assert_eq!(fs::read_to_string(&path).expect("read"), "first");
}

#[test]
fn a_new_file_whose_directory_was_not_fsynced_is_gone() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("orphan");
    write(&path, "data").sync_all().expect("fsync");
    fs.cut().expect("cut");
    assert!(!path.exists(), "the entry was never made durable");
}

#[test]
fn a_rename_is_durable_only_once_its_directory_is_fsynced() {
    let (_dir, fs) = mounted();
    let (tmp, final_) = (fs.path().join("manifest.tmp"), fs.path().join("manifest"));
    write(&final_, "old").sync_all().expect("fsync");
    fsync_dir(fs.path());
    write(&tmp, "new").sync_all().expect("fsync");
    fs::rename(&tmp, &final_).expect("rename");
    fs.cut().expect("cut");
    assert_eq!(fs::read_to_string(&final_).expect("read"), "old");
    assert!(
        !tmp.exists(),
        "the temporary file's entry was never durable"
    );

    write(&tmp, "new").sync_all().expect("fsync");
    fs::rename(&tmp, &final_).expect("rename");
    fsync_dir(fs.path());
    fs.cut().expect("cut");
    assert_eq!(fs::read_to_string(&final_).expect("read"), "new");
    assert!(!tmp.exists());
}

#[test]
fn an_entry_made_durable_without_its_data_comes_back_empty() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("empty");
    let _file = write(&path, "never fsynced");
    fsync_dir(fs.path());
    fs.cut().expect("cut");
    assert_eq!(fs::read(&path).expect("read").len(), 0);
}

#[test]
fn writes_through_o_dsync_are_durable_on_return() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("wal");
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc::O_DSYNC)
        .open(&path)
        .expect("open");
    fsync_dir(fs.path());
    file.write_all(b"commit 1").expect("write");
    fs.cut().expect("cut");
    assert_eq!(fs::read_to_string(&path).expect("read"), "commit 1");
}

#[test]
fn an_overwrite_and_a_truncation_not_fsynced_are_undone() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("page");
    write(&path, "0123456789").sync_all().expect("fsync");
    fsync_dir(fs.path());
    let file = OpenOptions::new().write(true).open(&path).expect("open");
    file.set_len(4).expect("truncate");
    std::os::unix::fs::FileExt::write_at(&file, b"ab", 6).expect("write");
    assert_eq!(fs::read(&path).expect("read"), b"0123\0\0ab");
    fs.cut().expect("cut");
    assert_eq!(fs::read_to_string(&path).expect("read"), "0123456789");
}

#[test]
fn directories_owners_and_modes_come_back_as_made_durable() {
    let (_dir, fs) = mounted();
    let sub = fs.path().join("data");
    fs::create_dir(&sub).expect("mkdir");
    std::os::unix::fs::chown(&sub, Some(4242), Some(4243)).expect("chown");
    fs::set_permissions(&sub, std::os::unix::fs::PermissionsExt::from_mode(0o700)).expect("chmod");
    write(&sub.join("a"), "a").sync_all().expect("fsync");
    fsync_dir(&sub);
    fs::create_dir(sub.join("not-durable")).expect("mkdir");
    fsync_dir(fs.path());
    fs.cut().expect("cut");
    let meta = fs::metadata(&sub).expect("stat");
    assert_eq!(
        (meta.uid(), meta.gid(), meta.mode() & 0o777),
        (4242, 4243, 0o700)
    );
    assert_eq!(fs::read_to_string(sub.join("a")).expect("read"), "a");
    assert!(!sub.join("not-durable").exists());
}

#[test]
fn sync_all_makes_everything_durable() {
    let (_dir, fs) = mounted();
    fs::create_dir_all(fs.path().join("a/b")).expect("mkdir");
    let _file = write(&fs.path().join("a/b/c"), "bootstrap");
    fs.sync_all().expect("sync");
    fs.cut().expect("cut");
    assert_eq!(
        fs::read_to_string(fs.path().join("a/b/c")).expect("read"),
        "bootstrap"
    );
}

#[test]
fn a_slow_fsync_is_slow_and_a_cut_while_it_waits_keeps_nothing() {
    let (_dir, fs) = mounted();
    let path = fs.path().join("aof");
    write(&path, "").sync_all().expect("fsync");
    fsync_dir(fs.path());
    fs.slow_fsync(Path::new(""), Some(Duration::from_millis(600)));
    let mut file = OpenOptions::new().append(true).open(&path).expect("open");
    file.write_all(b"set a").expect("write");
    let started = Instant::now();
    file.sync_data().expect("slow fsync");
    assert!(started.elapsed() >= Duration::from_millis(600));
    // The next one waits in the background while the power goes.
    file.write_all(b", set b").expect("write");
    let syncing = std::thread::spawn(move || file.sync_data());
    let deadline = Instant::now() + Duration::from_secs(5);
    while fs.slow_fsyncs_waiting() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(fs.slow_fsyncs_waiting(), 1);
    fs.cut().expect("cut");
    assert!(
        syncing.join().expect("thread").is_err(),
        "the fsync never completed"
    );
    assert_eq!(fs::read_to_string(&path).expect("read"), "set a");
}
