//! A JSONL dataset through a pipeline, streamed: the input is read a chunk of lines at a time
//! (memory is bounded by the chunk, not the file), each chunk's records are processed on the
//! thread pool, and the results are written in input order. Output and errors go to temporary
//! files beside their final names, renamed only by [`JsonlRun::finish`]: a run that stops early
//! leaves no half-written output under the final name.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rayon::ThreadPool;
use rayon::prelude::*;

use crate::core::batch::record::{Bad, process};
use crate::core::batch::{Outcome, Pipeline, Totals};

/// A file written under a temporary name and renamed into place at the end.
struct Staged {
    writer: BufWriter<File>,
    temp: PathBuf,
    path: PathBuf,
}

impl Staged {
    fn create(path: &Path) -> io::Result<Self> {
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: not a file path", path.display()),
            )
        })?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(".partial-{}", std::process::id()));
        let temp = path.with_file_name(temp_name);
        let file = File::create(&temp)?;
        Ok(Self {
            writer: BufWriter::with_capacity(1 << 20, file),
            temp,
            path: path.to_owned(),
        })
    }

    /// Flush and rename into place. Not synced to disk: the rename protects against a run that
    /// stops, not against a machine that loses power (a sync would add the write-back of the whole
    /// output to every run).
    fn commit(mut self) -> io::Result<()> {
        self.writer.flush()?;
        fs::rename(&self.temp, &self.path)
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
    input: BufReader<File>,
    output: Option<Staged>,
    errors: Option<Staged>,
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

/// Each line's outcome (or why it is bad) and its output.
type Results = Vec<(Result<Outcome, Bad>, Vec<u8>)>;

/// Write a processed chunk: each good record's output to `output`, each bad one's line to `errors`.
fn write(
    chunk: &Chunk,
    results: Results,
    output: Option<&mut Staged>,
    mut errors: Option<&mut Staged>,
    totals: &mut Totals,
) -> io::Result<()> {
    let Some(output) = output else {
        return Ok(());
    };
    let mut error_buf = Vec::new();
    for ((line, _), (result, mut out)) in chunk.lines.iter().zip(results) {
        match result {
            Ok(outcome) => {
                totals.add(&outcome);
                out.push(b'\n');
                totals.bytes_out += out.len() as u64;
                output.writer.write_all(&out)?;
            }
            Err(bad) => {
                totals.bad += 1;
                error_buf.clear();
                error_line(*line, &bad, &mut error_buf);
                if let Some(errors) = errors.as_deref_mut() {
                    errors.writer.write_all(&error_buf)?;
                }
            }
        }
    }
    Ok(())
}

/// A chunk of input: its bytes and the number and span of each non-blank line.
#[derive(Default)]
struct Chunk {
    buf: Vec<u8>,
    lines: Vec<(u64, Range<usize>)>,
}

/// What reading a chunk advanced: lines and bytes read, and whether the input ended.
struct Read {
    lines: u64,
    bytes: u64,
    end: bool,
}

impl Chunk {
    /// Read about `chunk_bytes` of whole lines from `input` (numbered from `line + 1`).
    fn read(&mut self, input: &mut BufReader<File>, line: u64, chunk_bytes: usize) -> io::Result<Read> {
        self.buf.clear();
        self.lines.clear();
        let mut read = Read {
            lines: 0,
            bytes: 0,
            end: false,
        };
        while self.buf.len() < chunk_bytes {
            let start = self.buf.len();
            let n = input.read_until(b'\n', &mut self.buf)?;
            if n == 0 {
                read.end = true;
                break;
            }
            read.lines += 1;
            read.bytes += n as u64;
            let mut end = self.buf.len();
            while end > start && matches!(self.buf[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            if self.buf[start..end].iter().any(|b| !b.is_ascii_whitespace()) {
                self.lines.push((line + read.lines, start..end));
            }
        }
        Ok(read)
    }

    /// Each line through the pipeline, on the pool's threads.
    fn process(&self, pipeline: &Pipeline) -> Results {
        self.lines
            .par_iter()
            .map(|(_, range)| {
                let mut out = Vec::with_capacity(range.len() + 1);
                let result = std::str::from_utf8(&self.buf[range.clone()])
                    .map_err(|e| Bad {
                        path: String::new(),
                        reason: format!("not valid UTF-8: {e}"),
                    })
                    .and_then(|text| process(pipeline, text, &mut out));
                (result, out)
            })
            .collect()
    }
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
        let bytes_total = file.metadata().map_err(named(input))?.len();
        let output = Staged::create(output).map_err(named(output))?;
        let errors = errors.map(|p| Staged::create(p).map_err(named(p))).transpose()?;
        Ok(Self {
            pipeline,
            input: BufReader::with_capacity(1 << 20, file),
            output: Some(output),
            errors,
            chunk_bytes: chunk_bytes.max(1),
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
        self.totals.bytes_in += read.bytes;
        self.done = read.end;
    }

    /// Process the next chunk on the pool while, beside it, the chunk before it is written and
    /// the one after it read (neither leaves the workers idle); `false` once the input is
    /// exhausted and everything written. Memory: about three chunks and one chunk's output.
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
                        .map(|(chunk, results)| write(&chunk, results, output, errors, totals).map(|()| chunk))
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
                results,
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

    /// Flush the output (and errors) and rename them into place. Call after the last step.
    pub fn finish(&mut self) -> io::Result<Totals> {
        self.write_unwritten()?;
        if let Some(output) = self.output.take() {
            output.commit()?;
        }
        if let Some(errors) = self.errors.take() {
            errors.commit()?;
        }
        Ok(self.totals.clone())
    }
}

impl Drop for JsonlRun {
    /// A run dropped before `finish` removes its temporary files.
    fn drop(&mut self) {
        for staged in [self.output.take(), self.errors.take()].into_iter().flatten() {
            drop(staged.writer);
            let _ = fs::remove_file(&staged.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::core::batch::{Format, Step};

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
