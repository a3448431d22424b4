"""The paged context system (``docs/context-system.md``).

- :mod:`~memci.context.system`: :class:`ContextSystem`, the window, its pages and its saved state;
- :mod:`~memci.context.contents`: the archive chapter: the contents page and its drop rules;
- :mod:`~memci.context.summary`: summarizers of archived pages;
- :mod:`~memci.context.recall`: the recall tools the model calls (OpenAI, Anthropic, ATTP);
- :mod:`~memci.context.search`: BM25 search over archived pages.
"""
