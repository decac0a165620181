"""What a word is, for every text rule, with nothing but the standard library.

:mod:`.words` builds the engine's text rules on these; a short-lived process
(a host's hook) reads them here without loading numpy.
"""

from __future__ import annotations

import re

__all__ = ["STOPWORDS", "WORD"]

#: A word: a run of word characters.
WORD = re.compile(r"\w+")

# Words too common to say anything: a text query drops them unless nothing else is
# left, and an incremental fold looks them up last.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves
"""
#: Words too common to say anything (lower case).
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
