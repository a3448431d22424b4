//! `memci._core.BatchPipeline` and `JsonlRun`: the batch pipeline from Python. Steps are the
//! `memci.ops` configs themselves (and `memci.batch.CountTokens`), read by the one conversion of
//! `python/config.rs`; inputs are converted with the GIL held and processed on the pipeline's
//! thread pool with it released.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use rayon::ThreadPool;
use rayon::prelude::*;

use crate::core::batch::jsonl::JsonlRun as CoreRun;
use crate::core::batch::record::{Bad, process};
use crate::core::batch::{Format, Kept, Outcome, Pipeline, REMOVING_STEPS, Step, Totals};
use crate::core::config::Encoding;
use crate::core::error::Error;
use crate::core::store::Incoming;
use crate::core::value::ValueRef;
use crate::python::config::{Described, Operation, named};
use crate::python::convert::{incoming, to_py};

fn invalid(text: String) -> PyErr {
    Error::InvalidOperation(text).into()
}

/// The most threads a pipeline may run on: more than any machine's cores need for work that is
/// all CPU, few enough that a mistyped count cannot start thousands of threads.
const MAX_WORKERS: usize = 256;

/// Pools kept for pipelines still to come, the most recently used first. A pipeline holds its own
/// pool, so a pool dropped from here lives (and is shared) as long as pipelines use it; its
/// threads stop after the last one goes. Few: a process uses one or two sizes.
const KEPT_POOLS: usize = 4;

/// The thread pools of this process's pipelines.
struct Pools {
    /// The process they were started in.
    pid: u32,
    /// Up to [`KEPT_POOLS`], by number of workers (0: one per core), the most recently used first.
    by_workers: Vec<(usize, Arc<ThreadPool>)>,
}

static POOLS: Mutex<Pools> = Mutex::new(Pools {
    pid: 0,
    by_workers: Vec::new(),
});

/// The pool of `workers` threads (None: one per core) that every pipeline of this process with
/// that many workers shares, as polars shares one pool: a pipeline made for each file of a loop
/// finds threads whose allocator arenas, encoding buffers and token caches are warm (a fresh pool
/// per pipeline made a clean run of the 190 MB bench 15% slower, measured). A process forked
/// from this one starts pools of its own: the parent's threads do not exist in it. More than
/// [`MAX_WORKERS`] is refused before any thread starts.
fn shared_pool(workers: Option<usize>) -> PyResult<Arc<ThreadPool>> {
    let n = workers.unwrap_or(0);
    if workers == Some(0) || n > MAX_WORKERS {
        return Err(invalid(format!(
            "batch: workers must be an int from 1 to {MAX_WORKERS} or None, got {n}"
        )));
    }
    let mut pools = POOLS.lock();
    let pid = std::process::id();
    if pools.pid != pid {
        // Forked (or first use): the pools listed belong to another process. They are leaked,
        // not dropped: their threads do not exist here to be told to stop.
        std::mem::forget(std::mem::take(&mut pools.by_workers));
        pools.pid = pid;
    }
    if let Some(at) = pools.by_workers.iter().position(|(k, _)| *k == n) {
        let found = pools.by_workers.remove(at);
        let pool = found.1.clone();
        pools.by_workers.insert(0, found);
        return Ok(pool);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| invalid(format!("batch: cannot start {n} workers: {e}")))?;
    let pool = Arc::new(pool);
    pools.by_workers.insert(0, (n, pool.clone()));
    pools.by_workers.truncate(KEPT_POOLS);
    Ok(pool)
}

