//! The passthrough: every operation done on the live tree as asked, and
//! every write, fsync and directory fsync told to the durable image.
//!
//! Files are created with the caller's owner (the daemon runs as root;
//! PostgreSQL insists on owning its files). The kernel checks permissions
//! (`default_permissions`) and keeps no attribute or entry for longer than
//! a request (TTL 0): after a power cut every path may be another inode.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, OpenFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen,
    ReplyStatfs, ReplyWrite, Request, TimeOrNow,
};

use super::durable::{Durable, LiveKey};
use super::inodes::{Inodes, ROOT};

/// Attributes and entries are never cached by the kernel (see above).
const TTL: Duration = Duration::ZERO;

/// State shared by the FUSE threads and the lab's handle.
pub struct Shared {
    /// Inode numbers ↔ live paths.
    pub inodes: Mutex<Inodes>,
    /// What a power cut would leave.
    pub durable: Mutex<Durable>,
    /// Open files and directory listings, by handle.
    handles: Mutex<HashMap<u64, Arc<Open>>>,
    /// The next handle.
    next_handle: AtomicU64,
    /// A slow disk: fsyncs of files under this prefix (relative to the
    /// root) take this long.
    pub slow: Mutex<Option<(PathBuf, Duration)>>,
    /// Power cuts so far: a slow fsync that outlived one does nothing.
    pub epoch: AtomicU64,
    /// Slow fsyncs still waiting.
    pub slow_in_flight: AtomicUsize,
}

/// An open file or directory.
enum Open {
    File {
        /// The live file.
        file: File,
        /// Its durable id.
        id: u64,
        /// Its path below the root, for the slow-disk scope.
        rel: PathBuf,
        /// Opened `O_SYNC`/`O_DSYNC`: every write is durable on return.
        sync_writes: bool,
    },
    /// A listing taken at opendir: name, kind, inode number.
    Dir(Vec<(OsString, FileType, u64)>),
}

impl Shared {
    /// Nothing open, nothing slow, over `inodes` and `durable`.
    pub fn new(inodes: Inodes, durable: Durable) -> Self {
        Self {
            inodes: Mutex::new(inodes),
            durable: Mutex::new(durable),
            handles: Mutex::new(HashMap::new()),
            next_handle: AtomicU64::new(1),
            slow: Mutex::new(None),
            epoch: AtomicU64::new(0),
            slow_in_flight: AtomicUsize::new(0),
        }
    }

    fn inodes(&self) -> MutexGuard<'_, Inodes> {
        self.inodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn durable(&self) -> MutexGuard<'_, Durable> {
        self.durable.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handle(&self, fh: FileHandle) -> Result<Arc<Open>, Errno> {
        let handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles.get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn keep(&self, open: Open) -> FileHandle {
        let fh = self.next_handle.fetch_add(1, Ordering::Relaxed);
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles.insert(fh, Arc::new(open));
        FileHandle(fh)
    }

    fn drop_handle(&self, fh: FileHandle) {
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        handles.remove(&fh.0);
    }

    fn path(&self, ino: INodeNo) -> Result<PathBuf, Errno> {
        self.inodes().path(ino.0).ok_or(Errno::ENOENT)
    }

    fn child(&self, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        self.inodes().child(parent.0, name).ok_or(Errno::ENOENT)
    }

    /// The entry for `path`, just looked up (or made) as `name` in
    /// `parent`: its attributes under its inode number.
    fn entry(&self, parent: INodeNo, name: &OsStr, path: &Path) -> Result<FileAttr, Errno> {
        let meta = fs::symlink_metadata(path)?;
        let ino = self.inodes().found(parent.0, name, key(&meta));
        Ok(attr(ino, &meta))
    }

    /// How long an fsync of `rel` takes on this disk now.
    fn fsync_delay(&self, rel: &Path) -> Option<Duration> {
        let slow = self.slow.lock().unwrap_or_else(|p| p.into_inner());
        slow.as_ref()
            .filter(|(prefix, _)| rel.starts_with(prefix))
            .map(|(_, delay)| *delay)
    }

    /// The live inode at `path` is about to lose its last link, or not.
    fn last_link(path: &Path) -> Option<LiveKey> {
        let meta = fs::symlink_metadata(path).ok()?;
        (meta.nlink() <= 1 || meta.is_dir()).then(|| key(&meta))
    }

    /// `live` is gone: neither the kernel's table nor the durable ids
    /// may give its number to the next file.
    fn freed(&self, live: Option<LiveKey>) {
        if let Some(live) = live {
            self.inodes().freed(live);
            self.durable().freed(live);
        }
    }

    fn relative(&self, path: &Path) -> PathBuf {
        let inodes = self.inodes();
        path.strip_prefix(inodes.root())
            .map(Path::to_owned)
            .unwrap_or_default()
    }
}

/// The filesystem the kernel talks to.
pub struct PassThrough(pub Arc<Shared>);

/// A live inode's key.
pub fn key(meta: &fs::Metadata) -> LiveKey {
    (meta.dev(), meta.ino())
}

fn kind(meta: &fs::Metadata) -> FileType {
    FileType::from_std(meta.file_type()).unwrap_or(FileType::RegularFile)
}

fn time(secs: i64, nanos: i64) -> SystemTime {
    match secs >= 0 {
        true => UNIX_EPOCH + Duration::new(secs as u64, nanos as u32),
        false => UNIX_EPOCH,
    }
}

fn attr(ino: u64, meta: &fs::Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: meta.size(),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind(meta),
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: meta.rdev() as u32,
        blksize: meta.blksize() as u32,
        flags: 0,
    }
}

