//! A JSONL dataset through a pipeline, streamed: the input is read a chunk of lines at a time
//! (memory is bounded by the chunk, not the file), each chunk's records are processed on the
//! thread pool, and the results are written in input order. Output and errors go to temporary
//! files beside their final names, renamed only by [`JsonlRun::finish`]: a run that stops early
//! leaves no half-written output under the final name.

use std::fs::{self, File};
use std::io::{self, BufWriter, IoSlice, Read as _, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::ThreadPool;
use rayon::prelude::*;

use crate::core::batch::record::{Bad, Piece, process_into};
use crate::core::batch::{Outcome, Pipeline, Totals};

/// Where a run's output (or errors) goes: what the user pointed at, and nothing else.
enum Target {
    /// A regular file (new, or reached through symlinks, resolved): written under a temporary
    /// name beside it and renamed over it at the end, so it is never seen half-written.
    Staged { temp: PathBuf, path: PathBuf },
    /// Standard output (`-`), a device, a FIFO, a socket: written as the run goes, never
    /// replaced (renaming over `/dev/null` would make it a regular file; a pipe cannot be renamed
    /// into).
    Streamed,
}

/// An output being written: a staged file or a stream (see [`Target`]).
struct Sink {
    writer: BufWriter<File>,
    target: Target,
    /// Bytes handed to the writer so far: where the next write lands in the file.
    written: u64,
    /// Renamed into place (or, streamed, flushed): the temporary file is no longer ours to remove.
    committed: bool,
}

/// A duplicate of standard output: the sink's file is closed at the end, fd 1 is not.
#[cfg(unix)]
fn stdout() -> io::Result<File> {
    use std::os::fd::AsFd as _;
    Ok(File::from(io::stdout().as_fd().try_clone_to_owned()?))
}

#[cfg(not(unix))]
fn stdout() -> io::Result<File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "- (standard output) is not supported here",
    ))
}

/// Symlinks followed before a path is taken as looping (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// Where a path that does not exist yet will be created: the end of its chain of symlinks (a
/// dangling symlink's target), so the file the link names gets the output, not the link.
fn link_target(path: &Path) -> io::Result<PathBuf> {
    let mut at = path.to_owned();
    for _ in 0..MAX_SYMLINKS {
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = fs::read_link(&at)?;
                at = at.parent().map_or_else(|| link.clone(), |dir| dir.join(&link));
            }
            _ => return Ok(at),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("more than {MAX_SYMLINKS} symlinks to follow"),
    ))
}

