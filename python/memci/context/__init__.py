"""The paged context system (``docs/context-system.md``).

From the top down (a module imports only those below it):

- :mod:`~memci.context.system`: :class:`ContextSystem`, the window and its pages; it runs the
  recall tools;
- :mod:`~memci.context.state`: the saved state, written and checked;
- :mod:`~memci.context.recall`: the recall tools the model calls (OpenAI, Anthropic, ATTP): their
  definitions, a call parsed into a request, the answer its results make;
- :mod:`~memci.context.attp`: the ATTP protocol: TOML answers and their code, checked, never run;
- :mod:`~memci.context.summary`: summarizers of archived pages;
- :mod:`~memci.context.contents`: the archive chapter: the contents page and its drop rules;
- :mod:`~memci.context.search`: BM25 search over archived pages;
- :mod:`~memci.context.page`: :class:`Page` and :class:`Entry`.
"""