/// One step from its config: sanitize, `count_tokens`, or an operation the store runs that removes
/// messages (truncate, filter, clear, `trim_to_tokens`).
fn step(config: &Bound<'_, PyAny>) -> PyResult<Step> {
    let name: String = config.getattr("name")?.extract()?;
    match name.as_str() {
        "sanitize" => return Ok(Step::Sanitize),
        "count_tokens" => {
            let encoding: Encoding = named(&config.getattr("encoding")?, "count_tokens: encoding")?;
            return Ok(Step::CountTokens(encoding));
        }
        "clear_tool_uses" => {
            if let (crate::python::edits::Edit::ToolUses(edit), _) = crate::python::edits::Edit::of(config)? {
                return Ok(Step::ClearToolUses(edit));
            }
        }
        _ => {}
    }
    Ok(match Described::of(config)?.operation {
        Operation::TrimToTokens(budget) => Step::TrimToTokens(budget),
        Operation::Truncate(cuts) => Step::Truncate(cuts),
        Operation::Filter(conditions) => Step::Filter(conditions),
        Operation::Clear { keep_system } => Step::Clear { keep_system },
        _ => {
            return Err(invalid(format!(
                "batch: {name} is not a batch step (steps: sanitize, trim_to_tokens, truncate, filter, clear, count_tokens, clear_tool_uses)"
            )));
        }
    })
}

/// Totals as a dict of the names `memci.batch.BatchSummary` has (removals by step name, token
/// totals per counting step).
fn totals_dict<'py>(py: Python<'py>, t: &Totals) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("records", t.records)?;
    d.set_item("blank", t.blank)?;
    d.set_item("conversations", t.conversations)?;
    d.set_item("bad", t.bad)?;
    d.set_item("messages_in", t.messages_in)?;
    d.set_item("messages_out", t.messages_out)?;
    let removed = PyDict::new(py);
    for (name, n) in REMOVING_STEPS.iter().zip(t.removed) {
        removed.set_item(name, n)?;
    }
    d.set_item("removed", removed)?;
    d.set_item("tokens", t.tokens.clone())?;
    d.set_item("cleared_tool_uses", t.cleared_tool_uses)?;
    d.set_item("cleared_input_tokens", t.cleared_input_tokens)?;
    d.set_item("bytes_in", t.bytes_in)?;
    d.set_item("bytes_out", t.bytes_out)?;
    Ok(d)
}

type BadTuple = (usize, String, String);

#[pyclass(frozen, module = "memci._core", name = "BatchPipeline")]
pub struct BatchPipeline {
    pipeline: Pipeline,
    pool: Arc<ThreadPool>,
}

#[pymethods]
impl BatchPipeline {
    /// The most threads a pipeline may run on.
    #[classattr]
    const MAX_WORKERS: usize = MAX_WORKERS;

    /// A pipeline of step configs over messages in `format`, run on `workers` threads (None: one
    /// per core).
    #[new]
    #[pyo3(signature = (steps, format = "chat", workers = None))]
    fn new(steps: Vec<Bound<'_, PyAny>>, format: &str, workers: Option<usize>) -> PyResult<Self> {
        let steps = steps.iter().map(step).collect::<PyResult<Vec<_>>>()?;
        let pipeline = Pipeline::new(steps, Format::parse(format)?)?;
        Ok(Self {
            pipeline,
            pool: shared_pool(workers)?,
        })
    }

