# Types for compiling _looppass_py.py itself as kchannel.aio._clooppass
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# Nothing is typed: compiled, select and on_event run with no interpreted
# frame (their Python wrappers bind as LoopSelector's methods), which is
# what they are a twin for.
cimport cython