impl Sink {
    /// The sink for `path`: `-` is standard output; a regular file (or a path not there yet) is
    /// staged beside its resolved place; a directory is refused; anything else is streamed to.
    fn open(path: &Path) -> io::Result<Self> {
        if path.as_os_str() == "-" {
            return Ok(Self::new(stdout()?, Target::Streamed));
        }
        let resolved = match fs::metadata(path) {
            Ok(meta) if meta.is_file() => fs::canonicalize(path)?,
            Ok(meta) if meta.is_dir() => {
                return Err(io::Error::new(io::ErrorKind::IsADirectory, "is a directory"));
            }
            Ok(_) => {
                // Opened for writing as it is: no truncation, no creation, never replaced.
                let file = fs::OpenOptions::new().write(true).open(path)?;
                return Ok(Self::new(file, Target::Streamed));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => link_target(path)?,
            Err(e) => return Err(e),
        };
        let name = resolved
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".partial-{}", std::process::id()));
        let temp = resolved.with_file_name(temp_name);
        let file = File::create(&temp)?;
        Ok(Self::new(file, Target::Staged { temp, path: resolved }))
    }

    fn new(file: File, target: Target) -> Self {
        Self {
            // Small: a block's output (about `BLOCK_BYTES`) is larger and goes to the file
            // uncopied; the buffer gathers only the errors file's lines and a last short block.
            writer: BufWriter::with_capacity(64 << 10, file),
            target,
            written: 0,
            committed: false,
        }
    }

    /// The file it ends up as, when it is one (two sinks must not share it).
    fn staged_path(&self) -> Option<&Path> {
        match &self.target {
            Target::Staged { path, .. } => Some(path),
            Target::Streamed => None,
        }
    }

    /// Append `bytes` to the file.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Append every slice to the file, in order, in as few calls as the kernel takes (a call
    /// takes up to 1,024 slices on Linux). What the buffer holds goes first.
    fn write_slices(&mut self, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
        self.writer.flush()?;
        let file = self.writer.get_mut();
        IoSlice::advance_slices(&mut slices, 0);
        while !slices.is_empty() {
            match file.write_vectored(slices) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n as u64;
                    IoSlice::advance_slices(&mut slices, n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reserve the next `len` bytes of a staged file before they are written (Linux `fallocate`,
    /// keeping the file's size): a write into reserved blocks skips the file system's per-page
    /// bookkeeping of delayed allocation, which on ext4 was a fifth of the kernel's time to copy
    /// the bench's 190 MB to a new file (52 -> 40 ms; the write-back after it took as long either
    /// way). Only a hint: where the file system cannot, the writes allocate as they go, and a
    /// full disk is reported by the write. A stream has nothing to reserve.
    fn reserve(&self, len: u64) {
        #[cfg(target_os = "linux")]
        if len > 0 && matches!(self.target, Target::Staged { .. }) {
            use rustix::fs::{FallocateFlags, fallocate};
            let _ = fallocate(self.writer.get_ref(), FallocateFlags::KEEP_SIZE, self.written, len);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = len;
    }

    /// Flush, and rename a staged file into place. Not synced to disk: the rename protects against
    /// a run that stops, not against a machine that loses power (a sync would add the write-back
    /// of the whole output to every run). On failure the temporary file is removed (by `drop`).
    fn commit(mut self) -> io::Result<()> {
        self.writer.flush()?;
        if let Target::Staged { temp, path } = &self.target {
            fs::rename(temp, path)?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Sink {
    /// A sink dropped before its commit (a run that stopped, failed to open its other file, or
    /// failed to rename) removes its temporary file: no `.partial` file is left behind. (Linux
    /// removes a file still open; its buffer's last bytes go to the unlinked file.)
    fn drop(&mut self) {
        if let (Target::Staged { temp, .. }, false) = (&self.target, self.committed) {
            let _ = fs::remove_file(temp);
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub bytes_read: u64,
    pub bytes_total: u64,
    pub records: u64,
}

pub struct JsonlRun {
    pipeline: Pipeline,
    input: Input,
    output: Option<Sink>,
    errors: Option<Sink>,
    chunk_bytes: usize,
    /// The number of the last line read (1-based).
    line: u64,
    bytes_total: u64,
    totals: Totals,
    /// The input is read to its end.
    done: bool,
    /// The chunk read ahead (read while the one before it was processed), and a spare.
    ahead: Option<Chunk>,
    spare: Chunk,
    /// The last processed chunk and its results, written while the next one is processed.
    unwritten: Option<(Chunk, Results)>,
}

/// The records of a chunk, processed in blocks of consecutive lines.
type Results = Vec<Block>;

/// A block's results: each line's outcome (or why it is bad), and its output, every good record's
/// line in order, as segments. A kept record's text is written from the chunk it was read into,
/// uncopied (the kernel's copy is the only one): only the bytes a record adds (a `,` where
/// messages were dropped, a message cut to fit, a newline after a line that ended in `\r\n`)
/// are gathered in `own`.
struct Block {
    outcomes: Vec<Result<Outcome, Bad>>,
    segments: Vec<Segment>,
    own: Vec<u8>,
}

/// A span of output: of the chunk's bytes, or of the block's own.
enum Segment {
    Input(Range<usize>),
    Own(Range<usize>),
}

impl Block {
    /// `span` of the chunk's bytes next: one segment with the one before if they meet.
    fn input(&mut self, span: Range<usize>) {
        match self.segments.last_mut() {
            Some(Segment::Input(last)) if last.end == span.start => last.end = span.end,
            _ => self.segments.push(Segment::Input(span)),
        }
    }

    /// `bytes` of the block's own next.
    fn own(&mut self, bytes: &[u8]) {
        let start = self.own.len();
        self.own.extend_from_slice(bytes);
        match self.segments.last_mut() {
            Some(Segment::Own(last)) if last.end == start => last.end = self.own.len(),
            _ => self.segments.push(Segment::Own(start..self.own.len())),
        }
    }

    /// The block's output as slices of `chunk` and of its own bytes.
    fn slices<'a>(&'a self, chunk: &'a [u8]) -> impl Iterator<Item = IoSlice<'a>> {
        self.segments.iter().map(move |segment| {
            IoSlice::new(match segment {
                Segment::Input(span) => &chunk[span.clone()],
                Segment::Own(span) => &self.own[span.clone()],
            })
        })
    }
}

/// About how much input a block of lines holds: small enough that a chunk splits into many
/// blocks for the pool's threads.
const BLOCK_BYTES: usize = 256 << 10;

/// Write a processed chunk: each block's output to `output` (in one vectored write for the
/// chunk), each bad line to `errors`.
fn write(
    chunk: &Chunk,
    results: &Results,
    output: Option<&mut Sink>,
    mut errors: Option<&mut Sink>,
    totals: &mut Totals,
) -> io::Result<()> {
    let Some(output) = output else {
        return Ok(());
    };
    let mut error_buf = Vec::new();
    let mut lines = chunk.lines.iter();
    for block in results {
        for (result, (line, _)) in block.outcomes.iter().zip(lines.by_ref()) {
            match result {
                Ok(outcome) => totals.add(outcome),
                Err(bad) => {
                    totals.bad += 1;
                    error_buf.clear();
                    error_line(*line, bad, &mut error_buf);
                    if let Some(errors) = errors.as_deref_mut() {
                        errors.write_all(&error_buf)?;
                    }
                }
            }
        }
    }
    let mut slices: Vec<IoSlice<'_>> = results.iter().flat_map(|b| b.slices(&chunk.buf)).collect();
    let bytes: u64 = slices.iter().map(|s| s.len() as u64).sum();
    totals.bytes_out += bytes;
    output.reserve(bytes);
    output.write_slices(&mut slices)
}

/// A chunk of input: its bytes (`buf[..filled]`; the buffer is kept at its size between chunks,
/// so it is neither zeroed nor reallocated per read) and the number and span of each non-blank line.
#[derive(Default)]
struct Chunk {
    buf: Vec<u8>,
    filled: usize,
    lines: Vec<(u64, Range<usize>)>,
}

/// What reading a chunk advanced: lines (blank ones among them) and bytes read, and whether the
/// input ended.
struct Read {
    lines: u64,
    blank: u64,
    bytes: u64,
    end: bool,
}

/// The input file, what it was when opened, and the start of a line the last chunk read but did
/// not end.
struct Input {
    file: File,
    path: PathBuf,
    opened: Identity,
    carry: Vec<u8>,
}

/// What tells a file's content apart between two looks: its size, its modification time and, on
/// Unix, its device and inode (another file renamed into its place).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    len: u64,
    modified: Option<std::time::SystemTime>,
    node: (u64, u64),
}

impl Identity {
    fn of(meta: &fs::Metadata) -> Self {
        #[cfg(unix)]
        let node = {
            use std::os::unix::fs::MetadataExt as _;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let node = (0, 0);
        Self {
            len: meta.len(),
            modified: meta.modified().ok(),
            node,
        }
    }
}

impl Chunk {
    /// Read about `chunk_bytes` of whole lines from `input` (numbered from `line + 1`), straight
    /// into this chunk's buffer: one copy, the kernel's. A line longer than the buffer grows it.
    fn read(&mut self, input: &mut Input, line: u64, chunk_bytes: usize) -> io::Result<Read> {
        self.lines.clear();
        // Past `chunk_bytes`, read on in small steps until a line ends.
        let step = chunk_bytes.clamp(1, 64 << 10);
        if self.buf.len() < chunk_bytes + step {
            self.buf.resize(chunk_bytes + step, 0);
        }
        self.filled = input.carry.len();
        if self.buf.len() < self.filled {
            self.buf.resize(self.filled, 0);
        }
        self.buf[..self.filled].copy_from_slice(&input.carry);
        input.carry.clear();
        let mut end = false;
        loop {
            let limit = chunk_bytes.max(self.filled + step);
            if self.buf.len() < limit {
                self.buf.resize(limit, 0);
            }
            let n = match input.file.read(&mut self.buf[self.filled..limit]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                end = true;
                break;
            }
            let from = self.filled;
            self.filled += n;
            if self.filled >= chunk_bytes && memchr::memchr(b'\n', &self.buf[from..self.filled]).is_some() {
                break;
            }
        }
        let filled = &self.buf[..self.filled];
        // Whole lines only: what follows the last newline waits for the next chunk, unless the
        // input ended (a last line without a newline is a line).
        let complete = if end {
            filled.len()
        } else {
            memchr::memrchr(b'\n', filled).map_or(0, |i| i + 1)
        };
        input.carry.extend_from_slice(&filled[complete..]);
        let mut read = Read {
            lines: 0,
            blank: 0,
            bytes: complete as u64,
            end,
        };
        let mut start = 0;
        while start < complete {
            let newline = memchr::memchr(b'\n', &filled[start..complete]).map_or(complete, |i| start + i);
            read.lines += 1;
            let mut last = newline;
            while last > start && filled[last - 1] == b'\r' {
                last -= 1;
            }
            if filled[start..last].iter().any(|b| !b.is_ascii_whitespace()) {
                self.lines.push((line + read.lines, start..last));
            } else {
                read.blank += 1;
            }
            start = newline + 1;
        }
        Ok(read)
    }

    /// Each line through the pipeline, in blocks of about [`BLOCK_BYTES`] on the pool's threads.
    fn process(&self, pipeline: &Pipeline) -> Results {
        let mut blocks = Vec::new();
        let (mut first, mut bytes) = (0, 0);
        for (i, (_, range)) in self.lines.iter().enumerate() {
            bytes += range.len();
            if bytes >= BLOCK_BYTES {
                blocks.push(first..i + 1);
                (first, bytes) = (i + 1, 0);
            }
        }
        if first < self.lines.len() {
            blocks.push(first..self.lines.len());
        }
        blocks
            .into_par_iter()
            .map(|lines| {
                let lines = &self.lines[lines];
                let mut block = Block {
                    outcomes: Vec::with_capacity(lines.len()),
                    segments: Vec::with_capacity(2 * lines.len()),
                    own: Vec::new(),
                };
                for (_, range) in lines {
                    let at = range.start;
                    let result = utf8(&self.buf[range.clone()]).and_then(|text| {
                        process_into(pipeline, text, &mut |piece| match piece {
                            Piece::Text(span) => block.input(at + span.start..at + span.end),
                            Piece::Bytes(bytes) => block.own(bytes),
                        })
                    });
                    if result.is_ok() {
                        // The line's own newline when it has one (not after a `\r` or at the end).
                        match self.buf.get(range.end) {
                            Some(b'\n') => block.input(range.end..range.end + 1),
                            _ => block.own(b"\n"),
                        }
                    }
                    block.outcomes.push(result);
                }
                block
            })
            .collect()
    }
}

/// A line's text, or why it is not UTF-8 (the standard library's wording, with the position).
fn utf8(bytes: &[u8]) -> Result<&str, Bad> {
    simdutf8::basic::from_utf8(bytes).or_else(|_| {
        std::str::from_utf8(bytes).map_err(|e| Bad {
            path: String::new(),
            reason: format!("not valid UTF-8: {e}"),
        })
    })
}

/// `e` with the path it is about.
fn named(path: &Path) -> impl Fn(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// An errors-file line: `{"line": n, "path": "...", "reason": "..."}`.
fn error_line(line: u64, bad: &Bad, out: &mut Vec<u8>) {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    out.extend_from_slice(
        format!(
            "{{\"line\":{line},\"path\":{},\"reason\":{}}}\n",
            quote(&bad.path),
            quote(&bad.reason)
        )
        .as_bytes(),
    );
}

impl JsonlRun {
    /// Open `input` and stage `output` (and `errors`, if given). `chunk_bytes`: about how much
    /// input is read and processed at a time.
    pub fn open(
        pipeline: Pipeline,
        input: &Path,
        output: &Path,
        errors: Option<&Path>,
        chunk_bytes: usize,
    ) -> io::Result<Self> {
        let file = File::open(input).map_err(named(input))?;
        let meta = file.metadata().map_err(named(input))?;
        if !meta.is_file() {
            // A pipe or a device has no size to check the run against (`input_change`).
            return Err(named(input)(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file (the input must be a file, so that a run can tell it was read whole)",
            )));
        }
        let opened = Identity::of(&meta);
        let bytes_total = opened.len;
        let output = Sink::open(output).map_err(named(output))?;
        // If the errors file cannot be opened, `output` is dropped here and removes its temporary.
        let errors = errors.map(|p| Sink::open(p).map_err(named(p))).transpose()?;
        if let (Some(path), Some(errors)) = (output.staged_path(), errors.as_ref())
            && errors.staged_path() == Some(path)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: the output and the errors file are the same file", path.display()),
            ));
        }
        Ok(Self {
            pipeline,
            input: Input {
                file,
                // Absolute: the end-of-run check must look at the same place if the working
                // folder changes meanwhile.
                path: std::path::absolute(input).unwrap_or_else(|_| input.to_owned()),
                opened,
                carry: Vec::new(),
            },
            output: Some(output),
            errors,
            // Never more than the file holds: a chunk's buffer is allocated at its full size.
            chunk_bytes: chunk_bytes.clamp(1, usize::try_from(bytes_total).unwrap_or(usize::MAX).max(1)),
            line: 0,
            bytes_total,
            totals: Totals::default(),
            done: false,
            ahead: None,
            spare: Chunk::default(),
            unwritten: None,
        })
    }

    pub fn progress(&self) -> Progress {
        Progress {
            bytes_read: self.totals.bytes_in,
            bytes_total: self.bytes_total,
            records: self.totals.conversations + self.totals.bad,
        }
    }

    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Count what a chunk read advanced.
    fn advance(&mut self, read: &Read) {
        self.line += read.lines;
        self.totals.records += read.lines;
        self.totals.blank += read.blank;
        self.totals.bytes_in += read.bytes;
        self.done = read.end;
    }

    /// Process the next chunk on the pool while, beside it, the chunk before it is written and
    /// the one after it read (neither leaves the workers idle); `false` once the input is
    /// exhausted and everything written. Memory: about three chunks (the output is written from
    /// the chunk it was read into).
    pub fn step(&mut self, pool: &ThreadPool) -> io::Result<bool> {
        let current = match self.ahead.take() {
            Some(chunk) => chunk,
            None if self.done => {
                self.write_unwritten()?;
                return Ok(false);
            }
            None => {
                let mut chunk = std::mem::take(&mut self.spare);
                let read = chunk.read(&mut self.input, self.line, self.chunk_bytes)?;
                self.advance(&read);
                chunk
            }
        };
        let mut next = std::mem::take(&mut self.spare);
        let read_on = !self.done;
        let unwritten = self.unwritten.take();
        let (pipeline, input, line, chunk_bytes) = (&self.pipeline, &mut self.input, self.line, self.chunk_bytes);
        let (output, errors, totals) = (self.output.as_mut(), self.errors.as_mut(), &mut self.totals);
        let (results, (wrote, read)) = pool.install(|| {
            rayon::join(
                || current.process(pipeline),
                || {
                    let wrote = unwritten
                        .map(|(chunk, results)| write(&chunk, &results, output, errors, totals).map(|()| chunk))
                        .transpose();
                    (wrote, read_on.then(|| next.read(input, line, chunk_bytes)).transpose())
                },
            )
        });
        if let Some(chunk) = wrote? {
            self.spare = chunk;
        }
        if let Some(read) = read? {
            self.advance(&read);
            self.ahead = Some(next);
        }
        self.unwritten = Some((current, results));
        Ok(true)
    }

    /// Write the last processed chunk's results, if not written yet.
    fn write_unwritten(&mut self) -> io::Result<()> {
        if let Some((chunk, results)) = self.unwritten.take() {
            write(
                &chunk,
                &results,
                self.output.as_mut(),
                self.errors.as_mut(),
                &mut self.totals,
            )?;
            self.spare = chunk;
        }
        Ok(())
    }

    /// Run every remaining chunk.
    pub fn run(&mut self, pool: &ThreadPool) -> io::Result<()> {
        while self.step(pool)? {}
        Ok(())
    }

    /// Why the input cannot be taken as read whole and unchanged (None: it can): fewer or more
    /// bytes were read than it held when the run opened it, or its size, modification time or
    /// inode (another file put in its place) differ now. O(1): two `stat` calls.
    pub fn input_change(&self) -> io::Result<Option<String>> {
        let opened = &self.input.opened;
        if self.totals.bytes_in != opened.len {
            return Ok(Some(format!(
                "{} bytes were read but it held {} when the run opened it",
                self.totals.bytes_in, opened.len
            )));
        }
        let now = Identity::of(&self.input.file.metadata()?);
        if now.len != opened.len {
            return Ok(Some(format!(
                "its size changed from {} to {} bytes",
                opened.len, now.len
            )));
        }
        if now.modified != opened.modified {
            return Ok(Some("it was modified while it was read".into()));
        }
        match fs::metadata(&self.input.path) {
            Ok(meta) if Identity::of(&meta).node == opened.node => Ok(None),
            Ok(_) => Ok(Some("another file was put in its place".into())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Some("it was removed or renamed".into())),
            Err(e) => Err(e),
        }
    }

    /// Flush the output (and errors) and rename them into place. Call after the last step. An
    /// input that changed under the run ([`Self::input_change`]) is an error, and nothing is
    /// renamed into place (what was streamed is out already).
    pub fn finish(&mut self) -> io::Result<Totals> {
        self.write_unwritten()?;
        if let Some(change) = self.input_change().map_err(named(&self.input.path))? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: changed while the run read it: {change}", self.input.path.display()),
            ));
        }
        if let Some(output) = self.output.take() {
            output.commit()?;
        }
        if let Some(errors) = self.errors.take() {
            errors.commit()?;
        }
        Ok(self.totals.clone())
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::core::batch::{Format, Step};
    use crate::core::test_random::Lcg;

    #[test]
    fn streams_in_order_and_reports_bad_lines() {
        let dir = std::env::temp_dir().join(format!("memci-batch-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.jsonl");
        let mut text = String::new();
        for i in 0..100 {
            if i == 40 {
                text.push_str("{not json\n\n");
            }
            let _ = write!(
                text,
                "{{\"i\":{i},\"messages\":[{{\"role\":\"user\",\"content\":\"m{i}\"}},{{\"role\":\"tool\",\"tool_call_id\":\"x\",\"content\":\"o\"}}]}}\r\n"
            );
        }
        fs::write(&input, text).unwrap();
        let pipeline = Pipeline::new(vec![Step::Sanitize], Format::Chat).unwrap();
        let (output, errors) = (dir.join("out.jsonl"), dir.join("errors.jsonl"));
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let mut run = JsonlRun::open(pipeline, &input, &output, Some(&errors), 256).unwrap();
        run.run(&pool).unwrap();
        assert!(!output.exists());
        let totals = run.finish().unwrap();
        assert_eq!((totals.conversations, totals.bad), (100, 1));
        assert_eq!(
            (totals.messages_in, totals.messages_out, totals.removed[0]),
            (200, 100, 100)
        );
        let out = fs::read_to_string(&output).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 100);
        assert_eq!(lines[41], r#"{"i":41,"messages":[{"role":"user","content":"m41"}]}"#);
        let errs = fs::read_to_string(&errors).unwrap();
        assert!(
            errs.starts_with(r#"{"line":41,"path":"","reason":"not valid JSON"#),
            "{errs}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_written_file_is_each_record_as_processed_alone() {
        use crate::core::batch::record::process;
        use crate::core::config::{Budget, Encoding, Roles};

        let dir = std::env::temp_dir().join(format!("memci-batch-pieces-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.jsonl");
        // Records of kept, dropped (orphan results) and long messages, with assorted spacing,
        // CRLF and LF line ends, a bad line, and no newline after the last line.
        let message = |k: u64, i: u64| match k % 4 {
            0 => format!(r#"{{"role":"user","content":"question {i}"}}"#),
            1 => format!(
                r#"{{"role": "assistant", "content": "{}"}}"#,
                "word ".repeat(i as usize % 40)
            ),
            2 => r#"{"role":"tool","tool_call_id":"gone","content":"orphan"}"#.to_owned(),
            _ => format!(r#"{{"content":"answer {i}","role":"assistant"}}"#),
        };
        let mut text = String::new();
        let mut random = Lcg::new(11);
        let mut next = || random.state() >> 33;
        for i in 0..400 {
            let n = next() % 9;
            let separators = [",", ", ", " ,\t", ",\n"];
            let mut list = String::from(if i % 3 == 0 { "[ " } else { "[" });
            for j in 0..n {
                if j > 0 {
                    // No newline inside a JSONL line: the last separator only between records.
                    list.push_str(separators[(next() % 3) as usize]);
                }
                list.push_str(&message(next(), i));
            }
            list.push_str(if i % 5 == 0 { " ]" } else { "]" });
            let _ = match i % 4 {
                0 => write!(text, "{list}"),
                1 => write!(text, r#"{{"id": {i}, "messages": {list}, "tail": [1,  2]}}"#),
                2 => write!(text, r#"  {{"messages":{list}}}  "#),
                _ => write!(text, r#"{{"messages" : {list} ,"x":null}}"#),
            };
            text.push_str(match i {
                399 => "",
                _ if i % 7 == 0 => "\r\n",
                _ if i % 97 == 0 => "\n{broken\n",
                _ => "\n",
            });
        }
        fs::write(&input, &text).unwrap();
        let trim = Step::TrimToTokens(Budget {
            start_on: Roles::default(),
            allow_partial: true,
            ..Budget::defaults(25, Encoding::O200kBase)
        });
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for steps in [vec![], vec![Step::Sanitize], vec![Step::Sanitize, trim]] {
            let pipeline = Pipeline::new(steps, Format::Chat).unwrap();
            let mut expected = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                if process(&pipeline, line.trim_end_matches('\r'), &mut expected).is_ok() {
                    expected.push(b'\n');
                }
            }
            let output = dir.join("out.jsonl");
            for chunk_bytes in [300, 4096, 1 << 20] {
                let mut run = JsonlRun::open(pipeline.clone(), &input, &output, None, chunk_bytes).unwrap();
                run.run(&pool).unwrap();
                let totals = run.finish().unwrap();
                assert_eq!(totals.bad, 4);
                let written = fs::read(&output).unwrap();
                assert!(written == expected, "chunk_bytes {chunk_bytes}");
                assert_eq!(totals.bytes_out, written.len() as u64);
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Every (number, text) of the non-blank lines of `text`, as the chunks read them.
    fn chunked_lines(path: &Path, chunk_bytes: usize) -> Vec<(u64, String)> {
        let file = File::open(path).unwrap();
        let opened = Identity::of(&file.metadata().unwrap());
        let mut input = Input {
            file,
            path: path.to_owned(),
            opened,
            carry: Vec::new(),
        };
        let (mut chunk, mut line, mut bytes, mut got) = (Chunk::default(), 0, 0, Vec::new());
        loop {
            let read = chunk.read(&mut input, line, chunk_bytes).unwrap();
            line += read.lines;
            bytes += read.bytes;
            for (n, range) in &chunk.lines {
                got.push((*n, String::from_utf8(chunk.buf[range.clone()].to_vec()).unwrap()));
            }
            if read.end {
                break;
            }
        }
        assert_eq!(bytes, fs::metadata(path).unwrap().len());
        got
    }

    #[test]
    fn chunks_end_on_whole_lines_whatever_their_size() {
        let dir = std::env::temp_dir().join(format!("memci-batch-chunks-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("in.jsonl");
        // Lines from empty to several times the chunk size, blank lines, CRLF, no final newline.
        let mut text = String::new();
        let mut state = 7u64;
        for i in 0..300 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let len = (state >> 33) as usize % if i % 50 == 0 { 5000 } else { 300 };
            let _ = write!(text, "{i}:{}", "x".repeat(len));
            text.push_str(match i % 7 {
                0 => "\r\n",
                1 => "\n  \n",
                _ => "\n",
            });
        }
        text.push_str("last");
        fs::write(&path, &text).unwrap();
        let expected: Vec<(u64, String)> = text
            .split('\n')
            .enumerate()
            .map(|(i, l)| (i as u64 + 1, l.trim_end_matches('\r').to_owned()))
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        for chunk_bytes in [1, 7, 256, 1000, 1 << 20] {
            assert_eq!(chunked_lines(&path, chunk_bytes), expected, "chunk_bytes {chunk_bytes}");
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_rename_that_fails_leaves_no_temporary_file() {
        let dir = std::env::temp_dir().join(format!("memci-batch-rename-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut sink = Sink::open(&dir.join("out.jsonl")).unwrap();
        sink.write_all(b"x\n").unwrap();
        // Something else takes the name meanwhile: a folder that is not empty cannot be renamed over.
        fs::create_dir_all(dir.join("out.jsonl").join("inside")).unwrap();
        assert!(sink.commit().is_err());
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["out.jsonl"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_input_cut_short_under_the_run_fails_it_and_nothing_is_renamed() {
        let dir = std::env::temp_dir().join(format!("memci-batch-cut-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.jsonl");
        fs::write(&input, "[{\"role\":\"user\",\"content\":\"x\"}]\n".repeat(500)).unwrap();
        let pipeline = Pipeline::new(vec![], Format::Chat).unwrap();
        let output = dir.join("out.jsonl");
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut run = JsonlRun::open(pipeline, &input, &output, None, 256).unwrap();
        assert!(run.step(&pool).unwrap());
        let file = fs::OpenOptions::new().write(true).open(&input).unwrap();
        file.set_len(4000).unwrap();
        run.run(&pool).unwrap();
        let change = run.input_change().unwrap().unwrap();
        assert!(change.contains("bytes were read but it held 16000"), "{change}");
        let error = run.finish().unwrap_err();
        assert!(error.to_string().contains("changed while the run read it"), "{error}");
        drop(run);
        assert!(!output.exists());
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_dropped_before_finish_leaves_no_output() {
        let dir = std::env::temp_dir().join(format!("memci-batch-drop-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.jsonl");
        fs::write(&input, "[{\"role\":\"user\",\"content\":\"x\"}]\n".repeat(50)).unwrap();
        let pipeline = Pipeline::new(vec![], Format::Chat).unwrap();
        let output = dir.join("out.jsonl");
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut run = JsonlRun::open(pipeline, &input, &output, None, 64).unwrap();
        assert!(run.step(&pool).unwrap());
        drop(run);
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(&dir).unwrap();
    }
}
