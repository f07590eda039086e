"""Readiness interest ops, as returned by ``prepare()``/``connect()``.

Values are the ``selectors`` event masks so they can be handed to a selector
unchanged.  0 means nothing more is needed (the step is complete).
"""
import selectors

OP_READ = selectors.EVENT_READ    # 1
OP_WRITE = selectors.EVENT_WRITE  # 2
OP_NONE = 0
