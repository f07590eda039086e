# Types for compiling _netpass_py.py itself as kchannel.network._cnetpass
# (Cython's pure-Python mode: this file augments the .py, which stays the one
# source of both twins; see setup.py).  Pure Python never reads it.
#
# Nothing is typed: compiled, the functions already run with no interpreted
# frame (their Python wrappers bind as the classes' methods), which is what
# they are a twin for; their attribute reads stay generic, as their objects
# are plain Python classes.
cimport cython
