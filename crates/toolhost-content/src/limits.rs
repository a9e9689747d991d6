//! The bounds on a result's content: how many blocks, how large each one
//! is, and how large all of them are together, each measured as MCP JSON
//! ([`Content::wire_len`]). Whatever comes from outside (a plugin, an MCP
//! server) is checked against them before anyone else sees it.

use crate::block::Content;

/// How much content one result may carry.
///
/// ```
/// use toolhost_content::{Content, ContentError, ContentLimits};
///
/// let limits = ContentLimits { max_blocks: 2, max_block_bytes: 1024, max_total_bytes: 1500 };
/// let small = vec![Content::text("a"), Content::image_bytes(&[1, 2, 3], "image/png")];
/// assert!(limits.check(&small).is_ok());
///
/// let many = vec![Content::text("a"); 3];
/// assert!(matches!(limits.check(&many), Err(ContentError::TooManyBlocks { count: 3, limit: 2 })));
///
/// let big = vec![Content::image_bytes(&[0; 1000], "image/png")];
/// assert!(matches!(limits.check(&big), Err(ContentError::BlockTooLarge { index: 0, .. })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentLimits {
    /// The most blocks.
    pub max_blocks: usize,
    /// The largest block, in bytes of MCP JSON.
    pub max_block_bytes: usize,
    /// The largest sum of all blocks, in bytes of MCP JSON.
    pub max_total_bytes: usize,
}

/// How many blocks one result may carry unless a host says otherwise.
pub const DEFAULT_MAX_BLOCKS: usize = 64;

impl ContentLimits {
    /// [`DEFAULT_MAX_BLOCKS`] blocks, each and all of them together at most
    /// `max_bytes`.
    pub fn within(max_bytes: usize) -> Self {
        ContentLimits {
            max_blocks: DEFAULT_MAX_BLOCKS,
            max_block_bytes: max_bytes,
            max_total_bytes: max_bytes,
        }
    }

    /// Checks `content` against the limits; returns its total size in bytes.
    /// Stops measuring at the first block over a limit.
    pub fn check(&self, content: &[Content]) -> Result<usize, ContentError> {
        if content.len() > self.max_blocks {
            return Err(ContentError::TooManyBlocks {
                count: content.len(),
                limit: self.max_blocks,
            });
        }
        let mut total: usize = 0;
        for (index, block) in content.iter().enumerate() {
            let size = block.wire_len();
            if size > self.max_block_bytes {
                return Err(ContentError::BlockTooLarge {
                    index,
                    kind: block.kind(),
                    size,
                    limit: self.max_block_bytes,
                });
            }
            total = total.saturating_add(size);
            if total > self.max_total_bytes {
                return Err(ContentError::TooLarge {
                    size: total,
                    limit: self.max_total_bytes,
                });
            }
        }
        Ok(total)
    }
}

/// Why content is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    /// More blocks than [`ContentLimits::max_blocks`].
    #[error("{count} content blocks, over the limit of {limit}")]
    TooManyBlocks {
        /// How many there are.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A block larger than [`ContentLimits::max_block_bytes`].
    #[error("content block {index} ({kind}) is {size} bytes, over the limit of {limit} bytes")]
    BlockTooLarge {
        /// Its position, from 0.
        index: usize,
        /// Its kind (`image`, …).
        kind: &'static str,
        /// Its size as MCP JSON.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// All blocks together larger than [`ContentLimits::max_total_bytes`]
    /// (`size` counts up to the block that went over).
    #[error(
        "the content blocks are at least {size} bytes together, over the limit of {limit} bytes"
    )]
    TooLarge {
        /// Their size as MCP JSON, up to the block that went over.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A block that is not what it says it is.
    #[error("content block {index} ({kind}): {problem}")]
    Invalid {
        /// Its position, from 0.
        index: usize,
        /// Its kind (`image`, …).
        kind: &'static str,
        /// What is wrong with it.
        problem: crate::media::BlockError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_counts_every_block() {
        let limits = ContentLimits {
            max_blocks: 10,
            max_block_bytes: 100,
            max_total_bytes: 120,
        };
        let block = Content::text("x".repeat(50));
        let one = block.wire_len();
        assert_eq!(limits.check(std::slice::from_ref(&block)), Ok(one));
        assert_eq!(
            limits.check(&[block.clone(), block.clone()]),
            Err(ContentError::TooLarge {
                size: 2 * one,
                limit: 120
            })
        );
        assert_eq!(limits.check(&[]), Ok(0));
    }
}
