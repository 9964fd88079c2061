//! The durable image: what a power cut would leave of the files above.
//!
//! The processes see the live tree, a real directory served through
//! FUSE. Beside it this keeps what the disk would hold after a crash of
//! the machine, as POSIX promises it and no more:
//! - a file's *content* as of its last `fsync`/`fdatasync` (a copy per
//!   inode in the store, brought up to date from the ranges written since);
//! - a directory's *entries* as of its last `fsync` of the directory
//!   (a name → inode map): a new file, a rename or an unlink is durable
//!   only once its directory has been fsynced.
//!
//! An inode named by a durable entry but never fsynced comes back empty;
//! a directory named but never fsynced comes back without entries. Modes
//! and owners are taken when the entry is made durable. Sockets and fifos
//! are not brought back (a server makes its socket anew).

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A live inode, by its backing file's device and inode numbers.
pub type LiveKey = (u64, u64);

/// The durable state of a filesystem, and the ranges written since.
pub struct Durable {
    /// One file per durable inode that was ever fsynced, named by its id.
    store: PathBuf,
    /// Live inode → durable id. An inode keeps its id across renames
    /// (its backing inode number does); a freed one loses it, so that a
    /// reused inode number starts afresh.
    ids: HashMap<LiveKey, u64>,
    /// The next id to give.
    next: u64,
    /// The root directory's id.
    root: u64,
    /// Written since the last fsync, per id.
    dirty: HashMap<u64, Dirty>,
    /// Each directory's entries at its last fsync, per id.
    dirs: HashMap<u64, BTreeMap<OsString, Entry>>,
}

/// What was written to a file since its last fsync.
#[derive(Default)]
struct Dirty {
    /// Written byte ranges, `[start, end)`, merged as they come in
    /// order (appends, the common case, stay one range).
    ranges: Vec<(u64, u64)>,
    /// The shortest length the file had since (a truncation), if shorter
    /// than the durable copy: bytes past it were zero or rewritten.
    shrunk_to: Option<u64>,
}

/// A durable directory entry.
#[derive(Clone, Debug)]
struct Entry {
    /// The inode it names.
    id: u64,
    /// What it is.
    kind: Kind,
    /// Permission bits.
    mode: u32,
    /// Owner.
    uid: u32,
    /// Group.
    gid: u32,
}

/// The kinds of inode a power cut brings back.
#[derive(Clone, Debug)]
enum Kind {
    File,
    Dir,
    Symlink(PathBuf),
    /// A socket or fifo: named, not brought back.
    Other,
}

impl Durable {
    /// An empty filesystem whose root is `live_root` (empty too), its
    /// store in `store` (created).
    pub fn new(live_root: &Path, store: PathBuf) -> std::io::Result<Self> {
        fs::create_dir_all(&store)?;
        let mut durable = Self {
            store,
            ids: HashMap::new(),
            next: 1,
            root: 0,
            dirty: HashMap::new(),
            dirs: HashMap::new(),
        };
        durable.root = durable.id_of(&fs::symlink_metadata(live_root)?);
        durable.dirs.insert(durable.root, BTreeMap::new());
        Ok(durable)
    }

    /// The durable id of the live inode `meta` describes (a new one the
    /// first time it is seen).
    pub fn id_of(&mut self, meta: &fs::Metadata) -> u64 {
        let next = &mut self.next;
        *self.ids.entry((meta.dev(), meta.ino())).or_insert_with(|| {
            *next += 1;
            *next - 1
        })
    }

    /// The live inode `key` is gone (its last link removed): a new file
    /// that gets its number is another inode. What the durable image
    /// holds of it stays.
    pub fn freed(&mut self, key: LiveKey) {
        if let Some(id) = self.ids.remove(&key) {
            self.dirty.remove(&id);
        }
    }

    /// `len` bytes were written at `offset` of `id`.
    pub fn written(&mut self, id: u64, offset: u64, len: u64) {
        let ranges = &mut self.dirty.entry(id).or_default().ranges;
        let end = offset + len;
        match ranges.last_mut() {
            Some(last) if last.0 <= offset && offset <= last.1 => last.1 = last.1.max(end),
            _ => ranges.push((offset, end)),
        }
        if ranges.len() > 4096 {
            merge(ranges);
        }
    }

    /// `id` was truncated or extended to `size`.
    pub fn resized(&mut self, id: u64, size: u64) {
        let dirty = self.dirty.entry(id).or_default();
        dirty.shrunk_to = Some(dirty.shrunk_to.map_or(size, |s| s.min(size)));
    }

    /// `fsync(live)`: the durable copy of `id` becomes what `live` holds.
    pub fn sync_file(&mut self, id: u64, live: &File) -> std::io::Result<()> {
        let Some(mut dirty) = self.dirty.remove(&id) else {
            return Ok(());
        };
        let copy = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(self.store.join(id.to_string()))?;
        if let Some(size) = dirty.shrunk_to {
            copy.set_len(size.min(copy.metadata()?.len()))?;
        }
        let len = live.metadata()?.len();
        merge(&mut dirty.ranges);
        let mut buf = vec![0u8; 1 << 20];
        for (start, end) in dirty.ranges {
            let mut at = start;
            while at < end.min(len) {
                let want = (end.min(len) - at).min(buf.len() as u64) as usize;
                let got = live.read_at(&mut buf[..want], at)?;
                if got == 0 {
                    break;
                }
                copy.write_all_at(&buf[..got], at)?;
                at += got as u64;
            }
        }
        copy.set_len(len)
    }

