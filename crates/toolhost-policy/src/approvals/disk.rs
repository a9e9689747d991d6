//! The saved-approvals file, shared by every process of one host: a
//! `host serve` and a `host approvals revoke` beside it, replicas on one
//! machine, two runtimes of one embedder.
//!
//! - **Changes** are read, changed and written back under an exclusive
//!   advisory lock (`flock`, through [`std::fs::File::lock`]) on a lock
//!   file beside it (the file's name with `.lock` added); the new file is
//!   written whole to a temporary file and renamed over the old one. Two
//!   writers never lose each other's change, and a reader never sees half
//!   a file. A lock held by another process for longer than
//!   [`LOCK_WAIT`](super::LOCK_WAIT) gives up with
//!   [`ApprovalsError::Busy`].
//! - **Whether a copy is current** is told by a [`Stamp`]: a generation
//!   number in the lock file, raised by every change, and the file's
//!   identity (device, inode, size, modification and change times, to the
//!   nanosecond). Taking a stamp costs two small reads of metadata and no
//!   lock, so a lookup reads the file again only after a change: by a
//!   writer here (the generation moved, even when the clock did not and
//!   a freed inode came back), or by a hand edit (the identity moved).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::store::{Change, FileIdentity as Identity, FileStamp as Stamp, Kind, Store};
use super::{
    ApprovalsError, File as Contents, LOCK_WAIT, MAX_APPROVALS, MAX_FILE_BYTES, SavedApproval,
};

/// How wide the generation number is in the lock file (`u64::MAX` has 20
/// digits): always written whole, at the start, in one write.
const GENERATION_DIGITS: usize = 20;

/// The approvals file and its lock file.
#[derive(Debug)]
pub(super) struct Disk {
    path: PathBuf,
    lock_path: PathBuf,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

impl Disk {
    pub(super) fn new(path: PathBuf) -> Disk {
        let mut lock = path.clone().into_os_string();
        lock.push(".lock");
        Disk {
            path,
            lock_path: PathBuf::from(lock),
        }
    }

    fn io(&self, path: &Path) -> impl Fn(std::io::Error) -> ApprovalsError {
        let path = path.to_path_buf();
        move |source| ApprovalsError::Io {
            path: path.clone(),
            source,
        }
    }

    /// Whether the file is as it was when `seen` was taken.
    fn unchanged(&self, seen: &Stamp) -> bool {
        let file = std::fs::metadata(&self.path).ok().map(|m| Identity::of(&m));
        file == seen.file && self.generation() == seen.generation
    }

    /// The lock file's generation, read without the lock (a number half
    /// written reads as another number, or none: the file is read again).
    fn generation(&self) -> Option<u64> {
        let mut text = [0u8; GENERATION_DIGITS];
        let mut file = File::open(&self.lock_path).ok()?;
        file.read_exact(&mut text).ok()?;
        std::str::from_utf8(&text).ok()?.parse().ok()
    }

    /// The entries, and the stamp they were read at. The generation is
    /// taken first and the identity from the file that was read, so a
    /// change meanwhile leaves a stamp that no longer matches: read again
    /// next time, never missed.
    fn read_stamped(&self) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
        let generation = self.generation();
        let (entries, file) = self.read_entries()?;
        Ok((entries, Stamp { generation, file }))
    }

    fn read_entries(&self) -> Result<(Vec<SavedApproval>, Option<Identity>), ApprovalsError> {
        let io = self.io(&self.path);
        let invalid = |message: String| ApprovalsError::Invalid {
            path: self.path.clone(),
            message,
        };
        let mut file = match File::open(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
            Err(e) => return Err(io(e)),
            Ok(f) => f,
        };
        let meta = file.metadata().map_err(&io)?;
        if meta.len() > MAX_FILE_BYTES {
            return Err(invalid(format!("over {MAX_FILE_BYTES} bytes")));
        }
        let mut text = String::new();
        (&mut file)
            .take(MAX_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(&io)?;
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(invalid(format!("over {MAX_FILE_BYTES} bytes")));
        }
        let contents: Contents = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if contents.approvals.len() > MAX_APPROVALS {
            return Err(invalid(format!("over {MAX_APPROVALS} approvals")));
        }
        Ok((contents.approvals, Some(Identity::of(&meta))))
    }