/// Gives a new inode the caller's owner.
fn own(path: &Path, req: &Request) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(req.uid()), Some(req.gid()))
}

/// The live file opened as the caller asked, minus what the passthrough
/// does itself: the kernel gives every write its offset (so no
/// `O_APPEND` below), and the live file is written through the page
/// cache (so no `O_DIRECT`, which would want aligned buffers).
fn open_live(path: &Path, flags: i32, create: Option<u32>) -> std::io::Result<File> {
    let access = flags & libc::O_ACCMODE;
    let keep = flags & !(libc::O_ACCMODE | libc::O_APPEND | libc::O_DIRECT | libc::O_CREAT);
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(access != libc::O_RDONLY)
        .custom_flags(keep & !(libc::O_TRUNC | libc::O_EXCL));
    if let Some(mode) = create {
        options.create_new(flags & libc::O_EXCL != 0);
        options.create(true).mode(mode);
    }
    options.open(path)
}

fn sync_flags(flags: i32) -> bool {
    flags & (libc::O_SYNC | libc::O_DSYNC) != 0
}

impl Filesystem for PassThrough {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self
            .0
            .child(parent, name)
            .and_then(|path| self.0.entry(parent, name, &path));
        reply_entry(reply, found)
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.0.inodes().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        let meta = match fh.map(|fh| self.0.handle(fh)) {
            Some(Ok(open)) => match &*open {
                Open::File { file, .. } => file.metadata().map_err(Errno::from),
                Open::Dir(_) => self.0.path(ino).and_then(|p| Ok(fs::symlink_metadata(p)?)),
            },
            _ => self.0.path(ino).and_then(|p| Ok(fs::symlink_metadata(p)?)),
        };
        match meta {
            Ok(meta) => reply.attr(&TTL, &attr(ino.0, &meta)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = Change {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        match self.0.path(ino).and_then(|p| self.set(&p, fh, &change)) {
            Ok(meta) => reply.attr(&TTL, &attr(ino.0, &meta)),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.0.path(ino).and_then(|p| Ok(fs::read_link(p)?)) {
            Ok(target) => reply.data(target.as_os_str().as_encoded_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let made = self.0.child(parent, name).and_then(|path| {
            let kind = nix::sys::stat::SFlag::from_bits_truncate(mode & libc::S_IFMT);
            let perm = nix::sys::stat::Mode::from_bits_truncate(mode & !umask & 0o7777);
            nix::sys::stat::mknod(&path, kind, perm, rdev.into())
                .map_err(|e| Errno::from_i32(e as i32))?;
            own(&path, req)?;
            self.0.entry(parent, name, &path)
        });
        reply_entry(reply, made)
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let made = self.0.child(parent, name).and_then(|path| {
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(&path)?;
            own(&path, req)?;
            self.0.entry(parent, name, &path)
        });
        reply_entry(reply, made)
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.0.child(parent, name).and_then(|path| {
            let last = Shared::last_link(&path);
            fs::remove_file(&path)?;
            self.0.freed(last);
            Ok(())
        });
        reply_empty(reply, done);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        let done = self.0.child(parent, name).and_then(|path| {
            let last = Shared::last_link(&path);
            fs::remove_dir(&path)?;
            self.0.freed(last);
            Ok(())
        });
        reply_empty(reply, done);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let made = self.0.child(parent, link_name).and_then(|path| {
            std::os::unix::fs::symlink(target, &path)?;
            own(&path, req)?;
            self.0.entry(parent, link_name, &path)
        });
        reply_entry(reply, made)
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        let done = (|| {
            let from = self.0.child(parent, name)?;
            let to = self.0.child(newparent, newname)?;
            let moved = key(&fs::symlink_metadata(&from)?);
            let replaced = Shared::last_link(&to).filter(|live| *live != moved);
            match flags.bits() {
                0 => fs::rename(&from, &to)?,
                bits => nix::fcntl::renameat2(
                    nix::fcntl::AT_FDCWD,
                    &from,
                    nix::fcntl::AT_FDCWD,
                    &to,
                    nix::fcntl::RenameFlags::from_bits_truncate(bits),
                )
                .map_err(|e| Errno::from_i32(e as i32))?,
            }
            self.0.inodes().renamed(moved, newparent.0, newname);
            if flags.bits() & libc::RENAME_EXCHANGE == 0 {
                self.0.freed(replaced);
            }
            Ok(())
        })();
        reply_empty(reply, done);
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let made = (|| {
            let from = self.0.path(ino)?;
            let to = self.0.child(newparent, newname)?;
            fs::hard_link(&from, &to)?;
            self.0.entry(newparent, newname, &to)
        })();
        reply_entry(reply, made)
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let opened = self
            .0
            .path(ino)
            .and_then(|path| self.open_file(&path, flags.0, None));
        match opened {
            Ok((fh, _)) => reply.opened(fh, FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        let read = self.0.handle(fh).and_then(|open| match &*open {
            Open::File { file, .. } => {
                let mut buf = vec![0u8; size as usize];
                let mut got = 0;
                while got < buf.len() {
                    match file.read_at(&mut buf[got..], offset + got as u64)? {
                        0 => break,
                        n => got += n,
                    }
                }
                buf.truncate(got);
                Ok(buf)
            }
            Open::Dir(_) => Err(Errno::EISDIR),
        });
        match read {
            Ok(data) => reply.data(&data),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: fuser::WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        let written = self.0.handle(fh).and_then(|open| match &*open {
            Open::File {
                file,
                id,
                sync_writes,
                ..
            } => {
                file.write_all_at(data, offset)?;
                let mut durable = self.0.durable();
                durable.written(*id, offset, data.len() as u64);
                if *sync_writes || sync_flags(flags.0) {
                    durable.sync_file(*id, file)?;
                }
                Ok(data.len() as u32)
            }
            Open::Dir(_) => Err(Errno::EISDIR),
        });
        match written {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: fuser::LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.0.drop_handle(fh);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let open = match self.0.handle(fh) {
            Ok(open) => open,
            Err(e) => return reply.error(e),
        };
        let Open::File { rel, .. } = &*open else {
            return reply.error(Errno::EISDIR);
        };
        let delay = self.0.fsync_delay(rel);
        let shared = self.0.clone();
        let sync = move || match &*open {
            Open::File { file, id, .. } => {
                shared.durable().sync_file(*id, file).map_err(Errno::from)
            }
            Open::Dir(_) => Err(Errno::EISDIR),
        };
        self.after(delay, sync, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.0.path(ino).and_then(|p| self.list(ino, &p)) {
            Ok(entries) => reply.opened(self.0.keep(Open::Dir(entries)), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let open = match self.0.handle(fh) {
            Ok(open) => open,
            Err(e) => return reply.error(e),
        };
        let Open::Dir(entries) = &*open else {
            return reply.error(Errno::ENOTDIR);
        };
        for (index, (name, kind, ino)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), index as u64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.0.drop_handle(fh);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let path = match self.0.path(ino) {
            Ok(path) => path,
            Err(e) => return reply.error(e),
        };
        let delay = self.0.fsync_delay(&self.0.relative(&path));
        let shared = self.0.clone();
        let sync = move || shared.durable().sync_dir(&path).map_err(Errno::from);
        self.after(delay, sync, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let root = self.0.inodes().root().to_owned();
        match nix::sys::statvfs::statvfs(&root) {
            Ok(s) => reply.statfs(
                s.blocks(),
                s.blocks_free(),
                s.blocks_available(),
                s.files(),
                s.files_free(),
                s.block_size() as u32,
                s.name_max() as u32,
                s.fragment_size() as u32,
            ),
            Err(e) => reply.error(Errno::from_i32(e as i32)),
        }
    }

    // What the live tree does not offer, refused without fuser's warning
    // (a terminal's ioctl, poll, extended attributes): the servers above
    // need none of them.
    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        reply.error(Errno::from_i32(libc::ENOTTY));
    }

    fn poll(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _ph: fuser::PollNotifier,
        _events: fuser::PollEvents,
        _flags: fuser::PollFlags,
        reply: fuser::ReplyPoll,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: fuser::ReplyXattr,
    ) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: fuser::ReplyXattr) {
        reply.error(Errno::from_i32(libc::ENOTSUP));
    }

    fn access(&self, _req: &Request, _ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // The kernel checked already (`default_permissions`).
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let made = self.0.child(parent, name).and_then(|path| {
            let (fh, _) = self.open_file(&path, flags, Some(mode & !umask & 0o7777))?;
            own(&path, req)?;
            Ok((fh, self.0.entry(parent, name, &path)?))
        });
        match made {
            Ok((fh, attr)) => reply.created(&TTL, &attr, Generation(0), fh, FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let done = self.0.handle(fh).and_then(|open| match &*open {
            Open::File { file, id, .. } => {
                nix::fcntl::fallocate(
                    file,
                    nix::fcntl::FallocateFlags::from_bits_truncate(mode),
                    offset as i64,
                    length as i64,
                )
                .map_err(|e| Errno::from_i32(e as i32))?;
                self.0.durable().written(*id, offset, length);
                Ok(())
            }
            Open::Dir(_) => Err(Errno::EISDIR),
        });
        reply_empty(reply, done);
    }
}

/// What a setattr asks for.
struct Change {
    mode: Option<u32>,
    uid: Option<u32>,
    gid: Option<u32>,
    size: Option<u64>,
    atime: Option<TimeOrNow>,
    mtime: Option<TimeOrNow>,
}

impl PassThrough {
    /// Opens (or creates) the live file at `path` and keeps a handle.
    fn open_file(
        &self,
        path: &Path,
        flags: i32,
        create: Option<u32>,
    ) -> Result<(FileHandle, u64), Errno> {
        let file = open_live(path, flags, create)?;
        let meta = file.metadata()?;
        let id = self.0.durable().id_of(&meta);
        if flags & libc::O_TRUNC != 0 && meta.is_file() {
            file.set_len(0)?;
            self.0.durable().resized(id, 0);
        }
        let open = Open::File {
            file,
            id,
            rel: self.0.relative(path),
            sync_writes: sync_flags(flags),
        };
        Ok((self.0.keep(open), id))
    }

    /// Applies a setattr to `path` (through the open file `fh` for a
    /// size, when given).
    fn set(
        &self,
        path: &Path,
        fh: Option<FileHandle>,
        change: &Change,
    ) -> Result<fs::Metadata, Errno> {
        if let Some(mode) = change.mode {
            fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o7777))?;
        }
        if change.uid.is_some() || change.gid.is_some() {
            std::os::unix::fs::lchown(path, change.uid, change.gid)?;
        }
        if let Some(size) = change.size {
            let open = fh.map(|fh| self.0.handle(fh)).transpose()?;
            let resized = match open.as_deref() {
                Some(Open::File { file, id, .. }) => file.set_len(size).map(|_| *id),
                _ => OpenOptions::new().write(true).open(path).and_then(|file| {
                    file.set_len(size)?;
                    Ok(self.0.durable().id_of(&file.metadata()?))
                }),
            }?;
            self.0.durable().resized(resized, size);
        }
        if change.atime.is_some() || change.mtime.is_some() {
            let stamp = |t: TimeOrNow| match t {
                TimeOrNow::SpecificTime(t) => t,
                TimeOrNow::Now => SystemTime::now(),
            };
            let mut times = fs::FileTimes::new();
            if let Some(t) = change.atime {
                times = times.set_accessed(stamp(t));
            }
            if let Some(t) = change.mtime {
                times = times.set_modified(stamp(t));
            }
            File::open(path)?.set_times(times)?;
        }
        Ok(fs::symlink_metadata(path)?)
    }

    /// The directory `path` (inode `ino`) listed, `.` and `..` first.
    fn list(&self, ino: INodeNo, path: &Path) -> Result<Vec<(OsString, FileType, u64)>, Errno> {
        let mut entries = vec![
            (".".into(), FileType::Directory, ino.0),
            ("..".into(), FileType::Directory, ROOT),
        ];
        let inodes = self.0.inodes();
        for item in fs::read_dir(path)? {
            let item = item?;
            let meta = item.metadata()?;
            entries.push((
                item.file_name(),
                kind(&meta),
                inodes.known(key(&meta)).max(2),
            ));
        }
        Ok(entries)
    }

    /// Runs `sync` and replies, after `delay` on a thread of its own (a
    /// slow disk delays the fsync, not every other request), unless a
    /// power cut came first: then the fsync never completed.
    fn after<F>(&self, delay: Option<Duration>, sync: F, reply: ReplyEmpty)
    where
        F: FnOnce() -> Result<(), Errno> + Send + 'static,
    {
        let Some(delay) = delay else {
            return reply_empty(reply, sync());
        };
        let shared = self.0.clone();
        let epoch = shared.epoch.load(Ordering::SeqCst);
        shared.slow_in_flight.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            let done = match shared.epoch.load(Ordering::SeqCst) == epoch {
                true => sync(),
                false => Err(Errno::EIO),
            };
            shared.slow_in_flight.fetch_sub(1, Ordering::SeqCst);
            reply_empty(reply, done);
        });
    }
}

fn reply_entry(reply: ReplyEntry, found: Result<FileAttr, Errno>) {
    match found {
        Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn reply_empty(reply: ReplyEmpty, done: Result<(), Errno>) {
    match done {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}
