//! The FUSE inode table of the passthrough: which live path each inode
//! number the kernel holds stands for.
//!
//! The kernel names files by inode numbers this side hands out; the
//! live tree names them by path. Each node keeps its parent and name (the
//! link it was last looked up by), so a rename moves one node and its
//! whole subtree follows.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::durable::LiveKey;

/// FUSE's root inode number.
pub const ROOT: u64 = 1;

/// One inode the kernel knows.
struct Node {
    /// The directory it was last seen in.
    parent: u64,
    /// Its name there.
    name: OsString,
    /// The live inode it stands for.
    live: LiveKey,
    /// How many lookups the kernel has not forgotten yet.
    lookups: u64,
}

/// Inode number ↔ live path.
pub struct Inodes {
    /// The live tree's root.
    root: PathBuf,
    /// Every inode the kernel holds, the root aside.
    nodes: HashMap<u64, Node>,
    /// Live inode → its number, so two names of one file are one inode.
    by_live: HashMap<LiveKey, u64>,
    /// The next number to hand out.
    next: u64,
}

impl Inodes {
    /// A table with only the root, `root` in the live tree.
    pub fn new(root: PathBuf) -> Self {
        Self {
            root,
            nodes: HashMap::new(),
            by_live: HashMap::new(),
            next: ROOT + 1,
        }
    }

    /// The live path of `ino`, if the kernel still holds it.
    pub fn path(&self, ino: u64) -> Option<PathBuf> {
        let mut names = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let node = self.nodes.get(&at)?;
            names.push(node.name.as_os_str());
            at = node.parent;
        }
        let mut path = self.root.clone();
        path.extend(names.iter().rev());
        Some(path)
    }

    /// The path of `name` in the directory `parent`.
    pub fn child(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        self.path(parent).map(|p| p.join(name))
    }

    /// The kernel looked `name` up in `parent` and found the live inode
    /// `live`: its number, counted once more.
    pub fn found(&mut self, parent: u64, name: &OsStr, live: LiveKey) -> u64 {
        if let Some(&ino) = self.by_live.get(&live)
            && let Some(node) = self.nodes.get_mut(&ino)
        {
            node.parent = parent;
            node.name = name.to_owned();
            node.lookups += 1;
            return ino;
        }
        let ino = self.next;
        self.next += 1;
        let node = Node {
            parent,
            name: name.to_owned(),
            live,
            lookups: 1,
        };
        self.nodes.insert(ino, node);
        self.by_live.insert(live, ino);
        ino
    }

    /// The number of a live inode the kernel holds, or 0 (readdir then
    /// shows a placeholder; the kernel looks every entry up by name).
    pub fn known(&self, live: LiveKey) -> u64 {
        self.by_live.get(&live).copied().unwrap_or(0)
    }

    /// The kernel forgot `count` lookups of `ino`.
    pub fn forget(&mut self, ino: u64, count: u64) {
        let Some(node) = self.nodes.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(count);
        if node.lookups == 0 {
            let live = node.live;
            self.nodes.remove(&ino);
            if self.by_live.get(&live) == Some(&ino) {
                self.by_live.remove(&live);
            }
        }
    }

    /// The live inode `live` was renamed to `new_name` in `new_parent`.
    pub fn renamed(&mut self, live: LiveKey, new_parent: u64, new_name: &OsStr) {
        if let Some(node) = self
            .by_live
            .get(&live)
            .and_then(|ino| self.nodes.get_mut(ino))
        {
            node.parent = new_parent;
            node.name = new_name.to_owned();
        }
    }

    /// The live inode `live` is gone: a new file given its number is
    /// another inode to the kernel too.
    pub fn freed(&mut self, live: LiveKey) {
        self.by_live.remove(&live);
    }

    /// After a power cut every live inode is new: nothing maps to the
    /// old numbers any more (the kernel's lookups find new ones).
    pub fn forget_live(&mut self) {
        self.by_live.clear();
    }

    /// The live tree's root.
    pub fn root(&self) -> &Path {
        &self.root
    }
}