    /// Applies `f` to the entries as the file holds them now, under the
    /// lock, and writes them back (and raises the generation) when `f`
    /// changed them. Returns the entries and their stamp.
    fn change_locked(&self, f: Change<'_>) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
        let mut lock = self.lock()?;
        let generation = read_generation(&mut lock);
        let (mut entries, file) = self.read_entries()?;
        let before = entries.clone();
        f(&mut entries)?;
        if entries == before {
            return Ok((entries, Stamp { generation, file }));
        }
        self.write(&entries)?;
        let next = generation.unwrap_or(0).wrapping_add(1);
        write_generation(&mut lock, next).map_err(self.io(&self.lock_path))?;
        let file = std::fs::metadata(&self.path).ok().map(|m| Identity::of(&m));
        // The lock is released when `lock` is closed.
        Ok((
            entries,
            Stamp {
                generation: Some(next),
                file,
            },
        ))
    }

    /// The lock file, opened (made when missing) and locked exclusively,
    /// waiting at most [`LOCK_WAIT`].
    fn lock(&self) -> Result<File, ApprovalsError> {
        let io = self.io(&self.lock_path);
        std::fs::create_dir_all(self.dir()).map_err(&io)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&self.lock_path)
            .map_err(&io)?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(ApprovalsError::Busy {
                        path: self.lock_path.clone(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
            }
        }
    }

    fn dir(&self) -> &Path {
        match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        }
    }

    /// Writes `entries` whole to a temporary file and renames it over the
    /// file.
    fn write(&self, entries: &[SavedApproval]) -> Result<(), ApprovalsError> {
        let io = self.io(&self.path);
        let text = serde_json::to_string_pretty(&Contents {
            approvals: entries.to_vec(),
        })
        .map_err(|e| io(std::io::Error::other(e)))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".approvals-")
            .suffix(".tmp")
            .tempfile_in(self.dir())
            .map_err(&io)?;
        tmp.write_all(format!("{text}\n").as_bytes()).map_err(&io)?;
        tmp.as_file().sync_all().map_err(&io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }
}

impl Store for Disk {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn unchanged_since(&self, seen: &super::Stamp) -> bool {
        match seen.0 {
            Kind::Disk(stamp) => self.unchanged(&stamp),
            Kind::Version(_) => false,
        }
    }

    fn read(&self) -> Result<(Vec<SavedApproval>, super::Stamp), ApprovalsError> {
        let (entries, stamp) = self.read_stamped()?;
        Ok((entries, super::Stamp(Kind::Disk(stamp))))
    }

    fn change(&self, f: Change<'_>) -> Result<(Vec<SavedApproval>, super::Stamp), ApprovalsError> {
        let (entries, stamp) = self.change_locked(f)?;
        Ok((entries, super::Stamp(Kind::Disk(stamp))))
    }
}

fn read_generation(lock: &mut File) -> Option<u64> {
    let mut text = [0u8; GENERATION_DIGITS];
    lock.seek(SeekFrom::Start(0)).ok()?;
    lock.read_exact(&mut text).ok()?;
    std::str::from_utf8(&text).ok()?.parse().ok()
}

fn write_generation(lock: &mut File, generation: u64) -> std::io::Result<()> {
    lock.seek(SeekFrom::Start(0))?;
    lock.write_all(format!("{generation:020}").as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_generation_alone_makes_a_stamp_stale() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::new(dir.path().join("a.json"));
        std::fs::write(&disk.lock_path, format!("{:020}", 7)).unwrap();
        let (_, stamp) = disk
            .change(&mut |entries| {
                entries.clear();
                Ok(())
            })
            .unwrap();
        assert!(disk.unchanged_since(&stamp), "nothing changed");
        let (_, read) = disk.read().unwrap();
        assert_eq!(read, stamp);
        // Another writer raised the generation; the file's identity is
        // the same (a freed inode reused, within one clock tick).
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&disk.lock_path)
            .unwrap();
        assert_eq!(read_generation(&mut lock), Some(7));
        write_generation(&mut lock, 8).unwrap();
        assert!(!disk.unchanged_since(&stamp));
        // Garbage in the lock file reads as no generation: stale too.
        std::fs::write(&disk.lock_path, "x").unwrap();
        assert!(!disk.unchanged_since(&stamp));
    }
}
