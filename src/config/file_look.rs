//! Looking at a watched configuration file, from a thread of the watch's own (never a
//! runtime worker: `open` on a FIFO or a hung network mount blocks). What has not
//! changed since the last look (by its metadata) is not read again; what is not a
//! regular file, is larger than any timeout table, or is empty (the first state of a
//! rewrite that is not a rename) is not handed on.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Larger than any timeout table: refused without being read whole.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What the metadata says of a file; a change of any part is a change of the file
/// (a rename over it or a swapped symlink gives another inode).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Signature {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
    changed_ns: i128,
}

impl Signature {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let (dev, ino, changed_ns) = {
            use std::os::unix::fs::MetadataExt;
            let ns = i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec());
            (meta.dev(), meta.ino(), ns)
        };
        #[cfg(not(unix))]
        let (dev, ino, changed_ns) = (0, 0, 0);
        Signature {
            dev,
            ino,
            len: meta.len(),
            modified: meta.modified().ok(),
            changed_ns,
        }
    }
}

/// What one look found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Nothing changed since the last look (or the text is the same).
    Unchanged,
    /// New text, to build a table from.
    Text(String),
    /// The path names something that is not a regular file (a FIFO, a directory, a
    /// device): not read.
    NotRegular,
    /// Larger than [`MAX_CONFIG_BYTES`]: not read.
    TooLarge(u64),
    /// Empty, or only white space: a file being written. The table in use stays.
    Empty,
    /// The file changed while it was read: looked at again next time.
    Moving,
    /// The file cannot be read (gone, no permission).
    Unreadable(String),
}

/// The watch's memory of one file.
#[derive(Debug)]
pub(crate) struct FileLook {
    path: PathBuf,
    last: Option<Signature>,
    text: Option<String>,
    /// That the file cannot be read was reported (once, until it can be again).
    unreadable: bool,
}

impl FileLook {
    /// Nothing looked at yet: the first [`look`](Self::look) reads what is there.
    pub(crate) fn new(path: PathBuf) -> Self {
        FileLook {
            path,
            last: None,
            text: None,
            unreadable: false,
        }
    }

    /// The file watched.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Looks at the file again: what changed since the last look.
    pub(crate) fn look(&mut self) -> Look {
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) => {
                self.last = None;
                return match std::mem::replace(&mut self.unreadable, true) {
                    false => Look::Unreadable(e.to_string()),
                    true => Look::Unchanged,
                };
            }
        };
        self.unreadable = false;
        let sig = Signature::of(&meta);
        if self.last.as_ref() == Some(&sig) {
            return Look::Unchanged;
        }
        self.last = Some(sig.clone());
        if !meta.is_file() {
            return Look::NotRegular;
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Look::TooLarge(meta.len());
        }
        let text = match read_at_most(&self.path, MAX_CONFIG_BYTES) {
            Ok(text) => text,
            Err(e) => return Look::Unreadable(e.to_string()),
        };
        let after = std::fs::metadata(&self.path).map(|m| Signature::of(&m));
        if after.ok().as_ref() != Some(&sig) {
            self.last = None;
            return Look::Moving;
        }
        if text.trim().is_empty() {
            return Look::Empty;
        }
        if self.text.as_deref() == Some(text.as_str()) {
            return Look::Unchanged;
        }
        self.text = Some(text.clone());
        Look::Text(text)
    }
}

/// The file's text, at most `limit` bytes of it (not valid UTF-8: replaced, and the
/// TOML parser names the place).
fn read_at_most(path: &Path, limit: u64) -> std::io::Result<String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit)
        .read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sw4rm-look-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_is_handed_on_once_per_change_and_never_empty() {
        let dir = dir("change");
        let path = dir.join("t.toml");
        std::fs::write(&path, "a = 1\n").unwrap();
        let mut look = FileLook::new(path.clone());
        assert_eq!(look.look(), Look::Text("a = 1\n".into()));
        assert_eq!(look.look(), Look::Unchanged);
        std::fs::write(&path, "").unwrap(); // a shell `>`: truncated first
        assert_eq!(look.look(), Look::Empty);
        assert_eq!(look.look(), Look::Unchanged);
        std::fs::write(&path, "  \n\t\n").unwrap();
        assert_eq!(look.look(), Look::Empty);
        std::fs::write(&path, "a = 2\n").unwrap();
        assert_eq!(look.look(), Look::Text("a = 2\n".into()));
        assert_eq!(look.look(), Look::Unchanged);
        // Rewritten with the same text: nothing to hand on.
        std::fs::write(&path, "").unwrap();
        assert_eq!(look.look(), Look::Empty);
        std::fs::write(&path, "a = 2\n").unwrap();
        assert_eq!(look.look(), Look::Unchanged);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn what_is_not_a_small_regular_file_is_not_read() {
        let dir = dir("kinds");
        let path = dir.join("t.toml");
        std::fs::create_dir(&path).unwrap();
        let mut look = FileLook::new(path.clone());
        assert_eq!(look.look(), Look::NotRegular);
        assert_eq!(look.look(), Look::Unchanged, "reported once");
        std::fs::remove_dir(&path).unwrap();
        assert!(matches!(look.look(), Look::Unreadable(_)));
        assert_eq!(look.look(), Look::Unchanged, "reported once");
        let big = std::fs::File::create(&path).unwrap();
        big.set_len(10 << 20).unwrap(); // 10 MB, sparse
        assert_eq!(look.look(), Look::TooLarge(10 << 20));
        assert_eq!(look.look(), Look::Unchanged);
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert_eq!(look.look(), Look::NotRegular);
        std::fs::remove_dir_all(&dir).ok();
    }
}
