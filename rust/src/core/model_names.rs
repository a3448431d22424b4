//! Model names: the encoding an OpenAI model uses, as tiktoken's tables map it.

/// Model names and the encoding each uses, as tiktoken's `MODEL_TO_ENCODING` has them (tiktoken
/// 0.14). The encodings memci does not ship are listed too, so that their models are refused by
/// name rather than as unknown.
const MODELS: [(&str, &str); 45] = [
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4-mini", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35-turbo", "cl100k_base"),
    ("davinci-002", "cl100k_base"),
    ("babbage-002", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
    ("text-embedding-3-small", "cl100k_base"),
    ("text-embedding-3-large", "cl100k_base"),
    ("text-davinci-003", "p50k_base"),
    ("text-davinci-002", "p50k_base"),
    ("text-davinci-001", "r50k_base"),
    ("text-curie-001", "r50k_base"),
    ("text-babbage-001", "r50k_base"),
    ("text-ada-001", "r50k_base"),
    ("davinci", "r50k_base"),
    ("curie", "r50k_base"),
    ("babbage", "r50k_base"),
    ("ada", "r50k_base"),
    ("code-davinci-002", "p50k_base"),
    ("code-davinci-001", "p50k_base"),
    ("code-cushman-002", "p50k_base"),
    ("code-cushman-001", "p50k_base"),
    ("davinci-codex", "p50k_base"),
    ("cushman-codex", "p50k_base"),
    ("text-davinci-edit-001", "p50k_edit"),
    ("code-davinci-edit-001", "p50k_edit"),
    ("text-similarity-davinci-001", "r50k_base"),
    ("text-similarity-curie-001", "r50k_base"),
    ("text-similarity-babbage-001", "r50k_base"),
    ("text-similarity-ada-001", "r50k_base"),
    ("text-search-davinci-doc-001", "r50k_base"),
    ("text-search-curie-doc-001", "r50k_base"),
    ("text-search-babbage-doc-001", "r50k_base"),
    ("text-search-ada-doc-001", "r50k_base"),
    ("code-search-babbage-code-001", "r50k_base"),
    ("code-search-ada-code-001", "r50k_base"),
    ("gpt2", "gpt2"),
    ("gpt-2", "gpt2"),
];

/// Model-name prefixes, tried in this order after the whole names, the first that matches wins:
/// tiktoken's `MODEL_PREFIX_TO_ENCODING` (dated snapshots such as `gpt-4o-2024-08-06`, and every
/// `gpt-5*`: `gpt-5.1`, `gpt-5.2-codex`, `gpt-5.4-pro`). Its `ft:` entries are left out: a
/// fine-tuned model `ft:<base>:<org>:<name>:<id>` is read as its base model (see
/// [`model_encoding`]).
const MODEL_PREFIXES: [(&str, &str); 12] = [
    ("o1-", "o200k_base"),
    ("o3-", "o200k_base"),
    ("o4-mini-", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-4.5-", "o200k_base"),
    ("gpt-4.1-", "o200k_base"),
    ("chatgpt-4o-", "o200k_base"),
    ("gpt-4o-", "o200k_base"),
    ("gpt-4-", "cl100k_base"),
    ("gpt-3.5-turbo-", "cl100k_base"),
    ("gpt-35-turbo-", "cl100k_base"),
    ("gpt-oss-", "o200k_harmony"),
];

/// The name of the encoding a model uses, as tiktoken's `encoding_name_for_model` finds it: the
/// whole name, then the first prefix that matches. A fine-tuned model (`ft:gpt-4.1-mini-2025-04-14:
/// org::id`) uses its base model's encoding; tiktoken instead matches its `ft:gpt-4` prefix, which
/// gives `cl100k_base` for a fine-tuned `gpt-4.1` though `gpt-4.1` uses `o200k_base`, and it knows
/// no fine-tuned `o4-mini`.
pub fn model_encoding(model: &str) -> Option<&'static str> {
    if let Some(tuned) = model.strip_prefix("ft:") {
        let base = tuned.split(':').next().unwrap_or(tuned);
        return model_encoding(base);
    }
    MODELS
        .iter()
        .find(|(name, _)| *name == model)
        .or_else(|| MODEL_PREFIXES.iter().find(|(prefix, _)| model.starts_with(prefix)))
        .map(|(_, encoding)| *encoding)
}
