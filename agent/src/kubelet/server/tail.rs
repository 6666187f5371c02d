//! Where the last `n` lines of a file begin, found by reading it backwards in blocks (upstream's
//! `tail.FindTailLineStartIndex`), so `tailLines=1` of a 1 GiB log reads a few kilobytes.
//!
//! # Guarantees
//! - Lines end with `\n` (a `\r` before it is content); a last line without its newline yet
//!   counts as a line (upstream does not count it, and so shows one line more).
//! - `n = 0` is the end of the file; `n` beyond the number of lines is its start.
//! - Reads only the blocks from the end back to the start of the `n`th line from the end:
//!   at most `⌈(bytes of those lines + 1) / BLOCK⌉` reads of [`BLOCK`] bytes.

use std::io::{self, Read, Seek, SeekFrom};

/// How much is read at a time.
pub const BLOCK: usize = 8 * 1024;

/// The offset in `r` where its last `n` lines begin.
pub fn tail_start<R: Read + Seek>(r: &mut R, n: u64) -> io::Result<u64> {
    let size = r.seek(SeekFrom::End(0))?;
    if n == 0 || size == 0 {
        return Ok(size);
    }
    let mut buf = vec![0u8; BLOCK];
    let mut end = size;
    let mut seen = 0u64;
    while end > 0 {
        let start = end.saturating_sub(BLOCK as u64);
        let chunk = &mut buf[..(end - start) as usize];
        r.seek(SeekFrom::Start(start))?;
        r.read_exact(chunk)?;
        for (i, b) in chunk.iter().enumerate().rev() {
            let at = start + i as u64;
            // The newline that ends the last line does not start one.
            if *b == b'\n' && at != size - 1 {
                seen += 1;
                if seen == n {
                    return Ok(at + 1);
                }
            }
        }
        end = start;
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn start(data: &[u8], n: u64) -> u64 {
        tail_start(&mut Cursor::new(data), n).unwrap()
    }

    fn tail(data: &[u8], n: u64) -> &[u8] {
        &data[start(data, n) as usize..]
    }

    #[test]
    fn the_last_lines_are_found() {
        let data = b"a\nb\nc\n";
        assert_eq!(start(data, 0), 6);
        assert_eq!(tail(data, 1), b"c\n");
        assert_eq!(tail(data, 2), b"b\nc\n");
        assert_eq!(tail(data, 3), data);
        assert_eq!(tail(data, 10), data, "more lines asked than there are");
    }

    #[test]
    fn empty_files_and_lines() {
        assert_eq!(start(b"", 0), 0);
        assert_eq!(start(b"", 1), 0);
        assert_eq!(tail(b"\n", 1), b"\n");
        assert_eq!(tail(b"a\n\n", 1), b"\n");
        assert_eq!(tail(b"a\n\n", 2), b"a\n\n");
        assert_eq!(tail(b"\n\n\n", 2), b"\n\n");
    }

    #[test]
    fn a_last_line_without_its_newline_counts() {
        assert_eq!(tail(b"a\nb", 1), b"b");
        assert_eq!(tail(b"a\nb", 2), b"a\nb");
        assert_eq!(tail(b"only", 1), b"only");
        assert_eq!(tail(b"only", 5), b"only");
    }

    #[test]
    fn carriage_returns_are_content() {
        let data = b"t stdout F one\r\nt stdout F two\r\n";
        assert_eq!(tail(data, 1), b"t stdout F two\r\n");
    }

    #[test]
    fn partial_entries_are_file_lines_of_their_own() {
        let data = b"t stdout F a\nt stdout P long \nt stdout P li\nt stdout F ne\n";
        assert_eq!(tail(data, 1), b"t stdout F ne\n");
        assert_eq!(
            tail(data, 3),
            b"t stdout P long \nt stdout P li\nt stdout F ne\n"
        );
    }

    #[test]
    fn lines_across_block_boundaries() {
        // Lines of every length around the block size.
        for len in [BLOCK - 2, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK] {
            let line = |c: u8| {
                let mut l = vec![c; len];
                l.push(b'\n');
                l
            };
            let data = [line(b'a'), line(b'b'), line(b'c')].concat();
            assert_eq!(tail(&data, 1), &line(b'c')[..], "{len}");
            assert_eq!(tail(&data, 2), &data[len + 1..], "{len}");
            assert_eq!(tail(&data, 4), &data[..], "{len}");
        }
    }

    /// Counts the bytes read through it.
    struct Counting<R> {
        inner: R,
        read: usize,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n;
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    #[test]
    fn a_short_tail_of_a_big_file_reads_only_its_end() {
        let line = b"2026-11-29T04:30:05.123456789Z stdout F some output of the container\n";
        let data = line.repeat(200_000); // 14 MB
        let mut r = Counting {
            inner: Cursor::new(&data[..]),
            read: 0,
        };
        assert_eq!(
            tail_start(&mut r, 1).unwrap() as usize,
            data.len() - line.len()
        );
        assert_eq!(r.read, BLOCK);
        r.read = 0;
        let start = tail_start(&mut r, 1000).unwrap() as usize;
        assert_eq!(start, data.len() - 1000 * line.len());
        assert!(r.read <= 1000 * line.len() + BLOCK, "{} bytes", r.read);
    }
}