    /// `fsync` of the directory `live_dir`: its entries, as they are now,
    /// become its durable entries.
    pub fn sync_dir(&mut self, live_dir: &Path) -> std::io::Result<()> {
        let id = self.id_of(&fs::symlink_metadata(live_dir)?);
        let mut entries = BTreeMap::new();
        for item in fs::read_dir(live_dir)? {
            let item = item?;
            let path = item.path();
            let meta = fs::symlink_metadata(&path)?;
            let kind = if meta.is_dir() {
                Kind::Dir
            } else if meta.is_file() {
                Kind::File
            } else if meta.file_type().is_symlink() {
                Kind::Symlink(fs::read_link(&path)?)
            } else {
                Kind::Other
            };
            let entry = Entry {
                id: self.id_of(&meta),
                kind,
                mode: meta.mode() & 0o7777,
                uid: meta.uid(),
                gid: meta.gid(),
            };
            entries.insert(item.file_name(), entry);
        }
        self.dirs.insert(id, entries);
        Ok(())
    }

    /// `sync(1)`: every file and directory under `live_root` made
    /// durable as it is now.
    pub fn sync_all(&mut self, live_root: &Path) -> std::io::Result<()> {
        let mut dirs = vec![live_root.to_owned()];
        while let Some(dir) = dirs.pop() {
            self.sync_dir(&dir)?;
            for item in fs::read_dir(&dir)? {
                let path = item?.path();
                let meta = fs::symlink_metadata(&path)?;
                if meta.is_dir() {
                    dirs.push(path);
                } else if meta.is_file() {
                    let id = self.id_of(&meta);
                    self.sync_file(id, &File::open(&path)?)?;
                }
            }
        }
        Ok(())
    }

    /// The power cut: `live_root` becomes the durable image (everything
    /// under it is replaced), and what was written since is forgotten.
    pub fn cut(&mut self, live_root: &Path) -> std::io::Result<()> {
        for item in fs::read_dir(live_root)? {
            let path = item?.path();
            match fs::symlink_metadata(&path)?.is_dir() {
                true => fs::remove_dir_all(&path)?,
                false => fs::remove_file(&path)?,
            }
        }
        self.dirty.clear();
        self.ids.clear();
        let root_meta = fs::symlink_metadata(live_root)?;
        self.ids
            .insert((root_meta.dev(), root_meta.ino()), self.root);
        let mut made = HashMap::new();
        self.bring_back(self.root, live_root, &mut made)?;
        let kept: std::collections::HashSet<String> =
            made.keys().map(|id: &u64| id.to_string()).collect();
        for item in fs::read_dir(&self.store)? {
            let item = item?;
            if !kept.contains(&*item.file_name().to_string_lossy()) {
                fs::remove_file(item.path())?;
            }
        }
        Ok(())
    }

    /// Makes the durable entries of directory `id` under `at`, depth
    /// first; `made` says where each file inode was made already (a
    /// second name is a hard link).
    fn bring_back(
        &mut self,
        id: u64,
        at: &Path,
        made: &mut HashMap<u64, PathBuf>,
    ) -> std::io::Result<()> {
        let entries = self.dirs.get(&id).cloned().unwrap_or_default();
        for (name, entry) in entries {
            let path = at.join(&name);
            match &entry.kind {
                Kind::Dir => {
                    fs::DirBuilder::new().mode(entry.mode).create(&path)?;
                    self.bring_back(entry.id, &path, made)?;
                }
                Kind::File => match made.get(&entry.id) {
                    Some(first) => fs::hard_link(first, &path)?,
                    None => {
                        self.bring_back_file(entry.id, &path)?;
                        made.insert(entry.id, path.clone());
                    }
                },
                Kind::Symlink(target) => std::os::unix::fs::symlink(target, &path)?,
                Kind::Other => continue,
            }
            std::os::unix::fs::lchown(&path, Some(entry.uid), Some(entry.gid))?;
            if !matches!(entry.kind, Kind::Symlink(_)) {
                fs::set_permissions(&path, fs::Permissions::from_mode(entry.mode))?;
            }
            let meta = fs::symlink_metadata(&path)?;
            self.ids.insert((meta.dev(), meta.ino()), entry.id);
        }
        Ok(())
    }

    /// The file `id` at `path`: its last fsynced content, or empty.
    fn bring_back_file(&self, id: u64, path: &Path) -> std::io::Result<()> {
        let copy = self.store.join(id.to_string());
        match copy.exists() {
            true => fs::copy(&copy, path).map(|_| ()),
            false => File::create(path).map(|_| ()),
        }
    }
}

/// Sorts and merges overlapping or touching ranges.
fn merge(ranges: &mut Vec<(u64, u64)>) {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(start, end) in ranges.iter() {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    *ranges = merged;
}

#[cfg(test)]
mod tests {
    use super::merge;

    #[test]
    fn ranges_merge_when_they_overlap_or_touch() {
        let mut ranges = vec![(10, 20), (0, 5), (5, 8), (15, 30), (40, 41)];
        merge(&mut ranges);
        assert_eq!(ranges, vec![(0, 8), (10, 30), (40, 41)]);
    }
}
