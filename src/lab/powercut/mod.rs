//! A power-cut filesystem: the lab's disk, able to lose what a real disk
//! loses when the machine does, and to be slow.
//!
//! A FUSE passthrough over a directory of the lab's (the live tree) that
//! remembers, beside it, what would survive a crash of the machine: each
//! file's content at its last fsync and each directory's entries at its
//! last directory fsync ([`durable`]). [`PowerCutFs::cut`] replaces the
//! live tree with that image — the power cut, for the processes above,
//! which the lab kills first and restarts after. [`PowerCutFs::slow_fsync`]
//! makes every fsync under a directory take a while — a slow disk — while
//! reads and writes stay fast. The idea is Jepsen's LazyFS
//! (dsrhaslab/lazyfs); this one is written here, with the strict POSIX
//! reading of a directory entry (durable only once its directory is
//! fsynced), which real filesystems often exceed.
//!
//! Mounting needs `/dev/fuse` and root; the mount goes when the handle
//! drops. (fuser's `auto_unmount`, through fusermount3, would also
//! unmount after a killed process, but in this fuser the unmount then
//! waits on fusermount3, which had exited, and the lab hung at its end:
//! a lab killed by SIGKILL leaves its mount, which `umount -l` clears.)

mod durable;
mod fs;
mod inodes;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use durable::Durable;
use fs::{PassThrough, Shared};
use inodes::Inodes;

/// A mounted power-cut filesystem.
pub struct PowerCutFs {
    /// Where the processes see it.
    mountpoint: PathBuf,
    /// The live tree it serves.
    live: PathBuf,
    /// State shared with the FUSE threads.
    shared: Arc<Shared>,
    /// The FUSE session; unmounts when dropped.
    session: Option<BackgroundSession>,
}

impl PowerCutFs {
    /// Mounts an empty filesystem at `mountpoint` (an empty directory),
    /// keeping its files under `backing` (created: the live tree and the
    /// durable copies).
    pub fn mount(backing: &Path, mountpoint: &Path) -> anyhow::Result<Self> {
        let live = backing.join("live");
        std::fs::create_dir_all(&live)?;
        std::fs::create_dir_all(mountpoint)?;
        let durable = Durable::new(&live, backing.join("durable"))?;
        let shared = Arc::new(Shared::new(Inodes::new(live.clone()), durable));
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("seckill-powercut".into()),
            MountOption::DefaultPermissions,
            MountOption::Dev,
            MountOption::Suid,
        ];
        config.acl = SessionACL::All;
        config.n_threads = Some(4);
        let session = fuser::spawn_mount(PassThrough(shared.clone()), mountpoint, &config)
            .with_context(|| {
                format!(
                    "mounting the power-cut filesystem at {} (needs /dev/fuse and root)",
                    mountpoint.display()
                )
            })?;
        Ok(Self {
            mountpoint: mountpoint.to_owned(),
            live,
            shared,
            session: Some(session),
        })
    }

    /// Where the processes see the filesystem.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// `sync(1)`: everything written so far made durable (the lab's
    /// bootstrap, say, as if installed long before the cut).
    pub fn sync_all(&self) -> anyhow::Result<()> {
        self.shared
            .durable()
            .sync_all(&self.live)
            .context("syncing the power-cut filesystem")
    }

    /// The power cut: every write not fsynced, every directory entry
    /// not made durable by an fsync of its directory, is gone; a slow
    /// fsync still waiting never completes. Call it with every process
    /// that uses the filesystem dead (the lab kills them first).
    pub fn cut(&self) -> anyhow::Result<()> {
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        let mut durable = self.shared.durable();
        durable
            .cut(&self.live)
            .context("bringing back the durable image")?;
        self.shared
            .inodes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .forget_live();
        Ok(())
    }

    /// A slow disk: from now on every fsync (of a file or a directory)
    /// under `under` (relative to the root; empty for all) takes `delay`
    /// before it completes; `None` makes the disk fast again.
    pub fn slow_fsync(&self, under: &Path, delay: Option<Duration>) {
        let mut slow = self.shared.slow.lock().unwrap_or_else(|p| p.into_inner());
        *slow = delay.map(|d| (under.to_owned(), d));
    }

    /// How many slow fsyncs are waiting right now.
    pub fn slow_fsyncs_waiting(&self) -> usize {
        self.shared.slow_in_flight.load(Ordering::SeqCst)
    }
}

impl Drop for PowerCutFs {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}
