/* A dict lookup split into stages whose cache misses can be prefetched
 * (engine.pyx, CythonEngine._prefetch).
 *
 * PyDict_GetItem on a big int-keyed dict is a chain of dependent misses:
 * an index slot, the entry it names (on a collision, another slot and
 * entry), the stored key (compared by value: the event's key is a new
 * int), the value. Looked up one after another for a chunk of events they
 * wait one after another; split into steps, each step's misses for the
 * whole chunk overlap (group prefetching, Chen et al., "Improving Hash
 * Join Performance through Prefetching", ICDE 2004).
 *
 * A step follows CPython's probe sequence one read further; the caller
 * gives up after a few (a key found later is simply not prefetched). Only
 * int keys are looked up (a stored key equal to one but not an int, such
 * as 3.0, is not found). The result is a hint: the engine still looks
 * every key up with the dict's own code.
 *
 * The layout of a dict's keys and its probe sequence are CPython's
 * internal ones (Include/internal/pycore_dict.h, Objects/dictobject.c),
 * copied for 3.11 only: on another version CAESAR_DICT_PROBE is 0 and
 * the engine looks the keys up whole. */
#ifndef CAESAR_DICT_PROBE_H
#define CAESAR_DICT_PROBE_H

#include <Python.h>
#include <stdint.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define CAESAR_DICT_PROBE 1

typedef struct {  /* PyDictKeyEntry */
    Py_hash_t me_hash;
    PyObject *me_key;
    PyObject *me_value;
} caesar_dict_entry;

typedef struct {  /* struct _dictkeysobject */
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind;  /* 0: DICT_KEYS_GENERAL */
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
} caesar_dict_keys;

#else
#define CAESAR_DICT_PROBE 0
typedef struct { Py_hash_t me_hash; PyObject *me_key; PyObject *me_value; } caesar_dict_entry;
typedef struct { uint8_t dk_log2_size, dk_log2_index_bytes; char dk_indices[1]; } caesar_dict_keys;
#endif

typedef struct {
    const caesar_dict_keys *keys;
    const caesar_dict_entry *entry; /* the entry the slot named; NULL: at a slot */
    size_t i;                       /* the slot probed */
    size_t perturb;
    long long want;                 /* the key, also its hash (caesar_probe_begin) */
    int at_key;                     /* the entry's hash matched: its key next */
} caesar_probe;

static inline const char *caesar_probe_slot(const caesar_probe *p) {
    const caesar_dict_keys *k = p->keys;
    return k->dk_indices + (p->i << (k->dk_log2_index_bytes - k->dk_log2_size));
}

/* The next slot of the probe sequence (dictobject.c's PERTURB_SHIFT 5). */
static inline void caesar_probe_next(caesar_probe *p) {
    p->perturb >>= 5;
    p->i = (p->i * 5 + p->perturb + 1) & (((size_t) 1 << p->keys->dk_log2_size) - 1);
    p->entry = NULL;
    p->at_key = 0;
    __builtin_prefetch(caesar_probe_slot(p));
}

/* The probe of int `key` in dict `d` started: its first index slot
 * prefetched. 0 when the dict is not a combined table of general keys
 * (nothing to follow) or the key's hash may not be the key itself (it is
 * below 2**61 - 1, taken from 2**60 on with a margin; -1's is -2). */
static inline int caesar_probe_begin(caesar_probe *p, PyObject *d, long long key) {
#if CAESAR_DICT_PROBE
    PyDictObject *mp = (PyDictObject *) d;
    const caesar_dict_keys *k = (const caesar_dict_keys *) mp->ma_keys;
    if (key == -1 || key >= ((long long) 1 << 60) || key <= -((long long) 1 << 60))
        return 0;
    if (mp->ma_values != NULL || k->dk_kind != 0)
        return 0;
    p->keys = k;
    p->entry = NULL;
    p->at_key = 0;
    p->want = key;
    p->perturb = (size_t) key;
    p->i = (size_t) key & (((size_t) 1 << k->dk_log2_size) - 1);
    __builtin_prefetch(caesar_probe_slot(p));
    return 1;
#else
    (void) p; (void) d; (void) key;
    return 0;
#endif
}

/* One step, reading what the last one prefetched. At a slot: the entry
 * it names prefetched, or (a deleted entry's slot) the next slot. At an
 * entry whose hash is the key's: its key and value prefetched, else the
 * next slot. At that key: the value in *value (borrowed) if the key is
 * the int looked up, else the next slot.
 * Returns 1 found, 0 absent (an empty slot), 2 not yet (step again). */
static inline int caesar_probe_step(caesar_probe *p, PyObject **value) {
#if CAESAR_DICT_PROBE
    const caesar_dict_keys *k = p->keys;
    const caesar_dict_entry *e = p->entry;
    const char *slot;
    Py_ssize_t ix;
    int overflow;
    if (p->at_key) {
        if (PyLong_CheckExact(e->me_key)
                && PyLong_AsLongLongAndOverflow(e->me_key, &overflow) == p->want
                && !overflow) {
            *value = e->me_value;
            return 1;
        }
        caesar_probe_next(p);
        return 2;
    }
    if (e != NULL) {
        if (e->me_hash == (Py_hash_t) p->want && e->me_value != NULL) {
            __builtin_prefetch(e->me_key);
            __builtin_prefetch(e->me_value);
            p->at_key = 1;
            return 2;
        }
        caesar_probe_next(p);
        return 2;
    }
    slot = caesar_probe_slot(p);
    switch (k->dk_log2_index_bytes - k->dk_log2_size) {
        case 0: ix = *(const int8_t *) slot; break;
        case 1: ix = *(const int16_t *) slot; break;
        case 2: ix = *(const int32_t *) slot; break;
        default: ix = (Py_ssize_t) *(const int64_t *) slot; break;
    }
    if (ix == -1)  /* DKIX_EMPTY */
        return 0;
    if (ix < 0) {  /* DKIX_DUMMY */
        caesar_probe_next(p);
        return 2;
    }
    p->entry = (const caesar_dict_entry *)
        (k->dk_indices + ((size_t) 1 << k->dk_log2_index_bytes)) + ix;
    __builtin_prefetch(p->entry);
    return 2;
#else
    (void) p; (void) value;
    return 0;
#endif
}

#endif