    #[getter]
    fn workers(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Run on conversations given as lists of message dicts. Returns the output lists (the kept
    /// input dicts themselves, in order; None for a bad conversation), each conversation's
    /// `count_tokens` counts, the bad ones as `(index, path, reason)`, and the totals.
    #[allow(clippy::type_complexity)]
    fn run_messages<'py>(
        &self,
        py: Python<'py>,
        conversations: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<(
        Vec<Option<Bound<'py, PyList>>>,
        Vec<Vec<u64>>,
        Vec<BadTuple>,
        Bound<'py, PyDict>,
    )> {
        let mut encoded: Vec<Option<Incoming>> = Vec::with_capacity(conversations.len());
        let mut bad = Vec::new();
        for (i, c) in conversations.iter().enumerate() {
            if !c.is_instance_of::<PyList>() && !c.is_instance_of::<PyTuple>() {
                bad.push((
                    i,
                    String::new(),
                    format!(
                        "a conversation must be a list of messages, got {}",
                        c.get_type().name()?
                    ),
                ));
                encoded.push(None);
                continue;
            }
            match incoming(c) {
                Ok(inc) => encoded.push(Some(inc)),
                Err(Error::InvalidMessage { path, reason }) => {
                    bad.push((i, path, reason));
                    encoded.push(None);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let pipeline = &self.pipeline;
        let outcomes: Vec<Option<Outcome>> = py.detach(|| {
            self.pool.install(|| {
                encoded
                    .into_par_iter()
                    .map(|inc| inc.map(|inc| pipeline.apply(inc)))
                    .collect()
            })
        });
        let mut totals = Totals {
            records: conversations.len() as u64,
            bad: bad.len() as u64,
            ..Totals::default()
        };
        let mut outputs = Vec::with_capacity(outcomes.len());
        let mut tokens = Vec::with_capacity(outcomes.len());
        for (c, outcome) in conversations.iter().zip(outcomes) {
            let Some(outcome) = outcome else {
                outputs.push(None);
                tokens.push(Vec::new());
                continue;
            };
            totals.add(&outcome);
            let list = PyList::empty(py);
            for kept in &outcome.kept {
                match kept {
                    Kept::Input(k) => list.append(c.get_item(*k)?)?,
                    Kept::New(bytes) => list.append(to_py(py, ValueRef::new(bytes))?)?,
                }
            }
            outputs.push(Some(list));
            tokens.push(outcome.tokens);
        }
        Ok((outputs, tokens, bad, totals_dict(py, &totals)?))
    }

    /// Run on records given as JSON text (str or bytes, one record each: a list of messages or an
    /// object with a `messages` key). Returns the output records as bytes (None for a bad one),
    /// each record's `count_tokens` counts, the bad ones as `(index, path, reason)`, and the totals.
    #[allow(clippy::type_complexity)]
    fn run_records<'py>(
        &self,
        py: Python<'py>,
        records: Vec<Bound<'py, PyAny>>,
    ) -> PyResult<(
        Vec<Option<Bound<'py, PyBytes>>>,
        Vec<Vec<u64>>,
        Vec<BadTuple>,
        Bound<'py, PyDict>,
    )> {
        enum Text {
            Str(PyBackedStr),
            Bytes(PyBackedBytes),
            Other,
        }
        let texts: Vec<Text> = records
            .iter()
            .map(|r| {
                if let Ok(s) = r.extract::<PyBackedStr>() {
                    Text::Str(s)
                } else if let Ok(b) = r.extract::<PyBackedBytes>() {
                    Text::Bytes(b)
                } else {
                    Text::Other
                }
            })
            .collect();
        let pipeline = &self.pipeline;
        let results: Vec<(Result<Outcome, Bad>, Vec<u8>)> = py.detach(|| {
            self.pool.install(|| {
                texts
                    .par_iter()
                    .map(|t| {
                        let mut out = Vec::new();
                        let text = match t {
                            Text::Str(s) => Ok(&**s),
                            Text::Bytes(b) => std::str::from_utf8(b).map_err(|e| format!("not valid UTF-8: {e}")),
                            Text::Other => Err("a record must be JSON text (str or bytes)".to_owned()),
                        };
                        let result = text
                            .map_err(|reason| Bad {
                                path: String::new(),
                                reason,
                            })
                            .and_then(|text| process(pipeline, text, &mut out));
                        (result, out)
                    })
                    .collect()
            })
        });
        let mut totals = Totals {
            records: results.len() as u64,
            ..Totals::default()
        };
        let mut outputs = Vec::with_capacity(results.len());
        let mut tokens = Vec::with_capacity(results.len());
        let mut bad = Vec::new();
        for (i, (result, out)) in results.into_iter().enumerate() {
            match result {
                Ok(outcome) => {
                    totals.add(&outcome);
                    totals.bytes_out += out.len() as u64;
                    outputs.push(Some(PyBytes::new(py, &out)));
                    tokens.push(outcome.tokens);
                }
                Err(b) => {
                    totals.bad += 1;
                    bad.push((i, b.path, b.reason));
                    outputs.push(None);
                    tokens.push(Vec::new());
                }
            }
        }
        Ok((outputs, tokens, bad, totals_dict(py, &totals)?))
    }

    /// Start a streamed run of the JSONL file `input` into `output` (and bad records into
    /// `errors`), reading `chunk_bytes` at a time (the default is `memci.batch`'s); drive it with
    /// `JsonlRun.step`.
    #[pyo3(signature = (input, output, errors, chunk_bytes))]
    fn open_jsonl(
        &self,
        input: PathBuf,
        output: PathBuf,
        errors: Option<PathBuf>,
        chunk_bytes: usize,
    ) -> PyResult<JsonlRun> {
        let run = CoreRun::open(self.pipeline.clone(), &input, &output, errors.as_deref(), chunk_bytes)?;
        Ok(JsonlRun {
            run: Mutex::new(Some(run)),
            pool: self.pool.clone(),
        })
    }
}

/// A streamed JSONL run: `step()` processes the next chunk (GIL released) until it returns False;
/// `finish()` renames the output into place; `close()` (or dropping the run) discards it.
#[pyclass(frozen, module = "memci._core", name = "JsonlRun")]
pub struct JsonlRun {
    run: Mutex<Option<CoreRun>>,
    pool: Arc<ThreadPool>,
}

impl JsonlRun {
    fn with<T>(&self, f: impl FnOnce(&mut CoreRun) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.run.lock();
        let run = guard
            .as_mut()
            .ok_or_else(|| invalid("batch: this run is finished or closed".into()))?;
        f(run)
    }
}

#[pymethods]
impl JsonlRun {
    /// Process the next chunk; False once the input is exhausted.
    fn step(&self, py: Python<'_>) -> PyResult<bool> {
        let pool = self.pool.clone();
        py.detach(|| self.with(|run| Ok(run.step(&pool)?)))
    }

    /// `(bytes_read, bytes_total, records)` so far.
    fn progress(&self) -> PyResult<(u64, u64, u64)> {
        self.with(|run| {
            let p = run.progress();
            Ok((p.bytes_read, p.bytes_total, p.records))
        })
    }

    /// Why the input cannot be taken as read whole and unchanged, or None (see `finish`).
    fn input_change(&self, py: Python<'_>) -> PyResult<Option<String>> {
        py.detach(|| self.with(|run| Ok(run.input_change()?)))
    }

    /// The totals so far.
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let totals = self.with(|run| Ok(run.totals().clone()))?;
        totals_dict(py, &totals)
    }

    /// Flush and rename the output (and errors) into place; returns the totals. An input that
    /// changed under the run is an `OSError`, and nothing is renamed into place.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let totals = py.detach(|| self.with(|run| Ok(run.finish()?)))?;
        *self.run.lock() = None;
        totals_dict(py, &totals)
    }

    /// Discard the run: its temporary files are removed and nothing is renamed.
    fn close(&self, py: Python<'_>) {
        let run = self.run.lock().take();
        py.detach(|| drop(run));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pools are one registry per process: a test that fills it must not evict a pool
    /// another test is comparing.
    static REGISTRY: Mutex<()> = Mutex::new(());

    #[test]
    fn pools_are_capped_in_size_and_in_number() {
        let _alone = REGISTRY.lock();
        assert!(shared_pool(Some(MAX_WORKERS + 1)).is_err());
        assert!(shared_pool(Some(0)).is_err());
        let first = shared_pool(Some(1)).unwrap();
        for n in 2..=KEPT_POOLS + 2 {
            let _ = shared_pool(Some(n)).unwrap();
        }
        assert!(POOLS.lock().by_workers.len() <= KEPT_POOLS);
        // Dropped from the registry, the pool lives on with its pipeline; a new one is made.
        assert_eq!(first.current_num_threads(), 1);
        assert!(!Arc::ptr_eq(&first, &shared_pool(Some(1)).unwrap()));
    }

    #[test]
    fn pipelines_with_as_many_workers_share_one_pool() {
        let _alone = REGISTRY.lock();
        let (two, again, three) = (shared_pool(Some(2)), shared_pool(Some(2)), shared_pool(Some(3)));
        let (two, again, three) = (two.unwrap(), again.unwrap(), three.unwrap());
        assert!(Arc::ptr_eq(&two, &again));
        assert!(!Arc::ptr_eq(&two, &three));
        assert_eq!((two.current_num_threads(), three.current_num_threads()), (2, 3));
    }
}
