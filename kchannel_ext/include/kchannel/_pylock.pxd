# A _thread.lock read, taken and released in C where no thread holds it,
# shared by kchannel._cappender (the appender's section) and
# kchannel.producer._csenderloop (the Sender's sections): CPython 3.11's
# lockobject read and written as its locked(), acquire(blocking=False) and
# release() do, with the GIL held, instead of calls of the bound methods
# (acquire's argument parsing alone is ~150-870 instructions).  A lock held
# by another thread is still waited for by the caller through the method
# (kc_lock_try_acquire returns 0); on another CPython kc_lock_readable() is
# 0, the other three do nothing (0; kc_lock_held 1) and callers use the
# methods.  The callers check the lock is exactly a _thread.lock.
cdef extern from *:
    """
    #ifndef KC_PYLOCK_H
    #define KC_PYLOCK_H
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    typedef struct {
        PyObject_HEAD
        void *lock_lock;
        PyObject *in_weakreflist;
        char locked;
    } kc_lockobject;
    #define kc_lock_readable() 1
    #define kc_lock_held(o) (((kc_lockobject *)(o))->locked != 0)
    static inline int kc_lock_try_acquire(PyObject *o) {
        kc_lockobject *l = (kc_lockobject *)o;
        if (PyThread_acquire_lock_timed((PyThread_type_lock)l->lock_lock, 0, 0)
                == PY_LOCK_ACQUIRED) {
            l->locked = 1;
            return 1;
        }
        return 0;
    }
    /* (lock.release()'s order: the flag, then the lock) */
    static inline int kc_lock_release(PyObject *o) {
        kc_lockobject *l = (kc_lockobject *)o;
        if (!l->locked) return 0;
        l->locked = 0;
        PyThread_release_lock((PyThread_type_lock)l->lock_lock);
        return 1;
    }
    #else
    #define kc_lock_readable() 0
    #define kc_lock_held(o) 1
    #define kc_lock_try_acquire(o) 0
    #define kc_lock_release(o) 0
    #endif
    #endif
    """
    bint kc_lock_readable() noexcept
    bint kc_lock_held(object o) noexcept
    bint kc_lock_try_acquire(object o) noexcept
    bint kc_lock_release(object o) noexcept
